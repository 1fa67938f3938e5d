//! LEB128 varints: the number format of the codec and of the sliding log's packed entries.

/// Append `v` as an unsigned LEB128 varint (in 64-bit arithmetic: it is on the path of every
/// write).
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    if v < 0x80 {
        // One byte: small counts and the sliding log's gaps.
        out.push(v as u8);
        return;
    }
    out.reserve(10);
    if v < 1 << 56 {
        // All 8 bytes (one store), then back to the varint's end.
        let (x, len) = encode_word(v);
        let end = out.len().saturating_add(len);
        out.extend_from_slice(&x.to_le_bytes());
        out.truncate(end);
        return;
    }
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes [`put_u64`] writes for `v` (1 to 10).
pub fn len_u64(v: u64) -> usize {
    let bits = u64::BITS.saturating_sub((v | 1).leading_zeros());
    bits.div_ceil(7) as usize
}

/// `v` (below 2^56) as a varint of at most 8 bytes, built at once in a little-endian word: the
/// 7-bit groups spread to one byte each, then the continuation bits on all but the last; and
/// its length in bytes.
pub fn encode_word(v: u64) -> (u64, usize) {
    let mut x = v;
    x = (x & 0x0fff_ffff) | ((x & 0x00ff_ffff_f000_0000) << 4);
    x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x0fff_c000_0fff_c000) << 2);
    x = (x & 0x007f_007f_007f_007f) | ((x & 0x3f80_3f80_3f80_3f80) << 1);
    let bits = u64::BITS.saturating_sub((v | 1).leading_zeros());
    let len = bits.div_ceil(7);
    x |= CONT
        & 1u64
            .wrapping_shl(len.wrapping_sub(1).wrapping_mul(8))
            .wrapping_sub(1);
    (x, len as usize)
}

/// Varints written into a fixed buffer, each at once (no reallocation or length bookkeeping
/// per value), for a short encoding appended in one copy.
#[derive(Debug)]
pub struct Fixed<const N: usize> {
    buf: [u8; N],
    len: usize,
    /// Something did not fit: the encoding is incomplete.
    short: bool,
}

impl<const N: usize> Fixed<N> {
    /// An empty encoding.
    pub fn new() -> Self {
        Fixed {
            buf: [0; N],
            len: 0,
            short: false,
        }
    }

    /// Append one byte.
    pub fn byte(&mut self, b: u8) {
        match self.buf.get_mut(self.len) {
            Some(slot) => *slot = b,
            None => self.short = true,
        }
        self.len = self.len.saturating_add(1);
    }

