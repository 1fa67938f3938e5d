//! RL.METRICS against a real server: the counters of every command and named policy, the
//! near-limit count under `ratelimit.near-limit-percent`, and the `WAIT` counters with the time
//! waited, each equal to what the calls sent imply (the calls carry `AT`, so each grant and
//! denial is known in advance). The same pairs through `EVAL` (how redis_exporter's `--script`
//! reads them) and from a user with only `+@read`.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;

/// RL.METRICS as a map (the pairs come as a flat array of bulk strings, values decimal text).
fn metrics(c: &mut Conn, call: &[&str]) -> HashMap<String, String> {
    let r = c.cmd(call);
    let items = r
        .as_array()
        .unwrap_or_else(|| panic!("{call:?}: a flat array, got {r:?}"));
    assert!(items.len().is_multiple_of(2), "{r:?}");
    let mut out = HashMap::new();
    for kv in items.chunks(2) {
        let (Reply::Bulk(k), Reply::Bulk(v)) = (&kv[0], &kv[1]) else {
            panic!("pairs of bulk strings: {kv:?}");
        };
        let k = String::from_utf8(k.clone()).expect("utf-8 name");
        let v = String::from_utf8(v.clone()).expect("utf-8 value");
        assert!(out.insert(k.clone(), v).is_none(), "{k} twice");
    }
    out
}

fn command(m: &HashMap<String, String>, counter: &str, cmd: &str) -> i64 {
    let k = format!("ratelimit_command_{counter}_total{{command=\"{cmd}\"}}");
    m.get(&k)
        .unwrap_or_else(|| panic!("{k} missing"))
        .parse()
        .expect("an integer")
}

fn policy(m: &HashMap<String, String>, counter: &str, name: &str) -> i64 {
    let k = format!("ratelimit_policy_{counter}_total{{policy=\"{name}\"}}");
    m.get(&k)
        .unwrap_or_else(|| panic!("{k} missing"))
        .parse()
        .expect("an integer")
}

const COUNTERS: [&str; 5] = ["calls", "granted", "denied", "shadow_denied", "near_limit"];

#[test]
fn the_pairs_count_each_command_and_policy_as_the_calls_imply() {
    let s = Server::start();
    let mut c = s.conn();
    let at = base_ms().to_string();
    // RL.GCRA burst 10: a limit of 10; 12 calls at one instant: remaining 9..0, then 2 denied.
    // Near the limit at 20%: remaining below 2, so the grants leaving 1 and 0.
    for _ in 0..12 {
        c.cmd(&["RL.GCRA", "g", "10", "1", "1m", "AT", &at]);
    }
    // A shadow policy of limit 2: 4 calls, the last two would be denied.
    c.int(&[
        "RL.POLICY",
        "SET",
        "shadowed",
        "GCRA",
        "2",
        "1",
        "1m",
        "SHADOW",
    ]);
    // An enforced one of limit 5: 7 calls, 2 denied; near: remaining 0 only (0·100 < 5·20).
    c.int(&["RL.POLICY", "SET", "free", "GCRA", "5", "1", "1m"]);
    for _ in 0..4 {
        c.cmd(&["RL.LIMIT", "s", "shadowed", "AT", &at]);
    }
    for _ in 0..7 {
        c.cmd(&["RL.LIMIT", "f", "free", "AT", &at]);
    }
    // An error counts nowhere.
    assert!(c.cmd(&["RL.GCRA", "g", "x", "1", "1m"]).is_error());

    let m = metrics(&mut c, &["RL.METRICS"]);
    let got = |f: &dyn Fn(&str) -> i64| COUNTERS.map(f);
    assert_eq!(got(&|n| command(&m, n, "rl.gcra")), [12, 10, 2, 0, 2]);
    // RL.LIMIT's own row counts every call under either policy.
    assert_eq!(got(&|n| command(&m, n, "rl.limit")), [11, 9, 2, 2, 1 + 3]);
    assert_eq!(got(&|n| policy(&m, n, "free")), [7, 5, 2, 0, 1]);
    // Shadow: all 4 let through; remaining 1 (not near: 1·100 ≥ 2·20), then 0 three times.
    assert_eq!(got(&|n| policy(&m, n, "shadowed")), [4, 4, 0, 2, 3]);
    assert_eq!(got(&|n| command(&m, n, "rl.tokenbucket")), [0; 5]);
    assert_eq!(m["ratelimit_policies"], "2");
    assert_eq!(m["ratelimit_near_limit_percent"], "20");
    // Bounded: per command and policy, never per key.
    assert!(!m.keys().any(|k| k.contains("\"g\"") || k.contains("\"f\"")));
    // Every name is a series Prometheus accepts: a metric name, maybe one label.
    for k in m.keys() {
        let (name, labels) = k.split_once('{').unwrap_or((k, ""));
        assert!(name.starts_with("ratelimit_"), "{k}");
        assert!(
            name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{k}"
        );
        assert!(labels.is_empty() || labels.ends_with("\"}"), "{k}");
    }

    // What redis_exporter's script runs gives the same pairs.
    let via_eval = metrics(&mut c, &["EVAL", "return redis.call('RL.METRICS')", "0"]);
    assert_eq!(via_eval, m);
    assert!(c.cmd(&["RL.METRICS", "extra"]).is_error());

    // The ratio is a module config: at 50%, a grant leaving 4 of 10 is near.
    c.ok(&["CONFIG", "SET", "ratelimit.near-limit-percent", "50"]);
    let at2 = (base_ms() + 3_600_000).to_string();
    for _ in 0..6 {
        c.cmd(&["RL.GCRA", "h", "10", "1", "1m", "AT", &at2]);
    }
    let m = metrics(&mut c, &["RL.METRICS"]);
    // remaining 9, 8, 7, 6, 5, 4: only 4 is below 5.
    assert_eq!(command(&m, "near_limit", "rl.gcra"), 2 + 1);
    assert_eq!(m["ratelimit_near_limit_percent"], "50");
    assert!(
        c.cmd(&["CONFIG", "SET", "ratelimit.near-limit-percent", "101"])
            .is_error()
    );
}

