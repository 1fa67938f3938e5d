//! RL.ACQUIRE / RL.RELEASE: a concurrency limiter, at most `limit` units held at once by leases
//! (Stripe's "concurrent requests limiter"), each lease a holder's id, its units and the time
//! it expires, so a crashed holder's units come back by themselves.
//!
//! - Acquiring takes `cost` units under the call's lease id until `lease` after the call, if
//!   they fit beside the live leases. Acquiring an id that holds a live lease renews it (its
//!   expiry moves to `now + lease`, no new units) if the units held, its own included, fit the
//!   limit given; under a lowered limit they exceed, the renewal is denied and the lease keeps
//!   its end. A different cost for it is an error.
//! - A lease is live while `now < expiry`. Expired leases are ignored when evaluating and
//!   dropped at the next write.
//! - `retry_after` is exact: the earliest time at which the leases expired by then free enough
//!   units for `cost` to fit; never when `cost > limit`. `reset_after` is when the last lease
//!   expires, which is also the key's expiry.
//! - A lowered limit keeps the leases (denying new leases and renewals until enough expire or
//!   are released).
//!
//! The id is the one per-call parameter: RL.ACQUIRE's `ID`, RL.ALL's `DEDUP` id. It is part of
//! [`ConcurrencyParams`] for the call and never encoded (a committed state holds `None`). RL.CHECK takes
//! no id: it asks whether `cost` units would fit now as a new lease (a renewal is not seen).
//!
//! The capabilities every limiter has (`core::flow`): a block denies every RL.ACQUIRE (a
//! renewal too) without charging it, and `BLOCK d` blocks the key when an acquire is denied;
//! RL.RELEASE is never denied, blocked or not; RL.REFUND is refused (use RL.RELEASE).
//!
//! State: the parameters and the leases (`leases`: two orders over one arena, 56 bytes a
//! lease). At most [`MAX_LEASES`] units, so at most that many leases, per key.

mod leases;

/// The error of `BESTEFFORT` on a concurrency limiter (a lease holds all it asked for or
/// nothing).
pub const BESTEFFORT_NO_CONCURRENCY: &str = "BESTEFFORT does not apply to CONCURRENCY";

/// The error of a concurrency limiter in RL.ALL without `DEDUP id`.
pub const ALL_NEEDS_LEASE_ID: &str = "CONCURRENCY in RL.ALL needs DEDUP id (the lease id)";

pub use leases::{Lease, Leases};

use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
use crate::core::limiter::{self, Algorithm, Refund, Retry, Verdict};
use crate::core::param::{check_count, check_duration};
use crate::core::state::{LimiterState, Stored};
use crate::core::time::{MAX_SPAN, Micros};
use crate::core::varint::{self, Reader};

/// The largest `limit`, so the most leases a key holds.
pub const MAX_LEASES: u64 = 65_536;

/// What `limit` must be when it is above [`MAX_LEASES`].
pub const MUST_FIT_LEASES: &str = "must be at most 65536";

/// Validated parameters: `limit` units in flight, leases of `lease` µs, and the call's lease id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrencyParams {
    limit: u64,
    lease: Micros,
    id: Option<DedupId>,
}

impl ConcurrencyParams {
    /// Validate the parameters.
    ///
    /// # Errors
    /// [`CoreError::InvalidParam`] naming `limit` (not in 1..=65536) or `lease` (not in
    /// 1..=`MAX_PARAM` µs).
    pub fn new(limit: u64, lease: Micros, id: Option<DedupId>) -> Result<Self, CoreError> {
        let limit = check_count(limit, "limit")?;
        if limit > MAX_LEASES {
            return Err(CoreError::InvalidParam("limit", MUST_FIT_LEASES));
        }
        let lease = check_duration(lease, "lease")?;
        Ok(ConcurrencyParams { limit, lease, id })
    }

    /// Units in flight at most.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Length of a lease (µs).
    pub fn lease(&self) -> Micros {
        self.lease
    }

