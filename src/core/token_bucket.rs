//! RL.TOKENBUCKET: a bucket of `capacity` tokens, refilled continuously with `refill` tokens per
//! `period` (fractions kept exactly), never above capacity. A request takes `n` tokens if it can.
//!
//! This is the GCRA schedule read as a level: with `T = period / refill`, the tokens at `now`
//! are `(now − (TAT − capacity·T)) / T`, so the state is the same exact TAT (see `core::gcra`),
//! and "full again" is the TAT itself. Starting full means starting with the TAT in the past.
//!
//! Called with other parameters, the bucket keeps its tokens (capped at the new capacity, a
//! fraction rounded down to the new tick, against the client), not its units used: raising the
//! capacity of an empty bucket does not refill it.
//!
//! Debt (RL.SETTLE above a reservation): tokens below zero, the TAT more than `capacity·T`
//! ahead. A request waits until the refill has brought the tokens back to its cost; a parameter
//! change keeps the tokens below zero (rounded up to the new tick, `Carry::Free`).

use crate::core::error::CoreError;
use crate::core::gcra::{Carry, GcraParams, Schedule};
use crate::core::limiter::{Algorithm, Verdict};
use crate::core::time::Micros;
use crate::core::varint::Reader;

/// RL.TOKENBUCKET's state. Its parameters are `GcraParams` with burst = capacity and
/// rate = refill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket(pub Schedule);

/// The token bucket is the [`Schedule`] keeping its free units ([`Carry::Free`]) when its
/// parameters change; every method is the schedule's.
impl Algorithm for TokenBucket {
    type Params = GcraParams;

    fn fresh(params: &GcraParams) -> Self {
        TokenBucket(Schedule::fresh(params))
    }

    fn params(&self) -> &GcraParams {
        self.0.params()
    }

    fn evaluate(
        &self,
        params: &GcraParams,
        now: Micros,
        cost: u64,
        best_effort: bool,
    ) -> Result<Verdict, CoreError> {
        let e = self
            .0
            .evaluate(params, now, cost, best_effort, Carry::Free)?;
        Ok(e.verdict)
    }

    fn commit(&mut self, params: &GcraParams, now: Micros, granted: u64) -> Result<(), CoreError> {
        self.0.commit(params, now, granted, Carry::Free)
    }

    const DELAY: bool = true;

    fn reserve(
        &self,
        params: &GcraParams,
        now: Micros,
        at: Micros,
        cost: u64,
    ) -> Result<Verdict, CoreError> {
        let e = self.0.reserve(params, now, at, cost, Carry::Free)?;
        Ok(e.verdict)
    }

    fn commit_reserved(
        &mut self,
        params: &GcraParams,
        now: Micros,
        at: Micros,
        granted: u64,
    ) -> Result<(), CoreError> {
        self.0
            .commit_reserved(params, now, at, granted, Carry::Free)
    }

    fn refund(&mut self, now: Micros, units: u64) -> Result<u64, CoreError> {
        self.0.refund(now, units)
    }

    fn fresh_at(&self) -> Micros {
        self.0.fresh_at()
    }

    fn dedup_until(params: &GcraParams, now: Micros) -> Micros {
        params.dedup_until(now)
    }

    fn window(params: &GcraParams, _now: Micros) -> Micros {
        params.span()
    }

