//! RL.ALL: several limiters on one request, all or nothing.
//!
//! Every key is evaluated without changing anything; only if all of them grant the request
//! (with `BESTEFFORT`: the smallest amount all can grant) and every charge is evaluated is any
//! key charged. So "10 per second and 1000 per hour" never over-charges the first limiter when
//! the second denies, as calling the commands one after another does. The per-key rules are
//! `core::flow`'s, the same as the single-limiter commands'.

use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
pub use crate::core::few::Few;
pub use crate::core::flow::Slot;
use crate::core::flow::{self, Judged, Settle};
use crate::core::kind::Kind;
use crate::core::limiter::{Reason, Request, Retry, Verdict};
use crate::core::state::{AlgoState, LimiterState, Stored, dispatch};
use crate::core::time::Micros;

/// The parameters of any one limiter: a fresh limiter of its algorithm, which carries them (so
/// a new algorithm needs nothing here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnyParams(AlgoState);

impl AnyParams {
    /// The parameters `params` of algorithm `A`.
    pub fn of<A: Stored>(params: &A::Params) -> Self {
        AnyParams(A::fresh(params).into_state())
    }

    /// The algorithm.
    pub fn kind(&self) -> Kind {
        self.0.kind()
    }

    /// Whether the algorithm fits its parameters to the call's shared options
    /// ([`crate::core::limiter::Algorithm::BINDS_CALL`]): [`Self::bind_call`] changes nothing
    /// otherwise.
    pub fn binds_call(&self) -> bool {
        dispatch!(&self.0, spec => binds_like(spec))
    }

    /// These parameters fitted to the call's shared options ([`crate::core::limiter::Algorithm::bind_call`]).
    ///
    /// # Errors
    /// [`CoreError::Refused`] from the algorithm.
    pub fn bind_call(
        self,
        dedup: Option<DedupId>,
        best_effort: bool,
    ) -> Result<AnyParams, CoreError> {
        if !dispatch!(&self.0, spec => binds_like(spec)) {
            return Ok(self);
        }
        dispatch!(&self.0, spec => bind_like(spec, dedup, best_effort))
    }

    /// The time over which the limit applies at `now`
    /// ([`crate::core::limiter::Algorithm::window`]).
    pub fn window(&self, now: Micros) -> Micros {
        dispatch!(&self.0, spec => window_like(spec, now))
    }

    /// A fresh limiter with these parameters, borrowed (its `params()` are these).
    pub fn state(&self) -> &AlgoState {
        &self.0
    }

    /// A fresh limiter with these parameters.
    pub fn into_state(self) -> AlgoState {
        self.0
    }

    /// [`flow::judge`] on the key's value (`None`: missing), for `cost` units of this limiter.
    ///
    /// # Errors
    /// [`CoreError::WrongKind`] if the key holds another algorithm; [`CoreError::Overflow`].
    pub fn judge(
        &self,
        state: Option<&LimiterState>,
        now: Micros,
        cost: u64,
        best_effort: bool,
        dedup: Option<DedupId>,
    ) -> Result<Judged, CoreError> {
        dispatch!(&self.0, spec => judge_like(spec, state, now, cost, best_effort, dedup))
    }

    /// Whether the algorithm takes `DELAY` ([`crate::core::limiter::Algorithm::DELAY`]).
    pub fn delays(&self) -> bool {
        dispatch!(&self.0, spec => delays_like(spec))
    }

    /// Whether the algorithm's units can be settled (`HOLD`, RL.SETTLE): it takes refunds.
    pub fn settles(&self) -> bool {
        dispatch!(&self.0, spec => settles_like(spec))
    }

    /// [`flow::allowed_at`] on the key.
    fn allowed_at(
        &self,
        state: Option<&LimiterState>,
        j: &Judged,
    ) -> Result<Option<Micros>, CoreError> {
        dispatch!(&self.0, spec => allowed_at_like(spec, state, j))
    }

    /// [`flow::reserve`] on the key.
    fn reserve(
        &self,
        state: Option<&LimiterState>,
        j: Judged,
        at: Micros,
    ) -> Result<Judged, CoreError> {
        dispatch!(&self.0, spec => reserve_like(spec, state, j, at))
    }

