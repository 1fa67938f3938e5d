//! What an algorithm is: the [`Algorithm`] trait, the [`Request`] it answers, its [`Verdict`],
//! and the grant and retry rules every algorithm shares ([`grant`]).
//!
//! An algorithm only answers two questions: what would this request get (`evaluate`, which
//! never mutates), and apply a grant (`commit`). The rules around them (per-key monotonic time,
//! `DEDUP`, `PEEK`, when to write) are `core::flow`'s, the same for every algorithm.

use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
use crate::core::time::{Micros, ceil_ms};
use crate::core::varint::Reader;

/// One request against one limiter, with every shared option resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Units to consume (`COST`, default 1). Zero reports the state and changes nothing.
    pub cost: u64,
    /// Compute the reply as if the request were made, change nothing.
    pub peek: bool,
    /// `SHADOW`: evaluate and charge exactly as enforced, but let the call through (the reply
    /// grants the cost: [`Request::reply`]). Nothing else depends on it: the state a call
    /// leaves is the same with or without it.
    pub shadow: bool,
    /// Grant what is available (maybe less than `cost`) instead of denying.
    pub best_effort: bool,
    /// Idempotency token, hashed.
    pub dedup: Option<DedupId>,
    /// Evaluation time (the server's clock or `AT`).
    pub now: Micros,
    /// `BLOCK d`: when the call is denied, block the key for `d` µs from `now`.
    pub block: Option<Micros>,
    /// `DELAY d`: a call that would be denied but is allowed within `d` µs is granted now as a
    /// reservation of that moment (algorithms with [`Algorithm::DELAY`]).
    pub delay: Option<Micros>,
    /// `HOLD ttl`: the units granted are a reservation under `dedup`, given back if not
    /// settled (RL.SETTLE) within `ttl` µs.
    pub hold: Option<Micros>,
}

impl Request {
    /// A plain request of `cost` units at `now`.
    pub fn new(cost: u64, now: Micros) -> Self {
        Request {
            cost,
            peek: false,
            shadow: false,
            best_effort: false,
            dedup: None,
            now,
            block: None,
            delay: None,
            hold: None,
        }
    }

    /// The reply of this call when enforcement replies `enforced` for `reason` (the call's
    /// reason, [`Reason::of_call`]): that reply, or under `SHADOW` ([`shadow`]) the call let
    /// through.
    #[inline(always)]
    pub fn reply(&self, enforced: Verdict, reason: Reason) -> (Verdict, Reason) {
        if self.shadow {
            shadow(enforced, reason, self.cost)
        } else {
            (enforced, reason)
        }
    }
}

/// `SHADOW` (SPEC "Conventions", "The detailed reply"): the reply of a call of `cost` units
/// that enforcement answers `enforced` for `reason`, let through whatever the reason. A call
/// enforcement grants in full keeps its reply (its retry is a leaky bucket's queue delay or a
/// `DELAY`'s wait, which the caller still needs). Any other is granted the cost with no wait:
/// `granted` = `cost`, retry 0, the limit, remaining and reset of the state after the call as
/// enforcement replies them; its reason is [`Reason::Shadow`] when enforcement denies it, else
/// (a `BESTEFFORT` call granted in part) [`Reason::Granted`].
#[cold]
pub fn shadow(enforced: Verdict, reason: Reason, cost: u64) -> (Verdict, Reason) {
    if !shadow_changes(&enforced, reason, cost) {
        return (enforced, reason);
    }
    let verdict = Verdict {
        granted: cost,
        retry: Retry::Granted,
        ..enforced
    };
    let reason = match reason {
        Reason::Granted => Reason::Granted,
        _ => Reason::Shadow,
    };
    (verdict, reason)
}

/// Whether [`shadow`] changes enforcement's reply `enforced` for `reason` to a call of `cost`
/// units: unless enforcement grants it in full.
#[inline(always)]
pub fn shadow_changes(enforced: &Verdict, reason: Reason, cost: u64) -> bool {
    reason != Reason::Granted || enforced.granted < cost
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

/// A value RL.INFO shows that is no count: a signed integer or a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoValue {
    Int(i64),
    Text(String),
}

/// What `RL.REFUND` does with an algorithm's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refund {
    /// Gives units back through [`Algorithm::refund`].
    Units,
    /// Refused: units come back through this other command (`RL.RELEASE`), named in the error.
    Via(&'static str),
}

/// A rate-limiting algorithm over its own state type.
///
/// `evaluate` and `commit` must agree: committing `evaluate(..).granted` units at the same `now`
/// with the same params yields the state the verdict described.
pub trait Algorithm: Sized + Clone {
    /// Validated parameters, as given on the command line.
    type Params: Clone + PartialEq + std::fmt::Debug;

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
    /// Never fails, and changes nothing before it could fail, when `evaluate` at the same `now`
    /// under the same `params` granted at least `granted`: `evaluate` checks every computation
    /// `commit` makes. That is what lets RL.ALL evaluate every key, then commit every key.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] only if that contract is broken.
    fn commit(&mut self, params: &Self::Params, now: Micros, granted: u64)
    -> Result<(), CoreError>;

