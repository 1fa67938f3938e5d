//! The per-key rules of SPEC.md, written once for the single-limiter commands ([`apply`]) and
//! RL.ALL (`core::multi`), in two steps:
//!
//! - [`judge`] reads the key and changes nothing: the key's algorithm must be the command's, the
//!   call is evaluated at the key's own clock ([`LimiterState::clock`]: time never goes
//!   backwards for one key), a blocked key denies every call without charging it, and a
//!   remembered `DEDUP` id is not charged again. The result is a [`Judged`].
//! - [`settle`] carries out what was decided on it ([`Settle`]): charge an amount ([`commit`]),
//!   or reserve it for a later time (`DELAY`: [`reserve`], [`commit_reserved`]), place a
//!   `BLOCK d` ([`place_block`]), or nothing. A write records the key's update
//!   ([`LimiterState::touch`]), its `DEDUP` id, and returns the key's new expiry
//!   ([`LimiterState::expiry`]).
//!
//! A single-limiter call is [`apply`] = [`judge`], [`Judged::decide`], [`settle`]; RL.ALL judges
//! every key, chooses the amount, then settles every key, so a key that cannot be charged leaves
//! every key as it was. The amount settled is a parameter of each key, not the call's `COST`.
//! RL.REFUND ([`judge_refund`], [`settle_refund`]), RL.BLOCK ([`block`]) and RL.UNBLOCK
//! ([`unblock`]) are the same for every algorithm too, and also judge before they change
//! anything; so is RL.SETTLE (`core::settle`).
//!
//! `HOLD ttl` ([`Remember`]): a grant's `DEDUP` id is remembered as a reservation. A key with a
//! reservation ended unsettled is run on a copy that gave its units back at its end
//! (`LimiterState::catch_up`); the copy becomes the key's value only when the call writes it
//! ([`apply`], `core::multi` alike), so reads change nothing and every write applies the same
//! give-back at the same time on a master, its replicas and the AOF.

use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
pub use crate::core::limiter::blocked;
use crate::core::limiter::{Algorithm, Reason, Refund, Request, Retry, Verdict};
use crate::core::state::{AlgoState, LimiterState, Stored, dispatch};
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

/// `state`'s algorithm (`None` for a missing key, or one holding only a block) and the time a
/// request made at `now` is evaluated at ([`LimiterState::clock`]).
///
/// # Errors
/// [`CoreError::WrongKind`] if the key holds another algorithm.
pub fn read<A: Stored>(
    state: Option<&LimiterState>,
    now: Micros,
) -> Result<(Option<&A>, Micros), CoreError> {
    let Some(s) = state else {
        return Ok((None, now));
    };
    let now = s.clock(now);
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

/// The end of the block in force on the key at `now`, if any.
pub fn blocked_until(state: Option<&LimiterState>, now: Micros) -> Option<Micros> {
    state?.extras.blocked_at(now)
}

/// What one key makes of a call, found without changing anything ([`judge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judged {
    /// The time the call is evaluated at on this key (never before its last update).
    pub now: Micros,
    /// The units asked of this key.
    pub cost: u64,
    /// The reply for them: the algorithm's verdict, the blocked reply on a blocked key, or the
    /// remembered grant of a `DEDUP` id.
    pub verdict: Verdict,
    /// The end of the block in force, if the key is blocked.
    pub blocked: Option<Micros>,
    /// The grant remembered for the call's `DEDUP` id (never on a blocked key).
    pub remembered: Option<u64>,
    /// `DELAY`: the later time the verdict's grant is a reservation of ([`reserve`]).
    pub reserved: Option<Micros>,
}

/// What a call does to one key, once judged ([`settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Nothing changes: no write, no replication.
    Keep,
    /// Charge this many units (and remember the call's `DEDUP` id).
    Charge(u64),
    /// `DELAY`: charge this many units as a reservation of this later time (and remember the
    /// call's `DEDUP` id).
    Reserve(u64, Micros),
    /// `BLOCK d` on a denied call: block the key until this time.
    Block(Micros),
}

impl Judged {
    /// Whether `BLOCK d` blocks the key on a call not granted: the call asked for units, this
    /// key denied them (granted none), the call is no `PEEK`, and the key was not blocked
    /// already (a denial while blocked does not extend the block). The block's end, if so.
    fn blocks(&self, req: &Request) -> Option<Micros> {
        let d = req.block?;
        (self.verdict.granted == 0 && self.cost > 0 && !req.peek && self.blocked.is_none())
            .then(|| self.now.saturating_add(d))
    }

