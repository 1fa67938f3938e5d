//! `DETAIL` end to end (SPEC "The detailed reply"): the limiter reply followed by `denied_by`,
//! `reason` and one entry per limiter with `window_ms`, under RESP2 and RESP3, on every limiter
//! command, RL.ALL and RL.CHECK. Every expectation is computed from the parameters and `AT`
//! times the test chose.

mod common;
use common::*;

#[test]
fn detail_on_gcra_names_the_limiter_and_its_window() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // burst 2, 1 per second: T = 1 s, a full limiter is fresh after 2 · 1 s.
    let r = c.cmd(&args!["RL.GCRA", "k", 2, 1, "1s", "AT", t, "DETAIL"]);
    assert_eq!(
        r,
        detailed(
            [1, 2, 1, 0, 1000],
            None,
            "granted",
            vec![entry("k", "k", [1, 1, 2, 1, 0, 1000, 2000])]
        )
    );
    // COST 2 with one unit left: denied, retry when the TAT (t + 1 s) is reached.
    let r = c.cmd(&args![
        "RL.GCRA", "k", 2, 1, "1s", "COST", 2, "DETAIL", "AT", t
    ]);
    assert_eq!(
        r,
        detailed(
            [0, 2, 1, 1000, 1000],
            Some("k"),
            "limit",
            vec![entry("k", "k", [2, 0, 2, 1, 1000, 1000, 2000])]
        )
    );
    // Without DETAIL: the five integers, nothing changed by the denied call.
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1s", "PEEK", "AT", t]),
        [1, 2, 0, 0, 2000]
    );
    // A cost above the limit can never be granted.
    let r = c.cmd(&args![
        "RL.GCRA", "k", 2, 1, "1s", "COST", 3, "AT", t, "detail"
    ]);
    assert_eq!(
        r,
        detailed(
            [0, 2, 1, -1, 1000],
            Some("k"),
            "never",
            vec![entry("k", "k", [3, 0, 2, 1, -1, 1000, 2000])]
        )
    );
}

/// A calendar window's `window_ms` is the length of the period the call falls in (SPEC: "a
/// calendar window's current length"): a 23 h day and week across Paris's DST change, a 28-day
/// February, a 91-day second quarter, a leap year. The times are fixed dates; the lengths are
/// the calendar's, computed from the dates (UTC offsets and month lengths), not read back.
#[test]
fn detail_window_ms_of_a_calendar_window_is_its_current_length() {
    let s = Server::start();
    let mut c = s.conn();
    const H: i64 = 3_600_000;
    const D: i64 = 24 * H;
    #[rustfmt::skip]
    let cases: Vec<(Vec<Vec<u8>>, i64, i64)> = vec![
        // 2027-03-28 01:00 in Paris: the day of the change to summer time lasts 23 h.
        (args!["RL.FIXED", "cd", 10, "day", "TZ", "Europe/Paris"].to_vec(),  1_806_192_000_000, D - H),
        // Its week, Monday 2027-03-22 to Monday 2027-03-29 (Paris): 7 days less an hour.
        (args!["RL.FIXED", "cw", 10, "week", "TZ", "Europe/Paris", "ANCHOR", "mon"].to_vec(),
                                                                               1_806_192_000_000, 7 * D - H),
        // A fixed offset has no DST: a week of 7 days.
        (args!["RL.FIXED", "co", 10, "week", "TZ", "+05:30", "ANCHOR", "sun"].to_vec(),
                                                                               1_806_192_000_000, 7 * D),
        // 2027-02-10 (UTC): February 2027 has 28 days; billed on the 15th, 2027-02-20 falls in
        // Feb 15 – Mar 15, 28 days too; 2027-01-20 in Jan 15 – Feb 15, 31 days.
        (args!["RL.FIXED", "cm", 10, "month"].to_vec(),                       1_802_217_600_000, 28 * D),
        (args!["RL.FIXED", "ca", 10, "month", "ANCHOR", 15].to_vec(),         1_803_081_600_000, 28 * D),
        (args!["RL.FIXED", "cb", 10, "month", "ANCHOR", 15].to_vec(),         1_800_403_200_000, 31 * D),
        // 2027-04-20: April to June, 30 + 31 + 30 days.
        (args!["RL.FIXED", "cq", 10, "quarter"].to_vec(),                     1_808_179_200_000, 91 * D),
        // 2028-06-01: a leap year.
        (args!["RL.FIXED", "cy", 10, "year"].to_vec(),                        1_843_430_400_000, 366 * D),
    ];
    for (mut call, at, window) in cases {
        call.extend(args!["DETAIL", "AT", at]);
        let r = c.cmd(&call);
        let a = r.as_array().unwrap_or_else(|| panic!("{call:?}: {r:?}"));
        let e = a[7].as_array().unwrap()[0].as_array().unwrap();
        assert_eq!(e[8], int(window), "window_ms of {call:?}");
    }
}

