//! A smoke suite: every command the module registers, called once or twice with replies checked
//! against the contract (SPEC). `make test-dist` runs it on the release tarball's module on every
//! server; the full suites run on the debug build.

mod common;
use common::*;

use std::time::Duration;

/// The commands this suite calls; `every_registered_command_is_in_the_smoke_suite` holds it to
/// the server's own list, so a command added later is not left out.
const CALLED: &[&str] = &[
    "rl.gcra",
    "rl.tokenbucket",
    "rl.leakybucket",
    "rl.fixed",
    "rl.sliding",
    "rl.slidingcounter",
    "rl.streamcount",
    "rl.all",
    "rl.check",
    "rl.checkall",
    "cl.throttle",
    "rl.info",
    "rl.metrics",
    "rl.refund",
    "rl.block",
    "rl.unblock",
    "rl.acquire",
    "rl.release",
    "rl.settle",
    "rl.limit",
    "rl.policy",
    "rl.policy|set",
    "rl.policy|get",
    "rl.policy|del",
    "rl.policy|list",
    "rl.policy|dump",
    "rl.policy|restore",
    "rl.policy|help",
    "rl._set",
    "rl._restore",
];

#[test]
fn every_registered_command_is_in_the_smoke_suite() {
    let s = Server::start();
    let mut c = s.conn();
    let listed = c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "ratelimit"]);
    let names: Vec<String> = listed
        .as_array()
        .expect("COMMAND LIST is an array")
        .iter()
        .filter_map(Reply::as_str)
        .map(|n| n.to_ascii_lowercase())
        .collect();
    assert!(names.len() >= 20, "{names:?}");
    for name in &names {
        assert!(
            CALLED.contains(&name.as_str()),
            "{name} is not in the smoke suite"
        );
    }
    for name in CALLED {
        assert!(names.iter().any(|n| n == name), "{name} is not registered");
    }
}

#[test]
fn the_algorithms_grant_and_deny() {
    let s = Server::start();
    let mut c = s.conn();
    // GCRA: T = 1 s; one unit of 10: TAT = now + T, reset_after = T.
    assert_eq!(
        c.ints(&["RL.GCRA", "s:gcra", "10", "1", "1s"]),
        [1, 10, 9, 0, 1000]
    );
    // Token bucket: 3 of 10 tokens, refilled at 1 per second.
    assert_eq!(
        c.ints(&["RL.TOKENBUCKET", "s:tb", "10", "1", "1s", "COST", "3"]),
        [3, 10, 7, 0, 3000]
    );
    // Leaky bucket: 2 units into an empty bucket: no queue delay.
    let lb = c.ints(&["RL.LEAKYBUCKET", "s:lb", "10", "1", "1s", "COST", "2"]);
    assert_eq!(lb[..4], [2, 10, 8, 0]);
    // Fixed window: 5 of 5, then denied.
    assert_eq!(
        c.ints(&["RL.FIXED", "s:fx", "5", "1h", "COST", "5"])[..3],
        [5, 5, 0]
    );
    let denied = c.ints(&["RL.FIXED", "s:fx", "5", "1h"]);
    assert_eq!(denied[..3], [0, 5, 0]);
    assert!(denied[3] > 0);
    // Sliding log and sliding counter: 3 per minute.
    for remaining in [2, 1, 0] {
        assert_eq!(
            c.ints(&["RL.SLIDING", "s:sl", "3", "1m"])[..3],
            [1, 3, remaining]
        );
    }
    assert_eq!(c.ints(&["RL.SLIDING", "s:sl", "3", "1m"])[0], 0);
    assert_eq!(
        c.ints(&["RL.SLIDINGCOUNTER", "s:sc", "3", "1m", "COST", "3"])[..3],
        [3, 3, 0]
    );
    assert_eq!(c.ints(&["RL.SLIDINGCOUNTER", "s:sc", "3", "1m"])[0], 0);
    // redis-cell's reply: [limited, max_burst + 1, remaining, retry_after_s, reset_after_s].
    let cell = c.ints(&["CL.THROTTLE", "s:cell", "9", "1", "1"]);
    assert_eq!(cell[..4], [0, 10, 9, -1]);
    // A stream counter: the window's total, -1 when LIMIT denies.
    assert_eq!(c.int(&["RL.STREAMCOUNT", "s:st", "1m", "ADD", "2"]), 2);
    assert_eq!(
        c.int(&["RL.STREAMCOUNT", "s:st", "1m", "ADD", "2", "LIMIT", "3"]),
        -1
    );
    assert_eq!(c.cmd(&["TYPE", "s:st"]), Reply::Simple("stream".into()));
    assert_eq!(
        c.cmd(&["TYPE", "s:gcra"]),
        Reply::Simple("ratelimit".into())
    );
}

