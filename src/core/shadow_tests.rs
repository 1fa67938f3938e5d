//! Property tests of `SHADOW` ([`Request::reply`], [`shadow`]) over every algorithm of the
//! registry ([`testkit::sample`]), alone and in RL.ALL: a shadow call leaves exactly the state
//! the enforced call leaves (same writes, expiries, blocks, ids), and its reply lets the call
//! through: the cost granted with no wait, the limit, remaining and reset of the state after
//! the call, read independently with a `PEEK COST 0`.

use proptest::prelude::*;

use crate::core::dedup::DedupId;
use crate::core::flow::{self, Outcome, Write};
use crate::core::gcra::{Gcra, GcraParams};
use crate::core::kind::Kind;
use crate::core::limiter::{Reason, Request, Retry, Verdict, shadow};
use crate::core::multi::AnyParams;
use crate::core::state::{LimiterState, Stored, dispatch};
use crate::core::testkit::{self, T0};
use crate::core::{CoreError, Micros};

const SEC: Micros = 1_000_000;

/// One call of `spec`'s algorithm on `state` through the real flow, storing a created value.
fn call(
    state: &mut Option<LimiterState>,
    spec: &AnyParams,
    req: &Request,
) -> Result<Outcome, CoreError> {
    fn go<A: Stored>(
        state: &mut Option<LimiterState>,
        spec: &A,
        req: &Request,
    ) -> Result<Outcome, CoreError> {
        flow::apply::<A>(state.as_mut(), spec.params(), req, 10)
    }
    let algo = spec.clone().into_state();
    let out = dispatch!(&algo, a => go(state, a, req))?;
    if let Write::Created(new) = &out.write {
        *state = Some(new.clone());
    }
    Ok(out)
}

/// What a `PEEK COST 0` at `now` replies on `state`: the limiter as it is.
fn current(state: &Option<LimiterState>, spec: &AnyParams, now: Micros) -> Verdict {
    let req = Request {
        peek: true,
        ..Request::new(0, now)
    };
    call(&mut state.clone(), spec, &req).unwrap().verdict
}

/// Any registered algorithm with small parameters (`extra` a lease id, an offset, a precision).
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

/// One call: a step in time (some behind the key's last update), and every shared option.
#[derive(Debug, Clone, Copy)]
struct Op {
    dt: u64,
    back: u64,
    cost: u64,
    peek: bool,
    best_effort: bool,
    dedup: Option<u8>,
    block: Option<Micros>,
    delay: Option<Micros>,
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = (
        0u64..900_000,
        prop::option::weighted(0.2, 0u64..400_000),
        0u64..7,
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.2),
        prop::option::weighted(0.3, 0u8..3),
        prop::option::weighted(0.2, 1u64..2_000_000),
        prop::option::weighted(0.2, 1u64..2_000_000),
    )
        .prop_map(
            |(dt, back, cost, peek, best_effort, dedup, block, delay)| Op {
                dt,
                back: back.unwrap_or(0),
                cost,
                peek,
                best_effort,
                dedup,
                block,
                delay,
            },
        );
    prop::collection::vec(op, 1..40)
}

impl Op {
    /// The enforced request at `t` (the step's time is `t`).
    fn request(&self, t: Micros) -> Request {
        Request {
            peek: self.peek,
            best_effort: self.best_effort,
            dedup: self.dedup.map(|d| DedupId(u128::from(d))),
            block: self.block,
            delay: self.delay,
            ..Request::new(self.cost, t - self.back)
        }
    }
}

/// The reply a shadow call must give when enforcement replied `enforced` for `reason` and
/// the limiter is `after` (a `PEEK COST 0` after the call): enforcement's own when it granted
/// the cost in full, else the cost granted now over the state after the call.
fn expected_shadow(
    enforced: Verdict,
    reason: Reason,
    cost: u64,
    after: Verdict,
) -> (Verdict, Reason) {
    if reason == Reason::Granted && enforced.granted >= cost {
        return (enforced, Reason::Granted);
    }
    let verdict = Verdict {
        granted: cost,
        retry: Retry::Granted,
        ..after
    };
    let reason = if reason == Reason::Granted {
        Reason::Granted
    } else {
        Reason::Shadow
    };
    (verdict, reason)
}

