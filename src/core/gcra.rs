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
//! time at the new one (rounding down); the token bucket keeps its tokens instead (rounding up,
//! capped at the new capacity). Either way the rounding favours the client, so a raised limit
//! never denies more than before.

use crate::core::CoreError;
use crate::core::codec::{self, Reader};
use crate::core::limiter::{Algorithm, Retry, Verdict, state_access};
use crate::core::state::{AlgoState, Kind};
use crate::core::time::Micros;

/// The largest count or duration (µs) a parameter may have: replies are signed 64-bit, and with
/// this bound every product below fits in 128 bits.
pub const MAX_PARAM: u64 = i64::MAX as u64;

/// Validated parameters: `burst` units at once, `rate` units per `period` µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraParams {
    burst: u64,
    rate: u64,
    period: Micros,
}

impl GcraParams {
    /// Validate the parameters; `what` names them in errors (`burst`/`capacity`, `rate`/`refill`).
    ///
    /// # Errors
    /// [`CoreError::InvalidParam`] when a value is 0 or above [`MAX_PARAM`].
    pub fn new(burst: u64, rate: u64, period: Micros) -> Result<Self, CoreError> {
        let ok = |v: u64| (1..=MAX_PARAM).contains(&v);
        if !ok(burst) {
            return Err(CoreError::InvalidParam("burst"));
        }
        if !ok(rate) {
            return Err(CoreError::InvalidParam("rate"));
        }
        if !ok(period) {
            return Err(CoreError::InvalidParam("period"));
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

/// `ticks / rate`, rounded up, as µs (saturating).
fn ticks_to_us(ticks: u128, rate: u64) -> Micros {
    let us = ticks.div_ceil(u128::from(rate.max(1)));
    u64::try_from(us).unwrap_or(u64::MAX)
}

/// What a schedule keeps when it is called with other parameters than it was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carry {
    /// The backlog `max(TAT − now, 0)` in units, rounded down and not capped: GCRA's units
    /// used, the leaky bucket's level (an over-full bucket drains before it accepts again).
    Backlog,
    /// The free units `burst − backlog`, rounded up and capped at the new burst: the token
    /// bucket's tokens.
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
        match carry {
            Carry::Backlog => overflow(now_new.checked_add(rescale(backlog, false)?)),
            Carry::Free => {
                let old_window = overflow(u128::from(old.burst).checked_mul(old_period))?;
                let new_window = overflow(u128::from(params.burst).checked_mul(new_period))?;
                let free = rescale(old_window.saturating_sub(backlog), true)?.min(new_window);
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
        let granted = if cost <= avail {
            cost
        } else if best_effort {
            avail
        } else {
            0
        };
        let after = if granted > 0 {
            overflow(
                u128::from(granted)
                    .checked_mul(period)
                    .and_then(|d| base.checked_add(d)),
            )?
        } else {
            tat
        };
        let retry = if granted == cost {
            Retry::Granted
        } else if cost > params.burst {
            Retry::Never
        } else {
            // Allowed once `now` reaches `after + cost·T − burst·T`.
            let need = overflow(
                u128::from(cost)
                    .checked_mul(period)
                    .and_then(|d| after.checked_add(d)),
            )?
            .saturating_sub(window);
            Retry::After(ticks_to_us(need.saturating_sub(now_t), rate))
        };
        Ok(Evaluation {
            verdict: Verdict {
                granted,
                limit: params.burst,
                remaining: avail.saturating_sub(granted),
                retry,
                reset_after: ticks_to_us(after.saturating_sub(now_t), rate),
            },
            queue_delay: ticks_to_us(base.saturating_sub(now_t), rate),
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

    /// When the schedule is fresh again: the TAT, in µs rounded up.
    pub fn fresh_at(&self) -> Micros {
        ticks_to_us(self.tat(), self.params.rate)
    }

    /// Codec: parameters then TAT.
    pub fn encode(&self, out: &mut Vec<u8>) {
        codec::put_u64(out, self.params.burst);
        codec::put_u64(out, self.params.rate);
        codec::put_u64(out, self.params.period);
        codec::put_u128(out, self.tat());
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

/// RL.GCRA's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra(pub Schedule);

impl Algorithm for Gcra {
    type Params = GcraParams;
    const KIND: Kind = Kind::Gcra;

    fn fresh(params: &GcraParams) -> Self {
        Gcra(Schedule::fresh(params))
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
        Ok(self
            .0
            .evaluate(params, now, cost, best_effort, Carry::Backlog)?
            .verdict)
    }

    fn commit(&mut self, params: &GcraParams, now: Micros, granted: u64) -> Result<(), CoreError> {
        self.0.commit(params, now, granted, Carry::Backlog)
    }

    fn fresh_at(&self) -> Micros {
        self.0.fresh_at()
    }

    fn dedup_until(params: &GcraParams, now: Micros) -> Micros {
        now.saturating_add(params.period)
    }

    fn describe(params: &GcraParams) -> Vec<(&'static str, u64)> {
        vec![
            ("burst", params.burst),
            ("rate", params.rate),
            ("period_ms", params.period / 1000),
        ]
    }

    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        Schedule::decode(input).map(Gcra)
    }

    state_access!(Gcra);
}
