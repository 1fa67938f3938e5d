//! RL.SLIDINGCOUNTER: the sliding window counter. Time is cut into epoch-aligned windows of `W`
//! µs; the state counts the units granted in the current window (`c`) and in the previous one
//! (`p`), and estimates the units in the sliding window ending now as if `p` had been spread
//! evenly over its window:
//!
//! ```text
//! E(now) = p · (W − e) / W + c        e = now mod W, the time elapsed in the current window
//! ```
//!
//! Everything is exact integer arithmetic on `E·W = p·(W − e) + c·W` in `u128` (with counts,
//! costs and windows below 2^63 every product fits). For a request of `n` units and limit `L`:
//!
//! - allowed iff `E + n ≤ L`, i.e. `p·(W − e) + (c + n)·W ≤ L·W`;
//! - `remaining = floor(L − E) = floor((L·W − p·(W − e) − c·W) / W)`, 0 when negative, after
//!   the call; `BESTEFFORT` grants that much before the call when `n` does not fit;
//! - `retry_after` (`n ≤ L`, with `p`, `c` after the call) is the first `d` with the request
//!   allowed at `now + d`. `E` never grows between calls (the weight of `p` shrinks, and at the
//!   boundary `E` becomes exactly `c`), so the first such time is found in three places:
//!   1. in this window, `e' = e + d < W`: allowed iff `p·e' ≥ (p + c + n − L)·W`, so with
//!      `p > 0`, `e' = ceil((p + c + n − L)·W / p)`;
//!   2. else in the next window, where `c` becomes the previous count and the current one is 0:
//!      allowed at `e''` into it iff `c·e'' ≥ (c + n − L)·W`, so `e'' = 0` when `c + n ≤ L`,
//!      else `e'' = ceil((c + n − L)·W / c)`, which is at most `W` because `n ≤ L`; the retry
//!      is `W − e + e''` (`e'' = W` is the start of the window after, where both counts are 0);
//! - `reset_after`, the time until `E = 0` (remaining == limit): `2W − e` while `c > 0` (when
//!   `c`, as the previous count, has fully decayed), `W − e` when only `p > 0`, else 0. It is
//!   also the key's expiry.
//!
//! A DEDUP id is remembered for one window. Changing the limit keeps the counts; a new window
//! length starts fresh.
//!
//! Debt (RL.SETTLE above a reservation): the current count above the limit. The formulas above
//! hold for any counts (`excess` is then larger than the counts' own weight could cover in this
//! window, and the retry falls in the next window, or at the start of the window after it, where
//! both counts are 0): the debt is repaid as the count decays over the next window.

use crate::core::error::CoreError;
use crate::core::limiter::{self, Algorithm, Verdict};
use crate::core::param::{MAX_PARAM, check_count, check_duration};
use crate::core::time::{MAX_SPAN, Micros};
use crate::core::varint::{self, Reader};

/// The longest window: `reset_after` and the key's expiry reach two windows ahead, which must
/// fit in [`MAX_SPAN`].
pub const MAX_WINDOW: Micros = MAX_SPAN / 2;

/// What the window must be when it is above [`MAX_WINDOW`].
const MUST_FIT_WINDOW: &str = "must be at most 4611686018427387 ms";

/// Validated parameters: an estimate of at most `limit` units in any `window` µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingCounterParams {
    limit: u64,
    window: Micros,
}

impl SlidingCounterParams {
    /// Validate the parameters.
    ///
    /// # Errors
    /// [`CoreError::InvalidParam`] when a value is 0 or above [`MAX_PARAM`].
    pub fn new(limit: u64, window: Micros) -> Result<Self, CoreError> {
        let limit = check_count(limit, "limit")?;
        let window = check_duration(window, "window")?;
        // The estimate is fresh two windows after the current one started.
        if window > MAX_WINDOW {
            return Err(CoreError::InvalidParam("window", MUST_FIT_WINDOW));
        }
        Ok(SlidingCounterParams { limit, window })
    }

    /// The limit on the estimate.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length in µs.
    pub fn window(&self) -> Micros {
        self.window
    }

