//! The codec accepts only values the module could have written (`LimiterState::is_valid`), and
//! every value it accepts works: RL.INFO's computation and a limiter call (COST 0 and 1, granted
//! or not), RL.REFUND, RL.BLOCK and RL.RELEASE succeed on it at any time from its last update on,
//! and what they write is accepted in turn (a replica takes the master's new value).
//!
//! Payloads are written here by hand, after the layouts `core::codec` documents, with fields
//! drawn around the bounds the validation checks.

use crate::core::codec;
use crate::core::concurrency::{Concurrency, release};
use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
use crate::core::flow::{self, Write};
use crate::core::kind::Kind;
use crate::core::limiter::Request;
use crate::core::param::MAX_PARAM;
use crate::core::state::{LimiterState, Stored, dispatch};
use crate::core::time::{MAX_SPAN, MAX_TIME, Micros};
use crate::core::varint::{put_u64, put_u128};

const T0: Micros = 1_700_000_000_000_000;
const HOUR: Micros = 3_600_000_000;

/// xorshift64*: a fixed sequence, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A last update: a real time, the latest `AT` or one past it, or anything.
fn last_update(r: &mut Rng) -> Micros {
    match r.below(5) {
        0 => [0, MAX_TIME, MAX_TIME + 1, u64::MAX][r.below(4) as usize],
        1 => r.next(),
        _ => T0 + r.below(1 << 40),
    }
}

/// A count or duration: small, a bound or one past it, or anything.
fn count(r: &mut Rng) -> u64 {
    match r.below(4) {
        0 => [0, 1, MAX_PARAM, MAX_PARAM + 1, u64::MAX][r.below(5) as usize],
        1 => r.next(),
        _ => 1 + r.below(100),
    }
}

/// A time around `last`: before it, after it, around the latest a value may reach
/// (`last + MAX_SPAN`), or anything.
fn time(r: &mut Rng, last: Micros) -> Micros {
    match r.below(5) {
        0 => last.saturating_sub(r.below(10 * HOUR)),
        1 => last.saturating_add(r.below(10 * HOUR)),
        2 => last
            .saturating_add(MAX_SPAN)
            .saturating_sub(r.below(2))
            .saturating_add(r.below(2)),
        3 => r.next(),
        _ => last,
    }
}

/// The algorithm's part of a payload of `kind`, with times around `last`.
fn algo_fields(r: &mut Rng, kind: Kind, last: Micros, out: &mut Vec<u8>) {
    match kind {
        Kind::Gcra | Kind::TokenBucket | Kind::LeakyBucket => {
            let (burst, rate) = (count(r), count(r));
            let period = if r.below(2) == 0 { HOUR } else { count(r) };
            for v in [burst, rate, period] {
                put_u64(out, v);
            }
            // The TAT in ticks of 1/rate µs.
            let tat = match r.below(4) {
                0 => 0,
                1 => u128::from(time(r, last)) * u128::from(rate) + u128::from(r.below(rate)),
                2 => (u128::from(last) + u128::from(MAX_SPAN))
                    .saturating_mul(u128::from(rate))
                    .saturating_add(u128::from(r.below(2))),
                _ => (u128::from(r.next()) << 64) | u128::from(r.next()),
            };
            put_u128(out, tat);
        }
        Kind::Fixed => {
            let window = count(r);
            for v in [count(r), window, r.below(window), time(r, last), count(r)] {
                put_u64(out, v);
            }
        }
        Kind::Sliding => {
            let window = (1 + r.below(3_600_000)) * 1000;
            let precision = if r.below(4) == 0 { count(r) } else { 1000 };
            let entries = r.below(4);
            for v in [count(r), window, precision, entries] {
                put_u64(out, v);
            }
            for i in 0..entries {
                // Δms from the previous entry (from the epoch for the first), units when not 1.
                let delta = if i == 0 {
                    time(r, last) / 1000
                } else {
                    1 + r.below(1000)
                };
                let units = if r.below(2) == 0 { 1 } else { count(r) };
                put_u64(out, (delta.min(u64::MAX >> 1) << 1) | u64::from(units != 1));
                if units != 1 {
                    put_u64(out, units);
                }
            }
        }
        Kind::SlidingCounter => {
            let window = count(r);
            let start = match r.below(3) {
                0 => 0,
                1 => time(r, last) / window.max(1) * window,
                _ => time(r, last),
            };
            for v in [count(r), window, start, count(r), count(r)] {
                put_u64(out, v);
            }
        }
        Kind::Concurrency => {
            let leases = r.below(4);
            for v in [1 + r.below(70_000), count(r), leases] {
                put_u64(out, v);
            }
            let mut prev = 0u64;
            for _ in 0..leases {
                out.extend_from_slice(&u128::from(r.next()).to_le_bytes());
                put_u64(out, 1 + r.below(3));
                let expiry = time(r, last).max(prev);
                put_u64(out, expiry - prev);
                prev = expiry;
            }
        }
    }
}

