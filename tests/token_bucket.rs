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
