//! LEB128 varints: the number format of the codec and of the sliding log's packed entries.

/// Append `v` as an unsigned LEB128 varint (in 64-bit arithmetic: it is on the path of every
/// write).
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    out.reserve(10);
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
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

    /// A varint `u128`.
    pub fn u128(&mut self) -> Option<u128> {
        self.varint(128)
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
            }
            prop_assert_eq!(Reader::new(&out).u128(), Some(v));
        }
    }
}
