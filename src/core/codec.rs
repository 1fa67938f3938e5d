//! The one binary format of a limiter's state, used by RDB, AOF rewrite (`RL._RESTORE`) and
//! `DEBUG DIGEST-VALUE`.
//!
//! Version 1 layout: `version` byte, `kind` byte, then LEB128 varints: last update (µs), the
//! algorithm's own fields (its `encode`), the number of dedup ids and, for each, its 16-byte
//! hash (little-endian), grant and expiry.
//!
//! Version 2 adds what RL.BLOCK and RL.REFUND store: `kind` 0 for a key holding only a block
//! (no algorithm fields follow), the block's end (µs, 0 for none) after the algorithm's
//! fields, and each dedup id's grant written `grant << 1 | settled`. A value that uses neither
//! (the common case) is still written as version 1, byte for byte as before, and both versions
//! are read.
//!
//! Version 3 is the fixed-width form of a GCRA, token bucket or leaky bucket value with no
//! `DEDUP` id and no block, whose fields fit fixed-width words ([`FIXED_LEN`] bytes,
//! little-endian: last update 8, TAT 8, `burst | rate << 32` 8, period 6), after the version and
//! kind bytes: 32 bytes in all. A key's in-memory value keeps these words (`core::packed`), so a
//! granted call replicates its new value (`RL._SET`) with a copy instead of an encoding. It is
//! read everywhere; RDB and AOF rewrite still write versions 1 and 2.
//!
//! Version 4 is version 2 with reservations (`HOLD ttl`): after each id's expiry, the end of
//! its reservation (µs, 0 for an id without `HOLD`) and, for a reservation, the units charged
//! for it (`core::dedup::Entry::charged`). It is written only for a value holding a
//! reservation, so every value without one is written as before, byte for byte.
//!
//! Decoding validates everything and never panics: a truncated, oversized or unknown payload is
//! `None`, and so is a value the module could not have written (`LimiterState::is_valid`: times
//! and counts outside the ranges the algorithms' arithmetic assumes), so that every command and
//! RL.INFO work on any value decoded. Change a layout only under a new version byte, keeping a decoder for the old ones.

use crate::core::dedup::{DedupId, Entry, MIN_ENTRY_LEN};
use crate::core::extras::Extras;
use crate::core::gcra::{Gcra, MAX_PARAM, Schedule};
use crate::core::kind::Kind;
use crate::core::leaky_bucket::LeakyBucket;
use crate::core::state::{AlgoState, LimiterState};
use crate::core::token_bucket::TokenBucket;
use crate::core::varint::{Reader, put_u64};

/// Version byte of the layout with blocks and settled ids (version 2), which RDB and AOF
/// rewrite write for a value that uses either; the fixed-width form ([`CODEC_FIXED`]) is newer.
pub const CODEC_VERSION: u8 = 2;

/// Version byte of the layout without blocks and settled ids.
pub const CODEC_VERSION_1: u8 = 1;

/// Version byte of a schedule's fixed-width form.
pub const CODEC_FIXED: u8 = 3;

/// Version byte of the layout with reservations (`HOLD`).
pub const CODEC_HOLD: u8 = 4;

/// Bytes of a schedule's fixed-width words.
pub const FIXED_LEN: usize = 30;

/// Bytes of a version 3 payload: version, kind, the fixed-width words.
pub const FIXED_PAYLOAD_LEN: usize = FIXED_LEN + 2;

/// The schedule of a GCRA, token bucket or leaky bucket state.
pub fn schedule_of(algo: &AlgoState) -> Option<&Schedule> {
    match algo {
        AlgoState::Gcra(a) => Some(&a.0),
        AlgoState::TokenBucket(a) => Some(&a.0),
        AlgoState::LeakyBucket(a) => Some(&a.0),
        _ => None,
    }
}

/// The state of algorithm `kind` over schedule `s` (`None`: `kind` is no schedule).
pub fn with_schedule(kind: Kind, s: Schedule) -> Option<AlgoState> {
    match kind {
        Kind::Gcra => Some(AlgoState::Gcra(Gcra(s))),
        Kind::TokenBucket => Some(AlgoState::TokenBucket(TokenBucket(s))),
        Kind::LeakyBucket => Some(AlgoState::LeakyBucket(LeakyBucket(s))),
        _ => None,
    }
}

