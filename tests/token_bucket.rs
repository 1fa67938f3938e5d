//! RL.TOKENBUCKET end to end against a real server. Time is driven with `AT`, an hour ahead of
//! the real clock (expiry is absolute from `AT`).

mod common;
mod suite;
use common::*;
use suite::{Spec, call};

/// Capacity 5, refilled with 5 tokens a second: one token every 200 ms.
const SPEC: Spec = Spec {
    command: "RL.TOKENBUCKET",
    params: &["5", "5", "1s"],
    changed: &["8", "4", "1s"],
    slow: &["5", "5", "1m"],
    slow_changed: &["8", "4", "1m"],
    info_name: "tokenbucket",
    info_params: &[("capacity", 5), ("refill", 5), ("period_ms", 1000)],
    // 2 of 5 tokens, one back every 200 ms: 3 left, full after 400 ms.
    after_cost_2: [5, 3, 400],
};

#[test]
fn tokenbucket_replies_follow_the_bucket() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    #[rustfmt::skip]
    let cases: &[(u64, &[&str], [i64; 5])] = &[
        // at (ms after t), extra options,      granted limit remaining retry reset
        (0,    &[],                            [1, 5, 4, 0,    200]),
        (0,    &["COST", "4"],                 [4, 5, 0, 0,    1000]),
        (0,    &[],                            [0, 5, 0, 200,  1000]),
        (100,  &[],                            [0, 5, 0, 100,  900]),
        (200,  &[],                            [1, 5, 0, 0,    1000]),
        (200,  &["COST", "6"],                 [0, 5, 0, -1,   1000]),
        (600,  &["COST", "3", "BESTEFFORT"],   [2, 5, 0, 600,  1000]),
        (600,  &["COST", "0"],                 [0, 5, 0, 0,    1000]),
        (1000, &["PEEK"],                      [1, 5, 1, 0,    800]),
        (2000, &["COST", "0"],                 [0, 5, 5, 0,    0]),
        (2000, &[],                            [1, 5, 4, 0,    200]),
        // The clock steps back: evaluated at the last update (2000 ms).
        (1500, &[],                            [1, 5, 3, 0,    400]),
    ];
    for (i, (at, extra, want)) in cases.iter().enumerate() {
        assert_eq!(
            call(&mut c, &SPEC, "k", extra, t + at),
            want.to_vec(),
            "case {i}: {extra:?} at +{at}ms"
        );
    }
}

#[test]
fn tokenbucket_keeps_its_tokens_when_the_capacity_changes() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    assert_eq!(call(&mut c, &SPEC, "k", &["COST", "5"], t)[2], 0);
    // A bigger bucket is not refilled by the change: still empty, filling at the new rate.
    assert_eq!(
        c.ints(&args!["RL.TOKENBUCKET", "k", 50, 5, "1s", "AT", t]),
        [0, 50, 0, 200, 10_000]
    );
}

// The checks every limiter passes (tests/suite).
shared_checks!(SPEC);

#[test]
fn tokenbucket_errors_name_the_argument() {
    #[rustfmt::skip]
    suite::check_errors(&SPEC, &[
        // arguments after the key,   error
        (&["0", "5", "1s"],           "ERR capacity must be a positive integer"),
        (&["5", "x", "1s"],           "ERR refill must be a positive integer"),
        (&["5", "5", "1.5s"],         "ERR invalid duration '1.5s' for period"),
        (&["5", "5", "1s", "OFFSET", "1"], "ERR unknown option 'OFFSET'"),
    ]);
}

#[test]
fn tokenbucket_key_expires_when_the_bucket_is_full_again() {
    suite::check_expiry_is_reset_time(
        &SPEC,
        &[
            // One token every 200 ms: full again 200 ms per token taken after the last refill.
            (0, &["COST", "3"], 600),
            (100, &[], 800),
            // 1 token left at +150 ms: denied, the expiry stays.
            (150, &["COST", "2"], 800),
            (900, &[], 1100),
        ],
    );
}

/// Reproducer: a parameter change rounded the kept tokens up, in the client's favour. Emptied
/// at t, the bucket of 2 per 3 minutes holds 1.99999999 tokens 1 µs before t + 3 min; as 7 per
/// minute it must deny 2 (exact arithmetic does), and grant 1.
#[test]
fn tokenbucket_parameter_change_rounds_against_the_client() {
    let s = Server::start();
    let mut c = s.conn();
    let call = |c: &mut Conn, refill: &str, period: &str, cost: &str, at: &str| {
        c.ints(&[
            "RL.TOKENBUCKET",
            "t1",
            "2",
            refill,
            period,
            "COST",
            cost,
            "AT",
            at,
        ])
    };
    assert_eq!(
        call(&mut c, "2", "3m", "2", "2541131987215.912"),
        [2, 2, 0, 0, 180000]
    );
    // The fraction kept is rounded down to the new grid (1/60000000 token): one such tick is
    // missing, back in 1/7 µs (1 ms, rounded up).
    assert_eq!(
        call(&mut c, "7", "60000ms", "2", "2541132167215.911"),
        [0, 2, 1, 1, 1]
    );
    // One token taken: full again in 60/7 s and 1/7 µs, 8572 ms rounded up.
    assert_eq!(
        call(&mut c, "7", "60000ms", "1", "2541132167215.911"),
        [1, 2, 0, 0, 8572]
    );
}