    /// [`flow::can_charge`] on the key.
    fn can_charge(
        &self,
        state: Option<&LimiterState>,
        j: &Judged,
        amount: u64,
    ) -> Result<(), CoreError> {
        dispatch!(&self.0, spec => can_charge_like(spec, state, j, amount))
    }

    /// [`flow::settle`] on the key.
    fn settle(
        &self,
        slot: &mut Slot<'_>,
        now: Micros,
        action: Settle,
        remember: flow::Remember,
        dedup_max: usize,
    ) -> Result<Option<Micros>, CoreError> {
        dispatch!(&self.0, spec => settle_like(spec, slot, now, action, remember, dedup_max))
    }

    /// The key's part of RL.ALL's reply after the call: its state at `now` (cost 0, a block
    /// honoured), with the retry for its full `cost` from that state, or `retry` when given (the
    /// retry of a call granted in full: 0, or a leaky bucket's queue delay).
    fn after(
        &self,
        state: Option<&LimiterState>,
        now: Micros,
        cost: u64,
        retry: Option<Retry>,
    ) -> Result<Verdict, CoreError> {
        let current = self.judge(state, now, 0, false, None)?.verdict;
        let retry = match retry {
            Some(r) => r,
            None => {
                let full = self.judge(state, now, cost, false, None)?;
                // A blocked key denies even `COST 0`: its retry is the block's.
                if full.blocked.is_some() {
                    full.verdict.retry
                } else {
                    retry_for_full_cost(&full.verdict, cost)
                }
            }
        };
        Ok(Verdict { retry, ..current })
    }
}

/// [`flow::judge`] for `spec`'s algorithm (the type is inferred from `spec`).
fn judge_like<A: Stored>(
    spec: &A,
    state: Option<&LimiterState>,
    now: Micros,
    cost: u64,
    best_effort: bool,
    dedup: Option<DedupId>,
) -> Result<Judged, CoreError> {
    flow::judge::<A>(state, spec.params(), now, cost, best_effort, dedup)
}

/// [`crate::core::limiter::Algorithm::window`] for `spec`'s algorithm at `now`.
fn window_like<A: Stored>(spec: &A, now: Micros) -> Micros {
    A::window(spec.params(), now)
}

/// [`AnyParams::delays`] for `spec`'s algorithm.
fn delays_like<A: Stored>(_spec: &A) -> bool {
    A::DELAY
}

/// [`AnyParams::settles`] for `spec`'s algorithm.
fn settles_like<A: Stored>(_spec: &A) -> bool {
    A::REFUND == crate::core::limiter::Refund::Units
}

/// [`flow::allowed_at`] for `spec`'s algorithm.
fn allowed_at_like<A: Stored>(
    spec: &A,
    state: Option<&LimiterState>,
    j: &Judged,
) -> Result<Option<Micros>, CoreError> {
    flow::allowed_at::<A>(state, spec.params(), j)
}

/// [`flow::reserve`] for `spec`'s algorithm.
fn reserve_like<A: Stored>(
    spec: &A,
    state: Option<&LimiterState>,
    j: Judged,
    at: Micros,
) -> Result<Judged, CoreError> {
    flow::reserve::<A>(state, spec.params(), j, at)
}

/// [`flow::can_charge`] for `spec`'s algorithm.
fn can_charge_like<A: Stored>(
    spec: &A,
    state: Option<&LimiterState>,
    j: &Judged,
    amount: u64,
) -> Result<(), CoreError> {
    flow::can_charge::<A>(state, spec.params(), j, amount)
}

/// [`flow::settle`] for `spec`'s algorithm.
fn settle_like<A: Stored>(
    spec: &A,
    slot: &mut Slot<'_>,
    now: Micros,
    action: Settle,
    remember: flow::Remember,
    dedup_max: usize,
) -> Result<Option<Micros>, CoreError> {
    flow::settle::<A>(slot, spec.params(), now, action, remember, dedup_max)
}

/// [`crate::core::limiter::Algorithm::BINDS_CALL`] for `spec`'s algorithm.
fn binds_like<A: Stored>(_spec: &A) -> bool {
    A::BINDS_CALL
}

/// [`AnyParams::bind_call`] for `spec`'s algorithm.
fn bind_like<A: Stored>(
    spec: &A,
    dedup: Option<DedupId>,
    best_effort: bool,
) -> Result<AnyParams, CoreError> {
    let mut params = spec.params().clone();
    A::bind_call(&mut params, dedup, best_effort)?;
    Ok(AnyParams::of::<A>(&params))
}