/// A whole payload: version 1 or 2 (kind 0 for a key of only a block), or the fixed form.
fn payload(r: &mut Rng) -> Vec<u8> {
    let last = last_update(r);
    let kinds = Kind::ALL;
    if r.below(8) == 0 {
        // Version 3: last update, TAT, burst | rate << 32, period (48 bits).
        let mut p = vec![codec::CODEC_FIXED, 1 + r.below(3) as u8];
        let rate = 1 + r.below(1000);
        let tat = match r.below(2) {
            0 => time(r, last).saturating_mul(rate),
            _ => r.next(),
        };
        p.extend_from_slice(&last.to_le_bytes());
        p.extend_from_slice(&tat.to_le_bytes());
        p.extend_from_slice(&((1 + r.below(1000)) | rate << 32).to_le_bytes());
        p.extend_from_slice(&HOUR.to_le_bytes()[..6]);
        return p;
    }
    let v2 = r.below(2) == 0;
    let kind = if v2 && r.below(8) == 0 {
        None
    } else {
        Some(kinds[r.below(kinds.len() as u64) as usize])
    };
    let mut p = vec![if v2 { 2 } else { 1 }, kind.map_or(0, |k| k as u8)];
    put_u64(&mut p, last);
    if let Some(kind) = kind {
        algo_fields(r, kind, last, &mut p);
    }
    if v2 {
        put_u64(&mut p, if r.below(2) == 0 { 0 } else { time(r, last) });
    }
    let ids = r.below(3);
    put_u64(&mut p, ids);
    for _ in 0..ids {
        p.extend_from_slice(&u128::from(r.next()).to_le_bytes());
        let granted = count(r);
        put_u64(
            &mut p,
            if v2 {
                granted.saturating_mul(2)
            } else {
                granted
            },
        );
        put_u64(&mut p, time(r, last));
    }
    p
}

/// `state`, written and read back: a value the module writes is one it accepts.
fn round_trips(state: &LimiterState, what: &str) {
    assert_eq!(
        codec::decode(&codec::encode(state)).as_ref(),
        Some(state),
        "{what} wrote a value the codec refuses"
    );
}

/// Every command on a value of algorithm `A`, at `now`, under its stored parameters.
fn exercise<A: Stored>(state: &LimiterState, now: Micros) {
    let algo = A::from_state(state.algo.as_ref().unwrap()).unwrap();
    let mut params = algo.params().clone();
    // A lease id no generated lease has (RL.ACQUIRE's ID; no-op for the other algorithms).
    A::bind_call(&mut params, Some(DedupId(u128::MAX - 7)), false).unwrap();
    for cost in [0, 1] {
        for best_effort in [false, true] {
            let mut s = state.clone();
            let mut req = Request::new(cost, now);
            req.best_effort = best_effort && A::KIND != Kind::Concurrency;
            req.dedup = Some(DedupId(3));
            req.block = Some(HOUR);
            let out = flow::apply::<A>(Some(&mut s), &params, &req, 10);
            let out = out.unwrap_or_else(|e| panic!("cost {cost} at {now}: {e:?} on {state:?}"));
            assert!(matches!(out.write, Write::None | Write::Updated));
            round_trips(&s, "a call");
        }
    }
}

