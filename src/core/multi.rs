//! RL.ALL: several limiters on one request, all or nothing.
//!
//! Every key is evaluated without changing anything; only if all of them grant the request
//! (with `BESTEFFORT`: the smallest amount all can grant) and every charge is evaluated is any
//! key charged. So "10 per second and 1000 per hour" never over-charges the first limiter when
//! the second denies, as calling the commands one after another does. The per-key rules are
//! `core::flow`'s, the same as the single-limiter commands'.

use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
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

    /// These parameters fitted to the call's shared options ([`crate::core::limiter::Algorithm::bind_call`]).
    ///
    /// # Errors
    /// [`CoreError::Refused`] from the algorithm.
    pub fn bind_call(
        self,
        dedup: Option<DedupId>,
        best_effort: bool,
    ) -> Result<AnyParams, CoreError> {
        dispatch!(&self.0, spec => bind_like(spec, dedup, best_effort))
    }

    /// The time over which the limit applies ([`crate::core::limiter::Algorithm::window`]).
    pub fn window(&self) -> Micros {
        dispatch!(&self.0, spec => window_like(spec))
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
        dedup: Option<DedupId>,
        dedup_max: usize,
    ) -> Result<Option<Micros>, CoreError> {
        dispatch!(&self.0, spec => settle_like(spec, slot, now, action, dedup, dedup_max))
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

/// [`crate::core::limiter::Algorithm::window`] for `spec`'s algorithm.
fn window_like<A: Stored>(spec: &A) -> Micros {
    A::window(spec.params())
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
    dedup: Option<DedupId>,
    dedup_max: usize,
) -> Result<Option<Micros>, CoreError> {
    flow::settle::<A>(slot, spec.params(), now, action, dedup, dedup_max)
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
    /// The time over which its limit applies ([`crate::core::limiter::Algorithm::window`]).
    pub window: Micros,
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
    pub writes: Vec<Option<Micros>>,
    /// A key is blocked (it denied the call, or `BLOCK d` blocked it).
    pub blocked: bool,
    /// Per key, in order: its part of the call.
    pub limiters: Vec<LimiterDetail>,
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
fn combine(granted: u64, verdicts: &[Verdict], costs: &[u64]) -> Verdict {
    let tightest = verdicts
        .iter()
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
    let retry = verdicts
        .iter()
        .fold(Retry::Granted, |acc, v| match (acc, v.retry) {
            (Retry::Never, _) | (_, Retry::Never) => Retry::Never,
            (Retry::After(a), Retry::After(b)) => Retry::After(a.max(b)),
            (Retry::After(a), Retry::Granted) | (Retry::Granted, Retry::After(a)) => {
                Retry::After(a)
            }
            (Retry::Granted, Retry::Granted) => Retry::Granted,
        });
    let reset_after = verdicts.iter().map(|v| v.reset_after).max().unwrap_or(0);
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

/// The amount the call grants and the amount each key is charged: with `BESTEFFORT` the least
/// any key grants (every key is asked the same cost), else the call's cost and each key's own
/// cost if every key grants it (a blocked key grants nothing, not even 0 units), else nothing.
fn choose(req: &Request, judged: &[Judged]) -> (u64, Vec<u64>) {
    if req.best_effort {
        let least = judged.iter().map(|j| j.verdict.granted).min().unwrap_or(0);
        (least, vec![least; judged.len()])
    } else if judged
        .iter()
        .all(|j| j.blocked.is_none() && j.verdict.granted == j.cost)
    {
        // A blocked key denies even a charge of 0.
        (req.cost, judged.iter().map(|j| j.cost).collect())
    } else {
        (0, vec![0; judged.len()])
    }
}

/// Judge every key ([`AnyParams::judge`]); a key holding another algorithm is reported before
/// any other error, naming the first such key.
fn judge_all(
    slots: &[Slot<'_>],
    specs: &[AnyParams],
    charges: &[u64],
    req: &Request,
) -> Result<Vec<Judged>, MultiError> {
    let judged: Vec<Result<Judged, CoreError>> = slots
        .iter()
        .zip(specs)
        .zip(charges)
        .map(|((slot, spec), &cost)| {
            spec.judge(slot.state(), req.now, cost, req.best_effort, req.dedup)
        })
        .collect();
    let wrong = judged.iter().enumerate().find_map(|(index, j)| match j {
        Err(CoreError::WrongKind { held, wanted }) => Some(MultiError::WrongKind {
            index,
            held: *held,
            wanted: *wanted,
        }),
        _ => None,
    });
    if let Some(e) = wrong {
        return Err(e);
    }
    Ok(judged.into_iter().collect::<Result<_, _>>()?)
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
    let charges = vec![req.cost; specs.len()];
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
pub fn apply_charged(
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
    let judged = judge_all(slots, specs, charges, req)?;
    let reasons: Vec<Reason> = judged.iter().map(Judged::reason).collect();
    let (reason, denied_by) = Reason::of_call(reasons.iter().copied());
    let detail = |verdicts: Vec<Verdict>, granted: &[u64]| -> Vec<LimiterDetail> {
        verdicts
            .into_iter()
            .zip(specs)
            .zip(&judged)
            .zip(&reasons)
            .zip(granted)
            .map(|((((v, spec), j), &reason), &granted)| LimiterDetail {
                cost: j.cost,
                verdict: Verdict { granted, ..v },
                window: spec.window(),
                reason,
            })
            .collect()
    };
    let blocked = judged.iter().any(|j| j.blocked.is_some());
    // A remembered id on any key (none blocked): nothing is charged again.
    if let Some(granted) = judged
        .iter()
        .find_map(|j| j.remembered)
        .filter(|_| !blocked)
    {
        let verdicts = slots
            .iter()
            .zip(specs)
            .zip(&judged)
            .map(|((slot, spec), j)| spec.after(slot.state(), j.now, j.cost, Some(Retry::Granted)))
            .collect::<Result<Vec<_>, _>>()?;
        // The call's grant: the remembered one when every key was asked the call's cost (a
        // BESTEFFORT call may have been granted less), else the call's cost.
        let granted = if charges.iter().all(|&c| c == req.cost) {
            granted
        } else {
            req.cost
        };
        let each: Vec<u64> = judged.iter().map(|j| j.remembered.unwrap_or(0)).collect();
        return Ok(MultiOutcome {
            verdict: combine(granted, &verdicts, charges),
            writes: vec![None; slots.len()],
            blocked: false,
            limiters: detail(verdicts, &each),
            reason: Reason::Granted,
            denied_by: None,
        });
    }
    let (granted, amounts) = choose(req, &judged);
    // What each key does: charged its amount (which every key can be, checked before any key
    // changes), or, when denied, blocked by `BLOCK d` if it denied.
    let mut actions = Vec::with_capacity(judged.len());
    for (((slot, spec), j), &amount) in slots.iter().zip(specs).zip(&judged).zip(&amounts) {
        let action = j.settles(req, amount);
        if let Settle::Charge(n) = action {
            spec.can_charge(slot.state(), j, n)?;
        }
        actions.push(action);
    }
    let placed = actions.iter().any(|a| matches!(a, Settle::Block(_)));
    // Settle every key (a copy when peeking), then read each key's reply from its state after.
    let mut verdicts = Vec::with_capacity(judged.len());
    let mut writes = Vec::with_capacity(judged.len());
    for ((((slot, spec), j), action), &amount) in slots
        .iter_mut()
        .zip(specs)
        .zip(&judged)
        .zip(actions)
        .zip(&amounts)
    {
        let mut copy;
        let target: &mut Slot<'_> = if req.peek && action != Settle::Keep {
            copy = Slot::New(slot.state().cloned());
            &mut copy
        } else {
            slot
        };
        let written = spec.settle(target, j.now, action, req.dedup, dedup_max)?;
        let full = (amount > 0 && amount == j.cost).then_some(j.verdict.retry);
        verdicts.push(spec.after(target.state(), j.now, j.cost, full)?);
        writes.push(written.filter(|_| !req.peek));
    }
    Ok(MultiOutcome {
        verdict: combine(granted, &verdicts, charges),
        writes,
        blocked: blocked || placed,
        limiters: detail(verdicts, &amounts),
        reason,
        denied_by,
    })
}

/// Why RL.ALL refuses `BESTEFFORT` with unequal charges.
pub const BESTEFFORT_CHARGES: &str = "BESTEFFORT does not apply to a CHARGE other than COST";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::flow::{Write, apply};
    use crate::core::gcra::{Gcra, GcraParams};
    use crate::core::leaky_bucket::LeakyBucket;
    use crate::core::limiter::Decision;
    use crate::core::param::MAX_PARAM;
    use crate::core::testkit;
    use crate::core::time::MAX_TIME;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_000_000_000;

    fn gcra(b: u64, r: u64, p: u64) -> AnyParams {
        AnyParams::of::<Gcra>(&GcraParams::new(b, r, p).unwrap())
    }

    /// One call with the single-limiter command of `spec`: the units it granted, or its error
    /// (a concurrency lease asked for other units than it holds).
    fn one(
        s: &mut Option<LimiterState>,
        spec: &AnyParams,
        req: &Request,
    ) -> Result<u64, CoreError> {
        fn go<A: Stored>(
            s: &mut Option<LimiterState>,
            spec: &A,
            req: &Request,
        ) -> Result<crate::core::flow::Outcome, CoreError> {
            apply::<A>(s.as_mut(), spec.params(), req, 10)
        }
        let out = dispatch!(&spec.0, a => go(s, a, req))?;
        if let Write::Created(new) = out.write {
            *s = Some(new);
        }
        Ok(out.verdict.granted)
    }

    /// The exact wait (µs) before one limiter alone grants `cost`, found by probing it with
    /// PEEK calls (bisection on the time, as grants only get easier while nothing is charged),
    /// not computed by any algorithm's retry formula; `None` when it never does.
    fn probe_retry(s: &Option<LimiterState>, spec: &AnyParams, now: u64, cost: u64) -> Option<u64> {
        let grants = |at: u64| {
            let req = Request {
                peek: true,
                ..Request::new(cost, at)
            };
            one(&mut s.clone(), spec, &req) == Ok(cost)
        };
        if grants(now) {
            return Some(0);
        }
        let mut hi = 1u64;
        while !grants(now + hi) {
            hi *= 2;
            if hi > 1 << 45 {
                return None;
            }
        }
        let mut lo = 0;
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if grants(now + mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }

    /// The same call made with each single-limiter command, peeking first: the model of "all or
    /// nothing". When nothing is granted, `BLOCK d` blocks each key that would deny the call on
    /// its own (the single-limiter call, on that key alone). Refused if any key refuses.
    fn model(
        states: &mut [Option<LimiterState>],
        specs: &[AnyParams],
        req: &Request,
    ) -> Result<u64, CoreError> {
        let peek = Request { peek: true, ..*req };
        let granted: Vec<u64> = states
            .iter_mut()
            .zip(specs)
            .map(|(s, p)| one(s, p, &peek))
            .collect::<Result<_, _>>()?;
        let amount = if req.best_effort {
            granted.iter().copied().min().unwrap_or(0)
        } else if granted.iter().all(|&g| g == req.cost) {
            req.cost
        } else {
            0
        };
        if amount > 0 && !req.peek {
            let charge = Request {
                cost: amount,
                best_effort: false,
                block: None,
                ..*req
            };
            for (s, p) in states.iter_mut().zip(specs) {
                assert_eq!(one(s, p, &charge), Ok(amount));
            }
        }
        if amount == 0 && req.block.is_some() {
            for ((s, p), g) in states.iter_mut().zip(specs).zip(granted) {
                if g == 0 {
                    assert_eq!(one(s, p, req), Ok(0));
                }
            }
        }
        Ok(amount)
    }

    fn run(states: &mut [Option<LimiterState>], specs: &[AnyParams], req: &Request) -> Decision {
        try_run(states, specs, req).unwrap()
    }

    /// Whether RL.ALL takes a call with these options on these limiters at all (a concurrency
    /// limiter refuses BESTEFFORT when the command is parsed: [`AnyParams::bind_call`]).
    fn accepted(specs: &[AnyParams], req: &Request) -> bool {
        let id = Some(DedupId(0));
        specs
            .iter()
            .all(|s| s.clone().bind_call(id, req.best_effort).is_ok())
    }

    /// RL.ALL on the keys `states` (missing ones created when granted), or its error.
    fn try_run(
        states: &mut [Option<LimiterState>],
        specs: &[AnyParams],
        req: &Request,
    ) -> Result<Decision, MultiError> {
        let mut slots: Vec<Slot<'_>> = states
            .iter_mut()
            .map(|s| match s {
                Some(s) => Slot::Existing(s),
                None => Slot::New(None),
            })
            .collect();
        let out = apply_all(&mut slots, specs, req, 10)?;
        let created: Vec<Option<LimiterState>> = slots
            .into_iter()
            .map(|s| match s {
                Slot::New(s) => s,
                Slot::Existing(_) => None,
            })
            .collect();
        for (s, new) in states.iter_mut().zip(created) {
            if new.is_some() {
                *s = new;
            }
        }
        Ok(Decision::from(out.verdict))
    }

    #[test]
    fn all_reply_takes_the_tightest_limiter() {
        // 3 per second and 5 per minute.
        let specs = [gcra(3, 3, 1_000_000), gcra(5, 5, 60_000_000)];
        let mut s = [None, None];
        let d = run(&mut s, &specs, &Request::new(2, T0));
        assert_eq!(
            (d.granted, d.limit, d.remaining, d.retry_after_ms),
            (2, 3, 1, 0)
        );
        // Both have 1 left (the per-minute one drained 1.08 units in that second): the first.
        let d = run(&mut s, &specs, &Request::new(2, T0 + 1_000_000));
        assert_eq!((d.granted, d.limit, d.remaining), (2, 3, 1));
        // Denied by the per-minute limiter: nothing is charged to the per-second one.
        let before = s.clone();
        let d = run(&mut s, &specs, &Request::new(2, T0 + 2_000_000));
        assert_eq!(
            (d.granted, d.limit, d.remaining, d.retry_after_ms),
            (0, 5, 1, 10_000)
        );
        assert_eq!(s, before);
        // BESTEFFORT takes what both can give.
        let d = run(
            &mut s,
            &specs,
            &Request {
                best_effort: true,
                ..Request::new(2, T0 + 2_000_000)
            },
        );
        assert_eq!((d.granted, d.remaining), (1, 0));
        // A cost above any limit can never pass.
        assert_eq!(
            run(&mut s, &specs, &Request::new(4, T0 + 9_000_000)).retry_after_ms,
            -1
        );
    }

    /// Any registered algorithm ([`testkit::sample`]) with small parameters.
    fn arb_spec() -> impl Strategy<Value = AnyParams> {
        (
            prop::sample::select(Kind::ALL),
            1u64..8,
            1u64..20,
            1u64..3_000_000,
        )
            .prop_filter_map("parameters the algorithm refuses", |(k, b, r, p)| {
                testkit::sample(k, [b, r, p, r * 1000])
            })
    }

    proptest! {
        /// RL.ALL grants exactly what peeking every limiter then charging all would, and leaves
        /// exactly the same states; with `BLOCK d`, a call not granted blocks each key that
        /// denied it, as its own command would.
        #[test]
        fn all_is_all_or_nothing(
            specs in prop::collection::vec(arb_spec(), 1..4),
            ops in prop::collection::vec(
                (0u64..800_000, 0u64..6, any::<bool>(), any::<bool>(), prop::option::weighted(0.2, 1u64..2_000_000)),
                1..40,
            ),
        ) {
            let mut a: Vec<Option<LimiterState>> = vec![None; specs.len()];
            let mut b = a.clone();
            let mut t = T0;
            for (dt, cost, be, peek, block) in ops {
                t += dt;
                let req = Request { best_effort: be, peek: peek && cost % 2 == 0, block, ..Request::new(cost, t) };
                if !accepted(&specs, &req) {
                    continue;
                }
                let want = model(&mut b, &specs, &req);
                let got = try_run(&mut a, &specs, &req);
                prop_assert_eq!(got.map(|d| d.granted as u64).ok(), want.ok());
                prop_assert_eq!(&a, &b);
            }
        }

        /// A call not granted in full replies, as retry, the longest of each limiter's exact
        /// wait for the full cost from the state the call leaves (would leave, for PEEK) (units a BESTEFFORT call did
        /// not charge are not charged), and the same call after that wait is granted.
        #[test]
        fn all_retry_is_the_longest_exact_wait(
            specs in prop::collection::vec(arb_spec(), 1..4),
            ops in prop::collection::vec((0u64..800_000, 1u64..6, any::<bool>(), any::<bool>()), 1..30),
        ) {
            let mut a: Vec<Option<LimiterState>> = vec![None; specs.len()];
            let mut t = T0;
            for (dt, cost, be, peek) in ops {
                t += dt;
                let req = Request { best_effort: be, peek, ..Request::new(cost, t) };
                if !accepted(&specs, &req) {
                    continue;
                }
                // A PEEK replies as if the call were made: the state it would leave.
                let mut left = a.clone();
                if try_run(&mut left, &specs, &Request { peek: false, ..req }).is_err() {
                    continue;
                }
                let d = run(&mut a, &specs, &req);
                if d.granted as u64 == cost {
                    continue;
                }
                let waits: Option<Vec<u64>> =
                    left.iter().zip(&specs).map(|(s, p)| probe_retry(s, p, t, cost)).collect();
                let want = waits.map_or(-1, |w| crate::core::time::ceil_ms(w.into_iter().max().unwrap()));
                prop_assert_eq!(d.retry_after_ms, want);
                if want >= 0 {
                    let later = Request { peek: true, ..Request::new(cost, t + want as u64 * 1000) };
                    prop_assert_eq!(run(&mut left.clone(), &specs, &later).granted as u64, cost);
                }
            }
        }
    }

    /// RL.ALL with a charge per key ([`apply_charged`]) on the keys `states`, or its error.
    fn try_run_charged(
        states: &mut [Option<LimiterState>],
        specs: &[AnyParams],
        charges: &[u64],
        req: &Request,
    ) -> Result<MultiOutcome, MultiError> {
        let mut slots: Vec<Slot<'_>> = states
            .iter_mut()
            .map(|s| match s {
                Some(s) => Slot::Existing(s),
                None => Slot::New(None),
            })
            .collect();
        let out = apply_charged(&mut slots, specs, charges, req, 10)?;
        let created: Vec<Option<LimiterState>> = slots
            .into_iter()
            .map(|s| match s {
                Slot::New(s) => s,
                Slot::Existing(_) => None,
            })
            .collect();
        for (s, new) in states.iter_mut().zip(created) {
            if new.is_some() {
                *s = new;
            }
        }
        Ok(out)
    }

    proptest! {
        /// RL.ALL with `CHARGE`: granted (the call's cost) exactly when peeking each limiter
        /// alone with its own charge grants it, then each limiter is charged its own charge as
        /// its own command would charge it, or none is; each limiter's entry shows its cost and
        /// what it was charged, and the denier is a limiter that would not grant alone.
        #[test]
        fn all_with_charges_is_all_or_nothing(
            dims in prop::collection::vec((arb_spec(), prop::option::of(0u64..7)), 1..4),
            ops in prop::collection::vec((0u64..800_000, 0u64..4, any::<bool>()), 1..40),
        ) {
            let specs: Vec<AnyParams> = dims.iter().map(|(s, _)| s.clone()).collect();
            let mut a: Vec<Option<LimiterState>> = vec![None; specs.len()];
            let mut b = a.clone();
            let mut t = T0;
            for (dt, cost, peek) in ops {
                t += dt;
                let req = Request { peek, ..Request::new(cost, t) };
                let id = Some(DedupId(7));
                let Ok(bound) = specs.iter().map(|s| s.clone().bind_call(id, false)).collect::<Result<Vec<_>, _>>() else {
                    continue;
                };
                let req = Request { dedup: None, ..req };
                let charges: Vec<u64> = dims.iter().map(|(_, c)| c.unwrap_or(cost)).collect();
                // The model: each limiter alone, with its own charge, peeking.
                let alone: Vec<Result<u64, CoreError>> = b
                    .iter()
                    .zip(&bound)
                    .zip(&charges)
                    .map(|((s, p), &c)| one(&mut s.clone(), p, &Request { peek: true, ..Request::new(c, t) }))
                    .collect();
                if alone.iter().any(Result::is_err) {
                    continue;
                }
                let alone: Vec<u64> = alone.into_iter().map(Result::unwrap).collect();
                let all_grant = alone.iter().zip(&charges).all(|(g, c)| g == c);
                let got = try_run_charged(&mut a, &bound, &charges, &req)
                    .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                if all_grant && !peek {
                    for ((s, p), &c) in b.iter_mut().zip(&bound).zip(&charges) {
                        prop_assert_eq!(one(s, p, &Request::new(c, t)), Ok(c));
                    }
                }
                prop_assert_eq!(got.verdict.granted, if all_grant { cost } else { 0 });
                prop_assert_eq!(&a, &b);
                for ((l, &c), &g) in got.limiters.iter().zip(&charges).zip(&alone) {
                    prop_assert_eq!(l.cost, c);
                    prop_assert_eq!(l.verdict.granted, if all_grant { c } else { 0 });
                    prop_assert_eq!(l.reason == Reason::Granted, c == 0 || g == c);
                }
                match got.denied_by {
                    None => prop_assert!(all_grant),
                    Some(i) => prop_assert!(!all_grant && alone[i] < charges[i]),
                }
            }
        }

        /// The merged reply's `limit` and `remaining` are those of the limiter that allows the
        /// fewest more calls of the same shape: the smallest `floor(remaining / charge)`
        /// (limiters charged 0 left out), then the fewest remaining, then the first.
        #[test]
        fn all_with_charges_replies_the_tightest_shape(
            dims in prop::collection::vec((arb_spec(), 0u64..5), 1..4),
            ops in prop::collection::vec((0u64..800_000, 0u64..3), 1..20),
        ) {
            let id = Some(DedupId(7));
            let Ok(specs) = dims.iter().map(|(s, _)| s.clone().bind_call(id, false)).collect::<Result<Vec<_>, _>>() else {
                return Ok(());
            };
            let charges: Vec<u64> = dims.iter().map(|(_, c)| *c).collect();
            let mut a: Vec<Option<LimiterState>> = vec![None; specs.len()];
            let mut t = T0;
            for (dt, cost) in ops {
                t += dt;
                let Ok(got) = try_run_charged(&mut a, &specs, &charges, &Request::new(cost, t)) else {
                    continue;
                };
                let mut best: Option<(bool, u64, u64, usize)> = None;
                for (i, (l, &c)) in got.limiters.iter().zip(&charges).enumerate() {
                    let r = l.verdict.remaining;
                    let key = (c == 0, r.checked_div(c).unwrap_or(0), r, i);
                    if best.is_none_or(|b| key < b) {
                        best = Some(key);
                    }
                }
                let (_, _, remaining, i) = best.unwrap();
                prop_assert_eq!(got.verdict.remaining, remaining);
                prop_assert_eq!(got.verdict.limit, got.limiters[i].verdict.limit);
            }
        }
    }

    #[test]
    fn all_refuses_besteffort_with_unequal_charges_changing_nothing() {
        let specs = [gcra(3, 3, 1_000_000), gcra(5, 5, 60_000_000)];
        let mut s = [None, None];
        let req = Request {
            best_effort: true,
            ..Request::new(2, T0)
        };
        assert_eq!(
            try_run_charged(&mut s, &specs, &[2, 3], &req).unwrap_err(),
            MultiError::Core(CoreError::Refused(BESTEFFORT_CHARGES))
        );
        assert_eq!(s, [None, None]);
        // Equal to the call's cost: taken.
        assert_eq!(
            try_run_charged(&mut s, &specs, &[2, 2], &req)
                .unwrap()
                .verdict
                .granted,
            2
        );
    }

    /// A count or duration biased to the edges: small, near `max`, or anywhere up to it.
    fn edgy(max: u64) -> impl Strategy<Value = u64> {
        prop_oneof![1u64..4, (max - 3)..=max, 1u64..=max]
    }

    /// Any parameters the parsers accept (the same constructors validate them), biased to the
    /// largest values, of any registered algorithm.
    fn arb_extreme_spec() -> impl Strategy<Value = AnyParams> {
        (
            prop::sample::select(Kind::ALL),
            edgy(MAX_PARAM),
            edgy(MAX_PARAM),
            edgy(MAX_PARAM),
            edgy(MAX_PARAM),
        )
            .prop_filter_map("parameters the parser refuses", |(k, a, b, d, e)| {
                testkit::sample(k, [a, b, d, e])
            })
    }

    proptest! {
        /// For any parameters the parsers accept and any time up to MAX_TIME, every result is
        /// computed (no overflow error) and within MAX_SPAN: nothing had to be capped, and the
        /// key's expiry in ms is a Unix time Redis accepts.
        #[test]
        fn accepted_parameters_never_saturate(
            spec in arb_extreme_spec(),
            ops in prop::collection::vec(
                (prop_oneof![0u64..=MAX_TIME, (MAX_TIME - 1_000_000)..=MAX_TIME], edgy(MAX_PARAM), any::<bool>()),
                1..12,
            ),
        ) {
            use crate::core::time::{MAX_SPAN, ceil_ms};
            let mut state: Option<LimiterState> = None;
            for (now, cost, be) in ops {
                let req = Request { best_effort: be, ..Request::new(cost, now) };
                if !accepted(std::slice::from_ref(&spec), &req) {
                    continue;
                }
                let mut slots = [match state.as_mut() {
                    Some(s) => Slot::Existing(s),
                    None => Slot::New(None),
                }];
                let out = match apply_all(&mut slots, std::slice::from_ref(&spec), &req, 10) {
                    // A concurrency lease asked for other units than it holds.
                    Err(MultiError::Core(CoreError::Refused(_))) => continue,
                    out => out.map_err(|e| TestCaseError::fail(format!("{e:?}")))?,
                };
                let [slot] = slots;
                if let Slot::New(Some(created)) = slot {
                    state = Some(created);
                }
                let d = Decision::from(out.verdict);
                prop_assert!(d.retry_after_ms <= ceil_ms(MAX_SPAN), "{d:?}");
                prop_assert!(d.reset_after_ms <= ceil_ms(MAX_SPAN), "{d:?}");
                if let Some(Some(at)) = out.writes.first() {
                    let from = state.as_ref().map_or(now, |s| s.last_update);
                    prop_assert!(*at <= from + MAX_SPAN, "expiry {at} from {from}");
                    prop_assert!(*at <= MAX_TIME + MAX_SPAN);
                    prop_assert!(ceil_ms(*at) < i64::MAX);
                }
            }
        }
    }

    /// Reproducer: with BESTEFFORT and nothing granted, the retry was computed from the state
    /// each limiter's own partial grant would have left (22500 ms instead of 7500).
    #[test]
    fn all_besteffort_retry_counts_no_uncharged_units() {
        let leaky = |b, r, p| AnyParams::of::<LeakyBucket>(&GcraParams::new(b, r, p).unwrap());
        let specs = [
            leaky(3, 10, 2_500_000),
            gcra(11, 1_000_000, 1_166_000),
            leaky(5, 1, 7_500_000),
        ];
        let t = 6_683_323_024_398_920;
        let mut s = [None, None, None];
        assert_eq!(run(&mut s, &specs, &Request::new(3, t)).granted, 3);
        for be in [false, true] {
            let req = Request {
                peek: true,
                best_effort: be,
                ..Request::new(3, t)
            };
            let d = run(&mut s, &specs, &req);
            // The third bucket holds 3 of 5 and drains 1 per 7.5 s: 3 more fit after 7.5 s.
            assert_eq!((d.granted, d.retry_after_ms), (0, 7_500), "BESTEFFORT {be}");
        }
        let later = Request {
            peek: true,
            ..Request::new(3, t + 7_500_000)
        };
        assert_eq!(run(&mut s, &specs, &later).granted, 3);
        let sooner = Request {
            peek: true,
            ..Request::new(3, t + 7_499_999)
        };
        assert_eq!(run(&mut s, &specs, &sooner).granted, 0);
    }
}
