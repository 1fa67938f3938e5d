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

#[cfg(test)]
mod tests {
    use super::*;

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
