//! RL.FIXED end to end against a real server. Time is driven with `AT`, an hour ahead of the
//! real clock (expiry is absolute from `AT`), on a round second so 1 s windows start at it.

mod common;
mod suite;
use common::*;
use suite::{Spec, call};

/// 5 units per 1 s window.
const SPEC: Spec = Spec {
    command: "RL.FIXED",
    params: &["5", "1s"],
    changed: &["8", "1s"],
    // Hour windows: the suite's keys must outlive its few seconds, and a fixed window's key
    // expires at the window's (epoch-aligned) end.
    slow: &["5", "1h"],
    slow_changed: &["8", "1h"],
    info_name: "fixed",
    info_params: &[("limit", 5), ("window_ms", 1000), ("offset_ms", 0)],
    // 2 of 5 in the window that starts at the round second and ends 1 s later.
    after_cost_2: [5, 3, 1000],
};

#[test]
fn fixed_counts_per_window() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    #[rustfmt::skip]
    let cases: &[(u64, &[&str], [i64; 5])] = &[
        // at (ms after t), extra options,      granted limit remaining retry reset
        (0,    &[],                            [1, 5, 4, 0,    1000]),
        (250,  &["COST", "4"],                 [4, 5, 0, 0,    750]),
        (500,  &[],                            [0, 5, 0, 500,  500]),
        (999,  &[],                            [0, 5, 0, 1,    1]),
        (1000, &["COST", "0"],                 [0, 5, 5, 0,    0]),
        (1000, &["COST", "6"],                 [0, 5, 5, -1,   0]),
        (1000, &["COST", "6", "BESTEFFORT"],   [5, 5, 0, -1,   1000]),
        (1500, &["COST", "2", "BESTEFFORT"],   [0, 5, 0, 500,  500]),
        (1500, &["PEEK"],                      [0, 5, 0, 500,  500]),
        (3700, &[],                            [1, 5, 4, 0,    300]),
        // The clock steps back: evaluated at the last update, in its window.
        (3000, &[],                            [1, 5, 3, 0,    300]),
        // Another limit keeps the count; another window starts fresh.
        (3800, &[],                            [1, 5, 2, 0,    200]),
    ];
    for (i, (at, extra, want)) in cases.iter().enumerate() {
        assert_eq!(
            call(&mut c, &SPEC, "k", extra, t + at),
            want.to_vec(),
            "case {i}: {extra:?} at +{at}ms"
        );
    }
    assert_eq!(
        c.ints(&args!["RL.FIXED", "k", 10, "1s", "AT", t + 3800]),
        [1, 10, 6, 0, 200]
    );
    let two_s_end = ((t + 3800) / 2000 + 1) * 2000;
    assert_eq!(
        c.ints(&args!["RL.FIXED", "k", 10, "2s", "AT", t + 3800]),
        [1, 10, 9, 0, (two_s_end - t - 3800) as i64]
    );
}

#[test]
fn fixed_windows_are_shifted_by_the_offset() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let hour = 3_600_000;
    let quarter = 900_000;
    // Hourly windows starting at a quarter past: the current one ends at the next xx:15.
    let end = ((t - quarter) / hour + 1) * hour + quarter;
    let to_end = (end - t) as i64;
    assert_eq!(
        c.ints(&args!["RL.FIXED", "k", 2, "1h", "OFFSET", "15m", "AT", t]),
        [1, 2, 1, 0, to_end]
    );
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), end as i64);
    // An offset of 75 minutes is the same windows: the count is kept.
    assert_eq!(
        c.ints(&args!["RL.FIXED", "k", 2, "1h", "offset", "75m", "AT", t]),
        [1, 2, 0, 0, to_end]
    );
    assert_eq!(
        c.ints(&args![
            "RL.FIXED",
            "k",
            2,
            "1h",
            "OFFSET",
            "15m",
            "AT",
            end - 1
        ]),
        [0, 2, 0, 1, 1]
    );
    assert_eq!(
        c.ints(&args!["RL.FIXED", "k", 2, "1h", "OFFSET", "15m", "AT", end]),
        [1, 2, 1, 0, hour as i64]
    );
    // Another offset starts a fresh window; OFFSET 0 is the default.
    assert_eq!(
        c.ints(&args!["RL.FIXED", "k", 2, "1h", "OFFSET", "0", "AT", end]),
        [1, 2, 1, 0, (hour - quarter) as i64]
    );
    assert_eq!(
        c.ints(&args!["RL.FIXED", "k", 2, "1h", "AT", end]),
        [1, 2, 0, 0, (hour - quarter) as i64]
    );
}

