//! No reply value or expiry is ever capped: parameters whose results could not be represented
//! exactly are refused when parsed, naming the arguments, and the largest accepted ones give
//! exact replies and expiries even at the latest AT (9999-12-31).

mod common;
use common::*;

/// The latest AT accepted, in Unix ms (9999-12-31T23:59:59.999Z).
const MAX_AT_MS: u64 = 253_402_300_799_999;
/// The longest duration a reply or expiry may span, in whole ms (i64::MAX µs).
const MAX_SPAN_MS: u64 = 9_223_372_036_854_775;

/// Reproducer: a full bucket of this size would drain in 9.9e19 ms; the reply and PEXPIRETIME
/// were silently capped at 18446744073709552 (u64::MAX µs).
#[test]
fn leakybucket_too_long_to_drain_is_refused() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        c.err(&[
            "RL.LEAKYBUCKET",
            "s1",
            "1000000000961",
            "10093",
            "1000000000ms",
            "COST",
            "1000000000961",
            "AT",
            "4102444800000"
        ]),
        "ERR capacity * period / rate must be at most 9223372036854775 ms"
    );
    assert_eq!(c.int(&["EXISTS", "s1"]), 0);
}

#[test]
fn every_command_names_the_arguments_too_large() {
    let s = Server::start();
    let mut c = s.conn();
    let half = (MAX_SPAN_MS / 2 + 1).to_string();
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["RL.GCRA", "k", "2", "1", &half],           "ERR burst * period / rate must be at most 9223372036854775 ms"),
        (&["RL.TOKENBUCKET", "k", "2", "1", &half],    "ERR capacity * period / refill must be at most 9223372036854775 ms"),
        (&["RL.LEAKYBUCKET", "k", "2", "1", &half],    "ERR capacity * period / rate must be at most 9223372036854775 ms"),
        (&["CL.THROTTLE", "k", "1", "1", "4611686018428"], "ERR (max_burst + 1) * period / count per period must be at most 9223372036854775 ms"),
        (&["RL.SLIDINGCOUNTER", "k", "1", "4611686018427388"], "ERR window must be at most 4611686018427387 ms"),
        (&["RL.GCRA", "k", "1", "1", "9223372036854776"], "ERR invalid duration '9223372036854776' for period"),
        (&["RL.ALL", "2", "{a}1", "{a}2", "FIXED", "1", "1s", "GCRA", "2", "1", &half],
                                                       "ERR burst * period / rate must be at most 9223372036854775 ms"),
        (&["RL.ALL", "1", "k", "SLIDINGCOUNTER", "1", "4611686018427388"],
                                                       "ERR window must be at most 4611686018427387 ms"),
    ];
    for (cmd, want) in cases {
        assert_eq!(c.err(cmd), *want, "{cmd:?}");
    }
    assert_eq!(c.int(&["DBSIZE"]), 0, "an error must not create a key");
}

/// The largest accepted parameters at the latest AT: every reply value and expiry is exact
/// (computed here from the arguments), and survives a reload.
#[test]
fn largest_parameters_at_the_latest_time_are_exact() {
    let s = Server::start();
    let mut c = s.conn();
    let at = MAX_AT_MS;
    let span = MAX_SPAN_MS;
    let half = 4_611_686_018_427_387u64; // the longest SLIDINGCOUNTER window, ms
    let cases: Vec<(Vec<String>, [i64; 5], u64)> = vec![
        // A full GCRA drains in one period: reset = period, expiry = AT + period.
        (
            strs(&["RL.GCRA", "g", "1", "1", &span.to_string()]),
            [1, 1, 0, 0, span as i64],
            at + span,
        ),
        (
            strs(&["RL.TOKENBUCKET", "t", "1", "1", &span.to_string()]),
            [1, 1, 0, 0, span as i64],
            at + span,
        ),
        (
            strs(&["RL.LEAKYBUCKET", "l", "1", "1", &span.to_string()]),
            [1, 1, 0, 0, span as i64],
            at + span,
        ),
        // Epoch-aligned windows longer than the whole calendar: the first ends at `window`.
        (
            strs(&["RL.FIXED", "f", "1", &span.to_string()]),
            [1, 1, 0, 0, (span - at) as i64],
            span,
        ),
        // Fresh two windows after the window start (0): 2·W − AT.
        (
            strs(&["RL.SLIDINGCOUNTER", "c", "1", &half.to_string()]),
            [1, 1, 0, 0, (2 * half - at) as i64],
            2 * half,
        ),
        (
            strs(&["RL.SLIDING", "s", "1", &span.to_string()]),
            [1, 1, 0, 0, span as i64],
            at + span,
        ),
    ];
    let at_s = at.to_string();
    for (cmd, reply, expiry) in &cases {
        let mut argv = cmd.clone();
        argv.extend(strs(&["AT", &at_s]));
        assert_eq!(c.ints(&argv), reply, "{cmd:?}");
        assert_eq!(c.int(&["PEXPIRETIME", &cmd[1]]), *expiry as i64, "{cmd:?}");
    }
    // CL.THROTTLE: burst 1 (max_burst 0), one per 9223372036854 s.
    let secs = span / 1000;
    assert_eq!(
        c.ints(&args!["CL.THROTTLE", "ct", 0, 1, secs, 1, "AT", at]),
        [0, 1, 0, -1, secs as i64]
    );
    assert_eq!(c.int(&["PEXPIRETIME", "ct"]), (at + secs * 1000) as i64);
    c.ok(&["DEBUG", "RELOAD"]);
    for (cmd, _, expiry) in &cases {
        assert_eq!(c.int(&["PEXPIRETIME", &cmd[1]]), *expiry as i64, "{cmd:?}");
    }
}

/// New parameters under which a key's current state would take longer than any reply can say
/// are refused at the call (the state is only known then), and change nothing.
#[test]
fn a_backlog_too_long_for_new_parameters_is_refused() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    assert_eq!(
        c.ints(&args![
            "RL.LEAKYBUCKET",
            "q",
            1_000_000,
            1_000_000,
            "1s",
            "COST",
            1_000_000,
            "AT",
            t
        ]),
        [1_000_000, 1_000_000, 0, 0, 1000]
    );
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "q"]);
    // A million queued units at one per 10^9 s: 10^18 s to drain.
    assert_eq!(
        c.err(&args!["RL.LEAKYBUCKET", "q", 1, 1, "1000000000s", "AT", t]),
        "ERR parameters too large for the key's current state: it would be fresh again in more than 9223372036854775 ms"
    );
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "q"]), digest);
}

fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
