//! Property tests of RL.REFUND and blocks over every algorithm of the registry
//! ([`testkit::sample`]), against independent models: a plain counter of units (granted minus
//! given back) at one instant, and "the same key without the calls made while it was blocked"
//! over time.

use proptest::prelude::*;

use crate::core::concurrency::{Concurrency, ConcurrencyParams, Released};
use crate::core::dedup::DedupId;
use crate::core::fixed_window::{Fixed, FixedParams};
use crate::core::flow::{self, Write};
use crate::core::gcra::{Gcra, GcraParams, Schedule};
use crate::core::kind::Kind;
use crate::core::limiter::{Refund, Request, Verdict};
use crate::core::sliding_log::{SlidingLog, SlidingParams};
use crate::core::state::{AlgoState, LimiterState, Stored, dispatch};
use crate::core::testkit;
use crate::core::{CoreError, Micros, codec};

const T0: Micros = 1_700_000_000_000_000;
const SEC: Micros = 1_000_000;

/// One call of algorithm `A` with `params` on `state`, storing a created value.
fn call<A: Stored>(state: &mut Option<LimiterState>, params: &A::Params, req: &Request) -> Verdict {
    try_call::<A>(state, params, req).unwrap()
}

/// [`call`], or the call's error (a concurrency sample's lease asked for other units).
fn try_call<A: Stored>(
    state: &mut Option<LimiterState>,
    params: &A::Params,
    req: &Request,
) -> Result<Verdict, CoreError> {
    let out = flow::apply::<A>(state.as_mut(), params, req, 100)?;
    if let Write::Created(s) = out.write {
        *state = Some(s);
    }
    Ok(out.verdict)
}

fn refund(state: &mut Option<LimiterState>, now: Micros, units: u64, id: Option<u64>) -> u64 {
    match state.as_mut() {
        None => 0,
        Some(s) => flow::refund(s, now, units, id.map(|i| DedupId(u128::from(i))))
            .unwrap()
            .map_or(0, |r| r.verdict.granted),
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Charge(u64),
    Refund(u64),
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            (0u64..6).prop_map(Op::Charge),
            (1u64..6).prop_map(Op::Refund)
        ],
        1..30,
    )
}

/// At one instant, from fresh: remaining is always `limit − (granted − given back)`, a refund
/// gives back at most what is charged (never fresher than fresh), and a charge is granted iff
/// it fits in that count.
fn counter_model<A: Stored>(
    params: &A::Params,
    limit: u64,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut state = None;
    let mut used: u64 = 0;
    for op in ops {
        match *op {
            Op::Charge(n) => {
                let v = call::<A>(&mut state, params, &Request::new(n, T0));
                let want = if used + n <= limit { n } else { 0 };
                prop_assert_eq!(v.granted, want);
                used += v.granted;
                prop_assert_eq!(v.remaining, limit - used);
            }
            Op::Refund(n) => {
                let given = refund(&mut state, T0, n, None);
                prop_assert_eq!(given, n.min(used), "refund {} of {}", n, used);
                used -= given;
            }
        }
    }
    Ok(())
}

/// [`counter_model`] for the algorithm of `fresh` when RL.REFUND gives its units back; else a
/// refund is refused, naming the command that does, and changes nothing.
fn refund_model<A: Stored>(fresh: &A, limit: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    match A::REFUND {
        Refund::Units => counter_model::<A>(fresh.params(), limit, ops),
        Refund::Via(via) => {
            let mut state = None;
            prop_assert_eq!(
                call::<A>(&mut state, fresh.params(), &Request::new(1, T0)).granted,
                1
            );
            let mut s = state.unwrap();
            let before = s.clone();
            prop_assert_eq!(
                flow::refund(&mut s, T0, 1, None).unwrap_err(),
                CoreError::NoRefund { held: A::KIND, via }
            );
            prop_assert_eq!(s, before);
            Ok(())
        }
    }
}