    /// What the call does to the key once `granted` units were chosen for it (its own verdict's
    /// for a single-limiter call, the amount every key grants for RL.ALL): nothing on a blocked
    /// key or for a remembered id; charge them; or, for a call denied, block the key if
    /// `BLOCK d` blocks it. A `PEEK` is the caller's (it settles nothing, or a copy).
    pub fn settles(&self, req: &Request, granted: u64) -> Settle {
        if self.blocked.is_some() || self.remembered.is_some() {
            Settle::Keep
        } else if granted > 0 {
            match self.reserved {
                None => Settle::Charge(granted),
                Some(at) => Settle::Reserve(granted, at),
            }
        } else {
            self.blocks(req).map_or(Settle::Keep, Settle::Block)
        }
    }

    /// Why this key denies the call, [`Reason::Granted`] if it does not: a blocked key denies
    /// every call (even `COST 0`), a key that grants nothing of a cost above 0 denies it (a
    /// `BESTEFFORT` call granted part of it is not denied), a remembered id is granted. A cost
    /// above the limit is [`Reason::Never`] whatever else holds.
    pub fn reason(&self) -> Reason {
        let denied = self.blocked.is_some()
            || (self.remembered.is_none() && self.cost > 0 && self.verdict.granted == 0);
        if !denied {
            Reason::Granted
        } else if self.verdict.retry == Retry::Never {
            Reason::Never
        } else if self.blocked.is_some() {
            Reason::Blocked
        } else {
            Reason::Limit
        }
    }

    /// What a single-limiter call does to its key: [`Self::settles`] its own verdict's grant,
    /// a `PEEK` changing nothing.
    pub fn decide(&self, req: &Request) -> Settle {
        match self.settles(req, self.verdict.granted) {
            Settle::Charge(_) | Settle::Reserve(..) if req.peek => Settle::Keep,
            action => action,
        }
    }
}

/// What `cost` units get from the key at `now` under `params`: the time it is evaluated at, the
/// algorithm's verdict ([`evaluate`]), or the blocked reply and the block's end, or the grant
/// remembered for `dedup`. Never changes anything.
///
/// # Errors
/// As [`read`] and [`evaluate`].
pub fn judge<A: Stored>(
    state: Option<&LimiterState>,
    params: &A::Params,
    now: Micros,
    cost: u64,
    best_effort: bool,
    dedup: Option<DedupId>,
) -> Result<Judged, CoreError> {
    let (algo, now) = read::<A>(state, now)?;
    if let Some(until) = blocked_until(state, now) {
        return judge_blocked(algo, params, now, cost, until);
    }
    let verdict = evaluate(algo, params, now, cost, best_effort)?;
    match remembered(state, dedup, now) {
        None => Ok(Judged {
            now,
            cost,
            verdict,
            blocked: None,
            remembered: None,
            reserved: None,
        }),
        Some(granted) => judge_remembered(algo, params, now, cost, granted),
    }
}

/// [`judge`] on a key blocked until `until`: the blocked reply.
#[cold]
fn judge_blocked<A: Stored>(
    algo: Option<&A>,
    params: &A::Params,
    now: Micros,
    cost: u64,
    until: Micros,
) -> Result<Judged, CoreError> {
    let asked = evaluate(algo, params, now, cost, false)?;
    let current = evaluate(algo, params, now, 0, false)?;
    Ok(Judged {
        now,
        cost,
        verdict: blocked(asked, current, cost, until, now),
        blocked: Some(until),
        remembered: None,
        reserved: None,
    })
}

/// [`judge`] for a `DEDUP` id remembered with its grant: that grant, on the limiter as it is
/// now.
#[cold]
fn judge_remembered<A: Stored>(
    algo: Option<&A>,
    params: &A::Params,
    now: Micros,
    cost: u64,
    granted: u64,
) -> Result<Judged, CoreError> {
    let current = evaluate(algo, params, now, 0, false)?;
    Ok(Judged {
        now,
        cost,
        verdict: Verdict {
            granted,
            retry: Retry::Granted,
            ..current
        },
        blocked: None,
        remembered: Some(granted),
        reserved: None,
    })
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

/// What a write remembers of the call: its `DEDUP` id and, with `HOLD ttl`, the reservation's
/// `ttl` (µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Remember {
    pub id: Option<DedupId>,
    pub hold: Option<Micros>,
}