    /// The call's lease id.
    pub fn id(&self) -> Option<DedupId> {
        self.id
    }
}

/// A concurrency limiter's state, boxed: one pointer in the key's value, like the other
/// algorithms' small states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concurrency(Box<Inner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    params: ConcurrencyParams,
    leases: Leases,
}

impl Concurrency {
    /// The stored leases, live or not yet dropped.
    pub fn leases(&self) -> &Leases {
        &self.0.leases
    }

    /// Units held by live leases at `now`.
    pub fn held(&self, now: Micros) -> u64 {
        self.0
            .leases
            .total()
            .saturating_sub(self.0.leases.expired_units(now))
    }

    /// Live leases at `now`: O(log n), expired leases counted through the expiry order.
    pub fn live_leases(&self, now: Micros) -> u64 {
        (self.0.leases.len() as u64).saturating_sub(self.0.leases.expired_leases(now))
    }

    /// Free `id`'s live lease at `now`: its units (0 for an unknown or expired id). Drops
    /// every lease expired at `now`.
    pub fn release(&mut self, id: DedupId, now: Micros) -> u64 {
        self.0.leases.drop_expired(now);
        self.0.leases.remove(id).map_or(0, u64::from)
    }

    /// `id`'s live lease at `now`.
    fn live(&self, id: Option<DedupId>, now: Micros) -> Option<Lease> {
        self.0.leases.get(id?).filter(|l| l.expiry > now)
    }

    /// The earliest expiry by which the leases other than `own` (a live lease at `now`) have
    /// freed `units` units beyond those already expired at `now`.
    fn time_when_others_free(&self, own: Lease, units: u64, now: Micros) -> Option<Micros> {
        let leases = &self.0.leases;
        let target = leases.expired_units(now).saturating_add(units);
        // Before `own` ends, the leases expired are all others'; from its end on, they include
        // its units.
        match leases.time_when_freed(target)? {
            at if at < own.expiry => Some(at),
            _ => leases.time_when_freed(target.saturating_add(u64::from(own.units))),
        }
    }

    /// Time from `now` until the last live lease expires.
    fn reset_after(&self, now: Micros, also: Option<Micros>) -> Micros {
        self.0
            .leases
            .last_expiry()
            .max(also.unwrap_or(0))
            .saturating_sub(now)
    }
}

impl Algorithm for Concurrency {
    type Params = ConcurrencyParams;

    /// Units come back when their lease is released (or expires), never by a refund.
    const REFUND: Refund = Refund::Via("RL.RELEASE");

    fn fresh(params: &ConcurrencyParams) -> Self {
        Concurrency(Box::new(Inner {
            // Carries the call's id (RL.ALL's parameters are a fresh limiter); it is never
            // encoded, and a commit clears it.
            params: *params,
            leases: Leases::default(),
        }))
    }

    fn params(&self) -> &ConcurrencyParams {
        &self.0.params
    }