proptest! {
    /// Every algorithm, every shared option: a shadow call writes, expires, blocks and
    /// remembers exactly what the enforced call does (the two keys stay equal call after call,
    /// and enforcement's verdict is the same), and replies the call let through.
    #[test]
    fn a_shadow_call_leaves_the_state_the_enforced_call_leaves(
        spec in arb_spec(),
        ops in arb_ops(),
    ) {
        let mut enforced: Option<LimiterState> = None;
        let mut shadowed: Option<LimiterState> = None;
        let mut t = T0;
        for op in ops {
            t += op.dt;
            let req = op.request(t);
            let shadow_req = Request { shadow: true, ..req };
            let (e, s) = match (call(&mut enforced, &spec, &req), call(&mut shadowed, &spec, &shadow_req)) {
                (Ok(e), Ok(s)) => (e, s),
                (e, s) => {
                    prop_assert_eq!(e.err(), s.err(), "{:?}", op);
                    prop_assert_eq!(&enforced, &shadowed, "{:?}", op);
                    continue;
                }
            };
            prop_assert_eq!(e.verdict, s.verdict, "{:?}", op);
            prop_assert_eq!(e.reason, s.reason, "{:?}", op);
            prop_assert_eq!(e.blocked, s.blocked, "{:?}", op);
            let wrote = |o: &Outcome| (!matches!(o.write, Write::None)).then_some(o.expires_at);
            prop_assert_eq!(wrote(&e), wrote(&s), "{:?}", op);
            prop_assert_eq!(&enforced, &shadowed, "{:?}", op);

            // The reply: enforcement's without SHADOW, the call let through with it.
            prop_assert_eq!(req.reply(e.verdict, e.reason), (e.verdict, e.reason));
            let got = shadow_req.reply(s.verdict, s.reason);
            // A PEEK granted in part replies as if charged; the state after is the one before.
            if !(op.peek && e.verdict.granted > 0) {
                let after = current(&shadowed, &spec, req.now);
                prop_assert_eq!(got, expected_shadow(e.verdict, e.reason, op.cost, after), "{:?}", op);
            }
            prop_assert!(got.0.granted >= op.cost, "{:?}", op);
            prop_assert_eq!(got.1 == Reason::Shadow, e.reason != Reason::Granted, "{:?}", op);
        }
    }

    /// RL.ALL: the same for a call over several keys; the reply names the would-be denier
    /// (the enforced call's `denied_by`) and grants the call's cost when enforcement denies.
    #[test]
    fn a_shadow_rl_all_call_leaves_the_states_the_enforced_call_leaves(
        specs in prop::collection::vec(arb_spec(), 1..4),
        ops in arb_ops(),
    ) {
        let mut enforced: Vec<Option<LimiterState>> = vec![None; specs.len()];
        let mut shadowed = enforced.clone();
        let mut t = T0;
        for op in ops {
            t += op.dt;
            let req = op.request(t);
            // As RL.ALL binds its limiters to the call (a lease id from DEDUP).
            let Ok(bound) = specs
                .iter()
                .map(|s| s.clone().bind_call(req.dedup, req.best_effort))
                .collect::<Result<Vec<_>, _>>()
            else {
                continue;
            };
            let shadow_req = Request { shadow: true, ..req };
            let e = testkit::apply_all_on(&mut enforced, &bound, &req);
            let s = testkit::apply_all_on(&mut shadowed, &bound, &shadow_req);
            let (e, s) = match (e, s) {
                (Ok(e), Ok(s)) => (e, s),
                (e, s) => {
                    prop_assert_eq!(e.err(), s.err(), "{:?}", op);
                    prop_assert_eq!(&enforced, &shadowed, "{:?}", op);
                    continue;
                }
            };
            prop_assert_eq!(e.verdict, s.verdict, "{:?}", op);
            prop_assert_eq!(&e.writes, &s.writes, "{:?}", op);
            prop_assert_eq!(&e.limiters, &s.limiters, "{:?}", op);
            prop_assert_eq!((e.reason, e.denied_by), (s.reason, s.denied_by), "{:?}", op);
            prop_assert_eq!(&enforced, &shadowed, "{:?}", op);

            let (got, reason) = shadow_req.reply(s.verdict, s.reason);
            if s.denied_by.is_some() {
                prop_assert_eq!(reason, Reason::Shadow, "{:?}", op);
                prop_assert_eq!(got, Verdict { granted: op.cost, retry: Retry::Granted, ..e.verdict }, "{:?}", op);
            } else {
                prop_assert_eq!(reason, Reason::Granted, "{:?}", op);
                prop_assert!(got.granted >= op.cost, "{:?}", op);
            }
        }
    }
}

