//! The per-key rules of SPEC.md, written once for the single-limiter commands ([`apply`]) and
//! RL.ALL (`core::multi`): the key's algorithm must be the command's, time never goes
//! backwards for one key, a remembered `DEDUP` id is not charged again, a denied, `PEEK` or
//! `COST 0` call changes nothing (so nothing is written or replicated), and a write records the
//! key's update time, its `DEDUP` id and its new expiry.
//!
//! Every request is evaluated first ([`read`], [`evaluate`]: nothing changes), then committed
//! ([`commit`]). RL.ALL evaluates every key before it commits any, so a key that cannot be
//! charged leaves every key as it was.

use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
use crate::core::limiter::{Algorithm, Request, Retry, Verdict};
use crate::core::state::{LimiterState, Stored};
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
            let algo = A::from_state(&s.algo).ok_or(CoreError::WrongKind {
                held: s.kind(),
                wanted: A::KIND,
            })?;
            Ok((Some(algo), now.max(s.last_update)))
        }
    }
}

/// The grant the key remembers for `id` at `now`, if any.
pub fn remembered(state: Option<&LimiterState>, id: Option<DedupId>, now: Micros) -> Option<u64> {
    state?.dedup.lookup(id?, now)
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
    let state = match slot {
        Slot::Existing(s) => &mut **s,
        Slot::New(s) => {
            s.get_or_insert_with(|| LimiterState::new(A::fresh(params).into_state(), now))
        }
    };
    let held = state.kind();
    let algo = A::from_state_mut(&mut state.algo).ok_or(CoreError::WrongKind {
        held,
        wanted: A::KIND,
    })?;
    algo.commit(params, now, granted)?;
    state.last_update = now;
    state.dedup.forget_expired(now);
    let until = A::dedup_until(params, now);
    // An id remembered until a time already passed is not remembered.
    if let Some(id) = dedup.filter(|_| until > now) {
        state.dedup.remember(id, granted, until, dedup_max);
    }
    Ok(state.expires_at())
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
}

impl Outcome {
    fn unchanged(verdict: Verdict) -> Self {
        Outcome {
            verdict,
            write: Write::None,
            expires_at: 0,
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
    if let Some(granted) = remembered(existing.as_deref(), req.dedup, now) {
        let current = evaluate(algo, params, now, 0, false)?;
        return Ok(Outcome::unchanged(Verdict {
            granted,
            retry: Retry::Granted,
            ..current
        }));
    }
    let verdict = evaluate(algo, params, now, req.cost, req.best_effort)?;
    if req.peek || verdict.granted == 0 {
        return Ok(Outcome::unchanged(verdict));
    }
    let mut slot = match existing {
        Some(s) => Slot::Existing(s),
        None => Slot::New(None),
    };
    let expires_at = commit::<A>(
        &mut slot,
        params,
        now,
        verdict.granted,
        req.dedup,
        dedup_max,
    )?;
    let write = match slot {
        Slot::Existing(_) => Write::Updated,
        Slot::New(Some(s)) => Write::Created(s),
        Slot::New(None) => Write::None,
    };
    Ok(Outcome {
        verdict,
        write,
        expires_at,
    })
}