    /// Start of the window holding `now`.
    fn window_start(&self, now: Micros) -> Micros {
        now.saturating_sub(now.checked_rem(self.window).unwrap_or(0))
    }
}

/// RL.SLIDINGCOUNTER's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingCounter {
    params: SlidingCounterParams,
    /// Start of the window `current` counts (Unix µs, a multiple of the window).
    start: Micros,
    /// Units granted in the window before `start`.
    previous: u64,
    /// Units granted in the window starting at `start`.
    current: u64,
}

fn overflow<T>(v: Option<T>) -> Result<T, CoreError> {
    v.ok_or(CoreError::Overflow)
}

/// `a · b` in u128.
fn mul(a: u64, b: u64) -> u128 {
    u128::from(a).saturating_mul(u128::from(b))
}

/// `ceil(num / den)` for `den > 0`.
fn div_ceil(num: u128, den: u128) -> Result<u128, CoreError> {
    let q = overflow(num.checked_div(den))?;
    if overflow(num.checked_rem(den))? == 0 {
        Ok(q)
    } else {
        overflow(q.checked_add(1))
    }
}

/// The counts as seen at one instant under one set of parameters.
#[derive(Debug, Clone, Copy)]
struct View {
    /// Start of `now`'s window.
    start: Micros,
    /// `now − start`, in `[0, W)`.
    elapsed: Micros,
    previous: u64,
    current: u64,
}

impl View {
    /// `E·W = p·(W − e) + c·W` with `c` raised by `extra`.
    fn scaled_estimate(&self, w: Micros, extra: u64) -> Result<u128, CoreError> {
        let decayed = mul(self.previous, w.saturating_sub(self.elapsed));
        let current = u128::from(self.current).saturating_add(u128::from(extra));
        overflow(
            current
                .checked_mul(u128::from(w))
                .and_then(|c| c.checked_add(decayed)),
        )
    }

    /// `floor(L − E)` with `c` raised by `extra`, 0 when negative.
    fn free(&self, params: &SlidingCounterParams, extra: u64) -> Result<u64, CoreError> {
        let w = params.window;
        let room = mul(params.limit, w).saturating_sub(self.scaled_estimate(w, extra)?);
        let units = overflow(room.checked_div(u128::from(w)))?;
        Ok(u64::try_from(units).unwrap_or(u64::MAX))
    }
}

impl SlidingCounter {
    /// The counts at `now` under `params`: shifted when the window moved on, cleared when it
    /// moved two windows or more, or when the window length changed.
    fn view(&self, params: &SlidingCounterParams, now: Micros) -> View {
        let start = params.window_start(now);
        let (previous, current) = if self.params.window != params.window {
            (0, 0)
        } else if self.start == start {
            (self.previous, self.current)
        } else if self.start.checked_add(params.window) == Some(start) {
            (self.current, 0)
        } else {
            (0, 0)
        };
        View {
            start,
            elapsed: now.saturating_sub(start),
            previous,
            current,
        }
    }

    /// The exact wait until `cost` (≤ limit) is allowed, on the counts after the call.
    fn retry_after(
        params: &SlidingCounterParams,
        v: &View,
        cost: u64,
    ) -> Result<Micros, CoreError> {
        let w = u128::from(params.window);
        let e = u128::from(v.elapsed);
        let limit = u128::from(params.limit);
        let (p, c, n) = (
            u128::from(v.previous),
            u128::from(v.current),
            u128::from(cost),
        );
        // 1. Later in this window, as the previous window's weight decays.
        let excess =
            overflow(p.checked_add(c).and_then(|s| s.checked_add(n)))?.saturating_sub(limit);
        if p > 0 {
            let at = div_ceil(overflow(excess.checked_mul(w))?, p)?;
            if at < w {
                return Ok(u64::try_from(at.saturating_sub(e)).unwrap_or(u64::MAX));
            }
        }
        // 2. In the next window, where this window's count decays in turn (at most W into it).
        let excess = overflow(c.checked_add(n))?.saturating_sub(limit);
        let into_next = if excess == 0 {
            0
        } else {
            div_ceil(overflow(excess.checked_mul(w))?, c)?.min(w)
        };
        let d = overflow(w.checked_sub(e).and_then(|r| r.checked_add(into_next)))?;
        Ok(u64::try_from(d).unwrap_or(u64::MAX))
    }
}

