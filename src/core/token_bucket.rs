//! RL.TOKENBUCKET: a bucket of `capacity` tokens, refilled continuously with `refill` tokens per
//! `period` (fractions kept exactly), never above capacity. A request takes `n` tokens if it can.
//!
//! This is the GCRA schedule read as a level: with `T = period / refill`, the tokens at `now`
//! are `(now − (TAT − capacity·T)) / T`, so the state is the same exact TAT (see `gcra.rs`), and
//! "full again" is the TAT itself. Starting full means starting with the TAT in the past.

use crate::core::CoreError;
use crate::core::codec::Reader;
use crate::core::gcra::{GcraParams, Schedule};
use crate::core::limiter::{Algorithm, Verdict, state_access};
use crate::core::state::{AlgoState, Kind};
use crate::core::time::Micros;

/// RL.TOKENBUCKET's state. Its parameters are `GcraParams` with burst = capacity and
/// rate = refill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket(pub Schedule);

impl Algorithm for TokenBucket {
    type Params = GcraParams;
    const KIND: Kind = Kind::TokenBucket;

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
        Ok(self.0.evaluate(params, now, cost, best_effort)?.verdict)
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
            ("refill", params.rate()),
            ("period_ms", params.period() / 1000),
        ]
    }

    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        Schedule::decode(input).map(TokenBucket)
    }

    state_access!(TokenBucket);
}
