//! GCRA, the generic cell rate algorithm, and the virtual schedule it shares with the buckets.
//!
//! A limiter allows `burst` units at once and `rate` units per `period` sustained, so one unit
//! costs the emission interval `T = period / rate`. The state is one number, the theoretical
//! arrival time (TAT): a request of `n` units at `now` is allowed iff
//! `max(TAT, now) + n·T − burst·T ≤ now`, and then `TAT = max(TAT, now) + n·T`.
//!
//! To stay exact whatever the rate (1000/s or 3/s, where `T` is not a whole number of
//! microseconds), time is counted in *ticks* of `1/rate` µs: one unit is then exactly `period`
//! ticks, and every comparison is integer arithmetic on `u128`. The token bucket
//! (`tokens = (now − (TAT − capacity·T)) / T`) and the leaky bucket (`level = (TAT − now) / T`)
//! are the same schedule read another way, so they reuse [`Schedule`].
//!
//! Changing the parameters of a live limiter keeps the units already used ([`Carry`]): GCRA and
//! the leaky bucket convert the backlog `max(TAT − now, 0)` to units at the old `T` and back to
//! time at the new one (rounding up to the new tick); the token bucket keeps its tokens instead
//! (rounding down, capped at the new capacity). Either way the rounding is against the client
//! (SPEC "Rounding rule": never a unit that exact arithmetic would deny), and as whole units are
//! exact on every tick grid, a raised limit still never denies more than before.

use crate::core::error::CoreError;
use crate::core::limiter::{self, Algorithm, Verdict};
use crate::core::param::{check_count, check_duration};
use crate::core::time::{MAX_SPAN, Micros};
use crate::core::varint::{self, Reader};

pub use crate::core::param::MAX_PARAM;

/// Validated parameters: `burst` units at once, `rate` units per `period` µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraParams {
    burst: u64,
    rate: u64,
    period: Micros,
}

impl GcraParams {
    /// Validate the parameters (the commands name them in their own words: `capacity`, `refill`).
    ///
    /// # Errors
    /// [`CoreError::InvalidParam`] when a value is 0 or above [`MAX_PARAM`];
    /// [`CoreError::SpanTooLong`] when `burst · period / rate` is above [`MAX_SPAN`].
    pub fn new(burst: u64, rate: u64, period: Micros) -> Result<Self, CoreError> {
        let burst = check_count(burst, "burst")?;
        let rate = check_count(rate, "rate")?;
        let period = check_duration(period, "period")?;
        // Every duration a reply or expiry holds (reset, retry, queue delay) is at most the
        // time a full limiter takes to drain: `burst · T`, rounded up.
        // `ceil(burst · period / rate) ≤ MAX_SPAN` exactly when `burst · period ≤ MAX_SPAN · rate`
        // (no division: this check runs on every decode). Both products are below 2^127.
        let window = u128::from(burst).checked_mul(u128::from(period));
        let most = u128::from(MAX_SPAN).checked_mul(u128::from(rate));
        if window.is_none_or(|w| most.is_none_or(|m| w > m)) {
            return Err(CoreError::SpanTooLong);
        }
        Ok(GcraParams {
            burst,
            rate,
            period,
        })
    }

    /// Units allowed at once (the limit).
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Units per period.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The period in µs.
    pub fn period(&self) -> Micros {
        self.period
    }
}

fn overflow<T>(v: Option<T>) -> Result<T, CoreError> {
    v.ok_or(CoreError::Overflow)
}

/// `ticks / rate`, rounded up, as µs (saturating): a point in time.
fn ticks_to_us(ticks: u128, rate: u64) -> Micros {
    let us = ticks.div_ceil(u128::from(rate.max(1)));
    u64::try_from(us).unwrap_or(u64::MAX)
}

/// `ticks / rate`, rounded up, as a duration in µs of at most [`MAX_SPAN`]. Validated
/// parameters keep every duration of their own state within it; only a state carried over
/// from other parameters can exceed it, which is refused rather than capped.
fn span_us(ticks: u128, rate: u64) -> Result<Micros, CoreError> {
    let us = ticks.div_ceil(u128::from(rate.max(1)));
    u64::try_from(us)
        .ok()
        .filter(|&us| us <= MAX_SPAN)
        .ok_or(CoreError::StateTooLong)
}

/// What a schedule keeps when it is called with other parameters than it was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carry {
    /// The backlog `max(TAT − now, 0)` in units, rounded up to the new tick and not capped:
    /// GCRA's units used, the leaky bucket's level (an over-full bucket drains before it
    /// accepts again).
    Backlog,
    /// The free units `burst − backlog`, rounded down to the new tick and capped at the new
    /// burst: the token bucket's tokens.
    Free,
}

