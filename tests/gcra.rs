//! RL.GCRA, CL.THROTTLE and RL.INFO end to end against a real server.
//!
//! Time is driven with `AT`, an hour ahead of the real clock (expiry is absolute from `AT`, so a
//! time in the past would delete the key at once).

mod common;
mod suite;
use common::*;
use suite::Spec;

/// Burst 10, 5 per second: one unit every 200 ms.
const SPEC: Spec = Spec {
    command: "RL.GCRA",
    params: &["10", "5", "1s"],
    changed: &["20", "10", "1s"],
    slow: &["10", "5", "1m"],
    slow_changed: &["20", "10", "1m"],
    info_name: "gcra",
    info_params: &[("burst", 10), ("rate", 5), ("period_ms", 1000)],
    // 2 of burst 10 at 200 ms each: 8 left, fresh after 400 ms.
    after_cost_2: [10, 8, 400],
};

// The checks every limiter passes (tests/suite); GCRA's own cases follow.
shared_checks!(SPEC);

#[test]
fn gcra_replies_follow_the_schedule() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // burst 10, 5 per second: one unit every 200 ms.
    #[rustfmt::skip]
    let cases: &[(u64, &[&str], [i64; 5])] = &[
        // at (ms after t), extra options,        granted limit remaining retry reset
        (0,    &[],                              [1, 10, 9, 0,    200]),
        (0,    &["COST", "9"],                   [9, 10, 0, 0,    2000]),
        (0,    &[],                              [0, 10, 0, 200,  2000]),
        (100,  &[],                              [0, 10, 0, 100,  1900]),
        (200,  &[],                              [1, 10, 0, 0,    2000]),
        (200,  &["COST", "11"],                  [0, 10, 0, -1,   2000]),
        (1000, &["COST", "5", "BESTEFFORT"],     [4, 10, 0, 1000, 2000]),
        (1000, &["COST", "0"],                   [0, 10, 0, 0,    2000]),
        (1500, &["PEEK"],                        [1, 10, 1, 0,    1700]),
        (1500, &["PEEK", "COST", "2"],           [2, 10, 0, 0,    1900]),
        (1500, &["PEEK", "COST", "3"],           [0, 10, 2, 100,  1500]),
        (5000, &["COST", "0"],                   [0, 10, 10, 0,   0]),
        // The clock steps back: evaluated at the last update (1000 ms).
        (400,  &[],                              [0, 10, 0, 200,  2000]),
    ];
    for (i, (at, extra, want)) in cases.iter().enumerate() {
        let mut cmd = args!["RL.GCRA", "k", 10, 5, "1s", "AT", t + at].to_vec();
        cmd.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
        assert_eq!(
            c.ints(&cmd),
            want.to_vec(),
            "case {i}: {extra:?} at +{at}ms"
        );
    }
}

#[test]
fn gcra_fraction_of_a_millisecond_in_at() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // 1000 per second, burst 1: the second unit is due 1 ms later, not 0.5 ms later.
    let at = |us: u64| format!("{}.{:03}", t + us / 1000, us % 1000);
    assert_eq!(
        c.ints(&args!["RL.GCRA", "f", 1, 1000, "1s", "AT", at(0)])[0],
        1
    );
    assert_eq!(
        c.ints(&args!["RL.GCRA", "f", 1, 1000, "1s", "AT", at(500)])[0],
        0
    );
    assert_eq!(
        c.ints(&args!["RL.GCRA", "f", 1, 1000, "1s", "AT", at(999)])[0],
        0
    );
    assert_eq!(
        c.ints(&args!["RL.GCRA", "f", 1, 1000, "1s", "AT", at(1000)])[0],
        1
    );
    // 4000 per second: four units per millisecond, exactly.
    let granted: i64 = (0..8)
        .map(|i| c.ints(&args!["RL.GCRA", "q", 1, 4000, "1s", "AT", at(i * 250)])[0])
        .sum();
    assert_eq!(granted, 8);
}

