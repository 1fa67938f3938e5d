//! The per-key rules of SPEC.md, written once for the single-limiter commands ([`apply`]) and
//! RL.ALL (`core::multi`): the key's algorithm must be the command's, time never goes
//! backwards for one key, a blocked key denies every call without charging it ([`judge`]), a
//! remembered `DEDUP` id is not charged again, a denied, `PEEK` or `COST 0` call changes nothing
//! (so nothing is written or replicated) unless `BLOCK d` blocks the key that denied
//! ([`place_block`]), and a write records the key's update time, its `DEDUP` id and its new
//! expiry. RL.REFUND ([`refund`]), RL.BLOCK ([`block`]) and RL.UNBLOCK ([`unblock`]) are the same
//! for every algorithm too.
//!
//! Every request is evaluated first ([`read`], [`judge`]: nothing changes), then committed
//! ([`commit`]). RL.ALL evaluates every key before it commits any, so a key that cannot be
//! charged leaves every key as it was.

use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
pub use crate::core::limiter::blocked;
use crate::core::limiter::{Algorithm, Refund, Request, Retry, Verdict};
use crate::core::state::{LimiterState, Stored, dispatch};
use crate::core::time::Micros;

/// One key of a request: its current value, or the new one a grant creates.
#[derive(Debug)]
pub enum Slot<'a> {
    Existing(&'a mut LimiterState),
    /// A missing key; `Some` once a grant created its value, which the caller stores.
    New(Option<LimiterState>),
}

impl Slot<'_> {
    /// The key's value, if it has one.
    pub fn state(&self) -> Option<&LimiterState> {
        match self {
            Slot::Existing(s) => Some(s),
            Slot::New(s) => s.as_ref(),
        }
    }
}

/// `state`'s algorithm (`None` for a missing key) and the time a request made at `now` is
/// evaluated at: never before the key's last update.
///
/// # Errors
/// [`CoreError::WrongKind`] if the key holds another algorithm.
pub fn read<A: Stored>(
    state: Option<&LimiterState>,
    now: Micros,
) -> Result<(Option<&A>, Micros), CoreError> {
    match state {
        None => Ok((None, now)),
        Some(s) => {
            let now = now.max(s.last_update);
            match &s.algo {
                // Only a block: the limiter itself is fresh.
                None => Ok((None, now)),
                Some(algo) => {
                    let algo = A::from_state(algo).ok_or(CoreError::WrongKind {
                        held: algo.kind(),
                        wanted: A::KIND,
                    })?;
                    Ok((Some(algo), now))
                }
            }
        }
    }
}

/// The end of the block in force on the key at `now`, if any.
pub fn blocked_until(state: Option<&LimiterState>, now: Micros) -> Option<Micros> {
    state?.extras.blocked_at(now)
}

/// What `cost` units get from the key at `now` under `params`, a block honoured: the
/// algorithm's verdict ([`evaluate`]), or the blocked reply and the block's end. Never changes
/// anything.
///
/// # Errors
/// As [`read`] and [`evaluate`].
pub fn judge<A: Stored>(
    state: Option<&LimiterState>,
    params: &A::Params,
    now: Micros,
    cost: u64,
    best_effort: bool,
) -> Result<(Verdict, Option<Micros>), CoreError> {
    let (algo, now) = read::<A>(state, now)?;
    match blocked_until(state, now) {
        Some(until) => {
            let asked = evaluate(algo, params, now, cost, false)?;
            let current = evaluate(algo, params, now, 0, false)?;
            Ok((blocked(asked, current, cost, until, now), Some(until)))
        }
        None => Ok((evaluate(algo, params, now, cost, best_effort)?, None)),
    }
}

/// The grant the key remembers for `id` at `now`, if any.
pub fn remembered(state: Option<&LimiterState>, id: Option<DedupId>, now: Micros) -> Option<u64> {
    state?.extras.lookup(id?, now)
}

/// What `cost` units get from `algo` (a fresh limiter when `None`) under `params` at `now`.
/// Never changes anything.
///
/// # Errors
/// [`CoreError::Overflow`] as the algorithm's `evaluate`.
pub fn evaluate<A: Algorithm>(
    algo: Option<&A>,
    params: &A::Params,
    now: Micros,
    cost: u64,
    best_effort: bool,
) -> Result<Verdict, CoreError> {
    match algo {
        Some(a) => a.evaluate(params, now, cost, best_effort),
        None => A::fresh(params).evaluate(params, now, cost, best_effort),
    }
}

