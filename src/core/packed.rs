//! A limiter key's value as it is kept in memory: [`Packed`], 32 bytes (one small allocation).
//!
//! The common value (a fixed-size limiter with small parameters and no `DEDUP` id) is kept
//! inline. A schedule (GCRA, token bucket, leaky bucket) whose fields fit fixed-width words is
//! kept as them ([`FIXED`]): read and written with a few loads and stores. Any other such value
//! is kept as its encoding: the last update and the algorithm's own fields in the codec's varints
//! (`core::codec`), which round-trip exactly. Any other value (`DEDUP` ids, a block, a sliding
//! log's entries or leases, parameters or times too large for 30 bytes) is boxed as a whole [`LimiterState`].
//! Commands work on a [`LimiterState`] either way ([`Packed::unpack`], then [`StateMut::store`]).

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

use crate::core::codec::{self, FIXED_LEN, fixed_bytes, fixed_words, schedule_of, with_schedule};
use crate::core::gcra::Schedule;
use crate::core::kind::Kind;
use crate::core::state::{AlgoState, LimiterState};
use crate::core::varint::{Reader, put_u64};

/// Bytes of an inline encoding.
pub const INLINE_MAX: usize = 30;

// A schedule's fixed-width words fill the inline bytes.
const _: () = assert!(INLINE_MAX == FIXED_LEN);

/// The `len` of a schedule kept as fixed-width words (little-endian): `last_update` (8 bytes),
/// then [`Schedule::fixed_parts`]: the TAT (8), `burst | rate << 32` (8) and the period (6).
pub const FIXED: u8 = u8::MAX;

/// A value kept inline: its algorithm, then `len` bytes of `last_update` and the algorithm's
/// encoding, or (`len` is [`FIXED`]) a schedule's fixed-width words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inline {
    kind: Kind,
    len: u8,
    bytes: [u8; INLINE_MAX],
}

/// A limiter key's value: inline when it fits, else boxed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packed {
    Inline(Inline),
    Boxed(Box<LimiterState>),
}

// The whole point: a 32-byte value (the allocator's 32-byte class).
const _: () = assert!(std::mem::size_of::<Packed>() == 32);