impl Remember {
    /// The call's id and hold.
    pub fn of(req: &Request) -> Self {
        Remember {
            id: req.dedup,
            hold: req.hold,
        }
    }
}

/// The error of a call with a `DEDUP` id (a `HOLD` or not) on a key whose every remembered id
/// is a pending reservation, at `ratelimit.dedup-max` ids.
pub const TOO_MANY_HOLDS: &str =
    "too many reservations held on the key (ratelimit.dedup-max), settle some first";

/// Whether a call granted on the key (`None`: missing) can remember its `DEDUP` id: it has none;
/// ids are not remembered at all (`dedup-max` 0) and it holds nothing; or there is room for the
/// id ([`Extras::can_hold`]). A key whose every remembered id is a pending reservation refuses a
/// new id rather than forget one: a reservation pushed out could not be settled, and a plain id
/// not remembered would let a retry of its call be charged again.
///
/// [`Extras::can_hold`]: crate::core::extras::Extras::can_hold
pub fn can_remember(state: Option<&LimiterState>, remember: Remember, dedup_max: usize) -> bool {
    if remember.id.is_none() || (remember.hold.is_none() && dedup_max == 0) {
        return true;
    }
    state.map_or(dedup_max > 0, |s| s.extras.can_hold(dedup_max))
}

/// Carry out `action` on a key judged at `now` ([`Judged::now`]) under `params`, creating its
/// value if it is missing. The key's new expiry when it was written, `None` when nothing changed.
///
/// # Errors
/// As [`commit`] and [`place_block`]: only if `action` was not decided on this key's
/// [`judge`]; nothing is changed then.
#[inline]
pub fn settle<A: Stored>(
    slot: &mut Slot<'_>,
    params: &A::Params,
    now: Micros,
    action: Settle,
    remember: Remember,
    dedup_max: usize,
) -> Result<Option<Micros>, CoreError> {
    match action {
        Settle::Keep => Ok(None),
        Settle::Charge(granted) => {
            commit::<A>(slot, params, now, granted, remember, dedup_max).map(Some)
        }
        Settle::Reserve(granted, at) => {
            commit_reserved::<A>(slot, params, now, at, granted, remember, dedup_max).map(Some)
        }
        Settle::Block(until) => place_block::<A>(slot, params, now, until).map(Some),
    }
}

/// Whether `amount` units can be charged to a key judged `j` (evaluated before any key
/// changes, so RL.ALL never charges one key and then fails on another).
///
/// # Errors
/// [`CoreError::Overflow`] if the key would not grant them (a broken contract of the
/// algorithm), as [`judge`].
pub fn can_charge<A: Stored>(
    state: Option<&LimiterState>,
    params: &A::Params,
    j: &Judged,
    amount: u64,
) -> Result<(), CoreError> {
    if j.verdict.granted == amount && j.blocked.is_none() && j.remembered.is_none() {
        return Ok(());
    }
    if j.reserved.is_some() {
        // A reservation is of the key's full cost, which `reserve` checked.
        return Err(CoreError::Overflow);
    }
    let charge = judge::<A>(state, params, j.now, amount, false, None)?;
    if charge.verdict.granted == amount {
        Ok(())
    } else {
        Err(CoreError::Overflow)
    }
}

/// Charge `granted` units (evaluated at `now` under `params`) to the key, creating its value if
/// it is missing, and record the update and the `DEDUP` id. Returns the key's new expiry.
///
/// # Errors
/// [`CoreError::WrongKind`] or [`CoreError::Overflow`] only if `granted` was not evaluated on
/// this key (see [`Algorithm::commit`]); nothing is changed then.
pub fn commit<A: Stored>(
    slot: &mut Slot<'_>,
    params: &A::Params,
    now: Micros,
    granted: u64,
    remember: Remember,
    dedup_max: usize,
) -> Result<Micros, CoreError> {
    let state = slot_state::<A>(slot, params, now);
    let algo = algo_mut::<A>(state, params)?;
    algo.commit(params, now, granted)?;
    let until = algo.remember_until(params, now);
    Ok(record(state, now, until, granted, remember, dedup_max))
}

