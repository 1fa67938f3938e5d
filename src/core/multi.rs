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
use crate::core::limiter::{Request, Retry, Verdict};
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

/// [`AnyParams::delays`] for `spec`'s algorithm.
fn delays_like<A: Stored>(_spec: &A) -> bool {
    A::DELAY
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

/// Combine per-limiter verdicts into the one reply: the limit and remaining of the limiter with
/// the fewest remaining (the first such), the largest retry (never if any is never) and reset.
fn combine(granted: u64, verdicts: &[Verdict]) -> Verdict {
    let tightest = verdicts
        .iter()
        .min_by_key(|v| v.remaining)
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

/// The amount every key is charged: with `BESTEFFORT` the least any key grants, else each
/// key's full cost if every key grants it, else nothing.
fn choose(req: &Request, judged: &[Judged]) -> u64 {
    if req.best_effort {
        judged.iter().map(|j| j.verdict.granted).min().unwrap_or(0)
    } else if judged.iter().all(|j| j.verdict.granted == j.cost) {
        req.cost
    } else {
        0
    }
}

/// Judge every key ([`AnyParams::judge`]); a key holding another algorithm is reported before
/// any other error, naming the first such key.
fn judge_all(
    slots: &[Slot<'_>],
    specs: &[AnyParams],
    req: &Request,
) -> Result<Vec<Judged>, MultiError> {
    let judged: Vec<Result<Judged, CoreError>> = slots
        .iter()
        .zip(specs)
        .map(|(slot, spec)| spec.judge(slot.state(), req.now, req.cost, req.best_effort, req.dedup))
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
        .collect::<Result<Vec<_>, _>>()?;
    judged.copy_from_slice(&reserved);
    Ok(())
}

/// Run `req` against every limiter: `slots[i]` is the value of key `i`, `specs[i]` its
/// parameters. Slots of missing keys must be `Slot::New(None)`; a granted call fills them.
///
/// Every key is judged ([`flow::judge`]) before any changes; then the amount is chosen, every
/// key is settled ([`flow::settle`]) and the replies are combined.
///
/// # Errors
/// [`MultiError::WrongKind`] naming the key; [`CoreError::Overflow`]. Nothing is changed then.
pub fn apply_all(
    slots: &mut [Slot<'_>],
    specs: &[AnyParams],
    req: &Request,
    dedup_max: usize,
) -> Result<MultiOutcome, MultiError> {
    let mut judged = judge_all(slots, specs, req)?;
    if let Some(d) = req.delay {
        delay_all(slots, specs, &mut judged, d)?;
    }
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
        return Ok(MultiOutcome {
            verdict: combine(granted, &verdicts),
            writes: vec![None; slots.len()],
            blocked: false,
        });
    }
    let amount = choose(req, &judged);
    // What each key does: charged `amount` (which every key can be, checked before any key
    // changes), or, when denied, blocked by `BLOCK d` if it denied.
    let mut actions = Vec::with_capacity(judged.len());
    for ((slot, spec), j) in slots.iter().zip(specs).zip(&judged) {
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
    for (((slot, spec), j), action) in slots.iter_mut().zip(specs).zip(&judged).zip(actions) {
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
        verdict: combine(amount, &verdicts),
        writes,
        blocked: blocked || placed,
    })
}

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
                (prop_oneof![0u64..=MAX_TIME, (MAX_TIME - 1_000_000)..=MAX_TIME], edgy(MAX_PARAM), any::<bool>(),
                 prop::option::of(edgy(MAX_PARAM))),
                1..12,
            ),
        ) {
            use crate::core::time::{MAX_SPAN, ceil_ms};
            let mut state: Option<LimiterState> = None;
            for (now, cost, be, delay) in ops {
                let req = Request { best_effort: be, delay, ..Request::new(cost, now) };
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
                    // A reservation that would leave the key fresh again more than MAX_SPAN
                    // from now is refused, not capped (and changes nothing).
                    Err(MultiError::Core(CoreError::StateTooLong)) if delay.is_some() => continue,
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
