//! A limiter key's value as it is kept in memory: [`Packed`], 32 bytes (one small allocation).
//!
//! The common value (a fixed-size limiter with small parameters and no `DEDUP` id) is kept
//! inline as its encoding: the last update and the algorithm's own fields in the codec's varints
//! (`core::codec`), which round-trip exactly. Any other value (`DEDUP` ids, a block, a sliding
//! log's entries or leases, parameters or times too large for 30 bytes) is boxed as a whole [`LimiterState`].
//! Commands work on a [`LimiterState`] either way ([`Packed::unpack`], then [`StateMut::store`]).

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

use crate::core::kind::Kind;
use crate::core::state::{AlgoState, LimiterState};
use crate::core::varint::{Reader, put_u64};

/// Bytes of an inline encoding.
pub const INLINE_MAX: usize = 30;

/// A value kept inline: its algorithm, then `len` bytes of `last_update` and the algorithm's
/// encoding.
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
    /// The value inline, if it has no `DEDUP` id and its encoding fits.
    fn of(state: &LimiterState) -> Option<Inline> {
        let algo = state.algo.as_ref()?;
        if !state.extras.is_empty() || state.extras.block_until() != 0 || state.has_heap() {
            return None;
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
    /// Append the value's codec encoding (`core::codec`) to `out`.
    pub fn encode_into(self, out: &mut Vec<u8>) {
        match self {
            Encodable::Inline(i) => {
                // The codec's layout (version 1: no block, no settled id): version, kind, then
                // what the inline value holds, then no DEDUP id.
                out.reserve(INLINE_MAX + 3);
                out.push(crate::core::codec::CODEC_VERSION_1);
                out.push(i.kind as u8);
                out.extend_from_slice(i.bytes.get(..usize::from(i.len)).unwrap_or_default());
                out.push(0);
            }
            Encodable::Full(s) => crate::core::codec::encode_into(s, out),
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

    #[test]
    fn common_values_are_inline_others_boxed() {
        let p = GcraParams::new(10_000_000, 1, 60_000_000).unwrap();
        let mut g = Gcra::fresh(&p);
        g.commit(&p, 1_700_000_000_000_000, 1).unwrap();
        let state = LimiterState::new(g.into_state(), 1_700_000_000_000_000);
        let packed = Packed::pack(state.clone());
        assert!(matches!(packed, Packed::Inline(_)));
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

    proptest! {
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