/// `DELAY`: [`commit`] `granted` units reserved at `now` for the later time `at`
/// ([`Algorithm::commit_reserved`]). The key's clock is `now`: its last update is the call's,
/// not the reservation's.
///
/// # Errors
/// As [`commit`]: only if the reservation was not judged on this key ([`reserve`]).
#[cold]
#[inline(never)]
pub fn commit_reserved<A: Stored>(
    slot: &mut Slot<'_>,
    params: &A::Params,
    now: Micros,
    at: Micros,
    granted: u64,
    remember: Remember,
    dedup_max: usize,
) -> Result<Micros, CoreError> {
    let state = slot_state::<A>(slot, params, now);
    let algo = algo_mut::<A>(state, params)?;
    algo.commit_reserved(params, now, at, granted)?;
    let until = algo.remember_until(params, now);
    Ok(record(state, now, until, granted, remember, dedup_max))
}

/// Record a grant of `granted` units at `now` on the key: its update, and the `DEDUP` id,
/// remembered until `until` ([`Algorithm::remember_until`]), with `HOLD ttl` as a reservation
/// until `now + ttl` (and remembered at least as long). Returns the key's new expiry.
#[inline(always)]
fn record(
    state: &mut LimiterState,
    now: Micros,
    until: Micros,
    granted: u64,
    remember: Remember,
    dedup_max: usize,
) -> Micros {
    state.touch(now);
    if let Some(id) = remember.id {
        match remember.hold {
            Some(ttl) => {
                let end = now.saturating_add(ttl);
                state
                    .extras
                    .remember_hold(id, granted, until, end, dedup_max);
            }
            // An id remembered until a time already passed is not remembered.
            None if until > now => state.extras.remember(id, granted, until, dedup_max),
            None => {}
        }
    }
    state.expiry(now)
}

/// `DELAY`: the first time (at or after [`Judged::now`]) the key grants its full cost, if
/// ever: `j.now` when it does now; `None` when no reservation can be made (a blocked key, a
/// remembered id, a cost above the limit, an algorithm without `DELAY`). Never changes
/// anything.
///
/// # Errors
/// As [`evaluate`].
pub fn allowed_at<A: Stored>(
    state: Option<&LimiterState>,
    params: &A::Params,
    j: &Judged,
) -> Result<Option<Micros>, CoreError> {
    if !A::DELAY || j.blocked.is_some() || j.remembered.is_some() {
        return Ok(None);
    }
    if j.verdict.granted == j.cost {
        return Ok(Some(j.now));
    }
    // The wait for the full cost from the state as it is (a BESTEFFORT verdict's retry counts
    // the units it granted).
    let (algo, _) = read::<A>(state, j.now)?;
    let full = evaluate(algo, params, j.now, j.cost, false)?;
    Ok(match full.retry {
        Retry::After(wait) if full.granted == 0 => Some(j.now.saturating_add(wait)),
        _ => None,
    })
}

/// `DELAY`: the key judged `j` granting its full cost now as a reservation of the later time
/// `at`, a time it grants it at ([`allowed_at`]); `j` itself when `at` is not later than
/// `j.now` (the key grants now). Never changes anything.
///
/// # Errors
/// As [`Algorithm::reserve`].
pub fn reserve<A: Stored>(
    state: Option<&LimiterState>,
    params: &A::Params,
    j: Judged,
    at: Micros,
) -> Result<Judged, CoreError> {
    if at <= j.now {
        return Ok(j);
    }
    let (algo, _) = read::<A>(state, j.now)?;
    let verdict = match algo {
        Some(a) => a.reserve(params, j.now, at, j.cost)?,
        None => A::fresh(params).reserve(params, j.now, at, j.cost)?,
    };
    Ok(Judged {
        verdict,
        reserved: Some(at),
        ..j
    })
}

/// `DELAY d` on a single key judged `j`: reserved for the time its full cost is allowed when
/// that is within `d`, else `j` as it is (with `BESTEFFORT`, what is available now).
#[cold]
#[inline(never)]
fn delayed<A: Stored>(
    state: Option<&LimiterState>,
    params: &A::Params,
    j: Judged,
    d: Micros,
) -> Result<Judged, CoreError> {
    match allowed_at::<A>(state, params, &j)? {
        Some(at) if at.saturating_sub(j.now) <= d => reserve::<A>(state, params, j, at),
        _ => Ok(j),
    }
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
    state.touch(now);
    state.extras.block(until);
    Ok(state.expiry(now))
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
    /// Why the key denied the call ([`Judged::reason`]).
    pub reason: Reason,
    /// The time the call was evaluated at on the key ([`Judged::now`]).
    pub now: Micros,
}