impl Algorithm for SlidingCounter {
    type Params = SlidingCounterParams;

    fn fresh(params: &SlidingCounterParams) -> Self {
        SlidingCounter {
            params: *params,
            start: 0,
            previous: 0,
            current: 0,
        }
    }

    fn params(&self) -> &SlidingCounterParams {
        &self.params
    }

    fn evaluate(
        &self,
        params: &SlidingCounterParams,
        now: Micros,
        cost: u64,
        best_effort: bool,
    ) -> Result<Verdict, CoreError> {
        let view = self.view(params, now);
        let avail = view.free(params, 0)?;
        let granted = limiter::grant(cost, avail, best_effort);
        let after = View {
            current: overflow(view.current.checked_add(granted))?,
            ..view
        };
        let retry = limiter::retry(granted, cost, params.limit, || {
            Self::retry_after(params, &after, cost)
        })?;
        let w = params.window;
        let reset_after = if after.current > 0 {
            w.saturating_mul(2).saturating_sub(after.elapsed)
        } else if after.previous > 0 {
            w.saturating_sub(after.elapsed)
        } else {
            0
        };
        Ok(Verdict {
            granted,
            limit: params.limit,
            remaining: after.free(params, 0)?,
            retry,
            reset_after,
        })
    }

    fn commit(
        &mut self,
        params: &SlidingCounterParams,
        now: Micros,
        granted: u64,
    ) -> Result<(), CoreError> {
        let view = self.view(params, now);
        *self = SlidingCounter {
            params: *params,
            start: view.start,
            previous: view.previous,
            current: overflow(view.current.checked_add(granted))?,
        };
        Ok(())
    }

    /// The current window's count, not below 0 (the previous window's is left as it is).
    fn refund(&mut self, now: Micros, units: u64) -> Result<u64, CoreError> {
        let view = self.view(&self.params, now);
        let given = view.current.min(units);
        if given > 0 {
            *self = SlidingCounter {
                params: self.params,
                start: view.start,
                previous: view.previous,
                current: view.current.saturating_sub(given),
            };
        }
        Ok(given)
    }

    fn fresh_at(&self) -> Micros {
        let w = self.params.window;
        if self.current > 0 {
            self.start.saturating_add(w.saturating_mul(2))
        } else if self.previous > 0 {
            self.start.saturating_add(w)
        } else {
            0
        }
    }

    fn dedup_until(params: &SlidingCounterParams, now: Micros) -> Micros {
        now.saturating_add(params.window)
    }

    fn window(params: &SlidingCounterParams, _now: Micros) -> Micros {
        params.window
    }

    fn describe(params: &SlidingCounterParams) -> Vec<(&'static str, u64)> {
        vec![("limit", params.limit), ("window_ms", params.window / 1000)]
    }

    fn encode(&self, out: &mut Vec<u8>) {
        varint::put_u64(out, self.params.limit);
        varint::put_u64(out, self.params.window);
        varint::put_u64(out, self.start);
        varint::put_u64(out, self.previous);
        varint::put_u64(out, self.current);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        let params = SlidingCounterParams::new(input.u64()?, input.u64()?).ok()?;
        let start = input.u64()?;
        if start.checked_rem(params.window)? != 0 {
            return None;
        }
        let previous = input.u64()?;
        let current = input.u64()?;
        Some(SlidingCounter {
            params,
            start,
            previous,
            current,
        })
    }

    /// Counts are at most a limit, and the current window started by the last call.
    fn valid_at(&self, last_update: Micros) -> bool {
        self.previous <= MAX_PARAM && self.current <= MAX_PARAM && self.start <= last_update
    }
}

#[cfg(test)]
mod tests {
    use crate::core::param::MAX_PARAM;
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::core::limiter::Retry;
    use crate::core::state::Stored;
    use crate::core::testkit::{self, GrantedRetry, Key, Model, T0};
    use crate::core::time::US_PER_SEC;
    use crate::core::{LimiterState, codec};