/// One limiter's part of an RL.ALL call (SPEC "The detailed reply": its entry in `limiters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterDetail {
    /// The units asked of this limiter (its `CHARGE`, else the call's `COST`).
    pub cost: u64,
    /// Its reply after the call: `granted` the units charged to it (or remembered for the
    /// call's `DEDUP` id), the rest as in the merged reply, for its own cost.
    pub verdict: Verdict,
    /// The time the call was evaluated at on its key ([`Judged::now`]): its window
    /// ([`AnyParams::window`]) is found from it when a detailed reply asks.
    pub now: Micros,
    /// Why it denied the call ([`Judged::reason`]).
    pub reason: Reason,
}

/// The result of an RL.ALL call: the combined reply, and for each key whether it was written
/// and its new expiry.
#[derive(Debug)]
pub struct MultiOutcome {
    pub verdict: Verdict,
    /// Per key, in order: `Some(expiry)` when the key was written (a `Slot::New` then holds the
    /// value to store).
    pub writes: Few<Option<Micros>>,
    /// A key is blocked (it denied the call, or `BLOCK d` blocked it).
    pub blocked: bool,
    /// Per key, in order: its part of the call.
    pub limiters: Few<LimiterDetail>,
    /// Why the call was denied ([`Reason::of_call`]), and the index of the key that denied it.
    pub reason: Reason,
    pub denied_by: Option<usize>,
}

/// Why RL.ALL refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiError {
    /// Key number `index` holds another algorithm.
    WrongKind {
        index: usize,
        held: Kind,
        wanted: Kind,
    },
    Core(CoreError),
}

impl From<CoreError> for MultiError {
    fn from(e: CoreError) -> Self {
        MultiError::Core(e)
    }
}

/// Combine per-limiter verdicts (each for its own cost in `costs`) into the one reply: the
/// limit and remaining of the limiter that allows the fewest more calls of the same shape (the
/// smallest `floor(remaining / cost)`, limiters of cost 0 left out; then the fewest remaining;
/// then the first), the largest retry (never if any is never) and reset.
fn combine<'v>(
    granted: u64,
    verdicts: impl Iterator<Item = &'v Verdict> + Clone,
    costs: &[u64],
) -> Verdict {
    let tightest = verdicts
        .clone()
        .zip(costs)
        .min_by_key(|(v, c)| {
            (
                **c == 0,
                v.remaining.checked_div(**c).unwrap_or(0),
                v.remaining,
            )
        })
        .map(|(v, _)| v)
        .copied()
        .unwrap_or(Verdict {
            granted: 0,
            limit: 0,
            remaining: 0,
            retry: Retry::Granted,
            reset_after: 0,
        });
    let mut retry = Retry::Granted;
    let mut reset_after = 0;
    for v in verdicts {
        retry = match (retry, v.retry) {
            (Retry::Never, _) | (_, Retry::Never) => Retry::Never,
            (Retry::After(a), Retry::After(b)) => Retry::After(a.max(b)),
            (Retry::After(a), Retry::Granted) | (Retry::Granted, Retry::After(a)) => {
                Retry::After(a)
            }
            (Retry::Granted, Retry::Granted) => Retry::Granted,
        };
        reset_after = reset_after.max(v.reset_after);
    }
    Verdict {
        granted,
        limit: tightest.limit,
        remaining: tightest.remaining,
        retry,
        reset_after,
    }
}

/// One limiter's wait before the full `cost` is granted, from the verdict of evaluating it
/// (without BESTEFFORT): 0 when it would grant now (a leaky bucket's queue delay is the wait of
/// a granted request, not a wait before granting).
fn retry_for_full_cost(v: &Verdict, cost: u64) -> Retry {
    if v.granted == cost {
        Retry::Granted
    } else {
        v.retry
    }
}