thread_local! {
    /// The encoding buffer of [`Packed::pack`], reused (commands run on one thread).
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl Inline {
    /// The value inline, if it has no `DEDUP` id and its encoding fits: as fixed-width words
    /// when it is a schedule whose fields fit them.
    fn of(state: &LimiterState) -> Option<Inline> {
        let algo = state.algo.as_ref()?;
        if !state.extras.is_empty() || state.extras.block_until() != 0 || state.has_heap() {
            return None;
        }
        if let Some(parts) = schedule_of(algo).and_then(Schedule::fixed_parts) {
            return Some(Inline {
                kind: algo.kind(),
                len: FIXED,
                bytes: fixed_bytes(state.last_update, parts),
            });
        }
        BUF.with_borrow_mut(|buf| {
            buf.clear();
            put_u64(buf, state.last_update);
            state.encode_algo(buf);
            let mut bytes = [0u8; INLINE_MAX];
            bytes.get_mut(..buf.len())?.copy_from_slice(buf);
            Some(Inline {
                kind: algo.kind(),
                len: u8::try_from(buf.len()).ok()?,
                bytes,
            })
        })
    }

    /// The value, decoded (`None` only if the bytes were not written by [`Inline::of`]).
    fn state(&self) -> Option<LimiterState> {
        if self.len == FIXED {
            let (last_update, parts) = fixed_words(&self.bytes);
            let algo = with_schedule(self.kind, Schedule::from_fixed_parts(parts)?)?;
            return Some(LimiterState::new(algo, last_update));
        }
        // All 30 bytes (zero after `len`), so that the varints near the end are read 8 bytes at
        // once too; exactly `len` of them must be the value.
        let mut r = Reader::new(&self.bytes);
        let last_update = r.u64()?;
        let algo = AlgoState::decode(self.kind, &mut r)?;
        (Some(r.remaining()) == INLINE_MAX.checked_sub(usize::from(self.len)))
            .then(|| LimiterState::new(algo, last_update))
    }
}

impl Packed {
    /// Keep `state`, inline when it fits.
    pub fn pack(state: LimiterState) -> Packed {
        match Inline::of(&state) {
            Some(inline) => Packed::Inline(inline),
            None => Packed::Boxed(Box::new(state)),
        }
    }

    /// `f` on the value [`Packed::pack`] would store for `state`, without moving `state`: what
    /// [`Packed::stored`] gives once it is stored.
    pub fn stored_of<R>(state: &LimiterState, f: impl FnOnce(Encodable<'_>) -> R) -> R {
        match Inline::of(state) {
            Some(inline) => f(Encodable::Inline(&inline)),
            None => f(Encodable::Full(state)),
        }
    }

    /// The value, as a copy when it is inline.
    pub fn state(&self) -> Option<LimiterState> {
        match self {
            Packed::Inline(i) => i.state(),
            Packed::Boxed(b) => Some((**b).clone()),
        }
    }

    /// The value to read or change in place; [`StateMut::store`] keeps the change.
    pub fn unpack(&mut self) -> Option<StateMut<'_>> {
        match self {
            Packed::Inline(i) => {
                let state = i.state()?;
                Some(StateMut {
                    inner: Inner::Inline { slot: self, state },
                    dirty: false,
                })
            }
            Packed::Boxed(b) => Some(StateMut {
                inner: Inner::Boxed(b),
                dirty: false,
            }),
        }
    }

    /// Run `f` on the value (decoded when inline); `None` if it does not decode.
    pub fn read<R>(&self, f: impl FnOnce(&LimiterState) -> R) -> Option<R> {
        match self {
            Packed::Inline(i) => i.state().map(|s| f(&s)),
            Packed::Boxed(b) => Some(f(b)),
        }
    }

    /// The value, for its encoding.
    pub fn stored(&self) -> Encodable<'_> {
        match self {
            Packed::Inline(i) => Encodable::Inline(i),
            Packed::Boxed(b) => Encodable::Full(b),
        }
    }

    /// Bytes used, the value itself and its heap, for `MEMORY USAGE`.
    pub fn mem_size(&self) -> usize {
        let own = std::mem::size_of::<Self>();
        match self {
            Packed::Inline(_) => own,
            Packed::Boxed(b) => own.saturating_add(b.mem_size()),
        }
    }
}

/// A key's value being read or changed: the boxed value itself, or the decoded inline one. A
/// changed inline value is encoded back into its slot by [`StateMut::store`], or when dropped.
#[derive(Debug)]
pub struct StateMut<'a> {
    inner: Inner<'a>,
    /// Borrowed mutably since it was stored (maybe changed).
    dirty: bool,
}

#[derive(Debug)]
enum Inner<'a> {
    Boxed(&'a mut LimiterState),
    Inline {
        slot: &'a mut Packed,
        state: LimiterState,
    },
}

impl StateMut<'_> {
    /// Keep what was changed (an inline value is encoded again, boxed if it no longer fits);
    /// returns the stored value, to be encoded for replication.
    pub fn store(&mut self) -> Encodable<'_> {
        let dirty = std::mem::replace(&mut self.dirty, false);
        match &mut self.inner {
            Inner::Boxed(s) => Encodable::Full(s),
            Inner::Inline { slot, state } => {
                if dirty {
                    **slot = match Inline::of(state) {
                        Some(inline) => Packed::Inline(inline),
                        None => Packed::Boxed(Box::new(state.clone())),
                    };
                }
                slot.stored()
            }
        }
    }

    /// Leave the stored value as it was: the caller knows nothing changed (a denied call).
    pub fn discard(mut self) {
        self.dirty = false;
    }
}

impl Drop for StateMut<'_> {
    fn drop(&mut self) {
        if self.dirty
            && let Inner::Inline { slot, state } = &mut self.inner
        {
            let state = std::mem::replace(
                state,
                LimiterState {
                    last_update: 0,
                    algo: None,
                    extras: Default::default(),
                },
            );
            **slot = Packed::pack(state);
        }
    }
}

