//! RL.FIXED calendar windows (`day`, `week`, `month`, `quarter`, `year`, `TZ`, `ANCHOR`) end to
//! end, in RL.ALL and RL.CHECK, in RL.INFO, and kept unchanged through RDB, AOF rewrite and
//! replication. Time is driven with `AT` (in 2027 and 2028, ahead of the server's clock, so keys
//! outlive the test); every expected boundary is a Unix time computed apart
//! (`date -u -d <ISO> +%s`), noted beside it.

mod common;
use common::*;

const S: u64 = 1000;
const H: u64 = 3600 * S;

/// RL.INFO's fields as (name, reply) pairs.
fn info(c: &mut Conn, key: &str) -> Vec<(String, Reply)> {
    let reply = c.cmd(&["RL.INFO", key]);
    let items = reply.as_array().expect("RL.INFO array").to_vec();
    items
        .chunks(2)
        .map(|p| (p[0].as_str().unwrap(), p[1].clone()))
        .collect()
}

fn field(fields: &[(String, Reply)], name: &str) -> Reply {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in {fields:?}"))
        .1
        .clone()
}

#[test]
fn calendar_paris_days_last_23_and_25_hours_across_dst() {
    let s = Server::start();
    let mut c = s.conn();
    // 2027-03-28 in Paris: 2027-03-27T23:00Z (1806188400) to 2027-03-28T22:00Z (1806271200).
    let (start, end) = (1_806_188_400 * S, 1_806_271_200 * S);
    let at = start + H;
    assert_eq!(
        c.ints(&args![
            "RL.FIXED",
            "d",
            2,
            "day",
            "TZ",
            "Europe/Paris",
            "AT",
            at
        ]),
        [1, 2, 1, 0, (end - at) as i64]
    );
    assert_eq!(end - start, 23 * H);
    assert_eq!(c.int(&["PEXPIRETIME", "d"]), end as i64);
    c.ints(&args![
        "RL.FIXED",
        "d",
        2,
        "day",
        "TZ",
        "Europe/Paris",
        "AT",
        at
    ]);
    assert_eq!(
        c.ints(&args![
            "RL.FIXED",
            "d",
            2,
            "day",
            "TZ",
            "Europe/Paris",
            "AT",
            end - 1
        ]),
        [0, 2, 0, 1, 1]
    );
    assert_eq!(
        c.ints(&args![
            "RL.FIXED",
            "d",
            2,
            "day",
            "TZ",
            "Europe/Paris",
            "AT",
            end
        ]),
        [1, 2, 1, 0, 24 * H as i64]
    );
    // 2027-10-31: 2027-10-30T22:00Z (1824933600) to 2027-10-31T23:00Z (1825023600), 25 h.
    let (start, end) = (1_824_933_600 * S, 1_825_023_600 * S);
    assert_eq!(
        c.ints(&args![
            "RL.FIXED",
            "o",
            2,
            "DAY",
            "tz",
            "europe/paris",
            "AT",
            start
        ]),
        [1, 2, 1, 0, 25 * H as i64]
    );
    assert_eq!(c.int(&["PEXPIRETIME", "o"]), end as i64);
    let fields = info(&mut c, "o");
    assert_eq!(field(&fields, "window"), Reply::Bulk(b"day".to_vec()));
    assert_eq!(field(&fields, "tz"), Reply::Bulk(b"Europe/Paris".to_vec()));
    assert_eq!(field(&fields, "window_start_ms"), Reply::Int(start as i64));
    assert_eq!(field(&fields, "window_end_ms"), Reply::Int(end as i64));
    assert_eq!(field(&fields, "window_ms"), Reply::Int(25 * H as i64));
    assert!(matches!(field(&fields, "tzdb_version"), Reply::Bulk(v) if v.len() >= 5));
}

#[test]
fn calendar_month_anchored_on_the_31st_renews_on_the_months_last_day() {
    let s = Server::start();
    let mut c = s.conn();
    // UTC: 2027-01-31 (1801353600), 2027-02-28 (1803772800), 2027-03-31 (1806451200);
    // 2028-01-31 (1832889600), 2028-02-29 (1835395200), 2028-03-31 (1838073600).
    let rows: &[(&str, u64, u64)] = &[
        ("c", 1_801_353_600, 1_803_772_800),
        ("c", 1_803_772_800, 1_806_451_200),
        ("l", 1_832_889_600, 1_835_395_200),
        ("l", 1_835_395_200, 1_838_073_600),
    ];
    for &(key, start, end) in rows {
        let at = start * S + 5 * S;
        assert_eq!(
            c.ints(&args![
                "RL.FIXED", key, 10, "month", "ANCHOR", 31, "COST", 10, "AT", at
            ]),
            [10, 10, 0, 0, ((end - start) * S - 5 * S) as i64],
            "{key} from {start}"
        );
        assert_eq!(
            c.ints(&args![
                "RL.FIXED",
                key,
                10,
                "month",
                "ANCHOR",
                31,
                "AT",
                end * S - 1
            ]),
            [0, 10, 0, 1, 1]
        );
    }
}