#[test]
fn several_limits_checks_and_introspection() {
    let s = Server::start();
    let mut c = s.conn();
    // RL.ALL: the fixed window of 2 is the tighter limit; both are charged.
    assert_eq!(
        c.ints(&[
            "RL.ALL", "2", "{a}g", "{a}f", "GCRA", "10", "1", "1s", "FIXED", "2", "1h", "COST", "2"
        ])[..3],
        [2, 2, 0]
    );
    assert_eq!(
        c.ints(&["RL.GCRA", "{a}g", "10", "1", "1s", "COST", "0"])[2],
        8
    );
    // RL.CHECK / RL.CHECKALL answer as PEEK would and change nothing.
    assert_eq!(
        c.ints(&["RL.CHECK", "{a}g", "GCRA", "10", "1", "1s"])[..3],
        [1, 10, 7]
    );
    assert_eq!(
        c.ints(&[
            "RL.CHECKALL",
            "2",
            "{a}g",
            "{a}f",
            "GCRA",
            "10",
            "1",
            "1s",
            "FIXED",
            "2",
            "1h"
        ])[0],
        0
    );
    assert_eq!(
        c.ints(&["RL.GCRA", "{a}g", "10", "1", "1s", "COST", "0"])[2],
        8
    );
    // RL.INFO describes the key; a missing key is nil.
    let info = c.cmd(&["RL.INFO", "{a}g"]);
    let fields = info.as_array().expect("RL.INFO is an array under RESP2");
    assert_eq!(fields[0].as_str().as_deref(), Some("algorithm"));
    assert_eq!(fields[1].as_str().as_deref(), Some("gcra"));
    assert!(c.cmd(&["RL.INFO", "missing"]).is_nil());
    // INFO ratelimit counts the calls.
    let gcra = c
        .info_field("ratelimit", "ratelimit_rl_gcra")
        .expect("counters");
    assert!(gcra.starts_with("calls="), "{gcra}");
    // RL.METRICS: the same counters as name/value pairs (the 2 RL.GCRA calls above).
    let metrics = c.cmd(&["RL.METRICS"]);
    let pairs = metrics
        .as_array()
        .expect("RL.METRICS is an array under RESP2");
    let name = "ratelimit_command_calls_total{command=\"rl.gcra\"}";
    let calls = pairs
        .chunks(2)
        .find(|p| p[0].as_str().as_deref() == Some(name))
        .and_then(|p| p[1].as_str());
    assert_eq!(calls.as_deref(), Some("2"), "{name} in RL.METRICS");
}

