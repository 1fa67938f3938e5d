//! RL.LEAKYBUCKET: a bucket of `capacity` units that drains `rate` units per `period`
//! continuously; a request adds `n` units if they fit, else it is denied.
//!
//! It is the FIFO queue with constant outflow. For a granted request, `retry_after` is its queue
//! delay: how long to hold it before processing so that processed requests leave at exactly the
//! outflow rate (0 when the bucket was empty). The level is `(TAT − now) / T` with
//! `T = period / rate`, so the state is the GCRA schedule (see `core::gcra`), and the queue delay
//! is `max(TAT, now) − now` before the request is added.
//!
//! Called with other parameters, the bucket keeps its level, converted to the new rate and not
//! capped at a lowered capacity: the units already queued are still in the queue, so an
//! over-full bucket drains below the new capacity before it accepts again, and the queue delays
//! it hands out keep the outflow at the rate.
//!
//! Debt (RL.SETTLE above a reservation): a level above the capacity, drained by the outflow
//! like any queued unit; a request fits again once `level + n ≤ capacity`.

use crate::core::error::CoreError;
use crate::core::gcra::{Carry, GcraParams, Schedule};
use crate::core::limiter::{Algorithm, Retry, Verdict};
use crate::core::time::Micros;
use crate::core::varint::Reader;

/// RL.LEAKYBUCKET's state. Its parameters are `GcraParams` with burst = capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket(pub Schedule);

/// The leaky bucket is the [`Schedule`] keeping its level ([`Carry::Backlog`]) when its
/// parameters change, whose granted requests wait their queue delay; every other method is the
/// schedule's.
impl Algorithm for LeakyBucket {
    type Params = GcraParams;

    fn fresh(params: &GcraParams) -> Self {
        LeakyBucket(Schedule::fresh(params))
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
            .evaluate(params, now, cost, best_effort, Carry::Backlog)?;
        let mut verdict = e.verdict;
        // A request granted in full waits its queue delay.
        if verdict.granted > 0 && verdict.granted == cost && e.queue_delay > 0 {
            verdict.retry = Retry::After(e.queue_delay);
        }
        Ok(verdict)
    }

    fn commit(&mut self, params: &GcraParams, now: Micros, granted: u64) -> Result<(), CoreError> {
        self.0.commit(params, now, granted, Carry::Backlog)
    }

    const DELAY: bool = true;

    /// A reserved request's retry is its queue delay from `now`: the wait until it is allowed
    /// plus its queue delay then.
    fn reserve(
        &self,
        params: &GcraParams,
        now: Micros,
        at: Micros,
        cost: u64,
    ) -> Result<Verdict, CoreError> {
        let e = self.0.reserve(params, now, at, cost, Carry::Backlog)?;
        Ok(Verdict {
            retry: Retry::After(e.queue_delay),
            ..e.verdict
        })
    }

    fn commit_reserved(
        &mut self,
        params: &GcraParams,
        now: Micros,
        at: Micros,
        granted: u64,
    ) -> Result<(), CoreError> {
        self.0
            .commit_reserved(params, now, at, granted, Carry::Backlog)
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
        params.describe(["capacity", "rate", "period_ms"])
    }

    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        Schedule::decode(input).map(LeakyBucket)
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
    use crate::core::testkit::{self, GrantedRetry, Key, Model, T0};
    use crate::core::time::US_PER_SEC;

    /// capacity `limit`, draining `rate` per `period`.
    impl crate::core::testkit::Sample for LeakyBucket {
        fn sample([limit, rate, period, _]: [u64; 4]) -> Option<GcraParams> {
            GcraParams::new(limit, rate, period).ok()
        }
    }

    #[test]
    fn leaky_bucket_queues_at_the_outflow_rate() {
        // Capacity 3, draining one unit a second: a granted call's retry is its queue delay.
        let params = GcraParams::new(3, 1, US_PER_SEC).unwrap();
        #[rustfmt::skip]
        let rows: &[testkit::Row] = &[
            // t µs        cost  BE     granted rem  retry µs    reset µs
            (0,            1,    false, 1,      2,   0,          1_000_000),
            (0,            1,    false, 1,      1,   1_000_000,  2_000_000),
            (0,            1,    false, 1,      0,   2_000_000,  3_000_000),
            (0,            1,    false, 0,      0,   1_000_000,  3_000_000),
            (500_000,      1,    false, 0,      0,   500_000,    2_500_000),
            (999_999,      1,    false, 0,      0,   1,          2_000_001),
            (1_000_000,    1,    false, 1,      0,   2_000_000,  3_000_000),
            (1_000_000,    4,    false, 0,      0,   -1,         3_000_000),
            (1_500_000,    2,    true,  0,      0,   1_500_000,  2_500_000),
            (2_000_000,    3,    true,  1,      0,   3_000_000,  3_000_000),
            (10_000_000,   0,    false, 0,      3,   0,          0),
            (10_000_000,   2,    false, 2,      1,   0,          2_000_000),
            (10_250_000,   1,    false, 1,      0,   1_750_000,  2_750_000),
        ];
        testkit::run_table::<LeakyBucket>(&params, params.burst(), rows);
    }

