//! Plain decimal integers: the one digit parser for arguments and for the `count` field of
//! stream entries.

/// Digits only (no sign, no spaces), at most 20 of them, within `u64`.
pub fn parse_u64_digits(token: &[u8]) -> Option<u64> {
    if token.is_empty() || token.len() > 20 || !token.iter().all(u8::is_ascii_digit) {
        return None;
    }
    token.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?
            .checked_add(u64::from(d.wrapping_sub(b'0')))
    })
}

/// Room for any `u64` in decimal.
pub const U64_DIGITS: usize = 20;

/// Write `n` in decimal so that it ends just before `end` in `buf`: the index where it starts
/// (digits that do not fit are dropped; callers size `buf` for them).
pub fn write_u64_before(mut n: u64, buf: &mut [u8], end: usize) -> usize {
    let mut pos = end;
    loop {
        pos = pos.saturating_sub(1);
        if let Some(slot) = buf.get_mut(pos) {
            *slot = b'0'.wrapping_add((n % 10) as u8);
        }
        n /= 10;
        if n == 0 || pos == 0 {
            return pos;
        }
    }
}

/// `n` in decimal, written into `buf` without allocating.
pub fn format_u64_into(n: u64, buf: &mut [u8; U64_DIGITS]) -> &[u8] {
    let start = write_u64_before(n, buf, U64_DIGITS);
    buf.get(start..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_every_width() {
        let mut buf = [0u8; U64_DIGITS];
        for n in [0, 1, 9, 10, 99, 100, 1_234_567, u64::MAX / 10, u64::MAX] {
            assert_eq!(format_u64_into(n, &mut buf), n.to_string().as_bytes());
        }
    }

    #[test]
    fn digits_only_within_u64() {
        #[rustfmt::skip]
        let cases: &[(&[u8], Option<u64>)] = &[
            (b"0", Some(0)),
            (b"42", Some(42)),
            (b"007", Some(7)),
            (b"18446744073709551615", Some(u64::MAX)),
            (b"18446744073709551616", None),
            (b"000000000000000000001", None),
            (b"", None),
            (b"-1", None),
            (b"+1", None),
            (b" 1", None),
            (b"1.0", None),
        ];
        for &(token, want) in cases {
            assert_eq!(parse_u64_digits(token), want, "{token:?}");
        }
    }
}