/// Charge `granted` units (evaluated at `now` under `params`) to the key, creating its value if
/// it is missing, and record the update and the `DEDUP` id. Returns the key's new expiry: when
/// the limiter is fresh again, and late enough to remember its ids.
///
/// # Errors
/// [`CoreError::WrongKind`] or [`CoreError::Overflow`] only if `granted` was not evaluated on
/// this key (see [`Algorithm::commit`]); nothing is changed then.
pub fn commit<A: Stored>(
    slot: &mut Slot<'_>,
    params: &A::Params,
    now: Micros,
    granted: u64,
    dedup: Option<DedupId>,
    dedup_max: usize,
) -> Result<Micros, CoreError> {
    let state = slot_state::<A>(slot, params, now);
    let algo = algo_mut::<A>(state, params)?;
    algo.commit(params, now, granted)?;
    state.last_update = now;
    state.extras.forget_expired(now);
    let until = A::dedup_until(params, now);
    // An id remembered until a time already passed is not remembered.
    if let Some(id) = dedup.filter(|_| until > now) {
        state.extras.remember(id, granted, until, dedup_max);
    }
    Ok(state.expires_at().max(now))
}

/// The key's value, created (a fresh limiter of `params`) if it is missing.
fn slot_state<'s, A: Stored>(
    slot: &'s mut Slot<'_>,
    params: &A::Params,
    now: Micros,
) -> &'s mut LimiterState {
    match slot {
        Slot::Existing(s) => s,
        Slot::New(s) => {
            s.get_or_insert_with(|| LimiterState::new(A::fresh(params).into_state(), now))
        }
    }
}

/// The key's algorithm, a fresh one of `params` if it holds only a block.
fn algo_mut<'s, A: Stored>(
    state: &'s mut LimiterState,
    params: &A::Params,
) -> Result<&'s mut A, CoreError> {
    let algo = state
        .algo
        .get_or_insert_with(|| A::fresh(params).into_state());
    let held = algo.kind();
    A::from_state_mut(algo).ok_or(CoreError::WrongKind {
        held,
        wanted: A::KIND,
    })
}

/// `BLOCK d` on a call the key denied at `now`: block it until `until` (creating its value if
/// missing). Returns the key's new expiry, which the block holds off.
///
/// # Errors
/// [`CoreError::WrongKind`] only if the key was not read as `A` ([`read`]); nothing is changed
/// then.
pub fn place_block<A: Stored>(
    slot: &mut Slot<'_>,
    params: &A::Params,
    now: Micros,
    until: Micros,
) -> Result<Micros, CoreError> {
    let state = slot_state::<A>(slot, params, now);
    algo_mut::<A>(state, params)?;
    state.last_update = now;
    state.extras.forget_expired(now);
    state.extras.block(until);
    Ok(state.expires_at().max(now))
}

/// Whether `BLOCK d` blocks a key whose verdict for `req` was `v`: the call asked for units, got
/// none, is no `PEEK`, and the key was not blocked already (a denial while blocked does not
/// extend the block). The block's end, if so.
pub fn blocks(req: &Request, v: &Verdict, already: Option<Micros>, now: Micros) -> Option<Micros> {
    let d = req.block?;
    (v.granted == 0 && req.cost > 0 && !req.peek && already.is_none())
        .then(|| now.saturating_add(d))
}

/// What the command layer must do after [`apply`].
#[derive(Debug)]
pub enum Write {
    /// Nothing changed: no write, no replication.
    None,
    /// The existing value was changed in place.
    Updated,
    /// The key was empty: store this new value.
    Created(LimiterState),
}

/// The result of one request: the exact reply, the write, and the key's new absolute expiry.
#[derive(Debug)]
pub struct Outcome {
    pub verdict: Verdict,
    pub write: Write,
    /// When the key should expire (Unix µs), meaningful when `write` is not `None`.
    pub expires_at: Micros,
    /// The key is blocked (the call was denied by the block, or placed it).
    pub blocked: bool,
}

impl Outcome {
    fn unchanged(verdict: Verdict) -> Self {
        Outcome {
            verdict,
            write: Write::None,
            expires_at: 0,
            blocked: false,
        }
    }
}

impl Write {
    fn of(slot: Slot<'_>) -> Write {
        match slot {
            Slot::Existing(_) => Write::Updated,
            Slot::New(Some(s)) => Write::Created(s),
            Slot::New(None) => Write::None,
        }
    }
}

