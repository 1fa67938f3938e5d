//! The request flow every limiter shares: per-key monotonic time, deduplication, `PEEK`,
//! `COST 0`, `BESTEFFORT`, and when to write.
//!
//! An [`Algorithm`] only answers two questions: what would this request get (`evaluate`, which
//! never mutates), and apply a grant (`commit`). [`apply`] wraps them with the rules of SPEC.md:
//! a denied, `PEEK` or `COST 0` call changes nothing (so nothing is written or replicated), and a
//! call whose time is older than the key's last update is evaluated at that update's time.

use crate::core::dedup::DedupId;

/// The three `Algorithm` methods that move a state in and out of [`AlgoState`], for a type whose
/// variant has the same name.
macro_rules! state_access {
    ($variant:ident) => {
        fn from_state(state: &AlgoState) -> Option<&Self> {
            match state {
                AlgoState::$variant(s) => Some(s),
                #[allow(unreachable_patterns)]
                _ => None,
            }
        }

        fn from_state_mut(state: &mut AlgoState) -> Option<&mut Self> {
            match state {
                AlgoState::$variant(s) => Some(s),
                #[allow(unreachable_patterns)]
                _ => None,
            }
        }

        fn into_state(self) -> AlgoState {
            AlgoState::$variant(self)
        }
    };
}
use crate::core::state::{AlgoState, Kind, LimiterState};
use crate::core::time::{Micros, ceil_ms};
use crate::core::{CoreError, codec};
pub(crate) use state_access;

/// One request against one limiter, with every shared option resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Units to consume (`COST`, default 1). Zero reports the state and changes nothing.
    pub cost: u64,
    /// Compute the reply as if the request were made, change nothing.
    pub peek: bool,
    /// Grant what is available (maybe less than `cost`) instead of denying.
    pub best_effort: bool,
    /// Idempotency token, hashed.
    pub dedup: Option<DedupId>,
    /// Evaluation time (the server's clock or `AT`).
    pub now: Micros,
}

impl Request {
    /// A plain request of `cost` units at `now`.
    pub fn new(cost: u64, now: Micros) -> Self {
        Request {
            cost,
            peek: false,
            best_effort: false,
            dedup: None,
            now,
        }
    }
}

/// When the same request could be granted again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The full request was granted: retry after 0.
    Granted,
    /// After this many microseconds (for a granted RL.LEAKYBUCKET request: its queue delay).
    After(Micros),
    /// Never: the cost exceeds the limiter's capacity.
    Never,
}

/// An algorithm's answer to one request, in exact units and microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub granted: u64,
    pub limit: u64,
    /// Units that could still be granted right after this call.
    pub remaining: u64,
    pub retry: Retry,
    /// Time until the limiter is back to its fresh state (remaining == limit).
    pub reset_after: Micros,
}

/// The limiter reply of SPEC.md: what clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub granted: i64,
    pub limit: i64,
    pub remaining: i64,
    /// 0 when granted in full, -1 when never possible, else ms rounded up.
    pub retry_after_ms: i64,
    pub reset_after_ms: i64,
}

impl From<Verdict> for Decision {
    fn from(v: Verdict) -> Self {
        let sat = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
        Decision {
            granted: sat(v.granted),
            limit: sat(v.limit),
            remaining: sat(v.remaining),
            retry_after_ms: match v.retry {
                Retry::Granted => 0,
                Retry::After(us) => ceil_ms(us),
                Retry::Never => -1,
            },
            reset_after_ms: ceil_ms(v.reset_after),
        }
    }
}

/// A rate-limiting algorithm over its own state type.
///
/// `evaluate` and `commit` must agree: committing `evaluate(..).granted` units at the same `now`
/// with the same params yields the state the verdict described.
pub trait Algorithm: Sized + Clone {
    /// Validated parameters, as given on the command line.
    type Params: Clone + PartialEq + std::fmt::Debug;

    /// Which algorithm this is (names it in WRONGTYPE errors and the codec).
    const KIND: Kind;

    /// The state of a limiter nobody has used yet.
    fn fresh(params: &Self::Params) -> Self;

    /// The parameters the state was last written with.
    fn params(&self) -> &Self::Params;

    /// What a request of `cost` units at `now` would get under `params`. Never mutates.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the parameters are too large to compute with.
    fn evaluate(
        &self,
        params: &Self::Params,
        now: Micros,
        cost: u64,
        best_effort: bool,
    ) -> Result<Verdict, CoreError>;