/// The virtual schedule: parameters plus the TAT, in ticks of `1 / rate` µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    params: GcraParams,
    // The TAT as two words: a u128 field would make the state 16-byte aligned and larger.
    tat_hi: u64,
    tat_lo: u64,
}

/// A schedule's evaluation, with the time the request would start from (`max(TAT, now)`).
#[derive(Debug, Clone, Copy)]
pub struct Evaluation {
    pub verdict: Verdict,
    /// How long the request waits behind earlier ones: `max(TAT, now) − now`, in µs (rounded up).
    pub queue_delay: Micros,
}

impl Schedule {
    /// A schedule nobody has used: the TAT is in the past.
    pub fn fresh(params: &GcraParams) -> Self {
        Schedule {
            params: *params,
            tat_hi: 0,
            tat_lo: 0,
        }
    }

    /// The stored parameters.
    pub fn params(&self) -> &GcraParams {
        &self.params
    }

    fn tat(&self) -> u128 {
        (u128::from(self.tat_hi) << 64) | u128::from(self.tat_lo)
    }

    fn set_tat(&mut self, tat: u128) {
        self.tat_hi = (tat >> 64) as u64;
        self.tat_lo = tat as u64;
    }

    /// The TAT in ticks of `params`, converting the state as `carry` says if `params` differ
    /// from the stored ones.
    fn tat_under(&self, params: &GcraParams, now: Micros, carry: Carry) -> Result<u128, CoreError> {
        if *params == self.params {
            return Ok(self.tat());
        }
        let old = &self.params;
        let old_period = u128::from(old.period);
        let new_period = u128::from(params.period);
        let now_old = overflow(u128::from(now).checked_mul(u128::from(old.rate)))?;
        let now_new = overflow(u128::from(now).checked_mul(u128::from(params.rate)))?;
        let backlog = self.tat().saturating_sub(now_old);
        // Rescale `ticks` (a count of units times `old.period`) to units times `new.period`,
        // without overflowing: whole units, then the fraction.
        let rescale = |ticks: u128, round_up: bool| -> Result<u128, CoreError> {
            let units = overflow(ticks.checked_div(old_period))?;
            let part = overflow(ticks.checked_rem(old_period))?;
            let whole = overflow(units.checked_mul(new_period))?;
            let scaled = overflow(part.checked_mul(new_period))?;
            let mut frac = overflow(scaled.checked_div(old_period))?;
            if round_up && overflow(scaled.checked_rem(old_period))? != 0 {
                frac = overflow(frac.checked_add(1))?;
            }
            overflow(whole.checked_add(frac))
        };
        // Both round against the client: more backlog, fewer free units.
        match carry {
            Carry::Backlog => overflow(now_new.checked_add(rescale(backlog, true)?)),
            Carry::Free => {
                let old_window = overflow(u128::from(old.burst).checked_mul(old_period))?;
                let new_window = overflow(u128::from(params.burst).checked_mul(new_period))?;
                let free = rescale(old_window.saturating_sub(backlog), false)?.min(new_window);
                overflow(now_new.checked_add(new_window.saturating_sub(free)))
            }
        }
    }

    /// What `cost` units at `now` would get under `params`. Never mutates.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the numbers do not fit (not with validated parameters).
    pub fn evaluate(
        &self,
        params: &GcraParams,
        now: Micros,
        cost: u64,
        best_effort: bool,
        carry: Carry,
    ) -> Result<Evaluation, CoreError> {
        let rate = params.rate;
        let period = u128::from(params.period);
        let burst = u128::from(params.burst);
        let now_t = overflow(u128::from(now).checked_mul(u128::from(rate)))?;
        let tat = self.tat_under(params, now, carry)?;
        let base = tat.max(now_t);
        let window = overflow(burst.checked_mul(period))?;
        let cap = overflow(now_t.checked_add(window))?;
        // Whole units that fit between `base` and `cap`: at most `burst`.
        let avail = overflow(cap.saturating_sub(base).checked_div(period))?;
        let avail = u64::try_from(avail).unwrap_or(u64::MAX);
        let granted = limiter::grant(cost, avail, best_effort);
        let after = if granted > 0 {
            overflow(
                u128::from(granted)
                    .checked_mul(period)
                    .and_then(|d| base.checked_add(d)),
            )?
        } else {
            tat
        };
        let retry = limiter::retry(granted, cost, params.burst, || {
            // Allowed once `now` reaches `after + cost·T − burst·T`.
            let need = overflow(
                u128::from(cost)
                    .checked_mul(period)
                    .and_then(|d| after.checked_add(d)),
            )?
            .saturating_sub(window);
            span_us(need.saturating_sub(now_t), rate)
        })?;
        Ok(Evaluation {
            verdict: Verdict {
                granted,
                limit: params.burst,
                remaining: avail.saturating_sub(granted),
                retry,
                reset_after: span_us(after.saturating_sub(now_t), rate)?,
            },
            queue_delay: span_us(base.saturating_sub(now_t), rate)?,
        })
    }