/// What RL.INFO computes, a limiter call, RL.REFUND, RL.BLOCK and RL.RELEASE on `state` at `now`.
fn works(state: &LimiterState, now: Micros) {
    state
        .peek(now)
        .unwrap_or_else(|e| panic!("RL.INFO at {now}: {e:?} on {state:?}"));
    let _ = (
        state.describe(),
        state.describe_live(now),
        state.expires_at(),
    );
    if let Some(algo) = &state.algo {
        type Go = fn(&LimiterState, Micros);
        fn of<A: Stored>(_: &A) -> Go {
            exercise::<A>
        }
        let go: Go = dispatch!(algo, a => of(a));
        go(state, now);
    }
    let mut s = state.clone();
    match flow::refund(&mut s, now, 1, None) {
        Ok(_) | Err(CoreError::NoRefund { .. }) => round_trips(&s, "RL.REFUND"),
        Err(e) => panic!("RL.REFUND at {now}: {e:?} on {state:?}"),
    }
    let mut s = state.clone();
    flow::block(&mut s, now, MAX_SPAN);
    round_trips(&s, "RL.BLOCK");
    let mut s = state.clone();
    if s.kind() == Some(Kind::Concurrency) {
        let id = Concurrency::from_state(s.algo.as_ref().unwrap())
            .and_then(|c| c.leases().iter().next())
            .map_or(DedupId(1), |l| l.id);
        release(&mut s, id, now).unwrap();
        round_trips(&s, "RL.RELEASE");
    }
}

#[test]
fn every_accepted_payload_works_with_every_command() {
    let mut r = Rng(0x005e_ed0f_a115_a7e5);
    let mut accepted = [0usize; 8];
    let mut refused = 0usize;
    for _ in 0..40_000 {
        let p = payload(&mut r);
        let Some(state) = codec::decode(&p) else {
            refused += 1;
            continue;
        };
        accepted[state.kind().map_or(0, |k| k as usize)] += 1;
        assert!(state.is_valid());
        round_trips(&state, "the codec");
        let last = state.last_update;
        let later = last + r.below(MAX_TIME - last + 1);
        // Before the last update too: calls are then evaluated at it.
        for now in [last.saturating_sub(1), last, later, MAX_TIME] {
            works(&state, now);
        }
    }
    // Neither side is empty, for every algorithm and for a key of only a block.
    assert!(refused > 1000, "{refused} refused");
    for (kind, n) in accepted.iter().enumerate() {
        assert!(*n >= 100, "{n} accepted of kind {kind}: {accepted:?}");
    }
}

/// One payload of version 2 (version 1 has no block) with the given algorithm part.
fn v2(kind: u8, last: Micros, fields: &[u128], block: Micros, ids: &[(u64, Micros)]) -> Vec<u8> {
    let mut p = vec![2, kind];
    put_u64(&mut p, last);
    for &f in fields {
        put_u128(&mut p, f);
    }
    put_u64(&mut p, block);
    put_u64(&mut p, ids.len() as u64);
    for &(granted, until) in ids {
        p.extend_from_slice(&7u128.to_le_bytes());
        put_u64(&mut p, granted.saturating_mul(2));
        put_u64(&mut p, until);
    }
    p
}