    fn describe(params: &GcraParams) -> Vec<(&'static str, u64)> {
        params.describe(["capacity", "refill", "period_ms"])
    }

    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        Schedule::decode(input).map(TokenBucket)
    }

    fn valid_at(&self, last_update: Micros) -> bool {
        self.0.valid_at(last_update)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::core::codec;
    use crate::core::gcra::GcraParams;
    use crate::core::limiter::Retry;
    use crate::core::limiter::Verdict;
    use crate::core::state::AlgoState;
    use crate::core::state::LimiterState;
    use crate::core::testkit::{self, GrantedRetry, Key, Model, T0};
    use crate::core::time::US_PER_SEC;

    /// capacity `limit`, refill `rate` per `period`.
    impl crate::core::testkit::Sample for TokenBucket {
        fn sample([limit, rate, period, _]: [u64; 4]) -> Option<GcraParams> {
            GcraParams::new(limit, rate, period).ok()
        }
    }

    #[test]
    fn token_bucket_spends_and_refills_continuously() {
        // Capacity 3, 3 tokens a minute: one token every 20 s.
        let params = GcraParams::new(3, 3, 60 * US_PER_SEC).unwrap();
        #[rustfmt::skip]
        let rows: &[testkit::Row] = &[
            // t µs            cost  BE     granted rem  retry µs     reset µs
            (0,                1,    false, 1,      2,   0,           20_000_000),
            (0,                1,    false, 1,      1,   0,           40_000_000),
            (0,                1,    false, 1,      0,   0,           60_000_000),
            (0,                1,    false, 0,      0,   20_000_000,  60_000_000),
            (19_999_999,       1,    false, 0,      0,   1,           40_000_001),
            (20_000_000,       1,    false, 1,      0,   0,           60_000_000),
            (20_000_000,       4,    false, 0,      0,   -1,          60_000_000),
            (50_000_000,       0,    false, 0,      1,   0,           30_000_000),
            (80_000_000,       0,    false, 0,      3,   0,           0),
            (80_000_000,       5,    true,  3,      0,   -1,          60_000_000),
            (90_000_000,       2,    true,  0,      0,   30_000_000,  50_000_000),
            (130_000_000,      2,    false, 2,      0,   0,           50_000_000),
        ];
        testkit::run_table::<TokenBucket>(&params, params.burst(), rows);
    }

    #[test]
    fn token_bucket_keeps_fractions_exactly() {
        // 3 tokens a second: a token every 333 333⅓ µs, and 3 of them exactly 1 s.
        let params = GcraParams::new(3, 3, US_PER_SEC).unwrap();
        #[rustfmt::skip]
        let rows: &[testkit::Row] = &[
            // t µs       cost  BE     granted rem  retry µs  reset µs
            (0,           3,    false, 3,      0,   0,        1_000_000),
            (333_333,     1,    false, 0,      0,   1,        666_667),
            (999_999,     0,    false, 0,      2,   0,        1),
            (1_000_000,   0,    false, 0,      3,   0,        0),
            (1_000_000,   1,    false, 1,      2,   0,        333_334),
            (1_000_000,   1,    false, 1,      1,   0,        666_667),
            (1_000_000,   1,    false, 1,      0,   0,        1_000_000),
            (1_333_333,   1,    false, 0,      0,   1,        666_667),
            (1_333_334,   1,    false, 1,      0,   0,        1_000_000),
        ];
        testkit::run_table::<TokenBucket>(&params, params.burst(), rows);
    }

    #[test]
    fn token_bucket_keeps_its_tokens_when_parameters_change() {
        let small = GcraParams::new(10, 1, US_PER_SEC).unwrap();
        let big = GcraParams::new(100, 1, US_PER_SEC).unwrap();
        let tiny = GcraParams::new(4, 1, US_PER_SEC).unwrap();
        let mut key = Key::default();
        assert_eq!(key.take::<TokenBucket>(&small, T0, 7).remaining, 3);
        // A larger bucket keeps the 3 tokens (it does not forget the 7 taken) and fills up.
        let v = key.peek::<TokenBucket>(&big, T0, 0);
        assert_eq!((v.remaining, v.reset_after), (3, 97 * US_PER_SEC));
        // A smaller one caps them.
        assert_eq!(key.peek::<TokenBucket>(&tiny, T0, 0).remaining, 3);
        assert_eq!(
            key.take::<TokenBucket>(&small, T0 + 5 * US_PER_SEC, 0)
                .remaining,
            8
        );
        let v = key.peek::<TokenBucket>(&tiny, T0 + 5 * US_PER_SEC, 0);
        assert_eq!((v.remaining, v.reset_after), (4, 0));
        // A faster refill keeps the level, and refills faster from now on.
        let fast = GcraParams::new(10, 10, US_PER_SEC).unwrap();
        let v = key.take::<TokenBucket>(&fast, T0 + 5 * US_PER_SEC, 8);
        assert_eq!((v.granted, v.remaining, v.reset_after), (8, 0, US_PER_SEC));
    }

    /// The textbook bucket: a level of tokens in exact units of `1 / period` token, gaining
    /// `refill` of those units every µs, capped at `capacity · period`.
    #[derive(Debug, Default)]
    struct Bucket {
        stored: Option<(GcraParams, u128, u64)>,
    }

    impl Model for Bucket {
        type Params = GcraParams;

        fn call(&mut self, p: &GcraParams, now: u64, cost: u64, be: bool, peek: bool) -> Verdict {
            let per = u128::from(p.period());
            let full = u128::from(p.burst()) * per;
            let (t, level) = match self.stored {
                None => (now, full),
                Some((q, level, last)) => {
                    let t = now.max(last);
                    let qfull = u128::from(q.burst()) * u128::from(q.period());
                    let level = (level + u128::from(t - last) * u128::from(q.rate())).min(qfull);
                    // Other parameters: the same tokens, in units of the new period (rounded
                    // down, against the client), at most the new capacity.
                    let level = (level * per / u128::from(q.period())).min(full);
                    (t, level)
                }
            };
            let avail = (level / per) as u64;
            let granted = if cost <= avail {
                cost
            } else if be {
                avail
            } else {
                0
            };
            let after = level - u128::from(granted) * per;
            let rate = u128::from(p.rate());
            let retry = if granted == cost {
                Retry::Granted
            } else if cost > p.burst() {
                Retry::Never
            } else {
                Retry::After((u128::from(cost) * per - after).div_ceil(rate) as u64)
            };
            if granted > 0 && !peek {
                self.stored = Some((*p, after, t));
            }
            Verdict {
                granted,
                limit: p.burst(),
                remaining: (after / per) as u64,
                retry,
                reset_after: (full - after).div_ceil(rate) as u64,
            }
        }
    }

    fn param_sets() -> Vec<GcraParams> {
        vec![
            GcraParams::new(5, 3, 1_000_000).unwrap(),
            GcraParams::new(8, 3, 1_000_000).unwrap(),
            GcraParams::new(2, 7, 3_000_000).unwrap(),
            GcraParams::new(5, 1000, 1_000).unwrap(),
        ]
    }

    proptest! {
        #[test]
        fn token_bucket_matches_the_textbook_bucket(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_500_000, 9, 4),
        ) {
            let params = param_sets();
            testkit::check_against_model::<TokenBucket, _>(
                &mut Bucket::default(), &params, start, &steps, GrantedRetry::Zero);
        }

        #[test]
        fn token_bucket_grants_at_most_capacity_plus_refill(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_500_000, 9, 1),
        ) {
            let p = GcraParams::new(5, 3, 1_000_000).unwrap();
            let h = testkit::check_against_model::<TokenBucket, _>(
                &mut Bucket::default(), &[p], start, &steps, GrantedRetry::Zero);
            // Grants happen in time order (each one moves the key's clock).
            let h: Vec<_> = h.into_iter().filter(|e| e.granted > 0).collect();
            for i in 0..h.len() {
                let mut sum = 0;
                for j in i..h.len() {
                    sum += h[j].granted;
                    let refill = u128::from(h[j].at - h[i].at) * 3 / 1_000_000;
                    prop_assert!(u128::from(sum) <= 5 + refill, "{i}..={j}");
                }
            }
        }

        #[test]
        fn token_bucket_level_stays_within_capacity(
            steps in testkit::steps(1_500_000, 9, 4),
        ) {
            let params = param_sets();
            let mut key = Key::default();
            let mut now = T0;
            for s in &steps {
                now = now.saturating_add_signed(s.dt);
                let p = &params[s.params];
                key.take::<TokenBucket>(p, now, s.cost);
                let v = key.peek::<TokenBucket>(p, now, 0);
                prop_assert!(v.remaining <= p.burst());
                if key.params::<TokenBucket>() != Some(*p) {
                    continue;
                }
                // Full again exactly when the reply says so.
                let full = key.peek::<TokenBucket>(p, now.max(key.last_update()) + v.reset_after, 0);
                prop_assert_eq!(full.remaining, p.burst());
            }
        }

        #[test]
        fn token_bucket_survives_a_century_and_clock_steps_back(
            steps in testkit::steps(1_500_000, 9, 1),
        ) {
            let p = GcraParams::new(5, 3, 1_000_000).unwrap();
            testkit::check_century_jump::<TokenBucket>(&p, T0, &steps);
            testkit::check_clock_step_back::<TokenBucket>(&p, T0, &steps);
        }

        #[test]
        fn token_bucket_state_round_trips_through_the_codec(
            steps in testkit::steps(1_500_000, 9, 4),
        ) {
            testkit::check_codec_round_trip::<TokenBucket>(&param_sets(), &steps);
        }
    }

    #[test]
    fn token_bucket_codec_fixture() {
        let p = GcraParams::new(3, 2, 1_000_000).unwrap();
        let mut key = Key::default();
        key.take::<TokenBucket>(&p, 1_000_000, 1);
        let state = key.state.clone().unwrap();
        #[rustfmt::skip]
        let bytes: &[u8] = &[
            1, 2,                   // codec version, kind TokenBucket
            0xc0, 0x84, 0x3d,       // last update 1 000 000 µs
            3, 2,                   // capacity, refill
            0xc0, 0x84, 0x3d,       // period 1 000 000 µs
            // TAT in ticks of 1/2 µs: now (2 000 000 ticks) + one token (1 000 000 ticks)
            0xc0, 0x8d, 0xb7, 0x01,
            0,                      // no dedup ids
        ];
        assert_eq!(codec::encode(&state), bytes);
        assert_eq!(codec::decode(bytes), Some(state));
        let LimiterState { algo, .. } = codec::decode(bytes).unwrap();
        assert!(matches!(algo, Some(AlgoState::TokenBucket(_))));
    }
}