    #[test]
    fn leaky_bucket_delays_are_exact_at_fractional_rates() {
        // 3 units a second leave every 333 333⅓ µs: queue delays never drift.
        let params = GcraParams::new(10, 3, US_PER_SEC).unwrap();
        #[rustfmt::skip]
        let rows: &[testkit::Row] = &[
            // t µs     cost  BE     granted rem  retry µs    reset µs
            (0,         1,    false, 1,      9,   0,          333_334),
            (0,         1,    false, 1,      8,   333_334,    666_667),
            (0,         1,    false, 1,      7,   666_667,    1_000_000),
            (0,         1,    false, 1,      6,   1_000_000,  1_333_334),
            (1_000_000, 1,    false, 1,      8,   333_334,    666_667),
        ];
        testkit::run_table::<LeakyBucket>(&params, params.burst(), rows);
    }

    #[test]
    fn leaky_bucket_keeps_its_level_when_parameters_change() {
        let small = GcraParams::new(10, 1, US_PER_SEC).unwrap();
        let big = GcraParams::new(100, 1, US_PER_SEC).unwrap();
        let tiny = GcraParams::new(4, 1, US_PER_SEC).unwrap();
        let mut key = Key::default();
        assert_eq!(key.take::<LeakyBucket>(&small, T0, 7).remaining, 3);
        // A larger bucket holds the same 7 queued units.
        let v = key.peek::<LeakyBucket>(&big, T0, 0);
        assert_eq!((v.remaining, v.reset_after), (93, 7 * US_PER_SEC));
        // A smaller one is over-full: it drains below its capacity before it accepts again,
        // and a granted call still queues behind all 7 units.
        let v = key.peek::<LeakyBucket>(&tiny, T0, 1);
        assert_eq!(
            (v.granted, v.remaining, v.retry),
            (0, 0, Retry::After(4 * US_PER_SEC))
        );
        let v = key.take::<LeakyBucket>(&tiny, T0 + 4 * US_PER_SEC, 1);
        assert_eq!(v.retry, Retry::After(3 * US_PER_SEC));
        // A faster outflow drains the same level faster.
        let fast = GcraParams::new(10, 4, US_PER_SEC).unwrap();
        let v = key.peek::<LeakyBucket>(&fast, T0 + 4 * US_PER_SEC, 0);
        assert_eq!((v.remaining, v.reset_after), (6, US_PER_SEC));
    }

    /// The textbook bucket: a level in exact units of `1 / period` unit, losing `rate` of those
    /// units every µs; a request is queued behind the level (its delay is the time to drain
    /// it) if it fits under the capacity.
    #[derive(Debug, Default)]
    struct Bucket {
        stored: Option<(GcraParams, u128, u64)>,
    }

    impl Model for Bucket {
        type Params = GcraParams;

