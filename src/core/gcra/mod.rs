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
//! are the same schedule read another way: each is a newtype over [`Schedule`] whose
//! `impl Algorithm` delegates to it.
//!
//! Changing the parameters of a live limiter keeps the units already used ([`Carry`]): GCRA and
//! the leaky bucket convert the backlog `max(TAT − now, 0)` to units at the old `T` and back to
//! time at the new one (rounding up to the new tick); the token bucket keeps its tokens instead
//! (rounding down, capped at the new capacity). Either way the rounding is against the client
//! (SPEC "Rounding rule": never a unit that exact arithmetic would deny), and as whole units are
//! exact on every tick grid, a raised limit still never denies more than before.
//!
//! Debt (RL.SETTLE above a reservation, `Algorithm::charge_debt`): the units are charged as any
//! grant, `TAT = max(TAT, now) + n·T`, without the limit's check, so the TAT may pass
//! `now + burst·T`. Nothing is available until `now` has caught up with `TAT − burst·T` (one
//! unit per `T`): `evaluate` denies with the exact wait `TAT + cost·T − burst·T − now`, and
//! `reset_after` is `TAT − now` as always. A TAT more than [`MAX_SPAN`] after the last update is
//! not a valid state (`valid_at`), so such debt is refused.

use crate::core::error::CoreError;
use crate::core::limiter::{self, Algorithm, Retry, Verdict};
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

    /// The time a fully used limiter takes to become fresh, `burst · period / rate` rounded up
    /// to the µs (at most [`MAX_SPAN`], as validated).
    pub fn span(&self) -> Micros {
        let ticks = wide_mul(self.burst, self.period);
        u64::try_from(div_ceil_ticks(ticks, self.rate)).unwrap_or(MAX_SPAN)
    }

    /// Until when a `DEDUP` id first seen at `now` is remembered: one period.
    pub fn dedup_until(&self, now: Micros) -> Micros {
        now.saturating_add(self.period)
    }

    /// The parameters for RL.INFO, under the algorithm's `names` for burst, rate and period
    /// (in ms).
    pub fn describe(&self, names: [&'static str; 3]) -> Vec<(&'static str, u64)> {
        let [burst, rate, period] = names;
        vec![
            (burst, self.burst),
            (rate, self.rate),
            (period, self.period / 1000),
        ]
    }
}

fn overflow<T>(v: Option<T>) -> Result<T, CoreError> {
    v.ok_or(CoreError::Overflow)
}

/// `a · b` in 128 bits: exact, as the product of two 64-bit numbers is below 2^128.
fn wide_mul(a: u64, b: u64) -> u128 {
    u128::from(a).wrapping_mul(u128::from(b))
}

/// `ticks / rate`, rounded up, as µs (saturating): a point in time.
fn ticks_to_us(ticks: u128, rate: u64) -> Micros {
    let us = div_ceil_ticks(ticks, rate);
    u64::try_from(us).unwrap_or(u64::MAX)
}

/// `x / d` (`None` for 0), in 64-bit arithmetic when `x` fits.
fn div_floor(x: u128, d: u64) -> Option<u128> {
    match u64::try_from(x) {
        Ok(x) => x.checked_div(d).map(u128::from),
        Err(_) => x.checked_div(u128::from(d)),
    }
}

/// `ticks / rate` (a rate of 0 taken as 1), rounded up: in 64-bit arithmetic when the ticks
/// fit (the common case, one instruction instead of a 128-bit division's call).
fn div_ceil_ticks(ticks: u128, rate: u64) -> u128 {
    let rate = rate.max(1);
    match u64::try_from(ticks) {
        Ok(t) => u128::from(t.div_ceil(rate)),
        Err(_) => ticks.div_ceil(u128::from(rate)),
    }
}