/// `last_update` and a schedule's fixed parts as fixed-width words (an inline value whose `len`
/// is `core::packed::FIXED`, and the body of a version 3 payload).
pub fn fixed_bytes(last_update: u64, [tat, burst_rate, period]: [u64; 3]) -> [u8; FIXED_LEN] {
    let mut bytes = [0u8; FIXED_LEN];
    if let Some((a, rest)) = bytes.split_first_chunk_mut::<8>()
        && let Some((b, rest)) = rest.split_first_chunk_mut::<8>()
        && let Some((c, rest)) = rest.split_first_chunk_mut::<8>()
        && let Some((d, _)) = rest.split_first_chunk_mut::<6>()
        && let Some((p, _)) = period.to_le_bytes().split_first_chunk::<6>()
    {
        *a = last_update.to_le_bytes();
        *b = tat.to_le_bytes();
        *c = burst_rate.to_le_bytes();
        *d = *p;
    }
    bytes
}

/// The inverse of [`fixed_bytes`]: `last_update` and the fixed parts.
pub fn fixed_words(bytes: &[u8; FIXED_LEN]) -> (u64, [u64; 3]) {
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        if let Some((head, _)) = b.split_first_chunk::<8>() {
            w = *head;
        } else if let Some((head, _)) = b.split_first_chunk::<6>()
            && let Some((low, _)) = w.split_first_chunk_mut::<6>()
        {
            *low = *head;
        }
        u64::from_le_bytes(w)
    };
    let rest = |n: usize| bytes.get(n..).unwrap_or_default();
    (word(bytes), [word(rest(8)), word(rest(16)), word(rest(24))])
}

/// The version 3 payload of a schedule of algorithm `kind` kept as fixed-width `words`.
pub fn fixed_payload(kind: Kind, words: &[u8; FIXED_LEN]) -> [u8; FIXED_PAYLOAD_LEN] {
    let mut out = [0u8; FIXED_PAYLOAD_LEN];
    if let Some(([version, tag], rest)) = out.split_first_chunk_mut::<2>() {
        *version = CODEC_FIXED;
        *tag = kind as u8;
        if let Some((body, _)) = rest.split_first_chunk_mut::<FIXED_LEN>() {
            *body = *words;
        }
    }
    out
}

/// Decode a version 3 payload (all of `input`, version byte included).
fn decode_fixed(input: &[u8]) -> Option<LimiterState> {
    let [CODEC_FIXED, tag, rest @ ..] = input else {
        return None;
    };
    let words: &[u8; FIXED_LEN] = rest.try_into().ok()?;
    let (last_update, parts) = fixed_words(words);
    let algo = with_schedule(Kind::from_tag(*tag)?, Schedule::from_fixed_parts(parts)?)?;
    Some(LimiterState::new(algo, last_update)).filter(LimiterState::is_valid)
}

/// Encode a whole limiter value.
pub fn encode(state: &LimiterState) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    encode_into(state, &mut out);
    out
}

/// Append the encoding of a whole limiter value to `out`.
pub fn encode_into(state: &LimiterState, out: &mut Vec<u8>) {
    let v4 = state.extras.iter().any(|e| e.hold_end != 0);
    let v2 = v4
        || state.algo.is_none()
        || state.extras.block_until() != 0
        || state.extras.iter().any(|e| e.settled);
    out.push(match (v4, v2) {
        (true, _) => CODEC_HOLD,
        (false, true) => CODEC_VERSION,
        (false, false) => CODEC_VERSION_1,
    });
    out.push(state.kind().map_or(0, |k| k as u8));
    put_u64(out, state.last_update);
    state.encode_algo(out);
    if v2 {
        put_u64(out, state.extras.block_until());
    }
    put_u64(out, state.extras.len() as u64);
    for e in state.extras.iter() {
        out.extend_from_slice(&e.id.0.to_le_bytes());
        if v2 {
            let granted = e.granted.min(MAX_PARAM);
            put_u64(out, (granted << 1) | u64::from(e.settled));
        } else {
            put_u64(out, e.granted);
        }
        put_u64(out, e.until);
        if v4 {
            put_u64(out, e.hold_end);
            if e.hold_end != 0 {
                put_u64(out, e.charged);
            }
        }
    }
}

