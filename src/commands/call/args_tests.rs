//! Tests of the argument parsers (`args`) against plain reference readings.

use crate::commands::call::args::{duration, duration_or_zero, parse_u64};
use crate::core::param::MAX_PARAM;
use crate::core::time::US_PER_MS;

/// The one-pass duration parser against the plain reading: the leading digits as a strict
/// integer, the unit, then the product in µs, over tokens built from digits, units and
/// other bytes.
#[test]
fn durations_match_a_plain_reading() {
    fn reference(token: &[u8], min: u64) -> Option<u64> {
        let digits = token.iter().take_while(|b| b.is_ascii_digit()).count();
        let (number, unit) = token.split_at(digits);
        let ms_per_unit: u64 = match unit.to_ascii_lowercase().as_slice() {
            b"" | b"ms" => 1,
            b"s" => 1_000,
            b"m" => 60_000,
            b"h" => 3_600_000,
            b"d" => 86_400_000,
            _ => return None,
        };
        let n = parse_u64(number).filter(|&n| n >= min)?;
        n.checked_mul(ms_per_unit)?
            .checked_mul(US_PER_MS)
            .filter(|&us| us <= MAX_PARAM)
    }
    let pieces: &[&[u8]] = &[
        b"0",
        b"1",
        b"9",
        b"30",
        b"00",
        b"153722867",
        b"2562047788",
        b"9223372036854775",
        b"9223372036854775807",
        b"99999999999999999999",
        b"s",
        b"S",
        b"ms",
        b"mS",
        b"m",
        b"h",
        b"d",
        b"D",
        b"w",
        b"x",
        b"-",
        b".",
        b" ",
        b"\xff",
        b"\xcd",
        b"M",
        b"H",
        b"Ms",
        b"",
    ];
    for a in pieces {
        for b in pieces {
            for c in pieces {
                let token = [*a, *b, *c].concat();
                for min in [0, 1] {
                    assert_eq!(
                        if min == 0 {
                            duration_or_zero(&token, "t").ok()
                        } else {
                            duration(&token, "t").ok()
                        },
                        reference(&token, min),
                        "{token:?}"
                    );
                }
            }
        }
    }
}