#[test]
fn gcra_resp3_reply_is_a_map() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["HELLO", "3"]);
    let r = c.cmd(&args!["RL.GCRA", "k", 10, 5, "1s", "AT", base_ms()]);
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
            "reset_after_ms"
        ]
    );
    let values: Vec<i64> = fields.iter().map(|(_, v)| v.as_int().unwrap()).collect();
    assert_eq!(values, [1, 10, 9, 0, 200]);
}

#[test]
fn gcra_key_expires_when_the_limiter_is_fresh_again() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "COST", 3, "AT", t]);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), (t + 600) as i64);
    // 3 per second: the TAT is 1/3 s away, rounded up to the next ms.
    c.ints(&args!["RL.GCRA", "j", 3, 3, "1s", "AT", t]);
    assert_eq!(c.int(&["PEXPIRETIME", "j"]), (t + 334) as i64);
    assert_eq!(c.cmd(&["TYPE", "k"]), Reply::Simple("ratelimit".into()));
    // DEL resets the limiter.
    c.int(&["DEL", "k"]);
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "COST", 10, "AT", t])[0],
        10
    );
}

#[test]
fn gcra_denied_peek_and_cost_zero_write_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // On a missing key: nothing is created.
    c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "PEEK", "AT", t]);
    c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "COST", 0, "AT", t]);
    c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "COST", 11, "AT", t]);
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
    // On an existing key: the value and expiry stay byte for byte.
    c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "COST", 10, "AT", t]);
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]);
    let expiry = c.int(&["PEXPIRETIME", "k"]);
    let dirty = c.info_field("persistence", "rdb_changes_since_last_save");
    c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "AT", t + 100]);
    c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "PEEK", "AT", t + 900]);
    c.ints(&args![
        "RL.GCRA",
        "k",
        20,
        5,
        "1s",
        "COST",
        0,
        "AT",
        t + 900
    ]);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]), digest);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), expiry);
    assert_eq!(
        c.info_field("persistence", "rdb_changes_since_last_save"),
        dirty
    );
}

#[test]
fn gcra_dedup_charges_a_retried_request_once() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let call = |c: &mut Conn, at: u64, cost: u64, id: &[u8]| {
        c.ints(&args![
            "RL.GCRA",
            "k",
            10,
            1,
            "1s",
            "COST",
            cost,
            "DEDUP",
            id,
            "AT",
            t + at
        ])
    };
    assert_eq!(call(&mut c, 0, 3, b"req-1"), [3, 10, 7, 0, 3000]);
    // The retry is not charged: the remembered grant, the current state, retry 0.
    assert_eq!(call(&mut c, 10, 3, b"req-1"), [3, 10, 7, 0, 2990]);
    // Ids are binary-safe and distinct.
    assert_eq!(call(&mut c, 10, 3, b"req-1\0"), [3, 10, 4, 0, 5990]);
    // A denied call does not remember its id.
    assert_eq!(call(&mut c, 20, 9, b"big"), [0, 10, 4, 4980, 5980]);
    assert_eq!(call(&mut c, 20, 4, b"big"), [4, 10, 0, 0, 9980]);
    // Forgotten one period (1 s) after the first call: charged again.
    assert_eq!(call(&mut c, 1000, 3, b"req-1")[0], 0);
    assert_eq!(call(&mut c, 3000, 3, b"req-1"), [3, 10, 0, 0, 10000]);
    // The key lives while ids are remembered, at least until its reset.
    let info = c.cmd(&["RL.INFO", "k"]);
    let fields = info.as_array().unwrap();
    let pos = fields
        .iter()
        .position(|f| f.as_str().as_deref() == Some("dedup_ids"))
        .unwrap();
    assert_eq!(
        fields[pos + 1],
        Reply::Int(1),
        "the other ids were forgotten"
    );
}

