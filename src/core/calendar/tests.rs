use proptest::prelude::*;

use super::*;

const S: i64 = 1_000_000;
const H: i64 = 3600 * S;

fn cal(unit: Unit, month: u8, day: u8, tod_ms: u32, zone: &str) -> Calendar {
    let zone = ZoneId::parse(zone.as_bytes()).unwrap();
    Calendar::new(unit, month, day, tod_ms, zone).unwrap()
}

/// The window holding `t` (Unix seconds), in Unix seconds.
fn window_s(c: &Calendar, t: i64) -> (i64, i64) {
    let (start, end) = c.window((t * S) as u64).unwrap();
    (start / S, end as i64 / S)
}

// Expected boundaries below are Unix times computed apart (`date -u -d <ISO> +%s`).

#[test]
fn calendar_paris_days_of_the_dst_changes_last_23_and_25_hours() {
    let day = cal(Unit::Day, 1, 1, 0, "Europe/Paris");
    // 2026-03-29 00:00 CET (2026-03-28T23:00Z) to 2026-03-30 00:00 CEST (2026-03-29T22:00Z).
    for t in [1774738800, 1774746000, 1774821599] {
        assert_eq!(window_s(&day, t), (1774738800, 1774821600), "{t}");
    }
    assert_eq!(1774821600 - 1774738800, 23 * 3600);
    // 2026-10-25 00:00 CEST (2026-10-24T22:00Z) to 2026-10-26 00:00 CET (2026-10-25T23:00Z).
    assert_eq!(window_s(&day, 1792879200), (1792879200, 1792969200));
    assert_eq!(window_s(&day, 1792969199), (1792879200, 1792969200));
    assert_eq!(1792969200 - 1792879200, 25 * 3600);
}

#[test]
fn calendar_lord_howe_1981_is_a_year_an_hour_and_a_half_short() {
    // +10:00 to +10:30 in March, to +11:30 (daylight time) in October: 1981-01-01 00:00+10:00
    // to 1982-01-01 00:00+11:30.
    let year = cal(Unit::Year, 1, 1, 0, "Australia/Lord_Howe");
    assert_eq!(window_s(&year, 347119200), (347119200, 378649800));
    assert_eq!(window_s(&year, 378649799), (347119200, 378649800));
    assert_eq!(378649800 - 347119200, 365 * 24 * 3600 - 5400);
}

#[test]
fn calendar_start_in_a_dst_gap_is_the_first_instant_after_it() {
    // 02:30 does not exist in Paris on 2026-03-29: the day starts at 03:00 CEST (01:00Z).
    let day = cal(Unit::Day, 1, 1, 9_000_000, "Europe/Paris");
    // 2026-03-28 02:30 CET is 01:30Z.
    assert_eq!(window_s(&day, 1774746000 - 1), (1774661400, 1774746000));
    // The next day starts at 2026-03-30 02:30 CEST (00:30Z).
    assert_eq!(window_s(&day, 1774746000), (1774746000, 1774830600));
}

#[test]
fn calendar_start_in_a_fold_is_the_first_of_the_two() {
    // 02:30 exists twice in Paris on 2026-10-25: first at 00:30Z (CEST).
    let day = cal(Unit::Day, 1, 1, 9_000_000, "Europe/Paris");
    let first = 1792879200 + 2 * 3600 + 1800; // 2026-10-25T00:30Z
    assert_eq!(window_s(&day, first).0, first);
    assert_eq!(window_s(&day, first - 1).1, first);
}

#[test]
fn calendar_month_anchored_on_the_31st_clamps_to_the_months_end() {
    let month = cal(Unit::Month, 1, 31, 0, "UTC");
    // Leap year: Jan 31 → Feb 29 → Mar 31.
    assert_eq!(window_s(&month, 1707955200), (1706659200, 1709164800)); // 2024-02-15
    assert_eq!(window_s(&month, 1709164800), (1709164800, 1711843200)); // 2024-02-29
    assert_eq!(window_s(&month, 1709164799), (1706659200, 1709164800));
    // Common year: Jan 31 → Feb 28 → Mar 31 → Apr 30.
    assert_eq!(window_s(&month, 1739577600), (1738281600, 1740700800)); // 2025-02-15
    assert_eq!(window_s(&month, 1742000000), (1740700800, 1743379200)); // 2025-03-15
    assert_eq!(window_s(&month, 1744000000), (1743379200, 1745971200)); // 2025-04-07
}