    /// Whether `DELAY d` applies: a request allowed later may be granted now as a reservation
    /// of that moment ([`Self::reserve`], [`Self::commit_reserved`]). The schedule algorithms
    /// (GCRA, token and leaky bucket) say so.
    const DELAY: bool = false;

    /// `DELAY`: the verdict of `cost` units granted at `now` as a reservation of the later time
    /// `at`, a time at which `evaluate` grants them: charged as the algorithm charges them at
    /// `at` (the state converted to `params` at `now`, as for any call), seen from `now`
    /// (`remaining`, `reset_after`), its retry the wait before acting on them. Only called
    /// when [`Self::DELAY`].
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the units do not fit at `at` or the algorithm has no
    /// `DELAY`; [`CoreError::StateTooLong`] when the charged state would be fresh again more
    /// than [`MAX_SPAN`](crate::core::time::MAX_SPAN) after `now`.
    fn reserve(
        &self,
        _params: &Self::Params,
        _now: Micros,
        _at: Micros,
        _cost: u64,
    ) -> Result<Verdict, CoreError> {
        Err(CoreError::Overflow)
    }

    /// Charge `granted` units reserved for `at` by [`Self::reserve`] at `now`, adopting
    /// `params`. Never fails, and changes nothing, when `reserve` at the same times and
    /// `params` succeeded.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] only if that contract is broken.
    fn commit_reserved(
        &mut self,
        _params: &Self::Params,
        _now: Micros,
        _at: Micros,
        _granted: u64,
    ) -> Result<(), CoreError> {
        Err(CoreError::Overflow)
    }

    /// Whether `RL.REFUND` gives units back to this algorithm (then `refund` must be written:
    /// `registry_is_complete`, in `commands::limiters::registry`, fails for an algorithm whose refund
    /// gives nothing back) or names another command.
    const REFUND: Refund = Refund::Units;

    /// Give back up to `units` at `now`, under the stored parameters (SPEC's RL.REFUND): never
    /// fresher than fresh, and only units that still count at `now`. Returns the units given
    /// back. Changes nothing when it fails.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the numbers do not fit (not with validated parameters).
    fn refund(&mut self, _now: Micros, _units: u64) -> Result<u64, CoreError> {
        Ok(0)
    }

    /// RL.SETTLE above a reservation: charge `units` at `now` under the stored parameters
    /// **unconditionally**, beyond the limit if need be (debt, repaid as the algorithm frees
    /// units: the module docs of each algorithm say how). By default a [`Self::commit`] of the
    /// stored parameters, which never checks the limit. Changes nothing when it fails; the
    /// caller refuses a result that is not [`Self::valid_at`] `now`.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the units do not fit the state's numbers.
    fn charge_debt(&mut self, now: Micros, units: u64) -> Result<(), CoreError> {
        let params = self.params().clone();
        let mut after = self.clone();
        after.commit(&params, now, units)?;
        *self = after;
        Ok(())
    }

    /// When the limiter is back to its fresh state, if nothing else happens (the key's expiry).
    fn fresh_at(&self) -> Micros;

    /// Until when a `DEDUP` id first seen at `now` is remembered.
    fn dedup_until(params: &Self::Params, now: Micros) -> Micros;

    /// The time over which the limit applies, in µs (SPEC's `window_ms` under `DETAIL`, the
    /// IETF RateLimit-Policy `w`): the window of a windowed algorithm, the time a fully used
    /// schedule takes to become fresh; 0 (the default) where no time applies.
    fn window(_params: &Self::Params, _now: Micros) -> Micros {
        0
    }

    /// Until when a `DEDUP` id is remembered once this state was charged at `now` under
    /// `params`: [`Self::dedup_until`] unless the state knows it already.
    fn remember_until(&self, params: &Self::Params, now: Micros) -> Micros {
        Self::dedup_until(params, now)
    }

