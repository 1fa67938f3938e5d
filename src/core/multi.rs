//! RL.ALL: several limiters on one request, all or nothing.
//!
//! Every limiter evaluates the request without changing anything; only if all of them grant it
//! (with `BESTEFFORT`: the smallest amount all can grant) is each charged. So "10 per second and
//! 1000 per hour" never over-charges the first limiter when the second denies, as calling the
//! commands one after another does.

use crate::core::CoreError;
use crate::core::limiter::{Algorithm, Decision, Request, Retry, Verdict};
use crate::core::state::{AlgoState, Kind, LimiterState, dispatch};
use crate::core::time::Micros;

/// The parameters of any one limiter: a fresh limiter of its algorithm, which carries them (so
/// a new algorithm needs nothing here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnyParams(AlgoState);

impl AnyParams {
    /// The parameters `params` of algorithm `A`.
    pub fn of<A: Algorithm>(params: &A::Params) -> Self {
        AnyParams(A::fresh(params).into_state())
    }

    /// The algorithm.
    pub fn kind(&self) -> Kind {
        dispatch!(&self.0, a => kind_of(a))
    }

    /// A fresh limiter with these parameters, last updated at `now`.
    fn fresh(&self, now: Micros) -> LimiterState {
        LimiterState::new(self.0.clone(), now)
    }

    fn evaluate(
        &self,
        s: &LimiterState,
        now: Micros,
        cost: u64,
        be: bool,
    ) -> Result<Verdict, CoreError> {
        dispatch!(&self.0, spec => {
            let a = from_state_like(spec, &s.algo).ok_or(CoreError::Overflow)?;
            a.evaluate(spec.params(), now, cost, be)
        })
    }

    /// Charge `n` units; returns when the limiter is fresh again.
    fn commit(&self, s: &mut LimiterState, now: Micros, n: u64) -> Result<Micros, CoreError> {
        dispatch!(&self.0, spec => {
            let a = from_state_mut_like(spec, &mut s.algo).ok_or(CoreError::Overflow)?;
            a.commit(spec.params(), now, n)?;
            Ok(a.fresh_at())
        })
    }

    fn dedup_until(&self, now: Micros) -> Micros {
        dispatch!(&self.0, spec => dedup_until_of(spec, now))
    }
}

fn kind_of<A: Algorithm>(_: &A) -> Kind {
    A::KIND
}

fn dedup_until_of<A: Algorithm>(spec: &A, now: Micros) -> Micros {
    A::dedup_until(spec.params(), now)
}

/// `state`'s algorithm if it is `spec`'s (the type is inferred from `spec`).
fn from_state_like<'s, A: Algorithm>(_spec: &A, state: &'s AlgoState) -> Option<&'s A> {
    A::from_state(state)
}

/// As [`from_state_like`], mutably.
fn from_state_mut_like<'s, A: Algorithm>(_spec: &A, state: &'s mut AlgoState) -> Option<&'s mut A> {
    A::from_state_mut(state)
}

/// One key of an RL.ALL call: its current value, or a new one to store.
#[derive(Debug)]
pub enum Slot<'a> {
    Existing(&'a mut LimiterState),
    New(Option<LimiterState>),
}

impl Slot<'_> {
    fn state(&self) -> Option<&LimiterState> {
        match self {
            Slot::Existing(s) => Some(s),
            Slot::New(s) => s.as_ref(),
        }
    }
}