#[test]
fn refunds_blocks_leases_and_reservations() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.TOKENBUCKET", "s:tb", "10", "1", "1h", "COST", "4"]);
    assert_eq!(c.ints(&["RL.REFUND", "s:tb", "3"])[..3], [3, 10, 9]);
    // A block denies without charging; RL.UNBLOCK lifts it.
    c.ints(&["RL.GCRA", "s:g", "10", "1", "1s"]);
    let left = c.int(&["RL.BLOCK", "s:g", "10s"]);
    assert!(left > 9000 && left <= 10000, "{left}");
    assert_eq!(
        c.ints(&["RL.GCRA", "s:g", "10", "1", "1s"])[..3],
        [0, 10, 0]
    );
    assert_eq!(c.int(&["RL.UNBLOCK", "s:g"]), 1);
    assert_eq!(c.ints(&["RL.GCRA", "s:g", "10", "1", "1s"])[0], 1);
    // Leases: 2 of 2 held, a third denied, freed by RL.RELEASE.
    assert_eq!(
        c.ints(&["RL.ACQUIRE", "s:c", "2", "1m", "ID", "a", "COST", "2"])[..3],
        [2, 2, 0]
    );
    assert_eq!(c.ints(&["RL.ACQUIRE", "s:c", "2", "1m", "ID", "b"])[0], 0);
    assert_eq!(c.int(&["RL.RELEASE", "s:c", "a"]), 2);
    // WAIT: a waiter gets its lease when the holder releases it.
    assert_eq!(c.ints(&["RL.ACQUIRE", "s:w", "1", "1m", "ID", "a"])[0], 1);
    let mut waiter = s.conn();
    waiter.send(&["RL.ACQUIRE", "s:w", "1", "1m", "ID", "b", "WAIT", "5s"]);
    wait_until("the waiter blocks", Duration::from_secs(5), || {
        c.info_field("clients", "blocked_clients").as_deref() == Some("1")
    });
    assert_eq!(c.int(&["RL.RELEASE", "s:w", "a"]), 1);
    let granted = waiter.recv();
    assert_eq!(granted.as_array().expect("a limiter reply")[0], int(1));
    // HOLD and RL.SETTLE: 5 reserved, 2 used, 3 given back.
    assert_eq!(
        c.ints(&[
            "RL.GCRA", "s:h", "10", "1", "1h", "COST", "5", "DEDUP", "job", "HOLD", "1m"
        ])[..3],
        [5, 10, 5]
    );
    let settled = c.cmd(&["RL.SETTLE", "1", "s:h", "job", "2"]);
    let reply = &settled.as_array().expect("one reply per key")[0];
    let values: Vec<i64> = reply
        .as_array()
        .expect("a limiter reply")
        .iter()
        .map(|v| v.as_int().expect("integers"))
        .collect();
    assert_eq!(values[..3], [2, 10, 8]);
}

#[test]
fn policies_and_the_internal_commands() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["RL.POLICY", "SET", "free", "GCRA", "10", "1", "1s"]);
    assert_eq!(
        c.cmd(&["RL.POLICY", "GET", "free"]),
        Reply::Array(vec![bulk("GCRA"), bulk("10"), bulk("1"), bulk("1s")])
    );
    let list = c.cmd(&["RL.POLICY", "LIST"]);
    assert_eq!(list.as_array().expect("pairs")[0], bulk("free"));
    assert_eq!(c.ints(&["RL.LIMIT", "s:p", "free"])[..3], [1, 10, 9]);
    let dump = c.cmd(&["RL.POLICY", "DUMP"]);
    let payload = dump.as_bytes().expect("a binary payload").to_vec();
    assert_eq!(c.int(&["RL.POLICY", "DEL", "free"]), 1);
    assert!(c.err(&["RL.LIMIT", "s:p", "free"]).contains("free"));
    c.ok(&[b"RL.POLICY".as_slice(), b"RESTORE", &payload]);
    assert_eq!(c.ints(&["RL.LIMIT", "s:p", "free"])[..3], [1, 10, 8]);
    assert!(c.cmd(&["RL.POLICY", "HELP"]).as_array().is_some());
    // The internal commands refuse a payload the module could not have written, and change
    // nothing (their real payloads: tests/upgrade.rs).
    assert!(c.err(&["RL._SET", "s:x", "garbage"]).starts_with("ERR"));
    assert!(c.err(&["RL._RESTORE", "s:x", "garbage"]).starts_with("ERR"));
    assert_eq!(c.int(&["EXISTS", "s:x"]), 0);
}