impl Write {
    fn of(slot: Slot<'_>, written: bool) -> Write {
        match slot {
            _ if !written => Write::None,
            Slot::Existing(_) => Write::Updated,
            Slot::New(Some(s)) => Write::Created(s),
            Slot::New(None) => Write::None,
        }
    }
}

/// Run `req` against the key's current value (`None` for an empty key) with `params`:
/// [`judge`], then [`settle`] what the call [decides](Judged::decide).
///
/// # Errors
/// [`CoreError::WrongKind`] if the key holds another algorithm; [`CoreError::Overflow`].
pub fn apply<A: Stored>(
    existing: Option<&mut LimiterState>,
    params: &A::Params,
    req: &Request,
    dedup_max: usize,
) -> Result<Outcome, CoreError> {
    if let Some(s) = existing.as_deref()
        && s.extras.hold_due(s.clock(req.now))
    {
        return apply_caught_up::<A>(existing, params, req, dedup_max);
    }
    let mut j = judge::<A>(
        existing.as_deref(),
        params,
        req.now,
        req.cost,
        req.best_effort,
        req.dedup,
    )?;
    // A call granted its full cost now is granted now, whatever `DELAY` allows.
    if let Some(d) = req.delay
        && j.verdict.granted != j.cost
    {
        j = delayed::<A>(existing.as_deref(), params, j, d)?;
    }
    let action = j.decide(req);
    if matches!(action, Settle::Charge(_) | Settle::Reserve(..))
        && !can_remember(existing.as_deref(), Remember::of(req), dedup_max)
    {
        return Err(CoreError::Refused(TOO_MANY_HOLDS));
    }
    // The reply on the key once `BLOCK d` blocked it, judged before the block is placed: a call
    // that cannot be answered changes nothing.
    let verdict = match action {
        Settle::Block(until) => {
            let (algo, _) = read::<A>(existing.as_deref(), req.now)?;
            judge_blocked(algo, params, j.now, req.cost, until)?.verdict
        }
        Settle::Keep | Settle::Charge(_) | Settle::Reserve(..) => j.verdict,
    };
    let mut slot = match existing {
        Some(s) => Slot::Existing(s),
        None => Slot::New(None),
    };
    let written = settle::<A>(
        &mut slot,
        params,
        j.now,
        action,
        Remember::of(req),
        dedup_max,
    )?;
    Ok(Outcome {
        verdict,
        write: Write::of(slot, written.is_some()),
        expires_at: written.unwrap_or(0),
        blocked: j.blocked.is_some() || matches!(action, Settle::Block(_)),
        reason: j.reason(),
        now: j.now,
    })
}