#[test]
fn calendar_week_starting_sunday_in_new_york() {
    let week = cal(Unit::Week, 1, 7, 0, "America/New_York");
    // Wed 2026-03-11: from Sun 2026-03-08 00:00 EST (05:00Z) to Sun 2026-03-15 00:00 EDT (04:00Z).
    assert_eq!(window_s(&week, 1773230400), (1772946000, 1773547200));
    assert_eq!(1773547200 - 1772946000, 7 * 86400 - 3600);
    assert_eq!(window_s(&week, 1772946000 - 1).1, 1772946000);
}

#[test]
fn calendar_day_offset_9h_in_kolkata() {
    let day = cal(Unit::Day, 1, 1, 9 * 3_600_000, "Asia/Kolkata");
    // 2026-01-10T02:00Z is 07:30 IST: the day began 2026-01-09 09:00 IST (03:30Z).
    assert_eq!(window_s(&day, 1768010400), (1767929400, 1768015800));
    assert_eq!(window_s(&day, 1768015800), (1768015800, 1768015800 + 86400));
    // A fixed offset +05:30 gives the same windows.
    let fixed = cal(Unit::Day, 1, 1, 9 * 3_600_000, "+05:30");
    assert_eq!(window_s(&fixed, 1768010400), (1767929400, 1768015800));
}

#[test]
fn calendar_quarter_and_year_anchors_set_the_phase() {
    // Quarters from Feb 10, May 10, Aug 10, Nov 10 (UTC).
    let q = cal(Unit::Quarter, 2, 10, 0, "UTC");
    let d = |s: &str| {
        let date: Date = s.parse().unwrap();
        days_of(date).unwrap() * 86400
    };
    assert_eq!(
        window_s(&q, d("2026-03-01")),
        (d("2026-02-10"), d("2026-05-10"))
    );
    assert_eq!(
        window_s(&q, d("2026-01-01")),
        (d("2025-11-10"), d("2026-02-10"))
    );
    let y = cal(Unit::Year, 4, 15, 0, "UTC");
    assert_eq!(
        window_s(&y, d("2026-04-14")),
        (d("2025-04-15"), d("2026-04-15"))
    );
    assert_eq!(
        window_s(&y, d("2026-04-15")),
        (d("2026-04-15"), d("2027-04-15"))
    );
    // 1970-01-01 00:00Z in New York is still 1969's last day: a start before the epoch.
    let ny = cal(Unit::Day, 1, 1, 0, "America/New_York");
    assert_eq!(ny.window(0).unwrap(), (-19 * H, 5 * H as u64));
}

#[test]
fn calendar_word_round_trips_and_zones_have_names() {
    for c in [
        cal(Unit::Day, 1, 1, 0, "UTC"),
        cal(Unit::Week, 1, 7, 86_399_999, "America/New_York"),
        cal(Unit::Year, 12, 31, 1, "-09:30"),
        cal(Unit::Quarter, 2, 10, 0, "+14:00"),
    ] {
        assert_eq!(Calendar::from_word(c.word()), Some(c));
        assert!(c.word() < 1 << 55);
    }
    assert_eq!(
        ZoneId::parse(b"europe/paris").unwrap().name(),
        "Europe/Paris"
    );
    assert_eq!(ZoneId::parse(b"+05:30").unwrap().name(), "+05:30");
    assert_eq!(ZoneId::parse(b"-09:30").unwrap().name(), "-09:30");
    assert_eq!(ZoneId::parse(b"+00:00"), ZoneId::parse(b"UTC"));
    assert_eq!(ZoneId::utc().name(), "UTC");
    for bad in [
        &b"Mars/Olympus"[..],
        b"+24:00",
        b"+05:60",
        b"05:30",
        b"",
        b"\xff",
        b"+5:30",
    ] {
        assert_eq!(ZoneId::parse(bad), None, "{bad:?}");
    }
    assert_eq!(Calendar::from_word(0), None);
    assert_eq!(Calendar::from_word(u64::MAX), None);
    assert_eq!(cal(Unit::Quarter, 4, 5, 0, "UTC").anchor(), "04-05");
    assert_eq!(cal(Unit::Week, 1, 7, 0, "UTC").anchor(), "sun");
    assert!(TZDB_VERSION.len() >= 5);
}