/// Decode a whole limiter value; `None` if it is not exactly a valid payload.
pub fn decode(input: &[u8]) -> Option<LimiterState> {
    let mut r = Reader::new(input);
    let (v2, v4) = match r.byte()? {
        CODEC_VERSION_1 => (false, false),
        CODEC_VERSION => (true, false),
        CODEC_HOLD => (true, true),
        CODEC_FIXED => return decode_fixed(input),
        _ => return None,
    };
    let algo = match r.byte()? {
        0 if v2 => None,
        tag => Some(Kind::from_tag(tag)?),
    };
    let last_update = r.u64()?;
    let algo = match algo {
        Some(kind) => Some(AlgoState::decode(kind, &mut r)?),
        None => None,
    };
    let block_until = if v2 { r.u64()? } else { 0 };
    let count = usize::try_from(r.u64()?).ok()?;
    // Never trust a count to size an allocation: it must fit in what is left.
    if count > r.remaining() / MIN_ENTRY_LEN {
        return None;
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let id = u128::from_le_bytes(r.bytes(16)?.try_into().ok()?);
        let word = r.u64()?;
        let (granted, settled) = if v2 {
            (word >> 1, word & 1 == 1)
        } else {
            (word, false)
        };
        let until = r.u64()?;
        let hold_end = if v4 { r.u64()? } else { 0 };
        let charged = if hold_end != 0 { r.u64()? } else { 0 };
        entries.push(Entry {
            hold_end,
            charged,
            ..Entry::plain(DedupId(id), granted, until, settled)
        });
    }
    if r.remaining() != 0 {
        return None;
    }
    // A version 4 payload holds a reservation (one encoding per value).
    if v4 && entries.iter().all(|e| e.hold_end == 0) {
        return None;
    }
    // A key of only a block has one; a version 2 payload always uses what version 1 lacks.
    if algo.is_none() && block_until == 0 {
        return None;
    }
    Some(LimiterState {
        last_update,
        algo,
        extras: Extras::from_parts(entries, block_until),
    })
    .filter(LimiterState::is_valid)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::CoreError;
    use crate::core::flow::apply;
    use crate::core::gcra::{Gcra, GcraParams};
    use crate::core::limiter::{Algorithm, Decision, Request};
    use crate::core::state::Stored;
    use crate::core::state::{AlgoState, dispatch};
    use crate::core::testkit;
    use crate::core::time::{MAX_SPAN, MAX_TIME};
    use proptest::prelude::*;

    fn gcra_state() -> LimiterState {
        let p = GcraParams::new(10, 5, 1_000_000).unwrap();
        let mut s = Gcra::fresh(&p);
        s.commit(&p, 1_700_000_000_000_000, 3).unwrap();
        let mut state = LimiterState::new(s.into_state(), 1_700_000_000_000_000);
        state
            .extras
            .remember(DedupId(7), 3, 1_700_000_001_000_000, 10);
        state
    }

    #[test]
    fn codec_fixture_is_stable() {
        // version 1, kind 1 (gcra), last update, burst 10, rate 5, period 1e6 µs,
        // TAT = (now + 600 ms) × 5 ticks, one dedup id (hash 7, granted 3, until +1 s); the
        // varints were computed independently (LEB128 by hand).
        let bytes = encode(&gcra_state());
        let want: Vec<u8> = [
            &[1u8, 1][..],
            &[128, 128, 249, 192, 193, 196, 130, 3],
            &[10, 5, 192, 132, 61],
            &[192, 141, 148, 198, 199, 214, 140, 15],
            &[1, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            &[3, 192, 132, 182, 193, 193, 196, 130, 3],
        ]
        .concat();
        assert_eq!(bytes, want);
        assert_eq!(decode(&want), Some(gcra_state()));
    }

    #[test]
    fn codec_rejects_bad_payloads() {
        let good = encode(&gcra_state());
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[4, 1]), None, "unknown version");
        assert_eq!(decode(&[CODEC_FIXED, 1]), None, "short fixed form");
        // The fixed form: a GCRA of burst 3, rate 7, period 9 µs; zero burst or rate, or a kind
        // that is not a schedule, is refused.
        let mut fixed = [0u8; FIXED_PAYLOAD_LEN];
        fixed[..2].copy_from_slice(&[CODEC_FIXED, Kind::Gcra as u8]);
        fixed[18..24].copy_from_slice(&[3, 0, 0, 0, 7, 0]);
        fixed[26] = 9;
        let want = LimiterState::new(
            Gcra::fresh(&GcraParams::new(3, 7, 9).unwrap()).into_state(),
            0,
        );
        assert_eq!(decode(&fixed), Some(want));
        for (at, value) in [(18, 0), (22, 0), (1, Kind::Fixed as u8), (1, 0)] {
            let mut bad = fixed;
            bad[at] = value;
            assert_eq!(decode(&bad), None, "byte {at} = {value}");
        }
        assert_eq!(decode(&[1, 99, 0]), None, "unknown kind");
        for cut in 0..good.len() {
            assert_eq!(decode(&good[..cut]), None, "truncated at {cut}");
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(decode(&long), None, "trailing byte");
        // Zero parameters are invalid even in a payload.
        assert_eq!(decode(&[1, 1, 0, 0, 5, 1, 0, 0]), None);
        // A huge dedup count must not allocate.
        let mut huge = encode(&LimiterState::new(
            Gcra::fresh(&GcraParams::new(1, 1, 1).unwrap()).into_state(),
            0,
        ));
        huge.pop();
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert_eq!(decode(&huge), None);
        // Varints longer than their type.
        assert_eq!(Reader::new(&[0xff; 11]).u64(), None);
        assert_eq!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).u64(),
            None
        );
        assert_eq!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).u64(),
            Some(u64::MAX)
        );
    }

    #[test]
    fn payloads_written_before_reservations_still_load() {
        // RL._RESTORE payloads of an AOF rewrite by the module as it was before `HOLD`
        // (versions 1 and 2), each key written at 1800000000000 ms: a GCRA with a settled id
        // and a block, a sliding log, a sliding counter, a calendar FIXED, a leaky bucket, a
        // block alone. Each loads, holds no reservation, and is written back byte for byte.
        let t = 1_800_000_000_000_000;
        #[rustfmt::skip]
        let payloads: [&[u8]; 6] = [
            &[2, 1, 128, 128, 226, 196, 242, 162, 153, 3, 10, 3, 192, 132, 61, 192, 132, 227, 206, 215, 232, 203, 9, 192, 150, 147, 199, 242, 162, 153, 3, 1, 100, 137, 74, 78, 112, 43, 145, 120, 175, 140, 26, 111, 105, 203, 40, 210, 5, 192, 132, 159, 197, 242, 162, 153, 3],
            &[1, 5, 160, 156, 227, 196, 242, 162, 153, 3, 100, 128, 142, 206, 28, 232, 7, 2, 128, 192, 226, 133, 227, 104, 41, 3, 1, 21, 141, 74, 78, 112, 43, 145, 120, 175, 140, 26, 114, 105, 203, 40, 210, 1, 128, 142, 176, 225, 242, 162, 153, 3],
            &[1, 6, 128, 128, 226, 196, 242, 162, 153, 3, 10, 128, 142, 206, 28, 128, 128, 226, 196, 242, 162, 153, 3, 0, 1, 1, 179, 133, 74, 78, 112, 43, 145, 120, 175, 140, 26, 108, 105, 203, 40, 210, 1, 128, 142, 176, 225, 242, 162, 153, 3],
            &[1, 4, 128, 128, 226, 196, 242, 162, 153, 3, 10, 0, 139, 1, 12, 69, 117, 114, 111, 112, 101, 47, 80, 97, 114, 105, 115, 128, 192, 210, 232, 249, 77, 128, 184, 212, 197, 217, 204, 153, 3, 1, 1, 218, 139, 74, 78, 112, 43, 145, 120, 175, 140, 26, 113, 105, 203, 40, 210, 1, 128, 184, 212, 197, 217, 204, 153, 3],
            &[1, 3, 128, 128, 226, 196, 242, 162, 153, 3, 10, 3, 192, 132, 61, 192, 132, 227, 206, 215, 232, 203, 9, 1, 120, 132, 74, 78, 112, 43, 145, 120, 175, 140, 26, 107, 105, 203, 40, 210, 1, 192, 132, 159, 197, 242, 162, 153, 3],
            &[2, 0, 128, 128, 226, 196, 242, 162, 153, 3, 128, 137, 220, 197, 242, 162, 153, 3, 0],
        ];
        let kinds = [
            Some(Kind::Gcra),
            Some(Kind::Sliding),
            Some(Kind::SlidingCounter),
            Some(Kind::Fixed),
            Some(Kind::LeakyBucket),
            None,
        ];
        for (bytes, kind) in payloads.iter().zip(kinds) {
            let state = decode(bytes).unwrap_or_else(|| panic!("{kind:?} loads"));
            assert_eq!(state.kind(), kind);
            assert!(state.last_update >= t && state.last_update < t + 1_000_000);
            assert!(
                state
                    .extras
                    .iter()
                    .all(|e| e.hold_end == 0 && e.charged == 0)
            );
            assert_eq!(encode(&state), bytes.to_vec(), "{kind:?} written as before");
        }
        // The GCRA's id was settled by a refund, and the key blocked for 5 s.
        let gcra = decode(payloads[0]).unwrap();
        assert_eq!(
            gcra.extras.iter().map(|e| e.settled).collect::<Vec<_>>(),
            [true]
        );
        assert_eq!(gcra.extras.block_until(), t + 5_000_000);
    }

    #[test]
    fn reservations_are_written_as_version_4_and_only_then() {
        let mut state = gcra_state();
        let v1 = encode(&state);
        assert_eq!(v1[0], CODEC_VERSION_1);
        state.extras.remember_hold(
            DedupId(9),
            4,
            1_700_000_001_000_000,
            1_700_000_002_000_000,
            10,
        );
        let v4 = encode(&state);
        assert_eq!(v4[0], CODEC_HOLD);
        assert_eq!(decode(&v4), Some(state.clone()));
        // Settled with 6 units (2 into debt): still a reservation's entry, still version 4.
        state.extras.settle(DedupId(9), 1_700_000_000_000_000, 6);
        let settled = encode(&state);
        assert_eq!(settled[0], CODEC_HOLD);
        let back = decode(&settled).unwrap();
        assert_eq!(back, state);
        let e = back
            .extras
            .iter()
            .find(|e| e.id == DedupId(9))
            .copied()
            .unwrap();
        assert_eq!((e.granted, e.charged, e.settled), (4, 6, true));
        // Version 4 without a reservation is not a payload the module writes.
        let mut no_hold = encode(&gcra_state());
        no_hold[0] = CODEC_HOLD;
        assert_eq!(decode(&no_hold), None);
        // A reservation ending past what its last update allows is refused.
        let mut far = gcra_state();
        far.extras
            .remember_hold(DedupId(9), 4, 0, far.last_update + MAX_SPAN + 1, 10);
        assert_eq!(decode(&encode(&far)), None);
    }

    /// A number small or up to the largest parameter.
    fn arb_number(small: u64) -> impl Strategy<Value = u64> {
        prop_oneof![1..small, 1..=MAX_PARAM]
    }

    /// A value of any registered algorithm ([`testkit::sample`]), charged by up to three calls
    /// (each with parameters of its own, at times up to `now`), with up to 4 dedup ids.
    pub(crate) fn arb_state() -> impl Strategy<Value = LimiterState> {
        let numbers = (
            arb_number(100),
            arb_number(100),
            arb_number(100_000_000),
            any::<u64>(),
            0u64..10_000_000,
        );
        // An id, its grant and expiry, and maybe a reservation: its end, and whether it was
        // settled (with how many units).
        let hold = prop::option::of((any::<u64>(), any::<bool>(), any::<u64>()));
        let entry = (any::<u128>(), any::<u64>(), any::<u64>(), hold);
        // The last update is the latest call's time: at or after the one that wrote the state.
        let ahead = prop_oneof![Just(0u64), 0u64..10_000_000, any::<u64>()];
        (
            prop::sample::select(Kind::ALL),
            prop::collection::vec(numbers, 1..4),
            ahead,
            0u64..=MAX_TIME,
            prop::collection::vec(entry, 0..5),
        )
            .prop_filter_map(
                "parameters the algorithm refuses",
                |(kind, mut calls, ahead, now, entries)| {
                    let ([a, b, c, d], _) = split(calls.first()?);
                    let mut algo = testkit::sample(kind, [a, b, c, d])?.into_state();
                    // The calls in time order, the last at `now`.
                    calls.sort_by_key(|n| std::cmp::Reverse(n.4));
                    for (i, n) in calls.iter().enumerate() {
                        let (numbers, back) = split(n);
                        let at = now.saturating_sub(back);
                        let cost = 1 + i as u64 % 2;
                        if let Some(spec) = testkit::sample(kind, numbers) {
                            let spec = spec.into_state();
                            dispatch!(&mut algo, a => charge(a, &spec, at, cost));
                        }
                    }
                    let last = now.saturating_add(ahead).min(MAX_TIME);
                    let mut s = LimiterState::new(algo, last);
                    // Ids remembered by calls up to `last`: for at most MAX_SPAN, of at most
                    // MAX_PARAM units.
                    let latest = last.saturating_add(MAX_SPAN);
                    for (id, granted, until, hold) in entries {
                        let until = until % latest.saturating_add(1);
                        let granted = granted % (MAX_PARAM + 1);
                        match hold {
                            None => s.extras.remember(DedupId(id), granted, until, 10),
                            Some((end, settled, charged)) => {
                                let end = 1 + end % latest;
                                s.extras.remember_hold(DedupId(id), granted, until, end, 10);
                                if settled {
                                    let charged = charged % (MAX_PARAM + 1);
                                    s.extras.settle(DedupId(id), 0, charged);
                                }
                            }
                        }
                    }
                    Some(s)
                },
            )
    }

    /// The four parameter numbers and the time back from `now` of a call.
    fn split(&(a, b, c, d, back): &(u64, u64, u64, u64, u64)) -> ([u64; 4], u64) {
        ([a, b, c, d], back)
    }

    /// Charge `cost` units at `now` with the parameters of `spec` (of `a`'s algorithm), if they
    /// are granted.
    fn charge<A: Stored>(a: &mut A, spec: &AlgoState, now: u64, cost: u64) {
        let Some(params) = A::from_state(spec).map(|s| s.params().clone()) else {
            return;
        };
        if a.evaluate(&params, now, cost, false)
            .is_ok_and(|v| v.granted == cost)
        {
            a.commit(&params, now, cost).unwrap();
        }
    }

    /// Run `req` on `s` with its own stored parameters.
    fn decide(s: &mut LimiterState, req: &Request) -> Result<Decision, CoreError> {
        fn go<A: Stored>(s: &mut LimiterState, req: &Request) -> Result<Decision, CoreError> {
            let p = A::from_state(s.algo.as_ref().unwrap())
                .unwrap()
                .params()
                .clone();
            apply::<A>(Some(s), &p, req, 10).map(|o| Decision::from(o.verdict))
        }
        type Go = fn(&mut LimiterState, &Request) -> Result<Decision, CoreError>;
        fn of<A: Stored>(_: &A) -> Go {
            go::<A>
        }
        let f: Go = dispatch!(s.algo.as_ref().unwrap(), a => of(a));
        f(s, req)
    }

    proptest! {
        #[test]
        fn codec_round_trips(state in arb_state()) {
            prop_assert_eq!(decode(&encode(&state)), Some(state));
        }

        /// The length known without encoding is never more than the encoding's: a value said
        /// too long to replicate as itself is too long.
        #[test]
        fn min_encoded_len_is_a_lower_bound(state in arb_state()) {
            prop_assert!(state.min_encoded_len() <= encode(&state).len());
        }

        #[test]
        fn codec_never_panics_on_garbage(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes);
        }

        /// A restored state decides exactly as the original.
        #[test]
        fn restore_then_decide_matches(state in arb_state(), cost in 0u64..5, dt in 0u64..10_000_000) {
            let mut a = state.clone();
            let mut b = decode(&encode(&state)).unwrap();
            let req = Request::new(cost, state.last_update.saturating_add(dt));
            prop_assert_eq!(decide(&mut a, &req), decide(&mut b, &req));
            prop_assert_eq!(a, b);
        }
    }
}