    fn evaluate(
        &self,
        params: &ConcurrencyParams,
        now: Micros,
        cost: u64,
        best_effort: bool,
    ) -> Result<Verdict, CoreError> {
        let limit = params.limit;
        let held = self.held(now);
        let free = limit.saturating_sub(held);
        let until = now.checked_add(params.lease).ok_or(CoreError::Overflow)?;
        if cost == 0 {
            return Ok(Verdict {
                granted: 0,
                limit,
                remaining: free,
                retry: Retry::Granted,
                reset_after: self.reset_after(now, None),
            });
        }
        // Without an id (RL.CHECK, which takes none) the request is a new lease's: do `cost`
        // units fit now. Only a call with an id commits.
        if let Some(lease) = self.live(params.id, now) {
            if u64::from(lease.units) != cost {
                return Err(CoreError::Refused(
                    "COST differs from the units the lease holds",
                ));
            }
            // A renewal: no new units, if the units held (its own included) fit the limit.
            if held <= limit {
                return Ok(Verdict {
                    granted: cost,
                    limit,
                    remaining: free,
                    retry: Retry::Granted,
                    reset_after: self.reset_after(now, Some(until)),
                });
            }
            // Above a lowered limit: denied, and the lease keeps its end. It fits again (renewed,
            // or acquired anew once it ended) when the other leases hold at most `limit − cost`.
            let retry = limiter::retry(0, cost, limit, || {
                let need = held.saturating_sub(limit);
                self.time_when_others_free(lease, need, now)
                    .map(|at| at.saturating_sub(now))
                    .ok_or(CoreError::Overflow)
            })?;
            return Ok(Verdict {
                granted: 0,
                limit,
                remaining: 0,
                retry,
                reset_after: self.reset_after(now, None),
            });
        }
        // All or nothing: a lease holds what it asked for (BESTEFFORT is refused where it
        // could be given, see `bind_call`).
        let _ = best_effort;
        let granted = limiter::grant(cost, free, false);
        let retry = limiter::retry(granted, cost, limit, || {
            // Denied: the expired units, then the units `cost` needs beyond the free ones,
            // come back in expiry order.
            let need = held.saturating_add(cost).saturating_sub(limit);
            let expired = self.0.leases.expired_units(now);
            self.0
                .leases
                .time_when_freed(expired.saturating_add(need))
                .map(|at| at.saturating_sub(now))
                .ok_or(CoreError::Overflow)
        })?;
        Ok(Verdict {
            granted,
            limit,
            remaining: free.saturating_sub(granted),
            retry,
            reset_after: self.reset_after(now, (granted > 0).then_some(until)),
        })
    }

    fn commit(
        &mut self,
        params: &ConcurrencyParams,
        now: Micros,
        granted: u64,
    ) -> Result<(), CoreError> {
        let id = params.id.ok_or(CoreError::Overflow)?;
        let units = u32::try_from(granted).map_err(|_| CoreError::Overflow)?;
        let until = now.checked_add(params.lease).ok_or(CoreError::Overflow)?;
        match self.live(Some(id), now) {
            Some(lease) if lease.units != units => return Err(CoreError::Overflow),
            Some(_) => {
                self.0.leases.drop_expired(now);
                self.0.leases.renew(id, until);
            }
            None => {
                self.0.leases.drop_expired(now);
                if !self.0.leases.insert(Lease {
                    id,
                    units,
                    expiry: until,
                }) {
                    return Err(CoreError::Overflow);
                }
            }
        }
        self.0.params = ConcurrencyParams {
            id: None,
            ..*params
        };
        Ok(())
    }

    fn fresh_at(&self) -> Micros {
        self.0.leases.last_expiry()
    }

    fn dedup_until(_params: &ConcurrencyParams, now: Micros) -> Micros {
        // The id is the lease: it is not also remembered as a DEDUP id.
        now
    }

    const BINDS_CALL: bool = true;

    fn bind_call(
        params: &mut ConcurrencyParams,
        dedup: Option<DedupId>,
        best_effort: bool,
    ) -> Result<(), CoreError> {
        if best_effort {
            return Err(CoreError::Refused(BESTEFFORT_NO_CONCURRENCY));
        }
        params.id = Some(dedup.ok_or(CoreError::Refused(ALL_NEEDS_LEASE_ID))?);
        Ok(())
    }

    fn describe(params: &ConcurrencyParams) -> Vec<(&'static str, u64)> {
        vec![
            ("limit", params.limit),
            ("lease_ms", params.lease.div_ceil(1000)),
        ]
    }

    fn describe_live(&self, now: Micros) -> Vec<(&'static str, u64)> {
        vec![("leases", self.live_leases(now)), ("held", self.held(now))]
    }

    fn heap_size(&self) -> usize {
        std::mem::size_of::<Inner>().saturating_add(self.0.leases.heap_size())
    }