/// Run `req` against the key's current value (`None` for an empty key) with `params`.
///
/// # Errors
/// [`CoreError::WrongKind`] if the key holds another algorithm; [`CoreError::Overflow`].
pub fn apply<A: Stored>(
    existing: Option<&mut LimiterState>,
    params: &A::Params,
    req: &Request,
    dedup_max: usize,
) -> Result<Outcome, CoreError> {
    let (algo, now) = read::<A>(existing.as_deref(), req.now)?;
    let (verdict, already) =
        judge::<A>(existing.as_deref(), params, now, req.cost, req.best_effort)?;
    if already.is_some() {
        return Ok(Outcome {
            blocked: true,
            ..Outcome::unchanged(verdict)
        });
    }
    if let Some(granted) = remembered(existing.as_deref(), req.dedup, now) {
        let current = evaluate(algo, params, now, 0, false)?;
        return Ok(Outcome::unchanged(Verdict {
            granted,
            retry: Retry::Granted,
            ..current
        }));
    }
    // The reply on the key once `BLOCK d` blocked it, judged before the block is placed.
    let block = match blocks(req, &verdict, already, now) {
        Some(until) => {
            let asked = evaluate(algo, params, now, req.cost, false)?;
            let current = evaluate(algo, params, now, 0, false)?;
            Some((until, blocked(asked, current, req.cost, until, now)))
        }
        None => None,
    };
    let mut slot = match existing {
        Some(s) => Slot::Existing(s),
        None => Slot::New(None),
    };
    if let Some((until, verdict)) = block {
        let expires_at = place_block::<A>(&mut slot, params, now, until)?;
        return Ok(Outcome {
            verdict,
            write: Write::of(slot),
            expires_at,
            blocked: true,
        });
    }
    if req.peek || verdict.granted == 0 {
        return Ok(Outcome::unchanged(verdict));
    }
    let expires_at = commit::<A>(
        &mut slot,
        params,
        now,
        verdict.granted,
        req.dedup,
        dedup_max,
    )?;
    Ok(Outcome {
        verdict,
        write: Write::of(slot),
        expires_at,
        blocked: false,
    })
}

/// The result of RL.REFUND.
#[derive(Debug)]
pub struct Refunded {
    /// The limiter reply after the refund, `granted` being the units given back.
    pub verdict: Verdict,
    /// The value changed (write and replicate).
    pub changed: bool,
    /// The key's new expiry (Unix µs), meaningful when `changed`.
    pub expires_at: Micros,
}

/// RL.REFUND: give back up to `units` at `now` to the key's limiter, under its stored
/// parameters. With `DEDUP id`, at most what the id was granted, once: the id is then settled
/// (an unknown or settled id gives nothing). `None` for a key holding only a block.
///
/// # Errors
/// [`CoreError::NoRefund`] for an algorithm that takes no refund; [`CoreError::Overflow`] or
/// [`CoreError::StateTooLong`] from the refund or the reply after it. Nothing is changed then.
pub fn refund(
    state: &mut LimiterState,
    now: Micros,
    units: u64,
    dedup: Option<DedupId>,
) -> Result<Option<Refunded>, CoreError> {
    let now = now.max(state.last_update);
    let cap = match dedup {
        None => units,
        Some(id) => match state.extras.entry(id, now) {
            Some(e) if !e.settled => e.granted.min(units),
            _ => 0,
        },
    };
    let Some(algo) = state.algo.as_ref() else {
        return Ok(None);
    };
    // Judged on a copy: the refund and the reply after it, both of which can fail. Nothing is
    // changed until both are known.
    let mut after = algo.clone();
    let given = dispatch!(&mut after, a => refund_algo(a, now, cap))?;
    let current = dispatch!(&after, a => a.evaluate(a.params(), now, 0, false))?;
    let settles = dedup.filter(|&id| state.extras.entry(id, now).is_some_and(|e| !e.settled));
    if given > 0 {
        state.algo = Some(after);
    }
    if let Some(id) = settles {
        state.extras.settle(id, now);
    }
    let changed = given > 0 || settles.is_some();
    if changed {
        state.last_update = now;
        state.extras.forget_expired(now);
    }
    let verdict = match state.extras.blocked_at(now) {
        Some(until) => blocked(current, current, 0, until, now),
        None => current,
    };
    Ok(Some(Refunded {
        verdict: Verdict {
            granted: given,
            retry: Retry::Granted,
            ..verdict
        },
        changed,
        expires_at: state.expires_at().max(now),
    }))
}

/// [`Algorithm::refund`], unless the algorithm names another command.
fn refund_algo<A: Stored>(a: &mut A, now: Micros, units: u64) -> Result<u64, CoreError> {
    match A::REFUND {
        Refund::Via(via) => Err(CoreError::NoRefund { held: A::KIND, via }),
        Refund::Units if units == 0 => Ok(0),
        Refund::Units => a.refund(now, units),
    }
}

/// RL.BLOCK on an existing key: blocked until `max(current end, now + d)` (`now` never before
/// the key's last update). Returns the key's new expiry and the block's end.
pub fn block(state: &mut LimiterState, now: Micros, d: Micros) -> (Micros, Micros) {
    let now = now.max(state.last_update);
    state.last_update = now;
    state.extras.forget_expired(now);
    state.extras.block(now.saturating_add(d));
    (state.expires_at().max(now), state.extras.block_until())
}

/// RL.UNBLOCK: remove the key's block (in force or not, so master and replica agree whatever
/// their clocks). Whether there was one, and whether the key held only the block (delete it).
pub fn unblock(state: &mut LimiterState) -> (bool, bool) {
    let had = state.extras.unblock();
    (had, state.algo.is_none())
}

/// A key holding only a block of `d` from `now` (RL.BLOCK on a missing key).
pub fn new_block(now: Micros, d: Micros) -> LimiterState {
    LimiterState::block_only(now.saturating_add(d), now)
}
