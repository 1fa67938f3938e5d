//! The one binary format of a limiter's state, used by RDB, AOF rewrite (`RL._RESTORE`) and
//! `DEBUG DIGEST-VALUE`.
//!
//! Layout: `version` byte, `kind` byte, then LEB128 varints: last update (µs), the algorithm's
//! own fields (its `encode`), the number of dedup ids and, for each, its 16-byte hash
//! (little-endian), grant and expiry. Decoding validates everything and never panics: a
//! truncated, oversized or unknown payload is `None`. Change the layout only by bumping
//! [`CODEC_VERSION`] and keeping a decoder for the old one.

use crate::core::dedup::{DedupId, DedupSet, Entry};
use crate::core::state::{Kind, LimiterState};

/// Version byte of the current layout.
pub const CODEC_VERSION: u8 = 1;

/// Append `v` as an unsigned LEB128 varint.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    put_u128(out, u128::from(v));
}

/// Append `v` as an unsigned LEB128 varint.
pub fn put_u128(out: &mut Vec<u8>, mut v: u128) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A cursor over an encoded payload.
#[derive(Debug)]
pub struct Reader<'a> {
    input: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Read from the start of `input`.
    pub fn new(input: &'a [u8]) -> Self {
        Reader { input }
    }

    /// One byte.
    pub fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.input.split_first()?;
        self.input = rest;
        Some(b)
    }

    /// `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.input.len() {
            return None;
        }
        let (head, rest) = self.input.split_at(n);
        self.input = rest;
        Some(head)
    }

    /// A varint that must fit in `bits` bits.
    fn varint(&mut self, bits: u32) -> Option<u128> {
        let mut v: u128 = 0;
        let mut shift: u32 = 0;
        loop {
            let b = self.byte()?;
            let part = u128::from(b & 0x7f);
            if shift >= bits || (shift > 0 && part.checked_shl(shift)? >> shift != part) {
                return None;
            }
            v |= part.checked_shl(shift)?;
            if b & 0x80 == 0 {
                return if bits >= 128 || v >> bits == 0 {
                    Some(v)
                } else {
                    None
                };
            }
            shift = shift.checked_add(7)?;
        }
    }

    /// A varint `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        self.varint(64).and_then(|v| u64::try_from(v).ok())
    }

    /// A varint `u128`.
    pub fn u128(&mut self) -> Option<u128> {
        self.varint(128)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.input.len()
    }
}

/// Encode a whole limiter value.
pub fn encode(state: &LimiterState) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    out.push(CODEC_VERSION);
    out.push(state.kind() as u8);
    put_u64(&mut out, state.last_update);
    state.encode_algo(&mut out);
    put_u64(&mut out, state.dedup.len() as u64);
    for e in state.dedup.iter() {
        out.extend_from_slice(&e.id.0.to_le_bytes());
        put_u64(&mut out, e.granted);
        put_u64(&mut out, e.until);
    }
    out
}

/// Smallest encoding of one dedup entry: 16 bytes of hash and two one-byte varints.
const MIN_ENTRY_LEN: usize = 18;

/// Decode a whole limiter value; `None` if it is not exactly a valid payload.
pub fn decode(input: &[u8]) -> Option<LimiterState> {
    let mut r = Reader::new(input);
    if r.byte()? != CODEC_VERSION {
        return None;
    }
    let kind = Kind::from_tag(r.byte()?)?;
    let last_update = r.u64()?;
    let algo = LimiterState::decode_algo(kind, &mut r)?;
    let count = usize::try_from(r.u64()?).ok()?;
    // Never trust a count to size an allocation: it must fit in what is left.
    if count > r.remaining() / MIN_ENTRY_LEN {
        return None;
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let id = u128::from_le_bytes(r.bytes(16)?.try_into().ok()?);
        let granted = r.u64()?;
        let until = r.u64()?;
        entries.push(Entry {
            id: DedupId(id),
            granted,
            until,
        });
    }
    if r.remaining() != 0 {
        return None;
    }
    Some(LimiterState {
        last_update,
        algo,
        dedup: DedupSet::from_entries(entries),
    })
}