#[test]
fn fixed_dedup_ids_live_until_the_window_ends() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let call_id = |c: &mut Conn, at: u64| {
        c.ints(&args![
            "RL.FIXED", "k", 5, "1s", "COST", 2, "DEDUP", "a", "AT", at
        ])
    };
    assert_eq!(call_id(&mut c, t + 100), [2, 5, 3, 0, 900]);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), (t + 1000) as i64);
    assert_eq!(call_id(&mut c, t + 999), [2, 5, 3, 0, 1]);
    // A new window forgets the id: charged again.
    assert_eq!(call_id(&mut c, t + 1000), [2, 5, 3, 0, 1000]);
}

// The checks every limiter passes (tests/suite).
shared_checks!(SPEC);

#[test]
fn fixed_errors_name_the_argument() {
    #[rustfmt::skip]
    suite::check_errors(&SPEC, &[
        // arguments after the key,                  error
        (&["0", "1s"],                               "ERR limit must be a positive integer"),
        (&["99999999999999999999", "1s"],            "ERR limit must be a positive integer"),
        (&["5", "1w"],                               "ERR invalid duration '1w' for window"),
        (&["5", "1s", "OFFSET"],                     "ERR syntax error, OFFSET needs a value"),
        (&["5", "1s", "OFFSET", "-1s"],              "ERR invalid duration '-1s' for OFFSET"),
        (&["5", "1s", "OFFSET", "1", "OFFSET", "2"], "ERR syntax error, OFFSET given more than once"),
        (&["5", "1s", "PRECISION", "1ms"],           "ERR unknown option 'PRECISION'"),
    ]);
}

#[test]
fn fixed_key_expires_when_the_window_ends() {
    suite::check_expiry_is_reset_time(
        &SPEC,
        &[
            // Windows of 1 s from the round second: the key lives to the window's end.
            (0, &["COST", "3"], 1000),
            (100, &[], 1000),
            (1150, &["COST", "2"], 2000),
            (1900, &[], 2000),
        ],
    );
}

#[test]
fn fixed_and_slidingcounter_combine_in_rl_all() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let all = |c: &mut Conn, extra: &[&str]| {
        let mut cmd = args![
            "RL.ALL",
            2,
            "{u}:f",
            "{u}:s",
            "FIXED",
            3,
            "1s",
            "OFFSET",
            0,
            "SLIDINGCOUNTER",
            5,
            "1s",
            "AT",
            t
        ]
        .to_vec();
        cmd.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
        c.ints(&cmd)
    };
    // The tightest limiter (FIXED, 2 left of 3) speaks; reset is the later of the two.
    assert_eq!(all(&mut c, &[]), [1, 3, 2, 0, 2000]);
    assert_eq!(all(&mut c, &["COST", "2"]), [2, 3, 0, 0, 2000]);
    // FIXED denies: nothing is charged to the sliding counter.
    assert_eq!(all(&mut c, &[]), [0, 3, 0, 1000, 2000]);
    assert_eq!(
        c.ints(&args![
            "RL.SLIDINGCOUNTER",
            "{u}:s",
            5,
            "1s",
            "COST",
            0,
            "AT",
            t
        ]),
        [0, 5, 2, 0, 2000]
    );
    assert_eq!(
        c.ints(&args!["RL.FIXED", "{u}:f", 3, "1s", "COST", 0, "AT", t]),
        [0, 3, 0, 0, 1000]
    );
}

/// Reproducer: RL.INFO under RESP3 repeated `limit` (FIXED's parameter and the reply's field),
/// a map key twice. It is shown once, as the parameter.
#[test]
fn fixed_info_names_each_field_once() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&args!["RL.FIXED", "f", 5, "1m", "COST", 2, "AT", t]);
    c.ok(&["HELLO", "3"]);
    let Reply::Map(map) = c.cmd(&["RL.INFO", "f"]) else {
        panic!("RL.INFO under RESP3 is not a map")
    };
    // Evaluated at the key's last update (the server's clock is an hour before it).
    let reset = (60_000 - t % 60_000) as i64;
    let want: Vec<(&str, Reply)> = vec![
        ("algorithm", Reply::Bulk(b"fixed".to_vec())),
        ("limit", Reply::Int(5)),
        ("window_ms", Reply::Int(60_000)),
        ("offset_ms", Reply::Int(0)),
        ("granted", Reply::Int(0)),
        ("remaining", Reply::Int(3)),
        ("retry_after_ms", Reply::Int(0)),
        ("reset_after_ms", Reply::Int(reset)),
        ("blocked_ms", Reply::Int(0)),
        ("dedup_ids", Reply::Int(0)),
    ];
    let got: Vec<(String, Reply)> = map
        .iter()
        .map(|(k, v)| (k.as_str().unwrap(), v.clone()))
        .collect();
    assert_eq!(got.len(), want.len() + 1, "{got:?}");
    for ((name, value), (want_name, want_value)) in got.iter().zip(&want) {
        assert_eq!((name.as_str(), value), (*want_name, want_value));
    }
    assert_eq!(got.last().map(|(k, _)| k.as_str()), Some("ttl_ms"));
}