    /// Parameter names and values, for RL.INFO.
    fn describe(params: &Self::Params) -> Vec<(&'static str, u64)>;

    /// More of the state for RL.INFO at `now`, values that are no count (a calendar window's
    /// zone, its boundaries); none by default.
    fn describe_more(&self, _now: Micros) -> Vec<(&'static str, InfoValue)> {
        Vec::new()
    }

    /// Names and values of the live state at `now`, for RL.INFO (a concurrency limiter's live
    /// leases); none by default.
    fn describe_live(&self, _now: Micros) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Whether [`Self::bind_call`] can change the parameters (it does only where it is
    /// overridden): RL.ALL leaves the others as parsed.
    const BINDS_CALL: bool = false;

    /// Fit `params` parsed inside RL.ALL to the call's shared options (a concurrency limiter
    /// takes its lease id from `DEDUP`); nothing to do by default.
    ///
    /// # Errors
    /// [`CoreError::Refused`] when the algorithm cannot take the call as given.
    fn bind_call(
        _params: &mut Self::Params,
        _dedup: Option<DedupId>,
        _best_effort: bool,
    ) -> Result<(), CoreError> {
        Ok(())
    }

    /// Bytes on the heap beyond the state itself (for `MEMORY USAGE`).
    fn heap_size(&self) -> usize {
        0
    }

    /// Append the state to `out` (the codec's per-algorithm part).
    fn encode(&self, out: &mut Vec<u8>);

    /// Bytes `encode` writes, when known without encoding (a state that can grow long says it,
    /// so a value too long to replicate as itself is not encoded to find out); `None` if not.
    fn known_encoded_len(&self) -> Option<usize> {
        None
    }

    /// Read the state written by `encode`.
    ///
    /// # Errors
    /// `None` on a truncated or invalid payload.
    fn decode(input: &mut Reader<'_>) -> Option<Self>;

    /// Whether the state is one the algorithm could have written by `last_update` (the key's
    /// last update, at most [`MAX_TIME`](crate::core::time::MAX_TIME)): every time it holds
    /// and every count within the ranges its arithmetic assumes, so that every command and
    /// RL.INFO work on it at any time from `last_update` on. The codec refuses a payload whose
    /// state is not (`LimiterState::is_valid`).
    fn valid_at(&self, last_update: Micros) -> bool;
}

/// The grant rule of every algorithm: all of `cost` if it fits in the `avail` units, else with
/// `BESTEFFORT` what is available, else nothing.
pub fn grant(cost: u64, avail: u64, best_effort: bool) -> u64 {
    if cost <= avail {
        cost
    } else if best_effort {
        avail
    } else {
        0
    }
}

/// The retry rule of every algorithm: [`Retry::Granted`] when all of `cost` was granted,
/// [`Retry::Never`] when `cost` is above the `limit`, else after the exact wait `wait` computes
/// (on the state after this call's grant).
///
/// # Errors
/// `wait`'s.
pub fn retry(
    granted: u64,
    cost: u64,
    limit: u64,
    wait: impl FnOnce() -> Result<Micros, CoreError>,
) -> Result<Retry, CoreError> {
    if granted == cost {
        Ok(Retry::Granted)
    } else if cost > limit {
        Ok(Retry::Never)
    } else {
        wait().map(Retry::After)
    }
}

/// The reply on a key blocked until `until`: denied, nothing remaining, retry when the block
/// has ended and the limiter would grant the request (`asked`, evaluated for its cost), or
/// never; fresh when the block has ended and the limiter is fresh (`current`, cost 0).
pub fn blocked(asked: Verdict, current: Verdict, cost: u64, until: Micros, now: Micros) -> Verdict {
    let left = until.saturating_sub(now);
    let retry = match asked.retry {
        Retry::Never => Retry::Never,
        _ if asked.granted == cost => Retry::After(left),
        Retry::After(wait) => Retry::After(wait.max(left)),
        Retry::Granted => Retry::After(left),
    };
    Verdict {
        granted: 0,
        limit: current.limit,
        remaining: 0,
        retry,
        reset_after: current.reset_after.max(left),
    }
}

/// Why a limiter denied a call (SPEC "The detailed reply": `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// Not denied.
    Granted,
    /// The limit: the units are not available now.
    Limit,
    /// The key is blocked.
    Blocked,
    /// The cost is above the limit: it can never be granted.
    Never,
    /// A call's reason, never a limiter's: enforcement denies the call (for any of the reasons
    /// above), `SHADOW` let it through ([`shadow`]).
    Shadow,
}

impl Reason {
    /// The name in the reply.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::Granted => "granted",
            Reason::Limit => "limit",
            Reason::Blocked => "blocked",
            Reason::Never => "never",
            Reason::Shadow => "shadow",
        }
    }

    /// The call's reason and the index of the limiter that denied it: among the limiters'
    /// reasons (in key order), `never` if any, else `blocked` if any, else `limit` if any (the
    /// first limiter with it), else granted (no denier).
    pub fn of_call(reasons: impl IntoIterator<Item = Reason>) -> (Reason, Option<usize>) {
        let mut worst = (Reason::Granted, None);
        for (i, r) in reasons.into_iter().enumerate() {
            if r > worst.0 {
                worst = (r, Some(i));
            }
        }
        worst
    }
}

#[cfg(test)]
mod reason_tests {
    use super::Reason::{self, *};

    #[test]
    fn call_reason_is_never_then_blocked_then_limit_first_in_key_order() {
        type Case = (&'static [Reason], (Reason, Option<usize>));
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // limiters' reasons, in key order       call's reason, denier
            (&[],                                    (Granted, None)),
            (&[Granted, Granted],                    (Granted, None)),
            (&[Granted, Limit, Limit],               (Limit, Some(1))),
            (&[Limit, Blocked, Blocked],             (Blocked, Some(1))),
            (&[Blocked, Limit, Never, Never],        (Never, Some(2))),
            (&[Never, Blocked],                      (Never, Some(0))),
        ];
        for (reasons, want) in cases {
            assert_eq!(
                Reason::of_call(reasons.iter().copied()),
                *want,
                "{reasons:?}"
            );
        }
    }
}