    /// Charge `granted` units at `now`, adopting `params` (converted as `carry` says).
    ///
    /// # Errors
    /// [`CoreError::Overflow`] as `evaluate`.
    pub fn commit(
        &mut self,
        params: &GcraParams,
        now: Micros,
        granted: u64,
        carry: Carry,
    ) -> Result<(), CoreError> {
        let now_t = overflow(u128::from(now).checked_mul(u128::from(params.rate)))?;
        let base = self.tat_under(params, now, carry)?.max(now_t);
        let tat = overflow(
            u128::from(granted)
                .checked_mul(u128::from(params.period))
                .and_then(|d| base.checked_add(d)),
        )?;
        self.params = *params;
        self.set_tat(tat);
        Ok(())
    }

    /// RL.REFUND: `TAT = max(TAT − units·T, now)` under the stored parameters. Returns the units
    /// given back: by how much `remaining` rises (`ceil(backlog / T)` at most).
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the numbers do not fit (not with validated parameters).
    pub fn refund(&mut self, now: Micros, units: u64) -> Result<u64, CoreError> {
        let period = u128::from(self.params.period);
        let now_t = overflow(u128::from(now).checked_mul(u128::from(self.params.rate)))?;
        let backlog = self.tat().saturating_sub(now_t);
        let owed = backlog.div_ceil(period.max(1));
        let given = u64::try_from(owed).unwrap_or(u64::MAX).min(units);
        if given > 0 {
            let back = u128::from(units).saturating_mul(period);
            self.set_tat(self.tat().saturating_sub(back).max(now_t));
        }
        Ok(given)
    }

    /// When the schedule is fresh again: the TAT, in µs rounded up.
    pub fn fresh_at(&self) -> Micros {
        ticks_to_us(self.tat(), self.params.rate)
    }

    /// Codec: parameters then TAT.
    pub fn encode(&self, out: &mut Vec<u8>) {
        varint::put_u64(out, self.params.burst);
        varint::put_u64(out, self.params.rate);
        varint::put_u64(out, self.params.period);
        varint::put_u128(out, self.tat());
    }

    /// Codec: the inverse of `encode`, validating the parameters.
    pub fn decode(input: &mut Reader<'_>) -> Option<Self> {
        let burst = input.u64()?;
        let rate = input.u64()?;
        let period = input.u64()?;
        let params = GcraParams::new(burst, rate, period).ok()?;
        let mut s = Schedule::fresh(&params);
        s.set_tat(input.u128()?);
        Some(s)
    }
}

/// An algorithm that is a reading of the [`Schedule`]: GCRA, the token bucket and the leaky
/// bucket differ only in their names, what they keep when their parameters change, and (the
/// leaky bucket) what `retry_after` means for a granted request. Implementing this trait makes
/// a type an [`Algorithm`].
pub trait ScheduleReading: Sized + Clone {
    /// What survives a change of parameters.
    const CARRY: Carry;
    /// RL.INFO's names for burst, rate and period.
    const NAMES: [&'static str; 3];

    /// Wrap a schedule.
    fn from_schedule(s: Schedule) -> Self;
    /// The schedule inside.
    fn schedule(&self) -> &Schedule;
    /// The schedule inside, mutably.
    fn schedule_mut(&mut self) -> &mut Schedule;

    /// The verdict for a request of `cost` (the schedule's own, unless a reading refines it).
    fn verdict(e: Evaluation, _cost: u64) -> Verdict {
        e.verdict
    }
}

impl<T: ScheduleReading> Algorithm for T {
    type Params = GcraParams;

    fn fresh(params: &GcraParams) -> Self {
        T::from_schedule(Schedule::fresh(params))
    }

    fn params(&self) -> &GcraParams {
        self.schedule().params()
    }

    fn evaluate(
        &self,
        params: &GcraParams,
        now: Micros,
        cost: u64,
        best_effort: bool,
    ) -> Result<Verdict, CoreError> {
        let e = self
            .schedule()
            .evaluate(params, now, cost, best_effort, T::CARRY)?;
        Ok(T::verdict(e, cost))
    }