#[test]
fn waits_count_granted_timed_out_and_the_time_waited() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["RL.ACQUIRE", "k", "1", "1m", "ID", "holder"]);
    // One waiter times out after 200 ms.
    let t0 = Instant::now();
    let r = c.cmd(&["RL.ACQUIRE", "k", "1", "1m", "ID", "late", "WAIT", "200"]);
    let waited = t0.elapsed();
    assert!(r.as_array().is_some(), "{r:?}");
    // One waiter is granted after a release.
    let mut w = s.conn();
    w.send(&["RL.ACQUIRE", "k", "1", "1m", "ID", "next", "WAIT", "10s"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = metrics(&mut c, &["RL.METRICS"]);
        if m["ratelimit_wait_waiting"] == "1" {
            break;
        }
        assert!(Instant::now() < deadline, "no waiter");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    c.cmd(&["RL.RELEASE", "k", "holder"]);
    let r = w.recv();
    assert!(r.as_array().is_some(), "{r:?}");
    let m = metrics(&mut c, &["RL.METRICS"]);
    assert_eq!(m["ratelimit_wait_waiting"], "0");
    assert_eq!(m["ratelimit_wait_granted_total"], "1");
    assert_eq!(m["ratelimit_wait_timed_out_total"], "1");
    assert_eq!(m["ratelimit_wait_dropped_total"], "0");
    let secs: f64 = m["ratelimit_wait_waited_seconds_total"]
        .parse()
        .expect("a decimal");
    // 200 ms timed out (the server's clock, at most what the client saw) + ≥ 100 ms granted.
    assert!(secs >= 0.3 && secs < waited.as_secs_f64() + 10.0, "{secs}");
    // RL.ACQUIRE's row: holder granted, late denied (timed out), next granted.
    assert_eq!(
        COUNTERS.map(|n| command(&m, n, "rl.acquire")),
        [3, 2, 1, 0, 2]
    );
}

#[test]
fn a_read_only_user_reads_the_metrics() {
    let s = Server::start();
    let mut admin = s.conn();
    // What redis_exporter needs, and RL.METRICS by name (servers before 7.2 give module
    // commands no ACL category; tests/acl.rs checks RL.METRICS is in @read where they do).
    admin.ok(&[
        "ACL",
        "SETUSER",
        "exporter",
        "on",
        ">pw",
        "+ping",
        "+info",
        "+eval",
        "+rl.metrics",
    ]);
    let mut e = s.conn();
    e.ok(&["AUTH", "exporter", "pw"]);
    let m = metrics(&mut e, &["RL.METRICS"]);
    assert!(m.contains_key("ratelimit_command_calls_total{command=\"rl.gcra\"}"));
    let m = metrics(&mut e, &["EVAL", "return redis.call('RL.METRICS')", "0"]);
    assert!(m.contains_key("ratelimit_wait_waiting"));
}