#[test]
fn gcra_dedup_max_bounds_remembered_ids() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["CONFIG", "SET", "ratelimit.dedup-max", "2"]);
    let t = base_ms();
    for id in ["a", "b", "c"] {
        assert_eq!(
            c.ints(&args!["RL.GCRA", "k", 100, 1, "1m", "DEDUP", id, "AT", t])[0],
            1
        );
    }
    // "a" was forgotten first; "c" is remembered.
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 100, 1, "1m", "DEDUP", "c", "AT", t])[2],
        97
    );
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 100, 1, "1m", "DEDUP", "a", "AT", t])[2],
        96
    );
    assert!(
        c.err(&["CONFIG", "SET", "ratelimit.dedup-max", "-1"])
            .starts_with("ERR")
    );
}

#[test]
fn gcra_new_parameters_keep_units_used() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 10, 10, "1s", "COST", 6, "AT", t]),
        [6, 10, 4, 0, 600]
    );
    // Raising the burst grants the difference at once (redis-cell issue #54 denied here).
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 20, 10, "1s", "COST", 14, "AT", t]),
        [14, 20, 0, 0, 2000]
    );
    // Doubling the rate halves the time the used units take to drain.
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 20, 20, "1s", "COST", 0, "AT", t]),
        [0, 20, 0, 0, 1000]
    );
}