    fn commit(&mut self, params: &GcraParams, now: Micros, granted: u64) -> Result<(), CoreError> {
        self.schedule_mut().commit(params, now, granted, T::CARRY)
    }

    fn refund(&mut self, now: Micros, units: u64) -> Result<u64, CoreError> {
        self.schedule_mut().refund(now, units)
    }

    fn fresh_at(&self) -> Micros {
        self.schedule().fresh_at()
    }

    fn dedup_until(params: &GcraParams, now: Micros) -> Micros {
        now.saturating_add(params.period)
    }

    fn describe(params: &GcraParams) -> Vec<(&'static str, u64)> {
        let [burst, rate, period] = T::NAMES;
        vec![
            (burst, params.burst),
            (rate, params.rate),
            (period, params.period / 1000),
        ]
    }

    fn encode(&self, out: &mut Vec<u8>) {
        self.schedule().encode(out);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        Schedule::decode(input).map(T::from_schedule)
    }
}

/// The `from_schedule`/`schedule`/`schedule_mut` of a newtype over [`Schedule`].
macro_rules! schedule_newtype {
    ($t:ident) => {
        fn from_schedule(s: Schedule) -> Self {
            $t(s)
        }

        fn schedule(&self) -> &Schedule {
            &self.0
        }

        fn schedule_mut(&mut self) -> &mut Schedule {
            &mut self.0
        }
    };
}
pub(crate) use schedule_newtype;

/// RL.GCRA's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra(pub Schedule);

impl ScheduleReading for Gcra {
    const CARRY: Carry = Carry::Backlog;
    const NAMES: [&'static str; 3] = ["burst", "rate", "period_ms"];

    schedule_newtype!(Gcra);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::flow::apply;
    use crate::core::limiter::{Request, Retry};
    use crate::core::state::LimiterState;
    use proptest::prelude::*;

    const SEC: u64 = 1_000_000;
    const T0: u64 = 1_700_000_000 * SEC;

    fn params(burst: u64, rate: u64, period: u64) -> GcraParams {
        GcraParams::new(burst, rate, period).unwrap()
    }

    /// A reference model written the other way round: the "continuous-state leaky bucket" of
    /// ITU-T I.371, a counter `x` (in ticks of 1/rate µs) that drains as time passes, instead
    /// of a theoretical arrival time.
    #[derive(Debug, Clone)]
    struct Model {
        burst: u128,
        rate: u128,
        period: u128,
        x: u128,
        lct: u64,
    }

    #[derive(Debug, PartialEq, Eq)]
    struct Reply {
        granted: u64,
        remaining: u64,
        retry: Retry,
        reset_us: u64,
    }

    impl Model {
        fn new(p: &GcraParams) -> Self {
            Model {
                burst: p.burst.into(),
                rate: p.rate.into(),
                period: p.period.into(),
                x: 0,
                lct: 0,
            }
        }

        fn call(&mut self, t: u64, cost: u64, peek: bool, best_effort: bool) -> Reply {
            let t = t.max(self.lct);
            let drained = u128::from(t - self.lct) * self.rate;
            let xp = self.x.saturating_sub(drained);
            let room = self.burst * self.period - xp.min(self.burst * self.period);
            let fits = (room / self.period) as u64;
            let granted = if cost <= fits {
                cost
            } else if best_effort {
                fits
            } else {
                0
            };
            let x_after = xp + u128::from(granted) * self.period;
            let retry = if granted == cost {
                Retry::Granted
            } else if u128::from(cost) > self.burst {
                Retry::Never
            } else {
                let excess = x_after + u128::from(cost) * self.period - self.burst * self.period;
                Retry::After(excess.div_ceil(self.rate) as u64)
            };
            let reply = Reply {
                granted,
                remaining: fits - granted,
                retry,
                reset_us: x_after.div_ceil(self.rate) as u64,
            };
            if granted > 0 && !peek {
                self.x = x_after;
                self.lct = t;
            }
            reply
        }
    }

    fn run(state: &mut Option<LimiterState>, p: &GcraParams, req: &Request) -> Reply {
        let out = apply::<Gcra>(state.as_mut(), p, req, 100).unwrap();
        if let crate::core::flow::Write::Created(s) = out.write {
            *state = Some(s);
        }
        Reply {
            granted: out.verdict.granted,
            remaining: out.verdict.remaining,
            retry: out.verdict.retry,
            reset_us: out.verdict.reset_after,
        }
    }

    #[test]
    fn gcra_table_of_replies() {
        // burst 10, 5 per second: T = 200 ms.
        let p = params(10, 5, SEC);
        let mut s = None;
        #[rustfmt::skip]
        let cases: &[(u64, u64, bool, u64, u64, Retry, u64)] = &[
            // at (ms after T0), cost, best_effort, granted, remaining, retry, reset_after (µs)
            (0,    1,  false, 1,  9, Retry::Granted,         200_000),
            (0,    9,  false, 9,  0, Retry::Granted,         2_000_000),
            (0,    1,  false, 0,  0, Retry::After(200_000),  2_000_000),
            (100,  1,  false, 0,  0, Retry::After(100_000),  1_900_000),
            (200,  1,  false, 1,  0, Retry::Granted,         2_000_000),
            (200,  11, false, 0,  0, Retry::Never,           2_000_000),
            (1000, 5,  true,  4,  0, Retry::After(1_000_000), 2_000_000),
            (1000, 0,  false, 0,  0, Retry::Granted,         2_000_000),
            (5000, 0,  false, 0, 10, Retry::Granted,         0),
            // A clock step back is evaluated at the last update (1000 ms).
            (500,  1,  false, 0,  0, Retry::After(200_000),  2_000_000),
        ];
        for (i, &(at, cost, be, granted, remaining, retry, reset)) in cases.iter().enumerate() {
            let req = Request {
                best_effort: be,
                ..Request::new(cost, T0 + at * 1000)
            };
            let got = run(&mut s, &p, &req);
            let want = Reply {
                granted,
                remaining,
                retry,
                reset_us: reset,
            };
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn gcra_is_exact_for_rates_that_do_not_divide_a_microsecond() {
        // 3 per second: T = 333333.33 µs. After 3 grants at T0 the bucket (burst 3) is empty;
        // one unit is back after exactly 1/3 s, which is 333334 µs rounded up.
        let p = params(3, 3, SEC);
        let mut s = None;
        assert_eq!(run(&mut s, &p, &Request::new(3, T0)).granted, 3);
        let r = run(&mut s, &p, &Request::new(1, T0));
        assert_eq!(r.retry, Retry::After(333_334));
        assert_eq!(run(&mut s, &p, &Request::new(1, T0 + 333_333)).granted, 0);
        assert_eq!(run(&mut s, &p, &Request::new(1, T0 + 333_334)).granted, 1);
        // A million per second keeps sub-microsecond intervals exact: 1000 units per ms.
        let p = params(1, 1_000_000, SEC);
        let mut s = None;
        let mut granted = 0;
        for i in 0..10_000u64 {
            granted += run(&mut s, &p, &Request::new(1, T0 + i)).granted;
        }
        assert_eq!(granted, 10_000);
    }

    #[test]
    fn gcra_parameter_change_keeps_used_units() {
        // 10 per second with burst 10; use 6, then switch to 20 per second, burst 10: the 6
        // used units stay used (4 remain), and drain at the new rate.
        let mut s = None;
        run(&mut s, &params(10, 10, SEC), &Request::new(6, T0));
        let r = run(&mut s, &params(10, 20, SEC), &Request::new(0, T0));
        assert_eq!(r.remaining, 4);
        assert_eq!(r.reset_us, 300_000);
        // Raising the burst grants the difference at once (redis-cell #54 would deny).
        let r = run(&mut s, &params(20, 20, SEC), &Request::new(14, T0));
        assert_eq!(r.granted, 14);
    }

    #[test]
    fn gcra_hundred_year_jump_saturates() {
        let p = params(5, 1, SEC);
        let mut s = None;
        run(&mut s, &p, &Request::new(5, T0));
        let far = T0 + 100 * 365 * 86_400 * SEC;
        let r = run(&mut s, &p, &Request::new(1, far));
        assert_eq!(r.granted, 1);
        // The largest parameters and the latest time still compute.
        let big = params(MAX_PARAM, MAX_PARAM, MAX_PARAM);
        let mut s = None;
        let r = run(
            &mut s,
            &big,
            &Request::new(MAX_PARAM, crate::core::time::MAX_TIME),
        );
        assert_eq!(r.granted, MAX_PARAM);
        let r = run(
            &mut s,
            &big,
            &Request::new(MAX_PARAM, crate::core::time::MAX_TIME),
        );
        assert_eq!(r.granted, 0);
    }

    #[test]
    fn gcra_refuses_parameters_whose_span_does_not_fit() {
        // Reproducer: the reset of a full bucket would be 9.9e22 µs, beyond any reply or expiry.
        assert_eq!(
            GcraParams::new(1_000_000_000_961, 10_093, 1_000_000_000_000_000),
            Err(CoreError::SpanTooLong)
        );
        // The bound is exact: burst · period / rate, rounded up, at most MAX_SPAN.
        assert!(GcraParams::new(1, 1, MAX_SPAN).is_ok());
        assert!(GcraParams::new(2, 2, MAX_SPAN).is_ok());
        assert_eq!(
            GcraParams::new(2, 1, MAX_SPAN / 2 + 1),
            Err(CoreError::SpanTooLong)
        );
        assert!(GcraParams::new(2, 1, MAX_SPAN / 2).is_ok());
        assert_eq!(
            GcraParams::new(3, 2, MAX_SPAN / 3 * 2 + 1),
            Err(CoreError::SpanTooLong)
        );
    }

    #[test]
    fn gcra_refuses_a_carried_backlog_that_would_not_fit() {
        // A million units queued, then one unit per 10^15 µs: 10^21 µs to drain.
        let mut s = None;
        run(
            &mut s,
            &params(1_000_000, 1_000_000, SEC),
            &Request::new(1_000_000, T0),
        );
        let slow = params(1, 1, 1_000_000_000 * SEC);
        let out = apply::<Gcra>(s.as_mut(), &slow, &Request::new(1, T0), 100);
        assert_eq!(out.unwrap_err(), CoreError::StateTooLong);
    }

    fn arb_params() -> impl Strategy<Value = GcraParams> {
        (
            1u64..20,
            1u64..2_000,
            prop_oneof![Just(SEC), 1u64..5_000_000],
        )
            .prop_map(|(b, r, p)| params(b, r, p))
    }

    #[derive(Debug, Clone)]
    struct Op {
        dt: i64,
        cost: u64,
        peek: bool,
        best_effort: bool,
    }

    fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            (
                -300_000i64..1_500_000,
                0u64..25,
                any::<bool>(),
                any::<bool>(),
            )
                .prop_map(|(dt, cost, peek, be)| Op {
                    dt,
                    cost,
                    peek: peek && cost % 3 == 0,
                    best_effort: be,
                }),
            1..60,
        )
    }

    /// Parameter sets whose periods do not divide one another (a conversion between them has
    /// a fraction), including those of the reproducers.
    fn changing_params() -> Vec<GcraParams> {
        vec![
            params(2, 2, 180 * SEC),
            params(2, 7, 60 * SEC),
            params(3, 2, 8_400 * SEC),
            params(1, 10, 3_600 * SEC),
            params(5, 3, SEC),
            params(4, 1000, 7_000),
            params(7, 11, 13_000_000),
        ]
    }

    /// The exact model of a schedule across parameter changes: the level in units, as a
    /// rational with the common denominator `den` (a multiple of every period, so draining
    /// `rate / period` units per µs is exact). `free` reads it as the token bucket (tokens are
    /// kept, capped at the new capacity); otherwise the backlog is kept, uncapped.
    struct Exact {
        den: u128,
        free: bool,
        /// Stored parameters, level (units × den; tokens for the token bucket), last update.
        stored: Option<(GcraParams, u128, u64)>,
    }

    impl Exact {
        fn new(sets: &[GcraParams], free: bool) -> Self {
            fn gcd(a: u128, b: u128) -> u128 {
                if b == 0 { a } else { gcd(b, a % b) }
            }
            let den = sets.iter().fold(1u128, |l, p| {
                let q = u128::from(p.period);
                l / gcd(l, q) * q
            });
            Exact {
                den,
                free,
                stored: None,
            }
        }

        /// Units available at `now` under `p`, exactly, as units × den.
        fn room(&self, p: &GcraParams, now: u64) -> (u64, u128) {
            let cap = u128::from(p.burst) * self.den;
            let Some((q, level, last)) = self.stored else {
                return (now, cap);
            };
            let t = now.max(last);
            let flow =
                u128::from(t - last) * u128::from(q.rate) * (self.den / u128::from(q.period));
            let room = if self.free {
                let qcap = u128::from(q.burst) * self.den;
                (level + flow).min(qcap).min(cap)
            } else {
                cap.saturating_sub(level.saturating_sub(flow))
            };
            (t, room)
        }

        fn charge(&mut self, p: &GcraParams, now: u64, granted: u64) {
            let (t, room) = self.room(p, now);
            let g = u128::from(granted) * self.den;
            let level = if self.free {
                room - g
            } else {
                // The backlog: capacity minus room, which may exceed the capacity (uncapped).
                let Some((q, level, last)) = self.stored else {
                    self.stored = Some((*p, g, t));
                    return;
                };
                let flow =
                    u128::from(t - last) * u128::from(q.rate) * (self.den / u128::from(q.period));
                level.saturating_sub(flow) + g
            };
            self.stored = Some((*p, level, t));
        }
    }

    /// Run random calls with random parameter changes against [`Exact`]: the implementation
    /// never grants a unit the exact model denies, and is stricter by less than one unit.
    fn check_against_exact<A: crate::core::state::Stored<Params = GcraParams>>(
        free: bool,
        start: u64,
        steps: &[(u64, usize, u64, bool)],
    ) -> Result<(), TestCaseError> {
        let sets = changing_params();
        let mut exact = Exact::new(&sets, free);
        let mut s: Option<LimiterState> = None;
        let mut t = start;
        for &(dt, which, cost, be) in steps {
            t += if dt >= NEAR { 0 } else { dt };
            // Some steps land within a µs or two of the instant a stored unit comes back,
            // where rounding decides.
            if let (Some((q, ..)), Some(delta)) = (exact.stored, dt.checked_sub(NEAR)) {
                let whole = |at: u64| exact.room(&q, at).1 / exact.den;
                let now_units = whole(t);
                let (mut lo, mut hi) = (0u64, 1u64 << 45);
                if whole(t + hi) > now_units {
                    while hi - lo > 1 {
                        let mid = lo + (hi - lo) / 2;
                        if whole(t + mid) > now_units {
                            hi = mid
                        } else {
                            lo = mid
                        }
                    }
                    t = (t + hi + delta).saturating_sub(2);
                }
            }
            let p = &sets[which % sets.len()];
            let (_, room) = exact.room(p, t);
            let exact_avail = (room / exact.den) as u64;
            let peek = Request {
                peek: true,
                ..Request::new(0, t)
            };
            let out = apply::<A>(s.as_mut(), p, &peek, 10).unwrap();
            let avail = out.verdict.remaining;
            prop_assert!(avail <= exact_avail, "{avail} > exact {exact_avail} at {t}");
            prop_assert!(
                avail + 1 >= exact_avail,
                "{avail} << exact {exact_avail} at {t}"
            );
            let req = Request {
                best_effort: be,
                ..Request::new(cost, t)
            };
            let out = apply::<A>(s.as_mut(), p, &req, 10).unwrap();
            if let crate::core::flow::Write::Created(new) = out.write {
                s = Some(new);
            }
            let g = out.verdict.granted;
            prop_assert!(g <= exact_avail, "granted {g} > exact {exact_avail} at {t}");
            if g > 0 {
                exact.charge(p, t, g);
            }
        }
        Ok(())
    }

    #[test]
    fn parameter_change_rounds_against_the_client() {
        // Reproducers. A token bucket of 2 per 3 min, emptied, then 1 µs short of 3 minutes
        // later holds 1.99999999 tokens; converted to 7 per minute it must not grant 2.
        let mut s = None;
        let take = |s: &mut Option<LimiterState>, p: &GcraParams, cost, at| {
            let out = apply::<crate::core::token_bucket::TokenBucket>(
                s.as_mut(),
                p,
                &Request::new(cost, at),
                10,
            )
            .unwrap();
            if let crate::core::flow::Write::Created(new) = out.write {
                *s = Some(new);
            }
            out.verdict.granted
        };
        let t = 2_541_131_987_215_912;
        assert_eq!(take(&mut s, &params(2, 2, 180 * SEC), 2, t), 2);
        assert_eq!(
            take(&mut s, &params(2, 7, 60 * SEC), 2, t + 180 * SEC - 1),
            0
        );
        assert_eq!(
            take(&mut s, &params(2, 7, 60 * SEC), 1, t + 180 * SEC - 1),
            1
        );
        // CL.THROTTLE c1 2 2 8400 (burst 3, one unit per 4200 s), then 1 µs before the unit
        // has drained, burst 1 at 10 per hour: 1 µs of backlog is still a backlog.
        let mut s = None;
        let t = 1_795_459_239_944_343;
        assert_eq!(
            run(&mut s, &params(3, 2, 8_400 * SEC), &Request::new(1, t)).granted,
            1
        );
        let later = t + 4_200 * SEC - 1;
        assert_eq!(
            run(&mut s, &params(1, 10, 3_600 * SEC), &Request::new(1, later)).granted,
            0
        );
        assert_eq!(
            run(
                &mut s,
                &params(1, 10, 3_600 * SEC),
                &Request::new(1, later + 1)
            )
            .granted,
            1
        );
    }

    /// A step's `dt` at or above this means: go to 2 µs before the next unit comes back, plus
    /// `dt − NEAR`.
    const NEAR: u64 = u64::MAX - 4;

    fn exact_steps() -> impl Strategy<Value = Vec<(u64, usize, u64, bool)>> {
        prop::collection::vec(
            (
                prop_oneof![
                    0u64..3,
                    0u64..2_000_000,
                    0u64..20_000_000_000,
                    NEAR..=u64::MAX
                ],
                0usize..7,
                0u64..8,
                any::<bool>(),
            ),
            1..50,
        )
    }

    proptest! {
        /// GCRA across parameter changes never grants what exact arithmetic would deny.
        #[test]
        fn gcra_parameter_changes_match_exact_arithmetic(start in T0..T0 + SEC, steps in exact_steps()) {
            check_against_exact::<Gcra>(false, start, &steps)?;
        }

        /// The leaky bucket keeps its level across changes, never in the client's favour.
        #[test]
        fn leaky_bucket_parameter_changes_match_exact_arithmetic(start in T0..T0 + SEC, steps in exact_steps()) {
            check_against_exact::<crate::core::leaky_bucket::LeakyBucket>(false, start, &steps)?;
        }

        /// The token bucket keeps its tokens across changes, never in the client's favour.
        #[test]
        fn token_bucket_parameter_changes_match_exact_arithmetic(start in T0..T0 + SEC, steps in exact_steps()) {
            check_against_exact::<crate::core::token_bucket::TokenBucket>(true, start, &steps)?;
        }
    }

    proptest! {
        /// Every reply field matches the reference model, whatever the sequence.
        #[test]
        fn gcra_matches_reference_model(p in arb_params(), ops in arb_ops()) {
            let mut model = Model::new(&p);
            let mut s = None;
            let mut t = T0;
            for op in ops {
                t = t.saturating_add_signed(op.dt);
                let req = Request { peek: op.peek, best_effort: op.best_effort, ..Request::new(op.cost, t) };
                let want = model.call(t, op.cost, op.peek, op.best_effort);
                let got = run(&mut s, &p, &req);
                prop_assert_eq!(got, want);
            }
        }

        /// Never more than `burst + elapsed / T` units in any run of calls.
        #[test]
        fn gcra_never_grants_more_than_burst_plus_rate(p in arb_params(), ops in arb_ops()) {
            let mut s = None;
            let mut t = T0;
            let mut log: Vec<(u64, u64)> = Vec::new();
            for op in ops {
                t = t.saturating_add_signed(op.dt.max(0));
                let req = Request { best_effort: op.best_effort, ..Request::new(op.cost, t) };
                let r = run(&mut s, &p, &req);
                if r.granted > 0 { log.push((t, r.granted)); }
            }
            for (i, &(start, _)) in log.iter().enumerate() {
                let mut total = 0u128;
                for &(at, g) in &log[i..] {
                    total += u128::from(g);
                    let allowance = u128::from(p.burst)
                        + u128::from(at - start) * u128::from(p.rate) / u128::from(p.period);
                    prop_assert!(total <= allowance, "{total} > {allowance}");
                }
            }
        }

        /// A denied request is denied 1 µs before `now + retry_after` and granted at it.
        #[test]
        fn gcra_retry_after_is_exact(p in arb_params(), ops in arb_ops(), cost in 1u64..20) {
            let mut s = None;
            let mut t = T0;
            for op in ops {
                t = t.saturating_add_signed(op.dt.max(0));
                run(&mut s, &p, &Request::new(op.cost, t));
            }
            let probe = |s: &Option<LimiterState>, at: u64| {
                let mut copy = s.clone();
                run(&mut copy, &p, &Request::new(cost, at))
            };
            match probe(&s, t).retry {
                Retry::After(us) => {
                    prop_assert_eq!(probe(&s, t + us - 1).granted, 0);
                    prop_assert_eq!(probe(&s, t + us).granted, cost);
                }
                Retry::Never => prop_assert!(cost > p.burst),
                Retry::Granted => {}
            }
        }

        /// Raising the burst or the rate never denies what the old parameters granted.
        #[test]
        fn gcra_raising_limits_never_denies_more(
            p in arb_params(), ops in arb_ops(), more_burst in 0u64..5, more_rate in 0u64..50, cost in 0u64..20,
        ) {
            let mut s = None;
            let mut t = T0;
            for op in ops {
                t = t.saturating_add_signed(op.dt.max(0));
                run(&mut s, &p, &Request::new(op.cost, t));
            }
            let raised = params(p.burst + more_burst, p.rate + more_rate, p.period);
            let before = run(&mut s.clone(), &p, &Request::new(cost, t));
            let after = run(&mut s.clone(), &raised, &Request::new(cost, t));
            prop_assert!(after.granted >= before.granted);
        }
    }
}