/// The bounds, each at its edge and one past it: what the module could have written is
/// accepted, the next value is refused.
#[test]
fn each_bound_is_accepted_and_one_past_it_refused() {
    let t = T0;
    let s = u128::from(MAX_SPAN);
    let tu = u128::from(t);
    let gcra = |tat: u128| v2(1, t, &[3, 1, u128::from(HOUR), tat], 0, &[]);
    // GCRA (burst 3, one an hour) with a TAT 2^63 - 1 µs after its last update: RL.INFO's
    // reset_after is then exactly MAX_SPAN. One tick more, it would not fit.
    let at_edge = codec::decode(&gcra(tu + s)).expect("the latest TAT");
    let info = at_edge.peek(t).unwrap().unwrap();
    assert_eq!(info.reset_after_ms, (MAX_SPAN / 1000 + 1) as i64);
    #[rustfmt::skip]
    let cases: &[(&str, Vec<u8>, Vec<u8>)] = &[
        ("last update", v2(1, MAX_TIME, &[3, 1, 1, 0], 0, &[]), v2(1, MAX_TIME + 1, &[3, 1, 1, 0], 0, &[])),
        ("GCRA TAT", gcra(tu + s), gcra(tu + s + 1)),
        // Rate 7: ticks of 1/7 µs.
        ("token bucket TAT", v2(2, t, &[3, 7, 1, (tu + s) * 7], 0, &[]), v2(2, t, &[3, 7, 1, (tu + s) * 7 + 1], 0, &[])),
        ("fixed window end", v2(4, t, &[5, 10, 0, tu + s, 1], 0, &[]), v2(4, t, &[5, 10, 0, tu + s + 1, 1], 0, &[])),
        ("fixed count", v2(4, t, &[5, 10, 0, tu, u128::from(MAX_PARAM)], 0, &[]), v2(4, t, &[5, 10, 0, tu, u128::from(MAX_PARAM) + 1], 0, &[])),
        // One entry of one unit at `t` (Δms << 1 from the epoch), then 1 ms later.
        ("sliding entry", v2(5, t, &[5, 1000, 1000, 1, (tu / 1000) << 1], 0, &[]), v2(5, t, &[5, 1000, 1000, 1, (tu / 1000 + 1) << 1], 0, &[])),
        ("sliding counter start", v2(6, t, &[5, 1000, tu, 1, 1], 0, &[]), v2(6, t, &[5, 1000, tu + 1000, 1, 1], 0, &[])),
        ("sliding counter count", v2(6, t, &[5, 1000, tu, u128::from(MAX_PARAM), 0], 0, &[]), v2(6, t, &[5, 1000, tu, 0, u128::from(MAX_PARAM) + 1], 0, &[])),
        ("block", v2(1, t, &[3, 1, 1, 0], t + MAX_SPAN, &[]), v2(1, t, &[3, 1, 1, 0], t + MAX_SPAN + 1, &[])),
        ("block only", v2(0, t, &[], t + MAX_SPAN, &[]), v2(0, t, &[], t + MAX_SPAN + 1, &[])),
        ("dedup id", v2(1, t, &[3, 1, 1, 0], 0, &[(MAX_PARAM, t + MAX_SPAN)]), v2(1, t, &[3, 1, 1, 0], 0, &[(1, t + MAX_SPAN + 1)])),
    ];
    for (what, ok, bad) in cases {
        let state = codec::decode(ok).unwrap_or_else(|| panic!("{what}: refused at the edge"));
        works(&state, t);
        works(&state, MAX_TIME);
        assert_eq!(codec::decode(bad), None, "{what}: accepted past the edge");
    }
    // A lease: limit 5, leases of 1 h, one lease (id 9, 1 unit) ending MAX_SPAN after `t`.
    let lease = |expiry: u64| {
        let mut p = vec![1, Kind::Concurrency as u8];
        for v in [t, 5, HOUR, 1] {
            put_u64(&mut p, v);
        }
        p.extend_from_slice(&9u128.to_le_bytes());
        put_u64(&mut p, 1);
        put_u64(&mut p, expiry);
        put_u64(&mut p, 0);
        p
    };
    let state = codec::decode(&lease(t + MAX_SPAN)).expect("the latest lease");
    works(&state, t);
    assert_eq!(codec::decode(&lease(t + MAX_SPAN + 1)), None);
    // The fixed form is held to the same bounds: GCRA, burst 3, rate 1, period 1 µs.
    let fixed = |last: u64, tat: u64| {
        let mut p = vec![codec::CODEC_FIXED, Kind::Gcra as u8];
        p.extend_from_slice(&last.to_le_bytes());
        p.extend_from_slice(&tat.to_le_bytes());
        p.extend_from_slice(&(3u64 | 1 << 32).to_le_bytes());
        p.extend_from_slice(&[1, 0, 0, 0, 0, 0]);
        p
    };
    assert!(codec::decode(&fixed(t, t + MAX_SPAN)).is_some());
    assert_eq!(codec::decode(&fixed(t, t + MAX_SPAN + 1)), None);
    assert_eq!(codec::decode(&fixed(MAX_TIME + 1, 0)), None);
}