/// Random calls over time with a block placed once: every call while blocked is denied and
/// changes nothing, and after the block the key replies exactly as the same key that never
/// saw the calls made during the block.
fn block_model<A: Stored>(
    params: &A::Params,
    steps: &[(u64, u64)],
    at: usize,
    d: Micros,
) -> Result<(), TestCaseError> {
    let mut blocked = None;
    let mut plain = None;
    let mut now = T0;
    let mut until = None;
    for (i, &(dt, cost)) in steps.iter().enumerate() {
        now += dt;
        if i == at {
            let (_, end, _) = match blocked.as_mut() {
                Some(s) => flow::block(s, now, d),
                None => {
                    blocked = Some(flow::new_block(now, d));
                    (0, now + d, now)
                }
            };
            until = Some(end);
        }
        let req = Request::new(cost, now);
        let in_block = until.is_some_and(|u| now < u);
        // A call the algorithm refuses (a concurrency lease asked for other units) is refused
        // on both keys alike.
        let v = try_call::<A>(&mut blocked, params, &req);
        if in_block {
            if let Ok(v) = v {
                prop_assert_eq!(v.granted, 0);
                prop_assert_eq!(v.remaining, 0);
                if cost > 0 {
                    prop_assert!(v.retry != crate::core::limiter::Retry::Granted);
                }
            }
        } else {
            let w = try_call::<A>(&mut plain, params, &req);
            prop_assert_eq!(v, w, "step {} at {}", i, now);
        }
    }
    Ok(())
}

/// [`block_model`] with the parameters of `fresh`.
fn block_model_of<A: Stored>(
    fresh: &A,
    steps: &[(u64, u64)],
    at: usize,
    d: Micros,
) -> Result<(), TestCaseError> {
    block_model::<A>(fresh.params(), steps, at, d)
}

proptest! {
    #[test]
    fn refund_matches_a_counter_at_one_instant(ops in arb_ops()) {
        for kind in Kind::ALL {
            let spec = testkit::sample(*kind, [8, 4, SEC, 0]).unwrap().into_state();
            dispatch!(&spec, a => refund_model(a, 8, &ops))?;
        }
    }

    /// Over time, on a sliding log, against a plain list of (time, units) where a refund takes
    /// units off the newest entries still in the window: the same units given back, and the units
    /// let through in any window never above the limit.
    #[test]
    fn refund_never_lets_more_through_than_net_units(
        steps in prop::collection::vec((0u64..400_000, 0u64..5, any::<bool>()), 1..60)
    ) {
        let window = SEC;
        let p = SlidingParams::new(6, window, 1000).unwrap();
        let mut state = None;
        let mut model: Vec<(Micros, u64)> = Vec::new();
        let mut now = T0;
        for (dt, n, is_refund) in steps {
            now += dt;
            model.retain(|(t, u)| *t + window > now && *u > 0);
            if is_refund && n > 0 {
                let given = refund(&mut state, now, n, None);
                let mut left = n;
                while left > 0 {
                    let Some(last) = model.last_mut() else { break };
                    let take = last.1.min(left);
                    last.1 -= take;
                    left -= take;
                    if last.1 == 0 {
                        model.pop();
                    }
                }
                prop_assert_eq!(given, n - left, "refund at {}", now);
            } else {
                let v = call::<SlidingLog>(&mut state, &p, &Request::new(n, now));
                let used: u64 = model.iter().map(|(_, u)| u).sum();
                prop_assert_eq!(v.granted, if used + n <= 6 { n } else { 0 });
                if v.granted > 0 {
                    model.push((now - now % 1000, v.granted));
                }
            }
            let net: u64 = model.iter().map(|(_, u)| u).sum();
            prop_assert!(net <= 6, "net {} at {}", net, now);
        }
    }

    #[test]
    fn dedup_refund_gives_at_most_the_grant_once(cost in 1u64..5, units in 1u64..9, extra in 0u64..4) {
        let g = GcraParams::new(10, 1, SEC).unwrap();
        let mut state = None;
        let req = Request { dedup: Some(DedupId(7)), ..Request::new(cost, T0) };
        prop_assert_eq!(call::<Gcra>(&mut state, &g, &req).granted, cost);
        call::<Gcra>(&mut state, &g, &Request::new(extra, T0));
        prop_assert_eq!(refund(&mut state, T0, units, Some(7)), units.min(cost));
        for _ in 0..3 {
            prop_assert_eq!(refund(&mut state, T0 + 1, units, Some(7)), 0);
        }
        prop_assert_eq!(refund(&mut state, T0, units, Some(8)), 0);
        // The settled id survives the codec.
        let s = state.clone().unwrap();
        prop_assert_eq!(codec::decode(&codec::encode(&s)), Some(s));
    }

    #[test]
    fn blocked_key_grants_nothing_then_is_as_if_never_blocked(
        steps in prop::collection::vec((0u64..300_000, 0u64..4), 2..50),
        at in 0usize..50,
        d in 1u64..3_000_000,
    ) {
        let at = at % steps.len();
        for kind in Kind::ALL {
            let spec = testkit::sample(*kind, [5, 5, SEC, 0]).unwrap().into_state();
            dispatch!(&spec, a => block_model_of(a, &steps, at, d))?;
        }
    }
}