#[test]
fn calendar_week_from_sunday_in_new_york_and_day_from_9h_in_kolkata() {
    let s = Server::start();
    let mut c = s.conn();
    // Sun 2027-03-14 00:00 EST (05:00Z, 1805000400) to Sun 2027-03-21 00:00 EDT (04:00Z,
    // 1805601600): 7 days less the hour DST took.
    let (start, end) = (1_805_000_400 * S, 1_805_601_600 * S);
    let wed = start + 3 * 24 * H;
    let tz = "America/New_York";
    assert_eq!(
        c.ints(&args![
            "RL.FIXED", "w", 5, "week", "TZ", tz, "ANCHOR", "sun", "AT", wed
        ]),
        [1, 5, 4, 0, (end - wed) as i64]
    );
    assert_eq!(end - start, 7 * 24 * H - H);
    let fields = info(&mut c, "w");
    assert_eq!(field(&fields, "anchor"), Reply::Bulk(b"sun".to_vec()));
    assert_eq!(field(&fields, "window_start_ms"), Reply::Int(start as i64));
    // 2027-01-10T02:00Z is 07:30 in Kolkata: the day from 09:00 began 2027-01-09T03:30Z
    // (1799465400) and ends 2027-01-10T03:30Z (1799551800); +05:30 is the same.
    let at = 1_799_546_400 * S;
    for (key, tz) in [("k1", "Asia/Kolkata"), ("k2", "+05:30")] {
        assert_eq!(
            c.ints(&args![
                "RL.FIXED", key, 5, "day", "OFFSET", "9h", "TZ", tz, "AT", at
            ]),
            [1, 5, 4, 0, (1_799_551_800 * S - at) as i64]
        );
        assert_eq!(
            field(&info(&mut c, key), "window_start_ms"),
            Reply::Int(1_799_465_400 * S as i64)
        );
    }
}

#[test]
fn calendar_errors_name_the_argument_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let cases: &[(&[&str], &str)] = &[
        (
            &["RL.FIXED", "k", "1", "month", "TZ", "Mars/Olympus"],
            "ERR unknown time zone 'Mars/Olympus'",
        ),
        (
            &["RL.FIXED", "k", "1", "month", "TZ", "Europe/Paris\u{1F600}"],
            "ERR unknown time zone 'Europe/Paris\\xf0\\x9f\\x98\\x80'",
        ),
        (
            &["RL.FIXED", "k", "1", "month", "ANCHOR", "32"],
            "ERR invalid ANCHOR '32' for month",
        ),
        (
            &["RL.FIXED", "k", "1", "month", "ANCHOR", "04-15"],
            "ERR invalid ANCHOR '04-15' for month",
        ),
        (
            &["RL.FIXED", "k", "1", "week", "ANCHOR", "15"],
            "ERR invalid ANCHOR '15' for week",
        ),
        (
            &["RL.FIXED", "k", "1", "year", "ANCHOR", "13-01"],
            "ERR invalid ANCHOR '13-01' for year",
        ),
        (
            &["RL.FIXED", "k", "1", "day", "ANCHOR", "1"],
            "ERR invalid ANCHOR '1' for day",
        ),
        (
            &["RL.FIXED", "k", "1", "1h", "TZ", "UTC"],
            "ERR TZ needs a calendar window (day, week, month, quarter or year)",
        ),
        (
            &["RL.FIXED", "k", "1", "1h", "ANCHOR", "1"],
            "ERR ANCHOR needs a calendar window (day, week, month, quarter or year)",
        ),
        (
            &["RL.FIXED", "k", "1", "day", "OFFSET", "24h"],
            "ERR OFFSET must be less than 24h for a calendar window",
        ),
        (
            &["RL.FIXED", "k", "1", "day", "TZ"],
            "ERR syntax error, TZ needs a value",
        ),
        (
            &["RL.FIXED", "k", "1", "day", "TZ", "UTC", "TZ", "UTC"],
            "ERR syntax error, TZ given more than once",
        ),
        (
            &["RL.FIXED", "k", "1", "days"],
            "ERR invalid duration 'days' for window",
        ),
    ];
    for (argv, want) in cases {
        assert_eq!(c.err(argv), *want, "{argv:?}");
    }
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
}