/// `window_ms` of each algorithm: the window of FIXED/SLIDING/SLIDINGCOUNTER, `limit · period /
/// rate` rounded up for the schedules, 0 for a concurrency limiter. Calendar windows: below.
#[test]
fn detail_window_ms_of_every_algorithm() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    #[rustfmt::skip]
    let cases: Vec<(Vec<Vec<u8>>, i64)> = vec![
        (args!["RL.GCRA", "g", 7, 3, "1s"].to_vec(),              2334), // 7000 / 3
        (args!["RL.TOKENBUCKET", "tb", 10, 3, "1s"].to_vec(),     3334), // 10000 / 3
        (args!["RL.LEAKYBUCKET", "lb", 5, 2, "1s"].to_vec(),      2500),
        (args!["RL.FIXED", "f", 100, "1m"].to_vec(),              60_000),
        (args!["RL.FIXED", "fo", 100, "1h", "OFFSET", "15m"].to_vec(), 3_600_000),
        (args!["RL.SLIDING", "s", 10, "30s"].to_vec(),            30_000),
        (args!["RL.SLIDING", "sp", 10, "30s", "PRECISION", "1s"].to_vec(), 30_000),
        (args!["RL.SLIDINGCOUNTER", "sc", 10, "1h"].to_vec(),     3_600_000),
        (args!["RL.ACQUIRE", "cc", 3, "10s", "ID", "x"].to_vec(), 0),
    ];
    for (mut call, window) in cases {
        call.extend(args!["DETAIL", "AT", t]);
        let r = c.cmd(&call);
        let a = r.as_array().unwrap_or_else(|| panic!("{r:?}"));
        assert_eq!(a.len(), 8, "{r:?}");
        let limiters = a[7].as_array().unwrap();
        assert_eq!(limiters.len(), 1);
        let e = limiters[0].as_array().unwrap();
        assert_eq!(e.len(), 10);
        assert_eq!(e[0], Reply::Bulk(call[1].clone()));
        assert_eq!(e[1], Reply::Bulk(call[1].clone()));
        assert_eq!(e[2], int(1), "cost of {call:?}");
        assert_eq!(e[8], int(window), "window_ms of {call:?}");
        assert_eq!(a[6], bulk("granted"));
        assert!(a[5].is_nil());
        // The merged reply is the one limiter's.
        for i in 0..5 {
            assert_eq!(a[i], e[i + 3], "{call:?}");
        }
    }
}

