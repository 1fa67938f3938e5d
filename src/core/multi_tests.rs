//! Tests of RL.ALL (`core::multi`) against independent models: all or nothing, exact retries,
//! charges per limiter.

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
fn one(s: &mut Option<LimiterState>, spec: &AnyParams, req: &Request) -> Result<u64, CoreError> {
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
    let out = testkit::apply_all_on(states, specs, req)?;
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

proptest! {
    /// RL.CHECKALL (RL.ALL with PEEK, per-limiter charges) replies exactly what the same call
    /// without PEEK replies, merged and per limiter, and changes nothing.
    #[test]
    fn checkall_replies_as_the_call_would_and_changes_nothing(
        dims in prop::collection::vec((arb_spec(), prop::option::of(0u64..7)), 1..4),
        ops in prop::collection::vec((0u64..800_000, 0u64..4, any::<bool>()), 1..40),
    ) {
        let id = Some(DedupId(u128::MAX));
        let Ok(specs) = dims.iter().map(|(s, _)| s.clone().bind_call(id, false)).collect::<Result<Vec<_>, _>>() else {
            return Ok(());
        };
        let mut a: Vec<Option<LimiterState>> = vec![None; specs.len()];
        let mut t = T0;
        for (dt, cost, charge_now) in ops {
            t += dt;
            let charges: Vec<u64> = dims.iter().map(|(_, c)| c.unwrap_or(cost)).collect();
            let before = a.clone();
            let checked = try_run_charged(&mut a, &specs, &charges, &Request { peek: true, ..Request::new(cost, t) });
            prop_assert_eq!(&a, &before);
            let mut made = a.clone();
            let call = try_run_charged(&mut made, &specs, &charges, &Request::new(cost, t));
            match (checked, call) {
                (Ok(c), Ok(m)) => {
                    prop_assert_eq!(c.verdict, m.verdict);
                    prop_assert_eq!(c.limiters, m.limiters);
                    prop_assert_eq!((c.reason, c.denied_by), (m.reason, m.denied_by));
                    prop_assert!(c.writes.iter().all(Option::is_none));
                }
                (c, m) => prop_assert_eq!(c.err(), m.err()),
            }
            // Move on with the call made now and then, so the checks meet used limiters.
            if charge_now {
                a = made;
            }
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
