//! RL.LEAKYBUCKET: a bucket of `capacity` units that drains `rate` units per `period`
//! continuously; a request adds `n` units if they fit, else it is denied.
//!
//! It is the FIFO queue with constant outflow. For a granted request, `retry_after` is its queue
//! delay: how long to hold it before processing so that processed requests leave at exactly the
//! outflow rate (0 when the bucket was empty). The level is `(TAT − now) / T` with
//! `T = period / rate`, so the state is the GCRA schedule (see `gcra.rs`), and the queue delay is
//! `max(TAT, now) − now` before the request is added.

use crate::core::CoreError;
use crate::core::codec::Reader;
use crate::core::gcra::{GcraParams, Schedule};
use crate::core::limiter::{Algorithm, Retry, Verdict, state_access};
use crate::core::state::{AlgoState, Kind};
use crate::core::time::Micros;

/// RL.LEAKYBUCKET's state. Its parameters are `GcraParams` with burst = capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket(pub Schedule);

impl Algorithm for LeakyBucket {
    type Params = GcraParams;
    const KIND: Kind = Kind::LeakyBucket;

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
        let e = self.0.evaluate(params, now, cost, best_effort)?;
        let mut verdict = e.verdict;
        if verdict.granted > 0 && verdict.granted == cost && e.queue_delay > 0 {
            verdict.retry = Retry::After(e.queue_delay);
        }
        Ok(verdict)
    }

    fn commit(&mut self, params: &GcraParams, now: Micros, granted: u64) -> Result<(), CoreError> {
        self.0.commit(params, now, granted)
    }

    fn fresh_at(&self) -> Micros {
        self.0.fresh_at()
    }

    fn dedup_until(params: &GcraParams, now: Micros) -> Micros {
        now.saturating_add(params.period())
    }

    fn describe(params: &GcraParams) -> Vec<(&'static str, u64)> {
        vec![
            ("capacity", params.burst()),
            ("rate", params.rate()),
            ("period_ms", params.period() / 1000),
        ]
    }

    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        Schedule::decode(input).map(LeakyBucket)
    }

    state_access!(LeakyBucket);
}