#[test]
fn detail_resp3_is_a_map_in_field_order() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ok(&["HELLO", "3"]);
    c.cmd(&args!["RL.FIXED", "{x}f", 1, "1m", "AT", t]);
    let r = c.cmd(&args![
        "RL.ALL", 2, "{x}g", "{x}f", "GCRA", 10, 5, "1s", "FIXED", 1, "1m", "DETAIL", "AT", t
    ]);
    let Reply::Map(fields) = r else {
        panic!("expected a map, got {r:?}")
    };
    let names: Vec<String> = fields.iter().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "granted",
            "limit",
            "remaining",
            "retry_after_ms",
            "reset_after_ms",
            "denied_by",
            "reason",
            "limiters"
        ]
    );
    // Window of t's minute: FIXED 1m aligned to the epoch, t a whole second.
    let window_left = (60_000 - t % 60_000) as i64;
    let head: Vec<Reply> = fields.iter().take(5).map(|(_, v)| v.clone()).collect();
    assert_eq!(
        head,
        [int(0), int(1), int(0), int(window_left), int(window_left)]
    );
    assert_eq!(fields[5].1, bulk("{x}f"));
    assert_eq!(fields[6].1, bulk("limit"));
    let Some(limiters) = fields[7].1.as_array() else {
        panic!("{:?}", fields[7]);
    };
    let want = [
        ("{x}g", [1, 0, 10, 10, 0, 0, 2000]),
        ("{x}f", [1, 0, 1, 0, window_left, window_left, 60_000]),
    ];
    assert_eq!(limiters.len(), want.len());
    for (l, (key, values)) in limiters.iter().zip(want) {
        let Reply::Map(f) = l else { panic!("{l:?}") };
        let names: Vec<String> = f.iter().map(|(k, _)| k.as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "name",
                "key",
                "cost",
                "granted",
                "limit",
                "remaining",
                "retry_after_ms",
                "reset_after_ms",
                "window_ms"
            ]
        );
        assert_eq!(f[0].1, bulk(key));
        assert_eq!(f[1].1, bulk(key));
        let got: Vec<Reply> = f.iter().skip(2).map(|(_, v)| v.clone()).collect();
        assert_eq!(got, values.map(int));
    }
    // A granted call: denied_by is RESP3's null.
    let r = c.cmd(&args!["RL.GCRA", "g2", 10, 5, "1s", "DETAIL", "AT", t]);
    let Reply::Map(fields) = r else { panic!() };
    assert_eq!(fields[5], (bulk("denied_by"), Reply::Nil));
    assert_eq!(fields[6], (bulk("reason"), bulk("granted")));
}

/// The call's reason is `never` if any limiter can never grant, else `blocked`, else `limit`;
/// `denied_by` is the first limiter in key order with that reason.
#[test]
fn detail_all_reason_prefers_never_then_blocked_then_limit() {
    let s = Server::start();
    let mut c = s.conn();
    // The start of a minute, so every call below falls in one window of the FIXED limiters.
    let t = (base_ms() / 60_000 + 1) * 60_000;
    // {r}a: FIXED 1 per minute, used up. {r}b: GCRA burst 5, blocked. {r}c: FIXED 2 per minute.
    c.cmd(&args!["RL.FIXED", "{r}a", 1, "1m", "AT", t]);
    c.cmd(&args!["RL.BLOCK", "{r}b", "10s", "AT", t]);
    let call = |c: &mut Conn, cost: u64, at: u64| {
        c.cmd(&args![
            "RL.ALL", 3, "{r}a", "{r}b", "{r}c", "FIXED", 1, "1m", "GCRA", 5, 1, "1s", "FIXED", 2,
            "1m", "COST", cost, "DETAIL", "AT", at
        ])
    };
    let reason = |r: &Reply| {
        let a = r.as_array().unwrap();
        (a[5].as_str(), a[6].as_str().unwrap())
    };
    // COST 1: a is at its limit, b blocked: blocked wins, though b is second.
    assert_eq!(
        reason(&call(&mut c, 1, t)),
        (Some("{r}b".into()), "blocked".into())
    );
    // COST 3: above c's limit of 2 (and a's): never, the first such key.
    assert_eq!(
        reason(&call(&mut c, 3, t)),
        (Some("{r}a".into()), "never".into())
    );
    // After the block, only a's limit.
    assert_eq!(
        reason(&call(&mut c, 1, t + 10_000)),
        (Some("{r}a".into()), "limit".into())
    );
    // Nothing was charged by the denied calls: c is still fresh, b holds no units.
    assert_eq!(
        c.ints(&args![
            "RL.FIXED",
            "{r}c",
            2,
            "1m",
            "COST",
            0,
            "AT",
            t + 10_000
        ])[2],
        2
    );
    assert_eq!(
        c.ints(&args![
            "RL.GCRA",
            "{r}b",
            5,
            1,
            "1s",
            "COST",
            0,
            "AT",
            t + 10_000
        ])[2],
        5
    );
}