#[test]
fn calendar_windows_work_in_rl_all_and_rl_check() {
    let s = Server::start();
    let mut c = s.conn();
    // The Paris month from the 15th: 2027-03-15 00:00 CET (2027-03-14T23:00Z, 1805065200)
    // to 2027-04-15 00:00 CEST (2027-04-14T22:00Z, 1807740000).
    let at = 1_805_065_200 * S + H;
    let end = 1_807_740_000 * S;
    let spec = ["FIXED", "3", "month", "TZ", "Europe/Paris", "ANCHOR", "15"];
    let mut all = vec!["RL.ALL", "2", "{u}:s", "{u}:m", "FIXED", "100", "1s"];
    all.extend(spec);
    let at_s = at.to_string();
    let mut call = all.clone();
    call.extend(["COST", "2", "AT", at_s.as_str()]);
    assert_eq!(c.ints(&call), [2, 3, 1, 0, (end - at) as i64]);
    assert_eq!(c.int(&["PEXPIRETIME", "{u}:m"]), end as i64);
    let mut check = vec!["RL.CHECK", "{u}:m"];
    check.extend(spec);
    check.extend(["COST", "2", "AT", at_s.as_str()]);
    assert_eq!(
        c.ints(&check),
        [0, 3, 1, (end - at) as i64, (end - at) as i64]
    );
    // RL.FIXED on the same key with the same calendar sees the same count.
    assert_eq!(
        c.ints(&args![
            "RL.FIXED",
            "{u}:m",
            3,
            "month",
            "TZ",
            "Europe/Paris",
            "ANCHOR",
            15,
            "AT",
            at
        ]),
        [1, 3, 0, 0, (end - at) as i64]
    );
}

/// The payload `RL._RESTORE` takes for a Paris month from the 15th holding `count` units, its
/// window `[start, end)` in µs, last written at `last` µs (codec version 1, kind 4 = RL.FIXED).
fn month_payload(start: u64, end: u64, count: u64, last: u64) -> Vec<u8> {
    fn put(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = vec![1, 4];
    // limit 3, window 0 (a calendar), month (3) | January (1 << 3) | the 15th (15 << 7), zone.
    for v in [last, 3, 0, 3 | 1 << 3 | 15 << 7, 12] {
        put(&mut out, v);
    }
    out.extend_from_slice(b"Europe/Paris");
    for v in [end - start, end, count, 0] {
        put(&mut out, v);
    }
    out
}

#[test]
fn calendar_boundaries_survive_rdb_aof_and_replication_without_being_recomputed() {
    let s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let replica = Server::replica_of(&s);
    let mut c = s.conn();
    // A value whose window ends an hour after the month this build computes (as one written
    // with other time-zone data would): 2027-03-14T23:00Z (1805065200) to 2027-04-14T23:00Z.
    let start = 1_805_065_200 * S;
    let end = 1_807_740_000 * S + H;
    let payload = month_payload(start * 1000, end * 1000, 3, start * 1000 + 1000);
    let px = end.to_string();
    assert_eq!(
        c.cmd(&[&b"RL._RESTORE"[..], b"m", &payload, b"PXAT", px.as_bytes()]),
        Reply::Simple("OK".into())
    );
    let spec = ["month", "TZ", "Europe/Paris", "ANCHOR", "15"];
    // Half an hour past the computed month's end the kept window still holds: denied until it
    // ends.
    let at = end - H / 2;
    let call = |c: &mut Conn, at: u64| {
        let at = at.to_string();
        let mut argv = vec!["RL.FIXED", "m", "3"];
        argv.extend(spec);
        argv.extend(["AT", at.as_str()]);
        c.ints(&argv)
    };
    assert_eq!(call(&mut c, at), [0, 3, 0, (H / 2) as i64, (H / 2) as i64]);
    let snapshot = |c: &mut Conn| {
        let fields = info(c, "m");
        (
            c.cmd(&["DEBUG", "DIGEST-VALUE", "m"]),
            c.int(&["PEXPIRETIME", "m"]),
            field(&fields, "window_start_ms"),
            field(&fields, "window_end_ms"),
        )
    };
    let before = snapshot(&mut c);
    assert_eq!(before.1, end as i64);
    assert_eq!(before.3, Reply::Int(end as i64));
    assert_eq!(before.2, Reply::Int(start as i64));
    c.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(snapshot(&mut c), before);
    wait_rewrite_done(&mut c);
    c.ok(&["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c), before);
    wait_replica_synced(&s, &replica);
    let mut r = replica.conn();
    assert_eq!(snapshot(&mut r), before);
    // At the kept end, a new window (this build's: 2027-04-15T00:00 CEST + 1 h is inside the
    // month that ends 2027-05-14T22:00Z, 1810332000) starts; the replica gets its boundaries.
    assert_eq!(
        call(&mut c, end),
        [1, 3, 2, 0, (1_810_332_000 * S - end) as i64]
    );
    wait_replica_synced(&s, &replica);
    let after = snapshot(&mut c);
    assert_eq!(after.3, Reply::Int(1_810_332_000 * S as i64));
    assert_eq!(snapshot(&mut r), after);
}