#[test]
fn gcra_wrong_types_are_refused() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ok(&["SET", "str", "1"]);
    assert_eq!(
        c.err(&args!["RL.GCRA", "str", 1, 1, "1s", "AT", t]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        c.err(&["RL.INFO", "str"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    c.ints(&args!["RL.GCRA", "g", 1, 1, "1s", "AT", t]);
    assert_eq!(
        c.err(&args!["RL.TOKENBUCKET", "g", 1, 1, "1s", "AT", t]),
        "WRONGTYPE key holds a RL.GCRA limiter, not RL.TOKENBUCKET"
    );
    assert_eq!(
        c.err(&args!["RL.LEAKYBUCKET", "g", 1, 1, "1s", "AT", t]),
        "WRONGTYPE key holds a RL.GCRA limiter, not RL.LEAKYBUCKET"
    );
    c.ints(&args!["RL.TOKENBUCKET", "tb", 1, 1, "1s", "AT", t]);
    assert_eq!(
        c.err(&args!["RL.GCRA", "tb", 1, 1, "1s", "AT", t]),
        "WRONGTYPE key holds a RL.TOKENBUCKET limiter, not RL.GCRA"
    );
    assert_eq!(
        c.err(&["CL.THROTTLE", "tb", "1", "1", "1"]),
        "WRONGTYPE key holds a RL.TOKENBUCKET limiter, not RL.GCRA"
    );
    assert_eq!(
        c.err(&["GET", "g"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn errors_are_redis_style_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms().to_string();
    let long_id = "x".repeat(257);
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["RL.GCRA"],                                   "ERR wrong number of arguments for 'rl.gcra' command"),
        (&["RL.GCRA", "k", "1", "1"],                    "ERR wrong number of arguments for 'rl.gcra' command"),
        (&["RL.GCRA", "k", "0", "1", "1s"],              "ERR burst must be a positive integer"),
        (&["RL.GCRA", "k", "-3", "1", "1s"],             "ERR burst must be a positive integer"),
        (&["RL.GCRA", "k", "1.5", "1", "1s"],            "ERR burst must be a positive integer"),
        (&["RL.GCRA", "k", "9223372036854775808", "1", "1s"], "ERR burst must be a positive integer"),
        (&["RL.GCRA", "k", "1", "abc", "1s"],            "ERR rate must be a positive integer"),
        (&["RL.GCRA", "k", "1", "1", "abc"],             "ERR invalid duration 'abc' for period"),
        (&["RL.GCRA", "k", "1", "1", "0"],               "ERR invalid duration '0' for period"),
        (&["RL.GCRA", "k", "1", "1", "5w"],              "ERR invalid duration '5w' for period"),
        (&["RL.GCRA", "k", "1", "1", "1s", "FOO"],       "ERR unknown option 'FOO'"),
        (&["RL.GCRA", "k", "1", "1", "1s", "COST"],      "ERR syntax error, COST needs a value"),
        (&["RL.GCRA", "k", "1", "1", "1s", "COST", "-1"], "ERR COST must be a non-negative integer"),
        (&["RL.GCRA", "k", "1", "1", "1s", "AT"],        "ERR syntax error, AT needs a value"),
        (&["RL.GCRA", "k", "1", "1", "1s", "AT", "now"], "ERR invalid time 'now' for AT, expected unix milliseconds"),
        (&["RL.GCRA", "k", "1", "1", "1s", "DEDUP"],     "ERR syntax error, DEDUP needs a value"),
        (&["RL.GCRA", "k", "1", "1", "1s", "DEDUP", &long_id], "ERR DEDUP id must be at most 256 bytes"),
        (&["RL.GCRA", "k", "1", "1", "1s", "PEEK", "PEEK"], "ERR syntax error, PEEK given more than once"),
        (&["RL.GCRA", "k", "1", "1", "1s", "AT", &t, "AT", &t], "ERR syntax error, AT given more than once"),
        (&["CL.THROTTLE", "k", "1", "1"],                "ERR wrong number of arguments for 'cl.throttle' command"),
        (&["CL.THROTTLE", "k", "1", "1", "1", "1", "1"], "ERR wrong number of arguments for 'cl.throttle' command"),
        (&["CL.THROTTLE", "k", "-1", "1", "1"],          "ERR max_burst must be a non-negative integer"),
        (&["CL.THROTTLE", "k", "1", "0", "1"],           "ERR count per period must be a positive integer"),
        (&["CL.THROTTLE", "k", "1", "1", "0"],           "ERR period must be a positive integer"),
        (&["CL.THROTTLE", "k", "1", "1", "1", "x"],      "ERR quantity must be a non-negative integer"),
        (&["CL.THROTTLE", "k", "1", "1", "1", "AT"],     "ERR syntax error, AT needs a value"),
        (&["CL.THROTTLE", "k", "1", "1", "1", "1", "AT"], "ERR syntax error, AT needs a value"),
        (&["CL.THROTTLE", "k", "9223372036854775807", "1", "1"], "ERR max_burst must be at most 9223372036854775806"),
        (&["CL.THROTTLE", "k", "1", "1", "9223372036855"], "ERR period must be at most 9223372036854 seconds"),
        (&["RL.INFO"],                                   "ERR wrong number of arguments for 'rl.info' command"),
        (&["RL.INFO", "k", "x"],                         "ERR wrong number of arguments for 'rl.info' command"),
        (&["RL._RESTORE", "k", "garbage"],               "ERR invalid rate limiter payload"),
    ];
    for (cmd, want) in cases {
        assert_eq!(c.err(cmd), *want, "{cmd:?}");
    }
    assert_eq!(c.int(&["DBSIZE"]), 0, "an error must not create a key");
    assert!(c.info_field("persistence", "rdb_changes_since_last_save") == Some("0".into()));
}

#[test]
fn hostile_input_is_refused_without_harm() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // Extremes of every number: answered, never a crash or a wrap-around.
    let max = i64::MAX.to_string();
    // The longest period: i64::MAX microseconds, in whole milliseconds.
    let period = (i64::MAX / 1000).to_string();
    let r = c.ints(&args![
        "RL.GCRA", "k", &max, &max, &period, "COST", &max, "AT", t
    ]);
    assert_eq!(r[0], i64::MAX);
    let r = c.ints(&args![
        "RL.GCRA", "k", &max, &max, &period, "COST", &max, "AT", t
    ]);
    assert_eq!(r[0], 0);
    assert_eq!(r[2], 0);
    assert_eq!(
        c.err(&args!["RL.GCRA", "k", 1, 1, "106751992d"]),
        "ERR invalid duration '106751992d' for period"
    );
    c.ints(&args![
        "RL.GCRA",
        "k2",
        1,
        1,
        "106751991d",
        "AT",
        "253402300799999"
    ]);
    assert_eq!(
        c.err(&args!["RL.GCRA", "k2", 1, 1, "1s", "AT", "253402300800000"]),
        "ERR invalid time '253402300800000' for AT, expected unix milliseconds"
    );
    // Binary keys and ids, and a megabyte of junk.
    c.ints(&args![
        "RL.GCRA",
        b"\xff\x00bin".to_vec(),
        1,
        1,
        "1s",
        "DEDUP",
        b"\x00\r\n".to_vec(),
        "AT",
        t
    ]);
    let junk = vec![b'9'; 1 << 20];
    assert_eq!(
        c.err(&args!["RL.GCRA", "k3", junk.clone(), 1, "1s"]),
        "ERR burst must be a positive integer"
    );
    assert!(
        c.err(&args!["RL.GCRA", "k3", 1, 1, junk])
            .starts_with("ERR invalid duration '9999")
    );
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn throttle_matches_redis_cell_readme() {
    let s = Server::start();
    let mut c = s.conn();
    // redis-cell's README: 15 max burst, 30 per 60 s.
    assert_eq!(
        c.ints(&["CL.THROTTLE", "user123", "15", "30", "60"]),
        [0, 16, 15, -1, 2]
    );
    assert_eq!(
        c.ints(&["CL.THROTTLE", "user123", "15", "30", "60", "1"]),
        [0, 16, 14, -1, 4]
    );
    // Use up the burst: 16 in all, then limited with a retry of one emission interval (2 s).
    assert_eq!(
        c.ints(&["CL.THROTTLE", "user123", "15", "30", "60", "14"]),
        [0, 16, 0, -1, 32]
    );
    assert_eq!(
        c.ints(&["CL.THROTTLE", "user123", "15", "30", "60"]),
        [1, 16, 0, 2, 32]
    );
    // A quantity above the limit can never pass: retry stays -1.
    assert_eq!(
        c.ints(&["CL.THROTTLE", "other", "15", "30", "60", "17"]),
        [1, 16, 16, -1, 0]
    );
    // Quantity 0 reports without charging.
    assert_eq!(
        c.ints(&["CL.THROTTLE", "user123", "15", "30", "60", "0"]),
        [0, 16, 0, -1, 32]
    );
    // The key is a GCRA limiter with burst = max_burst + 1, usable from RL.GCRA.
    let info = c.cmd(&["RL.INFO", "user123"]);
    let flat: Vec<String> = info
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_str()
                .unwrap_or_else(|| r.as_int().unwrap().to_string())
        })
        .collect();
    assert_eq!(
        &flat[..8],
        [
            "algorithm",
            "gcra",
            "burst",
            "16",
            "rate",
            "30",
            "period_ms",
            "60000"
        ]
    );
    assert_eq!(
        c.ints(&["RL.GCRA", "user123", "16", "30", "60s", "COST", "0"])[..3],
        [0, 16, 0]
    );
}

#[test]
fn throttle_rounds_seconds_like_redis_cell() {
    let s = Server::start();
    let mut c = s.conn();
    // 1 per 3 seconds, no burst beyond the first: reset is 3 s, then retry just under 3 s
    // rounds up to 3.
    assert_eq!(
        c.ints(&["CL.THROTTLE", "k", "0", "1", "3"]),
        [0, 1, 0, -1, 3]
    );
    let r = c.ints(&["CL.THROTTLE", "k", "0", "1", "3"]);
    assert_eq!(r, [1, 1, 0, 3, 3]);
}

#[test]
fn throttle_takes_at_as_an_extension() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // 1 per 3 s with no extra burst, at given times: exact, whatever the real clock does.
    assert_eq!(
        c.ints(&args!["CL.THROTTLE", "k", 0, 1, 3, "AT", t]),
        [0, 1, 0, -1, 3]
    );
    assert_eq!(
        c.ints(&args!["CL.THROTTLE", "k", 0, 1, 3, 1, "AT", t + 1000]),
        [1, 1, 0, 2, 2]
    );
    assert_eq!(
        c.ints(&args!["CL.THROTTLE", "k", 0, 1, 3, "at", t + 3000]),
        [0, 1, 0, -1, 3]
    );
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), (t + 6000) as i64);
    assert_eq!(
        c.err(&args!["CL.THROTTLE", "k", 0, 1, 3, "AT", "soon"]),
        "ERR invalid time 'soon' for AT, expected unix milliseconds"
    );
    assert_eq!(
        c.err(&args!["CL.THROTTLE", "k", 0, 1, 3, "NOW", t]),
        "ERR wrong number of arguments for 'cl.throttle' command"
    );
}