    /// `limit` per window of `period`.
    impl crate::core::testkit::Sample for SlidingCounter {
        fn sample([limit, _, period, _]: [u64; 4]) -> Option<SlidingCounterParams> {
            SlidingCounterParams::new(limit, period).ok()
        }
    }

    #[test]
    fn sliding_counter_weighs_the_previous_window() {
        let params = SlidingCounterParams::new(10, US_PER_SEC).unwrap();
        #[rustfmt::skip]
        let rows: &[testkit::Row] = &[
            // t µs       cost  BE     granted rem  retry µs  reset µs
            (0,           4,    false, 4,      6,   0,        2_000_000),
            (500_000,     6,    false, 6,      0,   0,        1_500_000),
            // Next window: 10 · (1 − e) + 1 ≤ 10 once e ≥ 0.1 s.
            (500_000,     1,    false, 0,      0,   600_000,  1_500_000),
            (1_099_999,   1,    false, 0,      0,   1,        900_001),
            // 10 · 0.75 = 7.5 used: 2 left.
            (1_250_000,   0,    false, 0,      2,   0,        750_000),
            (1_250_000,   3,    true,  2,      0,   250_000,  1_750_000),
            (1_500_000,   3,    false, 3,      0,   0,        1_500_000),
            (1_500_000,   11,   false, 0,      0,   -1,       1_500_000),
            // Two windows later, nothing is left; a step back is evaluated at 1.5 s.
            (3_200_000,   0,    false, 0,      10,  0,        0),
            (1_000_000,   0,    false, 0,      0,   0,        1_500_000),
        ];
        testkit::run_table::<SlidingCounter>(&params, params.limit(), rows);
    }

    #[test]
    fn sliding_counter_retry_solves_the_decay_exactly() {
        // 7 units in the previous window: 7 · (1 − e) + 1 ≤ 7 once e ≥ 1/7 s = 142 857.14 µs.
        let params = SlidingCounterParams::new(7, US_PER_SEC).unwrap();
        #[rustfmt::skip]
        let rows: &[testkit::Row] = &[
            // t µs       cost  BE     granted rem  retry µs  reset µs
            (0,           7,    false, 7,      0,   0,        2_000_000),
            (1_000_000,   1,    false, 0,      0,   142_858,  1_000_000),
            (1_142_857,   1,    false, 0,      0,   1,        857_143),
            (1_142_858,   1,    false, 1,      0,   0,        1_857_142),
            // 7 · (1 − e) + 1 + 7 ≤ 7 never holds in this window, nor 1 · (1 − e) + 7 ≤ 7 in
            // the next one before its end: the full 7 fit when both windows are over.
            (1_142_858,   7,    false, 0,      0,   1_857_142, 1_857_142),
        ];
        testkit::run_table::<SlidingCounter>(&params, params.limit(), rows);
    }

    #[test]
    fn sliding_counter_keeps_its_counts_until_the_window_changes() {
        let ten = SlidingCounterParams::new(10, US_PER_SEC).unwrap();
        let twenty = SlidingCounterParams::new(20, US_PER_SEC).unwrap();
        let longer = SlidingCounterParams::new(10, 2 * US_PER_SEC).unwrap();
        let mut key = Key::default();
        assert_eq!(key.take::<SlidingCounter>(&ten, T0, 8).remaining, 2);
        assert_eq!(key.peek::<SlidingCounter>(&twenty, T0, 0).remaining, 12);
        assert_eq!(key.peek::<SlidingCounter>(&longer, T0, 0).remaining, 10);
        assert_eq!(key.take::<SlidingCounter>(&twenty, T0 + 1, 12).remaining, 0);
        assert_eq!(key.peek::<SlidingCounter>(&ten, T0 + 1, 0).remaining, 0);
    }