/// A GCRA of burst 2, 1 per second, worked by hand: the third call at once is denied; with
/// SHADOW it is granted, charges nothing, and the key is as two calls left it.
#[test]
fn shadow_grants_what_enforcement_denies_and_charges_nothing() {
    let p = AnyParams::of::<Gcra>(&GcraParams::new(2, 1, SEC).unwrap());
    let mut key = None;
    for _ in 0..2 {
        assert_eq!(
            call(&mut key, &p, &Request::new(1, T0))
                .unwrap()
                .verdict
                .granted,
            1
        );
    }
    let two = key.clone();
    let req = Request {
        shadow: true,
        ..Request::new(1, T0)
    };
    let out = call(&mut key, &p, &req).unwrap();
    assert!(matches!(out.write, Write::None));
    assert_eq!(key, two);
    // Enforcement: denied for 1 s, nothing left, fresh in 2 s.
    let denied = Verdict {
        granted: 0,
        limit: 2,
        remaining: 0,
        retry: Retry::After(SEC),
        reset_after: 2 * SEC,
    };
    assert_eq!((out.verdict, out.reason), (denied, Reason::Limit));
    let let_through = Verdict {
        granted: 1,
        retry: Retry::Granted,
        ..denied
    };
    assert_eq!(
        req.reply(out.verdict, out.reason),
        (let_through, Reason::Shadow)
    );
    // COST 3 can never pass: let through all the same.
    let never = Request {
        shadow: true,
        ..Request::new(3, T0)
    };
    let out = call(&mut key, &p, &never).unwrap();
    assert_eq!(out.reason, Reason::Never);
    let (v, r) = never.reply(out.verdict, out.reason);
    assert_eq!((v.granted, v.retry, r), (3, Retry::Granted, Reason::Shadow));
    assert_eq!(key, two);
}

/// `BLOCK d` under SHADOW blocks the key as enforcement does (the state is enforcement's);
/// the shadow calls that follow are let through, their reason the block's.
#[test]
fn shadow_with_block_places_the_block_and_lets_the_calls_through() {
    let p = AnyParams::of::<Gcra>(&GcraParams::new(1, 1, SEC).unwrap());
    let mut key = None;
    call(&mut key, &p, &Request::new(1, T0)).unwrap();
    let req = Request {
        shadow: true,
        block: Some(10 * SEC),
        ..Request::new(1, T0)
    };
    let out = call(&mut key, &p, &req).unwrap();
    assert!(out.blocked);
    let blocked_until = key.as_ref().unwrap().extras.blocked_at(T0);
    assert_eq!(blocked_until, Some(T0 + 10 * SEC));
    let (v, r) = req.reply(out.verdict, out.reason);
    assert_eq!((v.granted, v.remaining, v.retry), (1, 0, Retry::Granted));
    assert_eq!(r, Reason::Shadow);
    // Later, once the limiter itself would grant: the block denies, SHADOW lets through.
    let later = Request {
        shadow: true,
        ..Request::new(1, T0 + 5 * SEC)
    };
    let out = call(&mut key, &p, &later).unwrap();
    assert_eq!(out.reason, Reason::Blocked);
    assert_eq!(later.reply(out.verdict, out.reason).1, Reason::Shadow);
    assert!(matches!(out.write, Write::None));
}

/// The rule itself, by hand: granted in full keeps enforcement's reply (a leaky bucket's queue
/// delay, a DELAY's wait); granted in part (BESTEFFORT) is topped up to the cost, still
/// `granted`; denied for any reason is let through as `shadow`.
#[test]
fn shadow_rule_by_case() {
    let v = |granted, retry| Verdict {
        granted,
        limit: 10,
        remaining: 4,
        retry,
        reset_after: 7,
    };
    let wait = Retry::After(3);
    #[rustfmt::skip]
    let cases = [
        // enforced verdict, reason, cost        reply
        ((v(5, Retry::Granted), Reason::Granted, 5), (v(5, Retry::Granted), Reason::Granted)),
        ((v(5, wait), Reason::Granted, 5),         (v(5, wait), Reason::Granted)),
        ((v(2, wait), Reason::Granted, 5),         (v(5, Retry::Granted), Reason::Granted)),
        ((v(0, wait), Reason::Limit, 5),           (v(5, Retry::Granted), Reason::Shadow)),
        ((v(0, wait), Reason::Blocked, 0),         (v(0, Retry::Granted), Reason::Shadow)),
        ((v(0, Retry::Never), Reason::Never, 11),  (v(11, Retry::Granted), Reason::Shadow)),
    ];
    for ((enforced, reason, cost), want) in cases {
        assert_eq!(
            shadow(enforced, reason, cost),
            want,
            "{enforced:?} {reason:?}"
        );
    }
}