/// [`apply`] on a key with reservations ended unsettled: the call runs on a copy that has given
/// their units back ([`LimiterState::catch_up`]), which becomes the key's value only when the
/// call writes it (a read, a `PEEK` or a denial leaves the value as it was: the next write
/// gives them back at the same time, on the master and on its replicas alike).
#[cold]
#[inline(never)]
fn apply_caught_up<A: Stored>(
    existing: Option<&mut LimiterState>,
    params: &A::Params,
    req: &Request,
    dedup_max: usize,
) -> Result<Outcome, CoreError> {
    let Some(state) = existing else {
        return apply::<A>(None, params, req, dedup_max);
    };
    let mut copy = state.clone();
    copy.catch_up(state.clock(req.now))?;
    let outcome = apply::<A>(Some(&mut copy), params, req, dedup_max)?;
    if matches!(outcome.write, Write::Updated) {
        *state = copy;
    }
    Ok(outcome)
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

/// An RL.REFUND judged on a key ([`judge_refund`]), not yet applied ([`settle_refund`]).
#[derive(Debug)]
pub struct RefundJudged {
    /// The time it is evaluated at on the key.
    pub now: Micros,
    /// The limiter reply after the refund, `granted` being the units given back.
    pub verdict: Verdict,
    /// The algorithm's state after the refund, when it gives units back.
    after: Option<AlgoState>,
    /// The `DEDUP` id the refund settles, and the units that stay charged for it.
    settles: Option<(DedupId, u64)>,
    /// The key's value with its ended reservations given back, when it had any
    /// ([`LimiterState::caught_up`]): what the refund applies to.
    base: Option<Box<LimiterState>>,
}

impl RefundJudged {
    /// Whether the refund changes the key (gives units back or settles an id).
    pub fn changes(&self) -> bool {
        self.after.is_some() || self.settles.is_some()
    }
}

/// RL.REFUND, judged: give back up to `units` at `now` to the key's limiter, under its stored
/// parameters. With `DEDUP id`, at most what the id was granted, once: the id is then settled
/// (an unknown or settled id gives nothing). `None` for a key holding only a block. Never changes
/// anything: every step that can fail is taken here.
///
/// # Errors
/// [`CoreError::NoRefund`] for an algorithm that takes no refund; [`CoreError::Overflow`] or
/// [`CoreError::StateTooLong`] from the refund or the reply after it.
pub fn judge_refund(
    state: &LimiterState,
    now: Micros,
    units: u64,
    dedup: Option<DedupId>,
) -> Result<Option<RefundJudged>, CoreError> {
    if let Some(copy) = state.caught_up(now)? {
        let judged = judge_refund(&copy, now, units, dedup)?;
        return Ok(judged.map(|j| RefundJudged {
            base: Some(Box::new(copy)),
            ..j
        }));
    }
    let now = state.clock(now);
    let live = |id| state.extras.entry(id, now).filter(|e| !e.settled);
    let cap = match dedup {
        None => units,
        Some(id) => live(id).map_or(0, |e| e.granted.min(units)),
    };
    let Some(algo) = state.algo.as_ref() else {
        return Ok(None);
    };
    let mut after = algo.clone();
    let given = dispatch!(&mut after, a => refund_algo(a, now, cap))?;
    let after = (given > 0).then_some(after);
    let current = {
        let algo = after.as_ref().unwrap_or(algo);
        dispatch!(algo, a => a.evaluate(a.params(), now, 0, false))?
    };
    let verdict = match state.extras.blocked_at(now) {
        Some(until) => blocked(current, current, 0, until, now),
        None => current,
    };
    Ok(Some(RefundJudged {
        now,
        verdict: Verdict {
            granted: given,
            retry: Retry::Granted,
            ..verdict
        },
        after,
        settles: dedup.and_then(|id| live(id).map(|e| (id, e.charged.saturating_sub(given)))),
        base: None,
    }))
}

/// Apply a refund judged on this key: the key's new expiry when it changed.
pub fn settle_refund(state: &mut LimiterState, judged: RefundJudged) -> Option<Micros> {
    if !judged.changes() {
        return None;
    }
    let now = judged.now;
    if let Some(base) = judged.base {
        *state = *base;
    }
    if let Some(algo) = judged.after {
        state.algo = Some(algo);
    }
    if let Some((id, charged)) = judged.settles {
        state.extras.settle(id, now, charged);
    }
    state.touch(now);
    Some(state.expiry(now))
}

/// RL.REFUND: [`judge_refund`], then [`settle_refund`].
///
/// # Errors
/// As [`judge_refund`]; nothing is changed then.
pub fn refund(
    state: &mut LimiterState,
    now: Micros,
    units: u64,
    dedup: Option<DedupId>,
) -> Result<Option<Refunded>, CoreError> {
    let Some(judged) = judge_refund(state, now, units, dedup)? else {
        return Ok(None);
    };
    let verdict = judged.verdict;
    let written = settle_refund(state, judged);
    Ok(Some(Refunded {
        verdict,
        changed: written.is_some(),
        expires_at: written.unwrap_or(0),
    }))
}

/// [`Algorithm::refund`], unless the algorithm names another command.
pub(crate) fn refund_algo<A: Stored>(a: &mut A, now: Micros, units: u64) -> Result<u64, CoreError> {
    match A::REFUND {
        Refund::Via(via) => Err(CoreError::NoRefund { held: A::KIND, via }),
        Refund::Units if units == 0 => Ok(0),
        Refund::Units => a.refund(now, units),
    }
}

/// RL.BLOCK on an existing key: blocked until `max(current end, now + d)` (`now` on the key's
/// clock). Returns the key's new expiry, the block's end and the time it was evaluated at.
pub fn block(state: &mut LimiterState, now: Micros, d: Micros) -> (Micros, Micros, Micros) {
    let now = state.clock(now);
    state.touch(now);
    state.extras.block(now.saturating_add(d));
    (state.expiry(now), state.extras.block_until(), now)
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