/// The result of an RL.ALL call: the combined reply, and for each key whether it was written
/// and its new expiry.
#[derive(Debug)]
pub struct MultiOutcome {
    pub decision: Decision,
    /// Per key, in order: `Some(expiry)` when the key was written (a `Slot::New` then holds the
    /// value to store).
    pub writes: Vec<Option<Micros>>,
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
/// the fewest remaining (the first such), the largest retry (−1 if any is never) and reset.
fn combine(granted: u64, verdicts: &[Verdict]) -> Decision {
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
    Decision::from(Verdict {
        granted,
        limit: tightest.limit,
        remaining: tightest.remaining,
        retry,
        reset_after,
    })
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

/// Run `req` against every limiter: `slots[i]` is the value of key `i`, `specs[i]` its
/// parameters. Slots of missing keys must be `Slot::New(None)`; a granted call fills them.
///
/// # Errors
/// [`MultiError::WrongKind`] naming the key; [`CoreError::Overflow`].
pub fn apply_all(
    slots: &mut [Slot<'_>],
    specs: &[AnyParams],
    req: &Request,
    dedup_max: usize,
) -> Result<MultiOutcome, MultiError> {
    // Missing keys evaluate as fresh limiters; every key keeps its own monotonic clock.
    let mut fresh: Vec<Option<LimiterState>> = Vec::with_capacity(slots.len());
    let mut nows: Vec<Micros> = Vec::with_capacity(slots.len());
    for (index, (slot, spec)) in slots.iter().zip(specs).enumerate() {
        match slot.state() {
            Some(s) if s.kind() != spec.kind() => {
                return Err(MultiError::WrongKind {
                    index,
                    held: s.kind(),
                    wanted: spec.kind(),
                });
            }
            Some(s) => {
                nows.push(req.now.max(s.last_update));
                fresh.push(None);
            }
            None => {
                nows.push(req.now);
                fresh.push(Some(spec.fresh(req.now)));
            }
        }
    }
    let view = |i: usize| -> Result<&LimiterState, CoreError> {
        slots
            .get(i)
            .and_then(Slot::state)
            .or_else(|| fresh.get(i).and_then(Option::as_ref))
            .ok_or(CoreError::Overflow)
    };
    let each = |cost: u64, best_effort: bool| -> Result<Vec<Verdict>, CoreError> {
        (0..specs.len())
            .map(|i| {
                let (spec, now) = specs.get(i).zip(nows.get(i)).ok_or(CoreError::Overflow)?;
                spec.evaluate(view(i)?, *now, cost, best_effort)
            })
            .collect()
    };

    // A remembered id on any key: the retry is not charged.
    if let Some(id) = req.dedup {
        let hit = (0..slots.len()).find_map(|i| {
            let now = *nows.get(i)?;
            view(i).ok()?.dedup.lookup(id, now)
        });
        if let Some(granted) = hit {
            return Ok(MultiOutcome {
                decision: combine(granted, &each(0, false)?),
                writes: vec![None; slots.len()],
            });
        }
    }

    let first = each(req.cost, req.best_effort)?;
    let amount = if req.best_effort {
        first.iter().map(|v| v.granted).min().unwrap_or(0)
    } else if first.iter().all(|v| v.granted == req.cost) {
        req.cost
    } else {
        0
    };
    if amount == 0 {
        // Nothing was charged: each limiter's current state, with its retry for the full cost
        // from that state (not from the state a BESTEFFORT evaluation would have left).
        let now_state = each(0, false)?;
        let full = each(req.cost, false)?;
        let verdicts: Vec<Verdict> = now_state
            .into_iter()
            .zip(&full)
            .map(|(current, v)| Verdict {
                retry: retry_for_full_cost(v, req.cost),
                ..current
            })
            .collect();
        return Ok(MultiOutcome {
            decision: combine(0, &verdicts),
            writes: vec![None; slots.len()],
        });
    }

    // Charge every limiter (a copy when peeking), then read each state after the charge.
    let mut verdicts = Vec::with_capacity(slots.len());
    let mut writes = Vec::with_capacity(slots.len());
    for (i, ((slot, spec), fresh)) in slots.iter_mut().zip(specs).zip(fresh).enumerate() {
        let now = nows.get(i).copied().unwrap_or(req.now);
        let mut scratch;
        let state: &mut LimiterState = match (req.peek, slot, fresh) {
            (true, Slot::Existing(s), _) => {
                scratch = (**s).clone();
                &mut scratch
            }
            (true, Slot::New(_), Some(f)) => {
                scratch = f;
                &mut scratch
            }
            (false, Slot::Existing(s), _) => s,
            (false, Slot::New(s), Some(f)) => s.insert(f),
            (_, Slot::New(_), None) => return Err(CoreError::Overflow.into()),
        };
        let fresh_at = spec.commit(state, now, amount)?;
        let after = spec.evaluate(state, now, 0, false)?;
        let retry = match first.get(i) {
            // Granted in full: 0, or a leaky bucket's queue delay.
            Some(v) if amount == req.cost => v.retry,
            _ => retry_for_full_cost(&spec.evaluate(state, now, req.cost, false)?, req.cost),
        };
        verdicts.push(Verdict { retry, ..after });
        if req.peek {
            writes.push(None);
            continue;
        }
        state.last_update = now;
        state.dedup.forget_expired(now);
        if let Some(id) = req.dedup {
            state
                .dedup
                .remember(id, amount, spec.dedup_until(now), dedup_max);
        }
        writes.push(Some(fresh_at.max(state.dedup.latest_expiry()).max(now)));
    }
    Ok(MultiOutcome {
        decision: combine(amount, &verdicts),
        writes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fixed_window::{Fixed, FixedParams};
    use crate::core::gcra::MAX_PARAM;
    use crate::core::gcra::{Gcra, GcraParams};
    use crate::core::leaky_bucket::LeakyBucket;
    use crate::core::limiter::{Write, apply};
    use crate::core::sliding_counter::{SlidingCounter, SlidingCounterParams};
    use crate::core::sliding_log::{SlidingLog, SlidingParams};
    use crate::core::time::MAX_TIME;
    use crate::core::token_bucket::TokenBucket;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_000_000_000;

    fn gcra(b: u64, r: u64, p: u64) -> AnyParams {
        AnyParams::of::<Gcra>(&GcraParams::new(b, r, p).unwrap())
    }

    /// One call with the single-limiter command of `spec`: the units it granted.
    fn one(s: &mut Option<LimiterState>, spec: &AnyParams, req: &Request) -> u64 {
        fn go<A: Algorithm>(
            s: &mut Option<LimiterState>,
            spec: &A,
            req: &Request,
        ) -> crate::core::limiter::Outcome {
            apply::<A>(s.as_mut(), spec.params(), req, 10).unwrap()
        }
        let out = dispatch!(&spec.0, a => go(s, a, req));
        if let Write::Created(new) = out.write {
            *s = Some(new);
        }
        out.verdict.granted
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
            one(&mut s.clone(), spec, &req) == cost
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
    /// nothing".
    fn model(states: &mut [Option<LimiterState>], specs: &[AnyParams], req: &Request) -> u64 {
        let peek = Request { peek: true, ..*req };
        let granted: Vec<u64> = states
            .iter_mut()
            .zip(specs)
            .map(|(s, p)| one(s, p, &peek))
            .collect();
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
                ..*req
            };
            for (s, p) in states.iter_mut().zip(specs) {
                assert_eq!(one(s, p, &charge), amount);
            }
        }
        amount
    }

    fn run(states: &mut [Option<LimiterState>], specs: &[AnyParams], req: &Request) -> Decision {
        let mut slots: Vec<Slot<'_>> = states
            .iter_mut()
            .map(|s| match s {
                Some(s) => Slot::Existing(s),
                None => Slot::New(None),
            })
            .collect();
        let out = apply_all(&mut slots, specs, req, 10).unwrap();
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
        out.decision
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

    fn arb_spec() -> impl Strategy<Value = AnyParams> {
        (0u8..6, 1u64..8, 1u64..20, 1u64..3_000_000).prop_map(|(k, b, r, p)| {
            let g = GcraParams::new(b, r, p).unwrap();
            match k {
                0 => AnyParams::of::<Gcra>(&g),
                1 => AnyParams::of::<TokenBucket>(&g),
                2 => AnyParams::of::<LeakyBucket>(&g),
                3 => AnyParams::of::<Fixed>(&FixedParams::new(b, p, r * 1000).unwrap()),
                4 => AnyParams::of::<SlidingCounter>(&SlidingCounterParams::new(b, p).unwrap()),
                // A window of whole ms, in buckets of r ms (at most the window).
                _ => {
                    let window = (p / 1000 + 1) * 1000;
                    let precision = (r * 1000).min(window);
                    AnyParams::of::<SlidingLog>(&SlidingParams::new(b, window, precision).unwrap())
                }
            }
        })
    }

    proptest! {
        /// RL.ALL grants exactly what peeking every limiter then charging all would, and leaves
        /// exactly the same states.
        #[test]
        fn all_is_all_or_nothing(
            specs in prop::collection::vec(arb_spec(), 1..4),
            ops in prop::collection::vec((0u64..800_000, 0u64..6, any::<bool>(), any::<bool>()), 1..40),
        ) {
            let mut a: Vec<Option<LimiterState>> = vec![None; specs.len()];
            let mut b = a.clone();
            let mut t = T0;
            for (dt, cost, be, peek) in ops {
                t += dt;
                let req = Request { best_effort: be, peek: peek && cost % 2 == 0, ..Request::new(cost, t) };
                let want = model(&mut b, &specs, &req);
                let got = run(&mut a, &specs, &req);
                prop_assert_eq!(got.granted as u64, want);
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
                // A PEEK replies as if the call were made: the state it would leave.
                let mut left = a.clone();
                run(&mut left, &specs, &Request { peek: false, ..req });
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
    /// largest values.
    fn arb_extreme_spec() -> impl Strategy<Value = AnyParams> {
        let ms = |v: u64| (v / 1000).max(1) * 1000;
        (
            0u8..6,
            edgy(MAX_PARAM),
            edgy(MAX_PARAM),
            edgy(MAX_PARAM),
            edgy(MAX_PARAM),
        )
            .prop_filter_map("parameters the parser refuses", move |(k, a, b, d, e)| {
                let g = GcraParams::new(a, b, d);
                Some(match k {
                    0 => AnyParams::of::<Gcra>(&g.ok()?),
                    1 => AnyParams::of::<TokenBucket>(&g.ok()?),
                    2 => AnyParams::of::<LeakyBucket>(&g.ok()?),
                    3 => AnyParams::of::<Fixed>(&FixedParams::new(a, d, e).ok()?),
                    4 => AnyParams::of::<SlidingCounter>(&SlidingCounterParams::new(a, d).ok()?),
                    _ => {
                        let (w, p) = (ms(d), ms(e));
                        AnyParams::of::<SlidingLog>(
                            &SlidingParams::new(a, w.max(p), w.min(p)).ok()?,
                        )
                    }
                })
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
                let mut slots = [match state.as_mut() {
                    Some(s) => Slot::Existing(s),
                    None => Slot::New(None),
                }];
                let out = apply_all(&mut slots, std::slice::from_ref(&spec), &req, 10);
                let out = out.map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                let [slot] = slots;
                if let Slot::New(Some(created)) = slot {
                    state = Some(created);
                }
                let d = out.decision;
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