impl Deref for StateMut<'_> {
    type Target = LimiterState;

    fn deref(&self) -> &LimiterState {
        match &self.inner {
            Inner::Boxed(s) => s,
            Inner::Inline { state, .. } => state,
        }
    }
}

impl DerefMut for StateMut<'_> {
    fn deref_mut(&mut self) -> &mut LimiterState {
        self.dirty = true;
        match &mut self.inner {
            Inner::Boxed(s) => s,
            Inner::Inline { state, .. } => state,
        }
    }
}

/// A stored value, for its codec encoding: an inline value is most of it already.
#[derive(Debug, Clone, Copy)]
pub enum Encodable<'a> {
    Inline(&'a Inline),
    Full(&'a LimiterState),
}

impl Encodable<'_> {
    /// The codec's version 3 payload of a fixed-width inline value (the common case): a copy
    /// of its words; `None` for any other value.
    pub fn fixed_payload(self) -> Option<[u8; codec::FIXED_PAYLOAD_LEN]> {
        match self {
            Encodable::Inline(i) if i.len == FIXED => Some(codec::fixed_payload(i.kind, &i.bytes)),
            _ => None,
        }
    }

    /// Whether the codec encoding is surely longer than `n` bytes, known without encoding it.
    pub fn surely_longer_than(self, n: usize) -> bool {
        match self {
            Encodable::Inline(_) => false,
            // Ids alone (at least `MIN_ENTRY_LEN` bytes each) usually settle it.
            Encodable::Full(s) => {
                s.extras
                    .len()
                    .saturating_mul(crate::core::dedup::MIN_ENTRY_LEN)
                    > n
                    || s.min_encoded_len() > n
            }
        }
    }

    /// Append the value's codec encoding (`core::codec`) to `out`.
    pub fn encode_into(self, out: &mut Vec<u8>) {
        match self {
            // Fixed-width words replicate as themselves (`fixed_payload`); this is for the rest.
            Encodable::Inline(i) if i.len == FIXED => {
                if let Some(state) = i.state() {
                    codec::encode_into(&state, out);
                }
            }
            Encodable::Inline(i) => {
                // The codec's layout (version 1: no block, no settled id): version, kind, then
                // what the inline value holds, then no DEDUP id.
                out.reserve(INLINE_MAX + 3);
                out.push(codec::CODEC_VERSION_1);
                out.push(i.kind as u8);
                out.extend_from_slice(i.bytes.get(..usize::from(i.len)).unwrap_or_default());
                out.push(0);
            }
            Encodable::Full(s) => codec::encode_into(s, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::codec;
    use crate::core::dedup::DedupId;
    use crate::core::gcra::{Gcra, GcraParams};
    use crate::core::limiter::Algorithm;
    use crate::core::state::Stored;
    use proptest::prelude::*;

    /// What a value encodes as before it is stored is what it encodes as once stored.
    #[test]
    fn stored_of_encodes_as_the_stored_value() {
        let p = GcraParams::new(10_000_000, 1, 60_000_000).unwrap();
        let mut g = Gcra::fresh(&p);
        g.commit(&p, 1_700_000_000_000_000, 1).unwrap();
        let state = LimiterState::new(g.into_state(), 1_700_000_000_000_000);
        let mut with_id = state.clone();
        with_id
            .extras
            .remember(DedupId(1), 1, 1_700_000_001_000_000, 10);
        for s in [state, with_id] {
            let mut before = Vec::new();
            Packed::stored_of(&s, |e| e.encode_into(&mut before));
            let mut after = Vec::new();
            Packed::pack(s.clone()).stored().encode_into(&mut after);
            assert_eq!(before, after);
            let fixed = Packed::stored_of(&s, |e| e.fixed_payload());
            assert_eq!(fixed, Packed::pack(s).stored().fixed_payload());
        }
    }

    #[test]
    fn common_values_are_inline_others_boxed() {
        let p = GcraParams::new(10_000_000, 1, 60_000_000).unwrap();
        let mut g = Gcra::fresh(&p);
        g.commit(&p, 1_700_000_000_000_000, 1).unwrap();
        let state = LimiterState::new(g.into_state(), 1_700_000_000_000_000);
        let packed = Packed::pack(state.clone());
        assert!(matches!(&packed, Packed::Inline(i) if i.len == FIXED));
        assert_eq!(packed.state(), Some(state.clone()));
        assert_eq!(packed.mem_size(), 32);
        let mut with_id = state.clone();
        with_id
            .extras
            .remember(DedupId(1), 1, 1_700_000_001_000_000, 10);
        let packed = Packed::pack(with_id.clone());
        assert!(matches!(packed, Packed::Boxed(_)));
        assert_eq!(packed.state(), Some(with_id));
        // A block is kept whole, and so is a key of only a block.
        let mut blocked = state.clone();
        blocked.extras.block(1_700_000_009_000_000);
        let packed = Packed::pack(blocked.clone());
        assert!(matches!(packed, Packed::Boxed(_)));
        assert_eq!(packed.state(), Some(blocked));
        let only = LimiterState::block_only(1_700_000_009_000_000, 1_700_000_000_000_000);
        assert_eq!(Packed::pack(only.clone()).state(), Some(only));
    }

    /// A schedule state of `kind` from its codec fields (decoded by the codec, not by the
    /// fixed form), if the parameters are valid.
    fn schedule_state(
        kind: Kind,
        burst: u64,
        rate: u64,
        period: u64,
        tat: u128,
        last: u64,
    ) -> Option<LimiterState> {
        let mut enc = Vec::new();
        for v in [burst, rate, period] {
            put_u64(&mut enc, v);
        }
        crate::core::varint::put_u128(&mut enc, tat);
        let algo = AlgoState::decode(kind, &mut Reader::new(&enc))?;
        Some(LimiterState::new(algo, last))
    }

    /// Values around the fixed form's limits (32-bit burst and rate, 48-bit period, 64-bit TAT).
    fn edgy(bits: u32) -> impl Strategy<Value = u64> {
        prop_oneof![
            1u64..200,
            any::<u64>(),
            (0u64..4).prop_map(move |d| {
                // From 2^bits - 2 to 2^bits + 1 (saturated at u64::MAX).
                let top = u64::MAX.checked_shr(64 - bits).unwrap_or(0);
                top.saturating_sub(1).saturating_add(d)
            }),
            (1u32..63).prop_map(|b| 1u64 << b),
        ]
    }

    proptest! {
        /// A GCRA, token bucket or leaky bucket value is kept as fixed-width words exactly when
        /// its fields fit them, and round-trips exactly, its codec encoding unchanged.
        #[test]
        fn schedules_are_fixed_exactly_when_they_fit(
            kind in prop_oneof![Just(Kind::Gcra), Just(Kind::TokenBucket), Just(Kind::LeakyBucket)],
            burst in edgy(32), rate in edgy(32), period in edgy(48),
            tat_lo in edgy(64), tat_hi in prop_oneof![Just(0u64), any::<u64>()],
            last in any::<u64>(),
        ) {
            let tat = (u128::from(tat_hi) << 64) | u128::from(tat_lo);
            let Some(state) = schedule_state(kind, burst, rate, period, tat, last) else {
                return Ok(());
            };
            let fits = burst <= u64::from(u32::MAX) && rate <= u64::from(u32::MAX)
                && period < 1 << 48 && tat_hi == 0;
            let mut packed = Packed::pack(state.clone());
            prop_assert_eq!(matches!(&packed, Packed::Inline(i) if i.len == FIXED), fits);
            prop_assert_eq!(packed.state(), Some(state.clone()));
            let mut enc = Vec::new();
            packed.stored().encode_into(&mut enc);
            prop_assert_eq!(&enc, &codec::encode(&state));
            // The codec gives back a value the module could have written (any other is refused).
            let decoded = state.is_valid().then(|| state.clone());
            prop_assert_eq!(codec::decode(&enc), decoded.clone());
            // What a granted call replicates: the fixed-width words, decoding to the value.
            let payload = packed.stored().fixed_payload();
            prop_assert_eq!(payload.is_some(), fits);
            if let Some(payload) = payload {
                prop_assert_eq!(payload.first(), Some(&codec::CODEC_FIXED));
                prop_assert_eq!(codec::decode(&payload), decoded);
            }
            // Changed and stored back: the form follows the new value.
            let mut s = packed.unpack().unwrap();
            s.last_update = last ^ 1;
            let mut enc = Vec::new();
            s.store().encode_into(&mut enc);
            drop(s);
            let mut want = state;
            want.last_update = last ^ 1;
            prop_assert_eq!(enc, codec::encode(&want));
            prop_assert_eq!(packed.state(), Some(want));
        }

        /// Inline bytes are only written by `Inline::of`, but any bytes at all decode or are
        /// refused without a panic, and encode without one.
        #[test]
        fn any_inline_bytes_are_safe(
            kind_i in 0usize..7, len in prop_oneof![Just(FIXED), any::<u8>()],
            bytes in prop::array::uniform30(any::<u8>()),
        ) {
            let kind = *Kind::ALL.get(kind_i % Kind::ALL.len()).unwrap();
            let packed = Packed::Inline(Inline { kind, len, bytes });
            let decoded = packed.state();
            let mut enc = Vec::new();
            packed.stored().encode_into(&mut enc);
            if let Some(state) = decoded {
                let valid = state.is_valid();
                prop_assert_eq!(codec::decode(&enc), valid.then_some(state));
            }
        }

        /// Any version 3 payload decodes to a valid value that its version 1 encoding gives back
        /// (the parameters are checked as the codec checks them), or is refused.
        #[test]
        fn any_fixed_payload_is_valid_or_refused(
            tag in prop_oneof![1u8..=3, any::<u8>()],
            words in prop::array::uniform30(any::<u8>()),
            small in any::<bool>(),
        ) {
            let mut words = words;
            if small {
                // Small, nonzero burst and rate: mostly valid parameters.
                words[16..24].copy_from_slice(&[3, 0, 0, 0, 7, 0, 0, 0]);
            }
            let mut payload = vec![codec::CODEC_FIXED, tag];
            payload.extend_from_slice(&words);
            let decoded = codec::decode(&payload);
            if let Some(state) = &decoded {
                prop_assert!(matches!(
                    state.kind(),
                    Some(Kind::Gcra | Kind::TokenBucket | Kind::LeakyBucket)
                ));
                prop_assert_eq!(codec::decode(&codec::encode(state)), Some(state.clone()));
                prop_assert_eq!(Packed::pack(state.clone()).stored().fixed_payload(), Some(
                    payload.clone().try_into().unwrap()
                ));
            }
            // Bytes short or over are refused.
            prop_assert_eq!(codec::decode(&payload[..payload.len() - 1]), None);
            payload.push(0);
            prop_assert_eq!(codec::decode(&payload), None);
        }

        /// Every value round-trips through its packed form, inline or boxed, and through an
        /// unpack-change-store cycle.
        #[test]
        fn packed_values_round_trip(state in codec::tests::arb_state(), last in any::<u64>()) {
            let mut packed = Packed::pack(state.clone());
            prop_assert_eq!(packed.state(), Some(state.clone()));
            prop_assert_eq!(packed.read(codec::encode), Some(codec::encode(&state)));
            let mut enc = Vec::new();
            packed.stored().encode_into(&mut enc);
            prop_assert_eq!(enc, codec::encode(&state));
            let mut s = packed.unpack().unwrap();
            s.last_update = last;
            drop(s);
            let mut want = state.clone();
            want.last_update = last;
            prop_assert_eq!(packed.state(), Some(want.clone()));
            // A discarded change is not kept; a stored one is.
            let mut s = packed.unpack().unwrap();
            s.last_update = last.wrapping_add(1);
            s.discard();
            if matches!(packed, Packed::Inline(_)) {
                prop_assert_eq!(packed.state(), Some(want.clone()));
            }
            let mut s = packed.unpack().unwrap();
            s.last_update = last.wrapping_add(2);
            let mut enc = Vec::new();
            s.store().encode_into(&mut enc);
            drop(s);
            want.last_update = last.wrapping_add(2);
            prop_assert_eq!(enc, codec::encode(&want));
            prop_assert_eq!(packed.state(), Some(want));
        }
    }
}