/// Each limiter's entry of RL.ALL: its own reply for its cost after the call.
#[test]
fn detail_all_entries_are_each_limiters_reply() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let r = c.cmd(&args![
        "RL.ALL",
        2,
        "{e}s",
        "{e}m",
        "GCRA",
        3,
        3,
        "1s",
        "TOKENBUCKET",
        5,
        5,
        "1m",
        "COST",
        2,
        "DETAIL",
        "AT",
        t
    ]);
    // GCRA 3 per second: T = 333.33 ms, 2 used: TAT t + 666.67 ms → reset 667, remaining 1.
    // Token bucket 5, 5 per minute: 3 tokens left, 2 refill in 24 s; full window 60 s.
    assert_eq!(
        r,
        detailed(
            [2, 3, 1, 0, 24_000],
            None,
            "granted",
            vec![
                entry("{e}s", "{e}s", [2, 2, 3, 1, 0, 667, 1000]),
                entry("{e}m", "{e}m", [2, 2, 5, 3, 0, 24_000, 60_000]),
            ]
        )
    );
    // BESTEFFORT granting part of the cost is granted, each entry showing what it was charged.
    let r = c.cmd(&args![
        "RL.ALL",
        2,
        "{e}s",
        "{e}m",
        "GCRA",
        3,
        3,
        "1s",
        "TOKENBUCKET",
        5,
        5,
        "1m",
        "COST",
        3,
        "BESTEFFORT",
        "DETAIL",
        "AT",
        t
    ]);
    let a = r.as_array().unwrap();
    assert_eq!(a[0], int(1));
    assert!(a[5].is_nil());
    assert_eq!(a[6], bulk("granted"));
    for e in a[7].as_array().unwrap() {
        let e = e.as_array().unwrap();
        assert_eq!((&e[2], &e[3]), (&int(3), &int(1)));
    }
}

#[test]
fn detail_on_check_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.cmd(&args!["RL.SLIDING", "s", 3, "10s", "COST", 3, "AT", t]);
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "s"]);
    let r = c.cmd(&args![
        "RL.CHECK",
        "s",
        "SLIDING",
        3,
        "10s",
        "DETAIL",
        "AT",
        t + 4000
    ]);
    // The three units leave the window at t + 10 s.
    assert_eq!(
        r,
        detailed(
            [0, 3, 0, 6000, 6000],
            Some("s"),
            "limit",
            vec![entry("s", "s", [1, 0, 3, 0, 6000, 6000, 10_000])]
        )
    );
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "s"]), digest);
    // A missing key is a fresh limiter.
    let r = c.cmd(&args![
        "RL.CHECK", "none", "GCRA", 4, 2, "1s", "DETAIL", "COST", 2, "AT", t
    ]);
    assert_eq!(
        r,
        detailed(
            [2, 4, 2, 0, 1000],
            None,
            "granted",
            vec![entry("none", "none", [2, 2, 4, 2, 0, 1000, 2000])]
        )
    );
    assert_eq!(c.int(&["EXISTS", "none"]), 0);
}

#[test]
fn detail_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.cmd(&args!["RL.GCRA", "k", 2, 1, "1s", "AT", t]);
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]);
    #[rustfmt::skip]
    let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
        (args!["RL.GCRA", "k", 2, 1, "1s", "DETAIL", "DETAIL", "AT", t].to_vec(), "ERR syntax error, DETAIL given more than once"),
        (args!["RL.REFUND", "k", 1, "DETAIL"].to_vec(), "ERR unknown option 'DETAIL'"),
        (args!["RL.BLOCK", "k", "1s", "DETAIL"].to_vec(), "ERR unknown option 'DETAIL'"),
        (args!["RL.ALL", 1, "k", "GCRA", 2, 1, "1s", "DETAIL", "detail"].to_vec(), "ERR syntax error, DETAIL given more than once"),
        (args!["RL.CHECK", "k", "GCRA", 2, 1, "1s", "DETAIL", "PEEK"].to_vec(), "ERR unknown option 'PEEK'"),
    ];
    for (call, want) in cases {
        assert_eq!(c.err(&call), want, "{call:?}");
    }
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]), digest);
}