    /// Append `v` as a varint, as [`put_u64`] does.
    pub fn u64(&mut self, mut v: u64) {
        if v < 1 << 56 {
            let (x, len) = encode_word(v);
            match self
                .buf
                .get_mut(self.len..)
                .and_then(|b| b.first_chunk_mut::<8>())
            {
                Some(slot) => *slot = x.to_le_bytes(),
                None => self.short = true,
            }
            self.len = self.len.saturating_add(len);
            return;
        }
        while v >= 0x80 {
            self.byte((v & 0x7f) as u8 | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    /// The encoding; `None` if it did not fit in `N` bytes (less 7 for the last store).
    pub fn bytes(&self) -> Option<&[u8]> {
        if self.short {
            return None;
        }
        self.buf.get(..self.len)
    }
}

impl<const N: usize> Default for Fixed<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The continuation bit of each of 8 bytes.
const CONT: u64 = 0x8080_8080_8080_8080;

/// A varint that ends within the 8 bytes of `word` (little-endian), read at once: its value and
/// length; `None` if it goes on.
fn decode_word(word: u64) -> Option<(u64, usize)> {
    let ends = !word & CONT;
    if ends == 0 {
        return None;
    }
    // The first byte without the continuation bit is the last one (1 to 8).
    let len = (ends.trailing_zeros() / 8).wrapping_add(1);
    let keep = u64::MAX.wrapping_shr(u64::BITS.wrapping_sub(len.wrapping_mul(8)));
    let mut x = word & keep & 0x7f7f_7f7f_7f7f_7f7f;
    x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    x = (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4);
    Some((x, len as usize))
}

/// Append `v` as an unsigned LEB128 varint.
pub fn put_u128(out: &mut Vec<u8>, mut v: u128) {
    if let Ok(small) = u64::try_from(v) {
        return put_u64(out, small);
    }
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

    /// A varint `u64` (at most 10 bytes, the last of them at most 1): the same as
    /// `varint(64)`, in 64-bit arithmetic for the sliding log's scans.
    pub fn u64(&mut self) -> Option<u64> {
        if let Some(v) = self.word() {
            return Some(v);
        }
        // One byte: most parameters.
        if let Some((&b, rest)) = self.input.split_first()
            && b < 0x80
        {
            self.input = rest;
            return Some(u64::from(b));
        }
        let mut v: u64 = 0;
        let mut shift: u32 = 0;
        for (i, &b) in self.input.iter().enumerate() {
            let part = u64::from(b & 0x7f);
            if shift > 63 || (shift == 63 && part > 1) {
                return None;
            }
            v |= part.checked_shl(shift)?;
            if b & 0x80 == 0 {
                self.input = self.input.get(i.checked_add(1)?..)?;
                return Some(v);
            }
            shift = shift.checked_add(7)?;
        }
        None
    }

    /// A varint of at most 8 bytes (56 bits) read at once, when 8 bytes are left; `None`
    /// (nothing read) otherwise.
    fn word(&mut self) -> Option<u64> {
        let (v, len) = decode_word(u64::from_le_bytes(*self.input.first_chunk::<8>()?))?;
        self.input = self.input.get(len..)?;
        Some(v)
    }

    /// A varint `u128`.
    pub fn u128(&mut self) -> Option<u128> {
        match self.word() {
            Some(v) => Some(u128::from(v)),
            None => self.varint(128),
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.input.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Small values, any value, and values around each byte boundary of a varint.
    fn edgy() -> impl Strategy<Value = u64> {
        prop_oneof![
            1u64..200,
            any::<u64>(),
            (1u32..64, 0u64..3).prop_map(|(b, d)| (1u64 << b).saturating_sub(1).saturating_add(d)),
        ]
    }

    proptest! {
        /// The 64-bit reader accepts and rejects exactly what the general one does.
        #[test]
        fn u64_reader_matches_the_general_one(
            bytes in prop::collection::vec(prop_oneof![any::<u8>(), Just(0xff), Just(0x80), Just(1)], 0..14),
            v in any::<u64>(),
        ) {
            let (mut a, mut b) = (Reader::new(&bytes), Reader::new(&bytes));
            prop_assert_eq!(a.u64(), b.varint(64).and_then(|v| u64::try_from(v).ok()));
            if a.remaining() != bytes.len() {
                prop_assert_eq!(a.remaining(), b.remaining());
            }
            let mut out = Vec::new();
            put_u64(&mut out, v);
            prop_assert_eq!(Reader::new(&out).u64(), Some(v));
        }

        /// Varints written at once into a fixed buffer are the ones `put_u64` writes.
        #[test]
        fn fixed_varints_match(values in prop::collection::vec(edgy(), 0..6)) {
            let mut want = Vec::new();
            let mut enc = Fixed::<64>::new();
            for &v in &values {
                put_u64(&mut want, v);
                enc.u64(v);
            }
            prop_assert_eq!(enc.bytes(), Some(&want[..]));
        }

        /// The 128-bit reader's 64-bit fast path accepts and rejects exactly what the general
        /// one does, and leaves the same bytes.
        #[test]
        fn u128_reader_matches_the_general_one(
            bytes in prop::collection::vec(prop_oneof![any::<u8>(), Just(0xff), Just(0x80), Just(0)], 0..22),
        ) {
            let (mut a, mut b) = (Reader::new(&bytes), Reader::new(&bytes));
            prop_assert_eq!(a.u128(), b.varint(128));
            prop_assert_eq!(a.remaining(), b.remaining());
        }

        /// Both writers give the one LEB128 encoding, worked out bit by bit here.
        #[test]
        fn writers_give_the_reference_encoding(v in prop_oneof![any::<u128>(), any::<u64>().prop_map(u128::from), 0u128..300]) {
            let mut want = Vec::new();
            let mut x = v;
            while x >= 0x80 {
                want.push((x as u8 & 0x7f) | 0x80);
                x >>= 7;
            }
            want.push(x as u8);
            let mut out = Vec::new();
            put_u128(&mut out, v);
            prop_assert_eq!(&out, &want);
            if let Ok(small) = u64::try_from(v) {
                let mut out = Vec::new();
                put_u64(&mut out, small);
                prop_assert_eq!(&out, &want);
                prop_assert_eq!(len_u64(small), want.len());
            }
            prop_assert_eq!(Reader::new(&out).u128(), Some(v));
        }
    }
}