#[test]
fn info_describes_without_changing() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["RL.INFO", "missing"]), Reply::Nil);
    let t = base_ms();
    c.ints(&args!["RL.GCRA", "k", 10, 5, "1s", "COST", 4, "AT", t]);
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]);
    let info = c.cmd(&["RL.INFO", "k"]);
    let items = info.as_array().unwrap();
    let names: Vec<String> = items
        .iter()
        .step_by(2)
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "algorithm",
            "burst",
            "rate",
            "period_ms",
            "granted",
            "limit",
            "remaining",
            "retry_after_ms",
            "reset_after_ms",
            "blocked_ms",
            "dedup_ids",
            "ttl_ms"
        ]
    );
    // Evaluated at the server's clock, an hour before the last update: clamped to it.
    let values: Vec<Reply> = items.iter().skip(1).step_by(2).cloned().collect();
    assert_eq!(values[0], Reply::Bulk(b"gcra".to_vec()));
    assert_eq!(
        &values[1..11],
        &[10, 5, 1000, 0, 10, 6, 0, 800, 0, 0].map(Reply::Int)
    );
    let ttl = values[11].as_int().unwrap();
    // The key expires at base + 800 ms, base being an hour after the test binary started.
    assert!(ttl > 3_000_000 && ttl <= 3_600_800, "ttl {ttl}");
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]), digest);
    // RESP3: a map.
    c.ok(&["HELLO", "3"]);
    let Reply::Map(m) = c.cmd(&["RL.INFO", "k"]) else {
        panic!("not a map")
    };
    assert_eq!(
        m[0],
        (
            Reply::Bulk(b"algorithm".to_vec()),
            Reply::Bulk(b"gcra".to_vec())
        )
    );
}