/// The bytes of version 2 (a block and a settled id), worked out by hand, and version 1 still
/// written when neither is used.
#[test]
fn codec_v2_fixture() {
    let p = FixedParams::new(5, SEC, 0).unwrap();
    let mut state = None;
    let req = Request {
        dedup: Some(DedupId(9)),
        ..Request::new(2, T0)
    };
    call::<Fixed>(&mut state, &p, &req);
    let mut s = state.unwrap();
    let v1 = codec::encode(&s);
    assert_eq!(v1.first(), Some(&1));
    assert_eq!(refund(&mut Some(s.clone()), T0, 1, Some(9)), 1);
    flow::refund(&mut s, T0, 1, Some(DedupId(9))).unwrap();
    flow::block(&mut s, T0, 1000);
    let t0 = [128u8, 128, 249, 192, 193, 196, 130, 3]; // T0 (1.7e15 µs) in LEB128
    let end = [192u8, 132, 182, 193, 193, 196, 130, 3]; // T0 + 1 s, the window's end
    let until = [232u8, 135, 249, 192, 193, 196, 130, 3]; // T0 + 1 ms, the block's end
    let want: Vec<u8> = [
        &[2u8, 4][..],                                        // version 2, FIXED
        &t0,                                                  // last update
        &[5, 192, 132, 61, 0],                                // limit 5, window 1e6 µs, offset 0
        &end,                                                 // window end
        &[1],                                                 // count 2 − 1
        &until,                                               // block end
        &[1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // one id, hash 9
        &[5],                                                 // granted 2, settled: 2 << 1 | 1
        &end,                                                 // remembered until the window ends
    ]
    .concat();
    assert_eq!(codec::encode(&s), want);
    assert_eq!(codec::decode(&want), Some(s));
    // A key holding only a block: kind 0, no algorithm fields.
    let b = flow::new_block(T0, 1000);
    let want: Vec<u8> = [&[2u8, 0][..], &t0, &until, &[0]].concat();
    assert_eq!(codec::encode(&b), want);
    assert_eq!(codec::decode(&want), Some(b));
    // Kind 0 is only version 2, and only with a block.
    assert_eq!(
        codec::decode(&[&[1u8, 0][..], &t0, &until, &[0]].concat()),
        None
    );
    assert_eq!(codec::decode(&[&[2u8, 0][..], &t0, &[0, 0]].concat()), None);
}

/// One step of a concurrency key: an acquire of `cost` under id `id`, or its release.
#[derive(Debug, Clone, Copy)]
struct LeaseStep {
    dt: u64,
    release: bool,
    id: u8,
    cost: u64,
}

fn arb_lease_steps() -> impl Strategy<Value = Vec<LeaseStep>> {
    prop::collection::vec(
        (0u64..400_000, any::<bool>(), 0u8..4, 1u64..4).prop_map(|(dt, release, id, cost)| {
            LeaseStep {
                dt,
                release,
                id,
                cost,
            }
        }),
        2..50,
    )
}

/// RL.RELEASE on `state` (a missing key holds nothing): the units freed, the key dropped once
/// it holds nothing.
fn release(state: &mut Option<LimiterState>, id: DedupId, now: Micros) -> u64 {
    let Some(s) = state.as_mut() else {
        return 0;
    };
    match crate::core::concurrency::release(s, id, now).unwrap() {
        Released::Nothing => 0,
        Released::Kept { units, .. } => units,
        Released::Emptied { units } => {
            *state = None;
            units
        }
    }
}

/// [`block_model`] for a concurrency key, whose calls carry a lease id: while blocked every
/// acquire (a renewal too) is denied and changes nothing, every release still frees its lease,
/// and after the block the key replies exactly as the same key that saw only the releases of
/// the blocked time.
fn lease_block_model(steps: &[LeaseStep], at: usize, d: Micros) -> Result<(), TestCaseError> {
    let mut blocked = None;
    let mut plain = None;
    let mut now = T0;
    let mut until = None;
    for (i, step) in steps.iter().enumerate() {
        now += step.dt;
        if i == at {
            let (_, end, _) = match blocked.as_mut() {
                Some(s) => flow::block(s, now, d),
                None => {
                    blocked = Some(flow::new_block(now, d));
                    (0, now + d, now)
                }
            };
            until = Some(end);
        }
        let id = DedupId(u128::from(step.id));
        let in_block = until.is_some_and(|u| now < u);
        if step.release {
            // Never denied, blocked or not: both keys free the same lease.
            let freed = release(&mut blocked, id, now);
            prop_assert_eq!(freed, release(&mut plain, id, now), "step {} at {}", i, now);
            continue;
        }
        let params = ConcurrencyParams::new(3, SEC, Some(id)).unwrap();
        let req = Request::new(step.cost, now);
        // A COST that differs from the units a live lease holds is an error on both keys.
        let Ok(out) = flow::apply::<Concurrency>(blocked.as_mut(), &params, &req, 100) else {
            continue;
        };
        let v = out.verdict;
        if let Write::Created(s) = out.write {
            blocked = Some(s);
        }
        if in_block {
            prop_assert_eq!(v.granted, 0);
            prop_assert_eq!(v.remaining, 0);
            prop_assert!(v.retry != crate::core::limiter::Retry::Granted);
        } else {
            let w = call::<Concurrency>(&mut plain, &params, &req);
            prop_assert_eq!(v, w, "step {} at {}", i, now);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn blocked_concurrency_key_acquires_nothing_releases_then_is_as_if_never_blocked(
        steps in arb_lease_steps(),
        at in 0usize..50,
        d in 1u64..3_000_000,
    ) {
        let at = at % steps.len();
        lease_block_model(&steps, at, d)?;
    }
}

#[test]
fn refund_on_a_concurrency_key_names_rl_release() {
    let params = ConcurrencyParams::new(3, SEC, Some(DedupId(1))).unwrap();
    let mut state = None;
    let v = call::<Concurrency>(&mut state, &params, &Request::new(2, T0));
    assert_eq!(v.granted, 2);
    let mut s = state.unwrap();
    let before = s.clone();
    assert_eq!(
        flow::refund(&mut s, T0, 1, None).unwrap_err(),
        crate::core::CoreError::NoRefund {
            held: crate::core::kind::Kind::Concurrency,
            via: "RL.RELEASE"
        }
    );
    assert_eq!(s, before, "a refused refund changes nothing");
}

#[test]
fn refund_that_cannot_reply_changes_nothing() {
    // A GCRA value whose TAT is more than MAX_SPAN past now (no payload can store it: the codec
    // refuses it, see `stored_tat_beyond_max_span_is_refused` below): the refund gives a unit
    // back, but the reply after it cannot state the reset. The call fails, and the value, its
    // DEDUP id and its update time are as they were.
    let parts = [u64::MAX, 1u64 | (1u64 << 32), SEC];
    let sched = Schedule::from_fixed_parts(parts).unwrap();
    let mut s = LimiterState::new(AlgoState::Gcra(Gcra(sched)), T0);
    s.extras.remember(DedupId(7), 1, T0 + 10 * SEC, 100);
    let before = s.clone();
    for id in [None, Some(DedupId(7))] {
        assert_eq!(
            flow::refund(&mut s, T0 + SEC, 1, id).unwrap_err(),
            crate::core::CoreError::StateTooLong
        );
        assert_eq!(s, before, "a refund that fails changes nothing ({id:?})");
    }
}

#[test]
fn stored_tat_beyond_max_span_is_refused() {
    let mut payload = vec![codec::CODEC_FIXED, 1];
    payload.extend_from_slice(&T0.to_le_bytes());
    payload.extend_from_slice(&u64::MAX.to_le_bytes());
    payload.extend_from_slice(&(1u64 | (1u64 << 32)).to_le_bytes());
    payload.extend_from_slice(&SEC.to_le_bytes()[..6]);
    assert_eq!(codec::decode(&payload), None);
}