    #[test]
    fn sliding_counter_rejects_zero_parameters() {
        assert!(SlidingCounterParams::new(0, 1).is_err());
        assert!(SlidingCounterParams::new(1, 0).is_err());
        assert!(SlidingCounterParams::new(MAX_PARAM, MAX_WINDOW).is_ok());
        assert_eq!(
            SlidingCounterParams::new(1, MAX_WINDOW + 1),
            Err(CoreError::InvalidParam("window", MUST_FIT_WINDOW))
        );
        assert_eq!(
            MUST_FIT_WINDOW,
            format!("must be at most {} ms", MAX_WINDOW / 1000)
        );
        assert!(SlidingCounterParams::new(1, MAX_PARAM + 1).is_err());
    }

    #[test]
    fn sliding_counter_computes_with_the_largest_parameters() {
        // Every product stays within u128 with the largest counts, costs and windows.
        let p = SlidingCounterParams::new(MAX_PARAM, MAX_WINDOW).unwrap();
        let mut key = Key::default();
        let v = key.take::<SlidingCounter>(&p, MAX_PARAM - 1, MAX_PARAM);
        assert_eq!((v.granted, v.remaining), (MAX_PARAM, 0));
        let v = key.take::<SlidingCounter>(&p, MAX_PARAM + 1, MAX_PARAM);
        assert_eq!(v.granted, 0);
        assert!(matches!(v.retry, Retry::After(_)));
        // The end of time is two windows on: both counts are gone.
        let v = key.take::<SlidingCounter>(&p, u64::MAX, MAX_PARAM);
        assert_eq!(v.granted, MAX_PARAM);
    }

    /// The textbook counter: one count per epoch-aligned window, the estimate by its
    /// definition, and retry and reset times found by bisection over time (the estimate never
    /// grows without new grants).
    #[derive(Debug, Default)]
    struct Windows {
        window: u64,
        counts: BTreeMap<u64, u64>,
        last: u64,
    }

    impl Windows {
        /// `(E·W, W)` at `t` under window `w`.
        fn scaled(&self, w: u64, t: u64) -> u128 {
            let index = t / w;
            let get = |i: u64| *self.counts.get(&i).unwrap_or(&0) as u128;
            let prev = if index == 0 { 0 } else { get(index - 1) };
            let elapsed = u128::from(t - index * w);
            prev * (u128::from(w) - elapsed) + get(index) * u128::from(w)
        }

        fn allows(&self, p: &SlidingCounterParams, t: u64, n: u64) -> bool {
            let w = u128::from(p.window());
            self.scaled(p.window(), t) + u128::from(n) * w <= u128::from(p.limit()) * w
        }

