//! RL.LEAKYBUCKET end to end against a real server. Time is driven with `AT`, an hour ahead of
//! the real clock (expiry is absolute from `AT`).

mod common;
mod suite;
use common::*;
use suite::{Spec, call};

/// Capacity 5, draining 5 units a second: one unit leaves every 200 ms.
const SPEC: Spec = Spec {
    command: "RL.LEAKYBUCKET",
    params: &["5", "5", "1s"],
    changed: &["8", "4", "1s"],
    slow: &["5", "5", "1m"],
    slow_changed: &["8", "4", "1m"],
    info_name: "leakybucket",
    info_params: &[("capacity", 5), ("rate", 5), ("period_ms", 1000)],
    // 2 units in a bucket of 5 draining one every 200 ms: room for 3, empty after 400 ms.
    after_cost_2: [5, 3, 400],
};

#[test]
fn leakybucket_granted_retry_is_the_queue_delay() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    #[rustfmt::skip]
    let cases: &[(u64, &[&str], [i64; 5])] = &[
        // at (ms after t), extra options,      granted limit remaining retry reset
        (0,    &[],                            [1, 5, 4, 0,    200]),
        (0,    &[],                            [1, 5, 3, 200,  400]),
        (0,    &["COST", "3"],                 [3, 5, 0, 400,  1000]),
        (0,    &[],                            [0, 5, 0, 200,  1000]),
        (100,  &[],                            [0, 5, 0, 100,  900]),
        (200,  &[],                            [1, 5, 0, 800,  1000]),
        (200,  &["COST", "6"],                 [0, 5, 0, -1,   1000]),
        // 2.5 units queued: 2 fit; all 4 fit once 3.5 units have left.
        (700,  &["COST", "4", "BESTEFFORT"],   [2, 5, 0, 700,  900]),
        (700,  &["PEEK"],                      [0, 5, 0, 100,  900]),
        (2000, &["COST", "0"],                 [0, 5, 5, 0,    0]),
        (2000, &["COST", "2"],                 [2, 5, 3, 0,    400]),
        // The clock steps back: evaluated at the last update (2000 ms).
        (1500, &[],                            [1, 5, 2, 400,  600]),
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
fn leakybucket_workers_that_wait_the_delay_leave_at_the_rate() {
    // Ten requests arrive at once into a bucket of 10 draining 4 per second: each may proceed
    // after its queue delay, one every 250 ms, never faster.
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let delays: Vec<i64> = (0..10)
        .map(|_| {
            let r = c.ints(&args!["RL.LEAKYBUCKET", "q", 10, 4, "1s", "AT", t]);
            assert_eq!(r[0], 1);
            r[3]
        })
        .collect();
    assert_eq!(
        delays,
        [0, 250, 500, 750, 1000, 1250, 1500, 1750, 2000, 2250]
    );
    // The eleventh does not fit; it fits once one unit has left.
    assert_eq!(
        c.ints(&args!["RL.LEAKYBUCKET", "q", 10, 4, "1s", "AT", t]),
        [0, 10, 0, 250, 2500]
    );
    assert_eq!(
        c.ints(&args!["RL.LEAKYBUCKET", "q", 10, 4, "1s", "AT", t + 250]),
        [1, 10, 0, 2250, 2500]
    );
}

// The checks every limiter passes (tests/suite).
shared_checks!(SPEC);

#[test]
fn leakybucket_errors_name_the_argument() {
    #[rustfmt::skip]
    suite::check_errors(&SPEC, &[
        // arguments after the key,   error
        (&["0", "5", "1s"],           "ERR capacity must be a positive integer"),
        (&["5", "-5", "1s"],          "ERR rate must be a positive integer"),
        (&["5", "5", "0ms"],          "ERR invalid duration '0ms' for period"),
        (&["5", "5", "1s", "DEDUP"],  "ERR syntax error, DEDUP needs a value"),
    ]);
}

#[test]
fn leakybucket_key_expires_when_the_bucket_is_empty_again() {
    suite::check_expiry_is_reset_time(
        &SPEC,
        &[
            // One unit drains every 200 ms: empty 200 ms per queued unit later.
            (0, &["COST", "3"], 600),
            (100, &[], 800),
            // Room for 1 at +150 ms: denied, the expiry stays.
            (150, &["COST", "2"], 800),
            (900, &[], 1100),
        ],
    );
}