/// Reproducer: a parameter change rounded the converted backlog down, in the client's favour.
/// CL.THROTTLE c1 2 2 8400 is burst 3, one unit per 4200 s; 1 µs before the unit drained, the
/// new parameters (burst 1, 10 per hour) must still see 1 µs of backlog and limit the call.
#[test]
fn throttle_parameter_change_rounds_against_the_client() {
    let s = Server::start();
    let mut c = s.conn();
    // Times relative to now, so the key is alive (its expiry is absolute): the reproducer's
    // were 1795459239944.343 and 4,200 s later.
    let t = base_ms() + 944;
    let first = format!("{t}.343");
    let before = format!("{}.342", t + 4_200_000);
    let at = format!("{}.343", t + 4_200_000);
    assert_eq!(
        c.ints(&["CL.THROTTLE", "c1", "2", "2", "8400", "1", "AT", &first]),
        [0, 3, 2, -1, 4200]
    );
    // Limited by the backlog's last tick (0.1 µs at 10 per hour): 1 µs, which redis-cell's
    // rounding (whole ms, then seconds up) shows as 0 s.
    assert_eq!(
        c.ints(&["CL.THROTTLE", "c1", "0", "10", "3600", "1", "AT", &before]),
        [1, 1, 0, 0, 0]
    );
    assert_eq!(
        c.ints(&["CL.THROTTLE", "c1", "0", "10", "3600", "1", "AT", &at]),
        [0, 1, 0, -1, 360]
    );
}