#[test]
fn calendar_refuses_times_past_its_years() {
    let year = cal(Unit::Year, 1, 1, 0, "Europe/Paris");
    assert!(year.window(crate::core::time::MAX_TIME).is_err());
    assert!(year.window(u64::MAX).is_err());
}

/// Zones whose clocks never move by more than an hour at once between 1970 and 2100.
const COMMON: &[&str] = &[
    "UTC",
    "Europe/Paris",
    "Europe/London",
    "America/New_York",
    "America/Los_Angeles",
    "America/Sao_Paulo",
    "America/Santiago",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Pacific/Auckland",
    "Asia/Kolkata",
    "Asia/Tokyo",
    "Africa/Cairo",
    "America/Havana",
];

fn arb_calendar(zone: impl Strategy<Value = ZoneId>) -> impl Strategy<Value = Calendar> {
    (
        1u8..=5,
        1u8..=12,
        1u8..=31,
        prop_oneof![Just(0u32), 0..DAY_MS],
        zone,
    )
        .prop_filter_map("valid", |(unit, month, day, tod, zone)| {
            let unit = Unit::from_tag(u64::from(unit))?;
            let (month, day) = match unit {
                Unit::Day => (1, 1),
                Unit::Week => (1, day % 7 + 1),
                Unit::Month => (1, day),
                _ => (month, day),
            };
            Calendar::new(unit, month, day, tod, zone)
        })
}

fn any_zone() -> impl Strategy<Value = ZoneId> {
    prop_oneof![
        (0..zone_names().len()).prop_map(|i| ZoneId(i as u16)),
        (-MAX_OFFSET_MIN..=MAX_OFFSET_MIN)
            .prop_filter_map("utc", |m| (m != 0).then(|| ZoneId::of_offset(m)).flatten()),
    ]
}

fn common_zone() -> impl Strategy<Value = ZoneId> {
    prop::sample::select(COMMON).prop_map(|z| ZoneId::parse(z.as_bytes()).unwrap())
}

/// Days a period lasts on the calendar (the fewest and the most).
fn calendar_days(unit: Unit) -> (i64, i64) {
    match unit {
        Unit::Day => (1, 1),
        Unit::Week => (7, 7),
        Unit::Month => (28, 31),
        Unit::Quarter => (89, 92),
        Unit::Year => (365, 366),
    }
}

/// 1970-01-01 to 2100-01-01, µs.
const UNTIL_2100: u64 = 4_102_444_800 * 1_000_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The window holding t starts at or before t and ends after it; the next window starts
    /// where it ends and the one before ends where it starts; its length is the calendar's,
    /// give or take the clock changes (a day skipped by a zone that crossed the date line, a
    /// DST shift of up to 3 h, as Antarctica/Casey's).
    #[test]
    fn calendar_windows_tile_time(c in arb_calendar(any_zone()), t in 0..UNTIL_2100) {
        let (start, end) = c.window(t).unwrap();
        prop_assert!(start <= t as i64 && t < end, "{start} {t} {end}");
        let (next_start, _) = c.window(end).unwrap();
        prop_assert_eq!(next_start, end as i64);
        if start > 0 {
            prop_assert_eq!(c.window(start as u64 - 1).unwrap().1, start as u64);
        }
        let (lo, hi) = calendar_days(c.unit());
        let len = end as i64 - start;
        prop_assert!(len >= lo * 24 * H - 27 * H && len <= hi * 24 * H + 3 * H, "{len}");
    }

    /// In zones that move their clocks by an hour at most at a time, a day lasts 23 to 25 hours
    /// and a longer period its calendar days give or take an hour and a half: two changes can
    /// add up within one period (Australia/Lord_Howe's 1981 went from +10:00 to +10:30 in March
    /// and to +11:30 in October, a year 1.5 h short).
    #[test]
    fn calendar_days_last_23_to_25_hours(c in arb_calendar(common_zone()), t in 0..UNTIL_2100) {
        let (start, end) = c.window(t).unwrap();
        let len = end as i64 - start;
        let (lo, hi) = calendar_days(c.unit());
        let slack = H + H / 2;
        prop_assert!(len >= lo * 24 * H - slack && len <= hi * 24 * H + slack, "{len}");
        if c.unit() == Unit::Day {
            prop_assert!((23 * H..=25 * H).contains(&len));
        }
    }
}