/// `ticks / rate`, rounded up, as a duration in µs of at most [`MAX_SPAN`]. Validated
/// parameters keep every duration of their own state within it; only a state carried over
/// from other parameters can exceed it, which is refused rather than capped.
fn span_us(ticks: u128, rate: u64) -> Result<Micros, CoreError> {
    let us = div_ceil_ticks(ticks, rate);
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
    /// burst: the token bucket's tokens. Tokens below zero (debt, `backlog > burst`) are kept
    /// below zero, rounded up to the new tick.
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
                // Tokens below zero (RL.SETTLE's debt) are kept as debt, rounded up.
                let debt = rescale(backlog.saturating_sub(old_window), true)?;
                let free = rescale(old_window.saturating_sub(backlog), false)?.min(new_window);
                overflow(
                    now_new
                        .checked_add(new_window.saturating_sub(free))
                        .and_then(|t| t.checked_add(debt)),
                )
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
        let now_t = wide_mul(now, rate);
        let tat = self.tat_under(params, now, carry)?;
        let base = tat.max(now_t);
        let window = wide_mul(params.burst, params.period);
        let cap = overflow(now_t.checked_add(window))?;
        // Whole units that fit between `base` and `cap`: at most `burst`.
        let avail = overflow(div_floor(cap.saturating_sub(base), params.period))?;
        let avail = u64::try_from(avail).unwrap_or(u64::MAX);
        let granted = limiter::grant(cost, avail, best_effort);
        let after = if granted > 0 {
            overflow(base.checked_add(wide_mul(granted, params.period)))?
        } else {
            tat
        };
        let retry = limiter::retry(granted, cost, params.burst, || {
            // Allowed once `now` reaches `after + cost·T − burst·T`.
            let need =
                overflow(after.checked_add(wide_mul(cost, params.period)))?.saturating_sub(window);
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
        let now_t = wide_mul(now, params.rate);
        let base = self.tat_under(params, now, carry)?.max(now_t);
        let tat = overflow(base.checked_add(wide_mul(granted, params.period)))?;
        self.params = *params;
        self.set_tat(tat);
        Ok(())
    }

    /// `DELAY`: `cost` units granted at `now` as a reservation of the later time `at` (when
    /// they are allowed), the state converted to `params` at `now`: charged as at `at`
    /// (`TAT = max(TAT, at) + cost·T`), seen from `now`, the retry the wait `at − now` and the
    /// queue delay `max(TAT, at) − now`.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the units do not fit at `at`; [`CoreError::StateTooLong`]
    /// when the charged schedule would be fresh again more than [`MAX_SPAN`] after `now`.
    pub fn reserve(
        &self,
        params: &GcraParams,
        now: Micros,
        at: Micros,
        cost: u64,
        carry: Carry,
    ) -> Result<Evaluation, CoreError> {
        let rate = params.rate;
        let now_t = wide_mul(now, rate);
        let at_t = wide_mul(at, rate);
        let base = self.tat_under(params, now, carry)?.max(at_t);
        let window = wide_mul(params.burst, params.period);
        let after = overflow(base.checked_add(wide_mul(cost, params.period)))?;
        // Allowed at `at`: the request ends at most a window after it.
        if after > overflow(at_t.checked_add(window))? {
            return Err(CoreError::Overflow);
        }
        let free = overflow(now_t.checked_add(window))?.saturating_sub(after);
        let remaining = overflow(div_floor(free, params.period))?;
        Ok(Evaluation {
            verdict: Verdict {
                granted: cost,
                limit: params.burst,
                remaining: u64::try_from(remaining).unwrap_or(u64::MAX),
                retry: Retry::After(at.saturating_sub(now)),
                reset_after: span_us(after.saturating_sub(now_t), rate)?,
            },
            queue_delay: span_us(base.saturating_sub(now_t), rate)?,
        })
    }

    /// Charge `granted` units reserved at `now` for `at` ([`Schedule::reserve`]), adopting
    /// `params` (converted at `now` as `carry` says).
    ///
    /// # Errors
    /// [`CoreError::Overflow`] as `reserve`.
    pub fn commit_reserved(
        &mut self,
        params: &GcraParams,
        now: Micros,
        at: Micros,
        granted: u64,
        carry: Carry,
    ) -> Result<(), CoreError> {
        let at_t = wide_mul(at, params.rate);
        let base = self.tat_under(params, now, carry)?.max(at_t);
        let tat = overflow(base.checked_add(wide_mul(granted, params.period)))?;
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

    /// The schedule as three words, when its fields fit them: the TAT, `burst | rate << 32`
    /// and the period (below 2^48). A limiter key keeps these inline (`core::packed`).
    pub fn fixed_parts(&self) -> Option<[u64; 3]> {
        let burst = u32::try_from(self.params.burst).ok()?;
        let rate = u32::try_from(self.params.rate).ok()?;
        (self.tat_hi == 0 && self.params.period >> 48 == 0).then(|| {
            [
                self.tat_lo,
                u64::from(burst) | (u64::from(rate) << 32),
                self.params.period,
            ]
        })
    }

    /// The inverse of [`Schedule::fixed_parts`], validating the parameters.
    pub fn from_fixed_parts([tat, burst_rate, period]: [u64; 3]) -> Option<Self> {
        let params = GcraParams::new(burst_rate & 0xffff_ffff, burst_rate >> 32, period).ok()?;
        Some(Schedule {
            params,
            tat_hi: 0,
            tat_lo: tat,
        })
    }

    /// Whether the schedule could have been written by `last_update`: a commit leaves the TAT
    /// at most [`MAX_SPAN`] after its time (`evaluate` refuses a longer `reset_after`), so that
    /// `reset_after` under the stored parameters is at most [`MAX_SPAN`] from then on.
    pub fn valid_at(&self, last_update: Micros) -> bool {
        // (last_update + MAX_SPAN) · rate < 2^65 · 2^63: no overflow.
        let most = u128::from(last_update)
            .checked_add(u128::from(MAX_SPAN))
            .and_then(|t| t.checked_mul(u128::from(self.params.rate)));
        most.is_some_and(|most| self.tat() <= most)
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

/// RL.GCRA's state: the schedule itself, which keeps its units used ([`Carry::Backlog`]) when
/// its parameters change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra(pub Schedule);

/// GCRA is the [`Schedule`] read as is: every method is the schedule's.
impl Algorithm for Gcra {
    type Params = GcraParams;

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
        let e = self
            .0
            .evaluate(params, now, cost, best_effort, Carry::Backlog)?;
        Ok(e.verdict)
    }

    fn commit(&mut self, params: &GcraParams, now: Micros, granted: u64) -> Result<(), CoreError> {
        self.0.commit(params, now, granted, Carry::Backlog)
    }

    const DELAY: bool = true;

    fn reserve(
        &self,
        params: &GcraParams,
        now: Micros,
        at: Micros,
        cost: u64,
    ) -> Result<Verdict, CoreError> {
        let e = self.0.reserve(params, now, at, cost, Carry::Backlog)?;
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
        params.describe(["burst", "rate", "period_ms"])
    }

    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        Schedule::decode(input).map(Gcra)
    }

    fn valid_at(&self, last_update: Micros) -> bool {
        self.0.valid_at(last_update)
    }
}

#[cfg(test)]
mod tests;