/// The amount the call grants and the amount each key is charged ([`Amounts::of`]): with
/// `BESTEFFORT` the least any key grants (every key is asked the same cost), else the call's
/// cost and each key's own cost if every key grants it (a blocked key grants nothing, not even
/// 0 units), else nothing.
fn choose(req: &Request, judged: &[Judged]) -> (u64, Amounts) {
    if req.best_effort {
        let least = judged.iter().map(|j| j.verdict.granted).min().unwrap_or(0);
        (least, Amounts::Each(least))
    } else if judged
        .iter()
        .all(|j| j.blocked.is_none() && j.verdict.granted == j.cost)
    {
        // A blocked key denies even a charge of 0.
        (req.cost, Amounts::Own)
    } else {
        (0, Amounts::Each(0))
    }
}

/// The amount each key is charged ([`choose`]).
#[derive(Debug, Clone, Copy)]
enum Amounts {
    /// The same amount on every key.
    Each(u64),
    /// Each key its own cost.
    Own,
}

impl Amounts {
    /// The amount of the key judged `j`.
    fn of(self, j: &Judged) -> u64 {
        match self {
            Amounts::Each(n) => n,
            Amounts::Own => j.cost,
        }
    }
}

/// Judge every key ([`AnyParams::judge`]); a key holding another algorithm is reported before
/// any other error, naming the first such key.
///
/// The judgments are pushed onto `judged` (empty, owned by the caller): a returned list would
/// be moved, whole, on its way out.
#[inline(always)]
fn judge_all(
    judged: &mut Few<Judged>,
    slots: &[Slot<'_>],
    specs: &[AnyParams],
    charges: &[u64],
    req: &Request,
) -> Result<(), MultiError> {
    let mut failed: Option<CoreError> = None;
    for (index, ((slot, spec), &cost)) in slots.iter().zip(specs).zip(charges).enumerate() {
        match spec.judge(slot.state(), req.now, cost, req.best_effort, req.dedup) {
            Ok(j) => judged.push(j),
            Err(CoreError::WrongKind { held, wanted }) => {
                return Err(MultiError::WrongKind {
                    index,
                    held,
                    wanted,
                });
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// `DELAY d` on RL.ALL: when the call is not granted in full now but every key grants its full
/// cost by a time `at` within `d` of each key's evaluation time (`at` the latest of the times
/// each key allows it: the moment the whole request is allowed), every key is judged as
/// granting it now as a reservation of `at`. Otherwise `judged` is left as it is.
fn delay_all(
    slots: &[Slot<'_>],
    specs: &[AnyParams],
    judged: &mut [Judged],
    d: Micros,
) -> Result<(), CoreError> {
    if judged.iter().all(|j| j.verdict.granted == j.cost) {
        return Ok(());
    }
    let mut at = 0;
    for ((slot, spec), j) in slots.iter().zip(specs).zip(judged.iter()) {
        match spec.allowed_at(slot.state(), j)? {
            Some(t) => at = at.max(t),
            None => return Ok(()),
        }
    }
    if judged.iter().any(|j| at.saturating_sub(j.now) > d) {
        return Ok(());
    }
    let reserved = slots
        .iter()
        .zip(specs)
        .zip(judged.iter())
        .map(|((slot, spec), j)| spec.reserve(slot.state(), *j, at))
        .collect::<Result<Few<_>, _>>()?;
    judged.copy_from_slice(&reserved);
    Ok(())
}

/// Run `req` against every limiter: `slots[i]` is the value of key `i`, `specs[i]` its
/// parameters, each asked the call's cost. Slots of missing keys must be `Slot::New(None)`; a
/// granted call fills them. As [`apply_charged`] with every charge the call's cost.
///
/// # Errors
/// As [`apply_charged`].
pub fn apply_all(
    slots: &mut [Slot<'_>],
    specs: &[AnyParams],
    req: &Request,
    dedup_max: usize,
) -> Result<MultiOutcome, MultiError> {
    let charges: Few<u64> = Few::from_elem(req.cost, specs.len());
    apply_charged(slots, specs, &charges, req, dedup_max)
}

/// Run `req` against every limiter, key `i` asked `charges[i]` units (SPEC's `CHARGE n`): the
/// call is granted only if every key grants its own charge, and then every key is charged its
/// own; otherwise nothing is charged. The reply's `granted` is the call's cost (`BESTEFFORT`:
/// the least any key grants, which needs every charge equal to the call's cost).
///
/// Every key is judged ([`flow::judge`]) before any changes; then the amounts are chosen, every
/// key is settled ([`flow::settle`]) and the replies are combined.
///
/// # Errors
/// [`MultiError::WrongKind`] naming the key; [`CoreError::Overflow`]; [`CoreError::Refused`]
/// for `BESTEFFORT` with a charge other than the call's cost, or fewer charges than keys.
/// Nothing is changed then.
#[inline(always)]
pub fn apply_charged(
    slots: &mut [Slot<'_>],
    specs: &[AnyParams],
    charges: &[u64],
    req: &Request,
    dedup_max: usize,
) -> Result<MultiOutcome, MultiError> {
    let due = slots.iter().any(|slot| match slot {
        Slot::Existing(s) => s.extras.hold_due(s.clock(req.now)),
        Slot::New(_) => false,
    });
    if due {
        return apply_caught_up(slots, specs, charges, req, dedup_max);
    }
    apply_now(slots, specs, charges, req, dedup_max)
}

/// [`apply_charged`] when a key has reservations ended unsettled: the call runs on copies of
/// those keys that gave their units back (`LimiterState::caught_up`), and a copy becomes the
/// key's value only when the call writes that key (as `flow::apply` does for one key).
#[cold]
#[inline(never)]
fn apply_caught_up(
    slots: &mut [Slot<'_>],
    specs: &[AnyParams],
    charges: &[u64],
    req: &Request,
    dedup_max: usize,
) -> Result<MultiOutcome, MultiError> {
    let mut copies = slots
        .iter()
        .map(|slot| match slot.state() {
            Some(s) => s.caught_up(req.now),
            None => Ok(None),
        })
        .collect::<Result<Few<_>, _>>()?;
    let mut inner: Few<Slot<'_>> = slots
        .iter_mut()
        .zip(copies.iter_mut())
        .map(|(slot, copy)| match (copy, slot) {
            (Some(copy), _) => Slot::Existing(copy),
            (None, Slot::Existing(s)) => Slot::Existing(s),
            (None, Slot::New(n)) => Slot::New(n.take()),
        })
        .collect();
    let outcome = apply_now(&mut inner, specs, charges, req, dedup_max);
    let created: Few<Option<Option<LimiterState>>> = inner
        .into_iter()
        .map(|slot| match slot {
            Slot::New(n) => Some(n),
            Slot::Existing(_) => None,
        })
        .collect();
    for (slot, new) in slots.iter_mut().zip(created) {
        if let (Slot::New(n), Some(new)) = (slot, new) {
            *n = new;
        }
    }
    let outcome = outcome?;
    for ((slot, copy), written) in slots.iter_mut().zip(copies).zip(&outcome.writes) {
        if let (Slot::Existing(s), Some(copy), Some(_)) = (slot, copy, written) {
            **s = copy;
        }
    }
    Ok(outcome)
}

/// [`apply_charged`] on keys without reservations to give back.
fn apply_now(
    slots: &mut [Slot<'_>],
    specs: &[AnyParams],
    charges: &[u64],
    req: &Request,
    dedup_max: usize,
) -> Result<MultiOutcome, MultiError> {
    if charges.len() != specs.len() || slots.len() != specs.len() {
        return Err(CoreError::Refused("every key needs one limiter").into());
    }
    if req.best_effort && charges.iter().any(|&c| c != req.cost) {
        return Err(CoreError::Refused(BESTEFFORT_CHARGES).into());
    }
    let mut judged: Few<Judged> = Few::with_capacity(slots.len());
    judge_all(&mut judged, slots, specs, charges, req)?;
    if let Some(d) = req.delay {
        delay_all(slots, specs, &mut judged, d)?;
    }
    let (reason, denied_by) = Reason::of_call(judged.iter().map(Judged::reason));
    let blocked = judged.iter().any(|j| j.blocked.is_some());
    // A remembered id on any key (none blocked): nothing is charged again.
    if let Some(granted) = judged
        .iter()
        .find_map(|j| j.remembered)
        .filter(|_| !blocked)
    {
        return remembered_all(slots, specs, charges, req, &judged, granted);
    }
    let (granted, amounts) = choose(req, &judged);
    // What each key does: charged its amount (which every key can be, checked before any key
    // changes), or, when denied, blocked by `BLOCK d` if it denied.
    // (Found again when each key is settled: it is a function of the key's judgment.)
    let mut placed = false;
    for ((slot, spec), j) in slots.iter().zip(specs).zip(&judged) {
        let action = j.settles(req, amounts.of(j));
        if let Settle::Charge(n) = action {
            spec.can_charge(slot.state(), j, n)?;
        }
        if matches!(action, Settle::Charge(_) | Settle::Reserve(..))
            && !req.peek
            && !flow::can_remember(slot.state(), flow::Remember::of(req), dedup_max)
        {
            return Err(CoreError::Refused(flow::TOO_MANY_HOLDS).into());
        }
        placed |= matches!(action, Settle::Block(_));
    }
    // Settle every key (a copy when peeking), then read each key's reply from its state after.
    let mut limiters: Few<LimiterDetail> = Few::with_capacity(judged.len());
    let mut writes: Few<Option<Micros>> = Few::with_capacity(judged.len());
    for ((slot, spec), j) in slots.iter_mut().zip(specs).zip(&judged) {
        let amount = amounts.of(j);
        let action = j.settles(req, amount);
        let part = |verdict: Verdict| LimiterDetail {
            cost: j.cost,
            verdict: Verdict {
                granted: amount,
                ..verdict
            },
            now: j.now,
            reason: j.reason(),
        };
        // A key charged its whole cost as judged replies what it was judged to (as its own
        // command does): the state after the charge is the one its verdict describes.
        let whole = amount > 0 && amount == j.cost && amount == j.verdict.granted;
        if whole && matches!(action, Settle::Charge(_) | Settle::Reserve(..)) {
            // A `PEEK` changes nothing, as its own command's does.
            let written = match req.peek {
                true => None,
                false => spec.settle(slot, j.now, action, flow::Remember::of(req), dedup_max)?,
            };
            limiters.push(part(j.verdict));
            writes.push(written);
            continue;
        }
        let mut copy;
        let target: &mut Slot<'_> = if req.peek && action != Settle::Keep {
            copy = Slot::New(slot.state().cloned());
            &mut copy
        } else {
            slot
        };
        let written = spec.settle(target, j.now, action, flow::Remember::of(req), dedup_max)?;
        let full = (amount > 0 && amount == j.cost).then_some(j.verdict.retry);
        limiters.push(part(spec.after(target.state(), j.now, j.cost, full)?));
        writes.push(written.filter(|_| !req.peek));
    }
    Ok(MultiOutcome {
        verdict: combine(granted, limiters.iter().map(|l| &l.verdict), charges),
        writes,
        blocked: blocked || placed,
        limiters,
        reason,
        denied_by,
    })
}

/// [`apply_now`] when a key remembers the call's `DEDUP` id (`granted`, the first such key's
/// grant) and none is blocked: nothing is charged again, each key replies as it is now.
#[cold]
#[inline(never)]
fn remembered_all(
    slots: &[Slot<'_>],
    specs: &[AnyParams],
    charges: &[u64],
    req: &Request,
    judged: &[Judged],
    granted: u64,
) -> Result<MultiOutcome, MultiError> {
    let mut limiters: Few<LimiterDetail> = Few::with_capacity(judged.len());
    for ((slot, spec), j) in slots.iter().zip(specs).zip(judged) {
        let verdict = spec.after(slot.state(), j.now, j.cost, Some(Retry::Granted))?;
        limiters.push(LimiterDetail {
            cost: j.cost,
            verdict: Verdict {
                granted: j.remembered.unwrap_or(0),
                ..verdict
            },
            now: j.now,
            reason: j.reason(),
        });
    }
    // The call's grant: the remembered one when every key was asked the call's cost (a
    // BESTEFFORT call may have been granted less), else the call's cost.
    let granted = if charges.iter().all(|&c| c == req.cost) {
        granted
    } else {
        req.cost
    };
    Ok(MultiOutcome {
        verdict: combine(granted, limiters.iter().map(|l| &l.verdict), charges),
        writes: Few::from_elem(None, slots.len()),
        blocked: false,
        limiters,
        reason: Reason::Granted,
        denied_by: None,
    })
}

/// Why RL.ALL refuses `BESTEFFORT` with unequal charges.
pub const BESTEFFORT_CHARGES: &str = "BESTEFFORT does not apply to a CHARGE other than COST";

#[cfg(test)]
#[path = "multi_tests.rs"]
mod tests;
