//! RL.SLIDINGCOUNTER end to end against a real server. Time is driven with `AT`, an hour ahead
//! of the real clock (expiry is absolute from `AT`), on a round second so 1 s windows start at
//! it.

mod common;
mod suite;
use common::*;
use suite::{Spec, call};

/// An estimate of at most 10 units in any 1 s.
const SPEC: Spec = Spec {
    command: "RL.SLIDINGCOUNTER",
    params: &["10", "1s"],
    changed: &["15", "1s"],
    slow: &["10", "1m"],
    slow_changed: &["15", "1m"],
    info_name: "slidingcounter",
    info_params: &[("limit", 10), ("window_ms", 1000)],
    // 2 of 10 in the window starting now; they weigh on the next window too: fresh after 2 s.
    after_cost_2: [10, 8, 2000],
};

#[test]
fn slidingcounter_weighs_the_previous_window() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    #[rustfmt::skip]
    let cases: &[(u64, &[&str], [i64; 5])] = &[
        // at (ms after t), extra options,      granted limit remaining retry reset
        (0,    &["COST", "4"],                 [4, 10, 6,  0,    2000]),
        (500,  &["COST", "6"],                 [6, 10, 0,  0,    1500]),
        // Next window: 10 · (1 − e) + 1 ≤ 10 once e ≥ 100 ms.
        (500,  &[],                            [0, 10, 0,  600,  1500]),
        (1099, &[],                            [0, 10, 0,  1,    901]),
        (1100, &["PEEK"],                      [1, 10, 0,  0,    1900]),
        // 10 · 0.75 = 7.5 used: 2 left.
        (1250, &["COST", "0"],                 [0, 10, 2,  0,    750]),
        (1250, &["COST", "3", "BESTEFFORT"],   [2, 10, 0,  250,  1750]),
        (1500, &["COST", "3"],                 [3, 10, 0,  0,    1500]),
        (1500, &["COST", "11"],                [0, 10, 0,  -1,   1500]),
        // The clock steps back: evaluated at the last update (1500 ms).
        (1200, &["COST", "0"],                 [0, 10, 0,  0,    1500]),
        (3200, &["COST", "0"],                 [0, 10, 10, 0,    0]),
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
fn slidingcounter_retry_is_exact_below_the_millisecond() {
    // 7 units in the previous window of 1 s: one more fits at 1/7 s = 142.857 ms into the next
    // one, so the reply rounds up to 143 ms; AT with a fraction hits the microsecond.
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let at = |us: u64| format!("{}.{:03}", t + us / 1000, us % 1000);
    let sc =
        |c: &mut Conn, us: u64| c.ints(&args!["RL.SLIDINGCOUNTER", "k", 7, "1s", "AT", at(us)]);
    assert_eq!(
        c.ints(&args![
            "RL.SLIDINGCOUNTER",
            "k",
            7,
            "1s",
            "COST",
            7,
            "AT",
            at(0)
        ]),
        [7, 7, 0, 0, 2000]
    );
    assert_eq!(sc(&mut c, 1_000_000), [0, 7, 0, 143, 1000]);
    assert_eq!(sc(&mut c, 1_142_857)[0], 0);
    assert_eq!(sc(&mut c, 1_142_858)[0], 1);
}

// The checks every limiter passes (tests/suite).
shared_checks!(SPEC);

#[test]
fn slidingcounter_errors_name_the_argument() {
    #[rustfmt::skip]
    suite::check_errors(&SPEC, &[
        // arguments after the key,         error
        (&["-10", "1s"],                    "ERR limit must be a positive integer"),
        (&["10", "abc"],                    "ERR invalid duration 'abc' for window"),
        (&["10", "9223372036854775807d"],   "ERR invalid duration '9223372036854775807d' for window"),
        (&["10", "1s", "OFFSET", "1s"],     "ERR unknown option 'OFFSET'"),
    ]);
}

#[test]
fn slidingcounter_key_expires_when_both_windows_are_over() {
    suite::check_expiry_is_reset_time(
        &SPEC,
        &[
            // Counts weigh on the next window: the key lives to the end of the window after.
            (0, &["COST", "3"], 2000),
            (100, &[], 2000),
            (1150, &["COST", "2"], 3000),
            (1900, &[], 3000),
        ],
    );
}
