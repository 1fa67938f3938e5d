//! `AT` as propagated: a time rendered exact to the microsecond, without allocating.

use crate::core::Micros;
use crate::core::time::US_PER_MS;

/// Room for any `AT` rendered by [`format_at_into`].
pub const AT_BUF: usize = 32;

/// The four decimal digits of `n % 10_000`, with no table and no division past the first: its
/// halves (`n / 100`, `n % 100`) in the two 16-bit lanes of a word, each split into tens and ones
/// by one product (`x * 103 >> 10` is `x / 10` for every `x` below 179; a lane stays below 2^14,
/// and what the shift brings down from the upper lane lands above the mask).
#[inline(always)]
fn quad(n: u32) -> [u8; 4] {
    let n = n % 10_000;
    let v = (n / 100) | ((n % 100) << 16);
    let tens = (v.wrapping_mul(103) >> 10) & 0x000f_000f;
    let ones = v.wrapping_sub(tens.wrapping_mul(10));
    (tens | (ones << 8) | 0x3030_3030).to_le_bytes()
}

/// Render a time for `AT`, exact to the microsecond (`1700000000123.045`), into `buf`, without
/// allocating (it is on the path of every call propagated with `AT`): every digit a `u64` of
/// milliseconds can have (17) is written at a fixed place, four at a time in 32-bit arithmetic,
/// then the leading zeros are skipped (none to look for in a time of this century's 13 digits).
pub fn format_at_into(us: Micros, buf: &mut [u8; AT_BUF]) -> &[u8] {
    let frac = (us % US_PER_MS) as u32;
    let ms = us / US_PER_MS;
    // Below 10^8 and below 2^64 / 10^11 < 2^28: both fit in 32 bits.
    let (low, high) = ((ms % 100_000_000) as u32, (ms / 100_000_000) as u32);
    buf[16..20].copy_from_slice(&quad(high));
    buf[20..24].copy_from_slice(&quad(low / 10_000));
    buf[24..28].copy_from_slice(&quad(low));
    let [_, f0, f1, f2] = quad(frac);
    buf[28..32].copy_from_slice(&[b'.', f0, f1, f2]);
    // Every time from 2001 to 2286: 13 digits, no leading zero to look for.
    if (1_000_000_000_000..10_000_000_000_000).contains(&ms) {
        buf[15] = b'0'.wrapping_add((high / 10_000 % 10) as u8);
        return buf.get(15..).unwrap_or_default();
    }
    buf[FIRST_DIGIT] = b'0'.wrapping_add((high / 100_000_000 % 10) as u8);
    buf[12..16].copy_from_slice(&quad(high / 10_000));
    // The integer part starts at its first digit that is not a zero, or at its last.
    let digits = buf.get(FIRST_DIGIT..LAST_DIGIT).unwrap_or_default();
    let zeros = digits.iter().take_while(|&&b| b == b'0').count();
    buf.get(FIRST_DIGIT.saturating_add(zeros)..)
        .unwrap_or_default()
}

/// Where [`format_at_into`] writes the first of the 17 digits of the milliseconds.
const FIRST_DIGIT: usize = 11;

/// Where [`format_at_into`] writes the last digit of the milliseconds (never skipped).
const LAST_DIGIT: usize = 27;

/// Render a time for `AT`, exact to the microsecond.
pub fn format_at(us: Micros) -> String {
    let mut buf = [0u8; AT_BUF];
    String::from_utf8_lossy(format_at_into(us, &mut buf)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_is_rendered_as_format_would() {
        assert_eq!(format_at(1_700_000_000_123_045), "1700000000123.045");
        assert_eq!(format_at(0), "0.000");
        assert_eq!(format_at(u64::MAX), "18446744073709551.615");
        // Every number of digits, against the standard formatting.
        let mut us = 7u64;
        for _ in 0..2_000 {
            let want = format!("{}.{:03}", us / 1000, us % 1000);
            assert_eq!(format_at(us), want);
            us = us.wrapping_mul(3).wrapping_add(us / 7 % 1000);
        }
        for us in [
            0, 1, 9, 10, 99, 100, 999, 1000, 9_999, 10_000, 99_999, 100_000, 1_000_000,
        ] {
            assert_eq!(format_at(us), format!("{}.{:03}", us / 1000, us % 1000));
        }
        // Each number of digits of the milliseconds at its edges, with every fraction's width.
        for k in 0..=19u32 {
            let p = 10u64.saturating_pow(k);
            for ms in [p.saturating_sub(1), p, p.saturating_add(1)] {
                for frac in [0, 5, 45, 999] {
                    let us = ms.saturating_mul(1000).saturating_add(frac);
                    assert_eq!(format_at(us), format!("{}.{:03}", us / 1000, us % 1000));
                }
            }
        }
        // Random times, all 64 bits.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let us = x >> (x % 64);
            assert_eq!(format_at(us), format!("{}.{:03}", us / 1000, us % 1000));
        }
    }
}