        fn call(&mut self, p: &GcraParams, now: u64, cost: u64, be: bool, peek: bool) -> Verdict {
            let per = u128::from(p.period());
            let cap = u128::from(p.burst()) * per;
            let (t, level) = match self.stored {
                None => (now, 0),
                Some((q, level, last)) => {
                    let t = now.max(last);
                    let level = level.saturating_sub(u128::from(t - last) * u128::from(q.rate()));
                    // Other parameters: the same queued units in units of the new period
                    // (rounded up, against the client), even above the new capacity.
                    (t, (level * per).div_ceil(u128::from(q.period())))
                }
            };
            let rate = u128::from(p.rate());
            let avail = (cap.saturating_sub(level) / per) as u64;
            let granted = if cost <= avail {
                cost
            } else if be {
                avail
            } else {
                0
            };
            let after = level + u128::from(granted) * per;
            let delay = level.div_ceil(rate) as u64;
            let retry = if granted == cost {
                if granted > 0 && delay > 0 {
                    Retry::After(delay)
                } else {
                    Retry::Granted
                }
            } else if cost > p.burst() {
                Retry::Never
            } else {
                let target = cap - u128::from(cost) * per;
                Retry::After((after - target).div_ceil(rate) as u64)
            };
            if granted > 0 && !peek {
                self.stored = Some((*p, after, t));
            }
            Verdict {
                granted,
                limit: p.burst(),
                remaining: (cap.saturating_sub(after) / per) as u64,
                retry,
                reset_after: after.div_ceil(rate) as u64,
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
        fn leaky_bucket_matches_the_textbook_bucket(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_500_000, 9, 4),
        ) {
            let params = param_sets();
            testkit::check_against_model::<LeakyBucket, _>(
                &mut Bucket::default(), &params, start, &steps, GrantedRetry::QueueDelay);
        }

        #[test]
        fn leaky_bucket_outflow_never_exceeds_the_rate(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_500_000, 9, 1),
        ) {
            // Processing each granted call after its queue delay, units leave one per
            // emission interval (1/3 s) at the earliest: a request's start time is never
            // before the previous request's start plus its cost.
            let p = GcraParams::new(5, 3, 1_000_000).unwrap();
            let mut key = Key::default();
            let mut now = start;
            let mut free_at: u128 = 0; // in ticks of 1/3 µs
            for s in &steps {
                now = now.saturating_add_signed(s.dt);
                let at = now.max(key.last_update());
                let v = key.take::<LeakyBucket>(&p, now, s.cost);
                if v.granted == 0 {
                    continue;
                }
                let delay = match v.retry {
                    Retry::Granted => 0,
                    Retry::After(us) => us,
                    Retry::Never => unreachable!(),
                };
                let starts = u128::from(at + delay) * 3;
                prop_assert!(starts >= free_at, "starts {starts} before {free_at}");
                // The queue delay is the wait, rounded up to the µs, not a µs more.
                prop_assert!(starts < free_at.max(u128::from(at) * 3) + 3);
                free_at = free_at.max(u128::from(at) * 3) + u128::from(v.granted) * 1_000_000;
            }
        }

        #[test]
        fn leaky_bucket_level_stays_within_capacity(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_500_000, 9, 1),
        ) {
            let p = GcraParams::new(5, 3, 1_000_000).unwrap();
            let h = testkit::check_against_model::<LeakyBucket, _>(
                &mut Bucket::default(), &[p], start, &steps, GrantedRetry::QueueDelay);
            // Grants happen in time order; over any span at most capacity plus outflow.
            let h: Vec<_> = h.into_iter().filter(|e| e.granted > 0).collect();
            for i in 0..h.len() {
                let mut sum = 0;
                for j in i..h.len() {
                    sum += h[j].granted;
                    let out = u128::from(h[j].at - h[i].at) * 3 / 1_000_000;
                    prop_assert!(u128::from(sum) <= 5 + out, "{i}..={j}");
                }
            }
        }

        #[test]
        fn leaky_bucket_survives_a_century_and_clock_steps_back(
            steps in testkit::steps(1_500_000, 9, 1),
        ) {
            let p = GcraParams::new(5, 3, 1_000_000).unwrap();
            testkit::check_century_jump::<LeakyBucket>(&p, T0, &steps);
            testkit::check_clock_step_back::<LeakyBucket>(&p, T0, &steps);
        }

        #[test]
        fn leaky_bucket_state_round_trips_through_the_codec(
            steps in testkit::steps(1_500_000, 9, 4),
        ) {
            testkit::check_codec_round_trip::<LeakyBucket>(&param_sets(), &steps);
        }
    }

    #[test]
    fn leaky_bucket_codec_fixture() {
        let p = GcraParams::new(3, 2, 1_000_000).unwrap();
        let mut key = Key::default();
        key.take::<LeakyBucket>(&p, 1_000_000, 2);
        let state = key.state.clone().unwrap();
        #[rustfmt::skip]
        let bytes: &[u8] = &[
            1, 3,                   // codec version, kind LeakyBucket
            0xc0, 0x84, 0x3d,       // last update 1 000 000 µs
            3, 2,                   // capacity, rate
            0xc0, 0x84, 0x3d,       // period 1 000 000 µs
            // TAT in ticks of 1/2 µs: now (2 000 000 ticks) + two units (2 000 000 ticks)
            0x80, 0x92, 0xf4, 0x01,
            0,                      // no dedup ids
        ];
        assert_eq!(codec::encode(&state), bytes);
        assert_eq!(codec::decode(bytes), Some(state));
    }
}