        /// The first time from `t` (within two windows) at which `pred` holds.
        fn first(&self, t: u64, w: u64, pred: impl Fn(u64) -> bool) -> u64 {
            let (mut lo, mut hi) = (t, t + 2 * w);
            assert!(pred(hi));
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if pred(mid) { hi = mid } else { lo = mid + 1 }
            }
            lo - t
        }
    }

    impl Model for Windows {
        type Params = SlidingCounterParams;

        fn call(
            &mut self,
            p: &SlidingCounterParams,
            now: u64,
            cost: u64,
            be: bool,
            peek: bool,
        ) -> Verdict {
            let t = now.max(self.last);
            let w = p.window();
            let mut after = Windows {
                window: w,
                counts: if self.window == w {
                    self.counts.clone()
                } else {
                    BTreeMap::new()
                },
                last: t,
            };
            let mut avail = 0;
            while avail < p.limit() && after.allows(p, t, avail + 1) {
                avail += 1;
            }
            let granted = if cost <= avail {
                cost
            } else if be {
                avail
            } else {
                0
            };
            *after.counts.entry(t / w).or_insert(0) += granted;
            let mut remaining = 0;
            while remaining < p.limit() && after.allows(p, t, remaining + 1) {
                remaining += 1;
            }
            let retry = if granted == cost {
                Retry::Granted
            } else if cost > p.limit() {
                Retry::Never
            } else {
                Retry::After(after.first(t, w, |x| after.allows(p, x, cost)))
            };
            let reset_after = after.first(t, w, |x| after.scaled(w, x) == 0);
            if granted > 0 && !peek {
                *self = after;
            }
            Verdict {
                granted,
                limit: p.limit(),
                remaining,
                retry,
                reset_after,
            }
        }
    }

    fn param_sets() -> Vec<SlidingCounterParams> {
        vec![
            SlidingCounterParams::new(7, US_PER_SEC).unwrap(),
            SlidingCounterParams::new(12, US_PER_SEC).unwrap(),
            SlidingCounterParams::new(3, US_PER_SEC).unwrap(),
            SlidingCounterParams::new(7, 700_001).unwrap(),
        ]
    }

    proptest! {
        #[test]
        fn sliding_counter_matches_the_textbook_estimate(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_000_000, 9, 4),
        ) {
            testkit::check_against_model::<SlidingCounter, _>(
                &mut Windows::default(), &param_sets(), start, &steps, GrantedRetry::Zero);
        }

        #[test]
        fn sliding_counter_grants_at_most_the_limit_in_any_window(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_000_000, 9, 1),
        ) {
            let p = param_sets()[0];
            let h = testkit::check_against_model::<SlidingCounter, _>(
                &mut Windows::default(), &[p], start, &steps, GrantedRetry::Zero);
            let mut per_window = BTreeMap::new();
            for e in &h {
                *per_window.entry(e.at / p.window()).or_insert(0) += e.granted;
            }
            prop_assert!(per_window.values().all(|&n| n <= p.limit()), "{per_window:?}");
            // And the estimate never exceeds the limit after a grant.
            let mut key = Key::default();
            let mut now = start;
            for s in &steps {
                now = now.saturating_add_signed(s.dt);
                let v = key.take::<SlidingCounter>(&p, now, s.cost);
                if v.granted > 0 {
                    // Granted: the key's clock is this call's evaluation time.
                    let at = key.last_update();
                    let SlidingCounter { start: ws, previous, current, .. } =
                        *SlidingCounter::from_state(key.state.as_ref().unwrap().algo.as_ref().unwrap()).unwrap();
                    let w = u128::from(p.window());
                    let e = u128::from(at - ws);
                    let scaled = u128::from(previous) * (w - e) + u128::from(current) * w;
                    prop_assert!(scaled <= u128::from(p.limit()) * w);
                }
            }
        }

        #[test]
        fn sliding_counter_survives_a_century_and_clock_steps_back(
            steps in testkit::steps(1_000_000, 9, 1),
        ) {
            let p = param_sets()[0];
            testkit::check_century_jump::<SlidingCounter>(&p, T0, &steps);
            testkit::check_clock_step_back::<SlidingCounter>(&p, T0, &steps);
        }

        #[test]
        fn sliding_counter_state_round_trips_through_the_codec(
            steps in testkit::steps(1_000_000, 9, 4),
        ) {
            testkit::check_codec_round_trip::<SlidingCounter>(&param_sets(), &steps);
        }
    }

    #[test]
    fn sliding_counter_codec_fixture() {
        let p = SlidingCounterParams::new(100, 60_000_000).unwrap();
        let mut key = Key::default();
        key.take::<SlidingCounter>(&p, 1_000_000, 3);
        key.take::<SlidingCounter>(&p, 61_000_000, 5);
        let state = key.state.clone().unwrap();
        #[rustfmt::skip]
        let bytes: &[u8] = &[
            1, 6,                   // codec version, kind SlidingCounter
            0xc0, 0x92, 0x8b, 0x1d, // last update 61 000 000 µs
            100,                    // limit
            0x80, 0x8e, 0xce, 0x1c, // window 60 000 000 µs
            0x80, 0x8e, 0xce, 0x1c, // current window start 60 000 000 µs
            3,                      // previous count
            5,                      // current count
            0,                      // no dedup ids
        ];
        assert_eq!(codec::encode(&state), bytes);
        assert_eq!(codec::decode(bytes), Some(state));
        // A window start that is not a multiple of the window is not an encoding we write.
        let mut bad = bytes.to_vec();
        bad[11] = 0x81;
        assert_eq!(codec::decode(&bad), None::<LimiterState>);
    }
}