    /// Apply a grant of `granted` units at `now` under `params` (adopting `params`).
    ///
    /// # Errors
    /// [`CoreError::Overflow`] as for `evaluate`.
    fn commit(&mut self, params: &Self::Params, now: Micros, granted: u64)
    -> Result<(), CoreError>;

    /// When the limiter is back to its fresh state, if nothing else happens (the key's expiry).
    fn fresh_at(&self) -> Micros;

    /// Until when a `DEDUP` id first seen at `now` is remembered.
    fn dedup_until(params: &Self::Params, now: Micros) -> Micros;

    /// Parameter names and values, for RL.INFO.
    fn describe(params: &Self::Params) -> Vec<(&'static str, u64)>;

    /// Bytes on the heap beyond the state itself (for `MEMORY USAGE`).
    fn heap_size(&self) -> usize {
        0
    }

    /// Append the state to `out` (the codec's per-algorithm part).
    fn encode(&self, out: &mut Vec<u8>);

    /// Read the state written by `encode`.
    ///
    /// # Errors
    /// `None` on a truncated or invalid payload.
    fn decode(input: &mut codec::Reader<'_>) -> Option<Self>;

    /// Borrow this algorithm's state out of the enum, if it is this algorithm.
    fn from_state(state: &AlgoState) -> Option<&Self>;

    /// Mutably borrow this algorithm's state out of the enum.
    fn from_state_mut(state: &mut AlgoState) -> Option<&mut Self>;

    /// Wrap into the enum.
    fn into_state(self) -> AlgoState;
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

/// The result of one request: the reply, the write, and the key's new absolute expiry.
#[derive(Debug)]
pub struct Outcome {
    pub decision: Decision,
    /// The exact values behind `decision` (for replies in other units, like CL.THROTTLE's).
    pub verdict: Verdict,
    pub write: Write,
    /// When the key should expire (Unix µs), meaningful when `write` is not `None`.
    pub expires_at: Micros,
}

/// Run `req` against the key's current value (`None` for an empty key) with `params`.
///
/// # Errors
/// [`CoreError::WrongKind`] if the key holds another algorithm; [`CoreError::Overflow`].
pub fn apply<A: Algorithm>(
    existing: Option<&mut LimiterState>,
    params: &A::Params,
    req: &Request,
    dedup_max: usize,
) -> Result<Outcome, CoreError> {
    match existing {
        Some(state) => {
            let (decision, verdict, changed, expires_at) =
                step::<A>(state, params, req, dedup_max)?;
            let write = if changed { Write::Updated } else { Write::None };
            Ok(Outcome {
                decision,
                verdict,
                write,
                expires_at,
            })
        }
        None => {
            let mut state = LimiterState::new(A::fresh(params).into_state(), req.now);
            let (decision, verdict, changed, expires_at) =
                step::<A>(&mut state, params, req, dedup_max)?;
            let write = if changed {
                Write::Created(state)
            } else {
                Write::None
            };
            Ok(Outcome {
                decision,
                verdict,
                write,
                expires_at,
            })
        }
    }
}

fn step<A: Algorithm>(
    state: &mut LimiterState,
    params: &A::Params,
    req: &Request,
    dedup_max: usize,
) -> Result<(Decision, Verdict, bool, Micros), CoreError> {
    let wrong = || CoreError::WrongKind {
        held: state.kind(),
        wanted: A::KIND,
    };
    let algo = A::from_state(&state.algo).ok_or_else(wrong)?;
    // Time never goes backwards for one key: a clock step back grants nothing extra.
    let now = req.now.max(state.last_update);

    if let Some(id) = req.dedup
        && let Some(granted) = state.dedup.lookup(id, now)
    {
        let current = Verdict {
            granted,
            retry: Retry::Granted,
            ..algo.evaluate(params, now, 0, false)?
        };
        return Ok((Decision::from(current), current, false, 0));
    }

    let verdict = algo.evaluate(params, now, req.cost, req.best_effort)?;
    let decision = Decision::from(verdict);
    if req.peek || verdict.granted == 0 {
        return Ok((decision, verdict, false, 0));
    }

    let algo = A::from_state_mut(&mut state.algo).ok_or(CoreError::Overflow)?;
    algo.commit(params, now, verdict.granted)?;
    let fresh_at = algo.fresh_at();
    state.last_update = now;
    state.dedup.forget_expired(now);
    if let Some(id) = req.dedup {
        state
            .dedup
            .remember(id, verdict.granted, A::dedup_until(params, now), dedup_max);
    }
    // The key lives until the limiter is fresh again, and long enough to remember its ids.
    let expires_at = fresh_at.max(state.dedup.latest_expiry()).max(now);
    Ok((decision, verdict, true, expires_at))
}