    /// `limit`, `lease`, the lease count, then per lease in expiry order: the 16-byte id
    /// (little-endian), its units and its expiry as a delta from the previous one.
    fn encode(&self, out: &mut Vec<u8>) {
        varint::put_u64(out, self.0.params.limit);
        varint::put_u64(out, self.0.params.lease);
        varint::put_u64(out, self.0.leases.len() as u64);
        let mut prev = 0;
        for l in self.0.leases.iter() {
            out.extend_from_slice(&l.id.0.to_le_bytes());
            varint::put_u64(out, u64::from(l.units));
            varint::put_u64(out, l.expiry.saturating_sub(prev));
            prev = l.expiry;
        }
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        let params = ConcurrencyParams::new(input.u64()?, input.u64()?, None).ok()?;
        let count = input.u64()?;
        // Each lease takes at least 18 bytes: never allocate from a count alone.
        if count > MAX_LEASES || count > (input.remaining() / 18) as u64 {
            return None;
        }
        let mut leases = Leases::default();
        let mut prev: Micros = 0;
        for _ in 0..count {
            let id = DedupId(u128::from_le_bytes(input.bytes(16)?.try_into().ok()?));
            let units = u32::try_from(input.u64()?).ok()?;
            let expiry = prev.checked_add(input.u64()?)?;
            if units == 0
                || u64::from(units) > MAX_LEASES
                || leases.get(id).is_some()
                || leases.total().saturating_add(u64::from(units)) > MAX_LEASES
            {
                return None;
            }
            leases.insert(Lease { id, units, expiry }).then_some(())?;
            prev = expiry;
        }
        Some(Concurrency(Box::new(Inner { params, leases })))
    }

    /// A lease ends at most a lease after the call that took or renewed it. (Decoding already
    /// bounds the units.)
    fn valid_at(&self, last_update: Micros) -> bool {
        self.0.leases.last_expiry() <= last_update.saturating_add(MAX_SPAN)
    }
}

/// What RL.RELEASE does to a key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// No live lease for the id: nothing changed (nothing to write or propagate).
    Nothing,
    /// The lease's units were freed; the key now expires at this time (Unix µs).
    Kept { units: u64, expires_at: Micros },
    /// The last lease was freed: delete the key.
    Emptied { units: u64 },
}

/// RL.RELEASE on a key's value at `now` (never before its last update): free `id`'s live
/// lease, record the update, and say what becomes of the key.
///
/// # Errors
/// [`CoreError::WrongKind`] if the key holds another algorithm.
pub fn release(state: &mut LimiterState, id: DedupId, now: Micros) -> Result<Released, CoreError> {
    let now = state.clock(now);
    // A key holding only a block holds no lease. A block never stops a release: it only
    // denies what would take units.
    let Some(algo) = state.algo.as_mut() else {
        return Ok(Released::Nothing);
    };
    let held = algo.kind();
    let conc = Concurrency::from_state_mut(algo).ok_or(CoreError::WrongKind {
        held,
        wanted: Concurrency::KIND,
    })?;
    if conc.live(Some(id), now).is_none() {
        return Ok(Released::Nothing);
    }
    let units = conc.release(id, now);
    state.touch(now);
    // The key lives while a lease, a remembered id or a block does.
    let expires_at = state.expiry(now);
    if expires_at <= now {
        return Ok(Released::Emptied { units });
    }
    Ok(Released::Kept { units, expires_at })
}

/// Does `id` hold a live lease in this value at `now` (a call with it renews, taking no new
/// units)? `false` for a value of another algorithm.
pub fn holds(state: &LimiterState, id: DedupId, now: Micros) -> bool {
    let now = state.clock(now);
    state
        .algo
        .as_ref()
        .and_then(Concurrency::from_state)
        .is_some_and(|c| c.live(Some(id), now).is_some())
}

#[cfg(test)]
mod tests;
