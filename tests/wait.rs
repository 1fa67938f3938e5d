//! `RL.ACQUIRE ... WAIT timeout` end to end against a real server: waiters served first come
//! first served (never more than the limit held), woken by RL.RELEASE, by a lease's expiry and
//! by DEL; timeouts reply the denied reply on time; a killed waiter leaves nothing; no blocking
//! inside MULTI or a script; a replica and an AOF replay end with the master's leases. The
//! waits run on the server's clock; time bounds are generous (they check that a wake is not
//! missed, not how fast it is).

mod common;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;

/// `INFO ratelimit`'s wait counters: waiting, granted, timed_out, dropped.
fn wait_stats(c: &mut Conn) -> HashMap<String, i64> {
    let line = c
        .info_field("ratelimit", "ratelimit_rl_acquire_wait")
        .expect("ratelimit_rl_acquire_wait in INFO ratelimit");
    line.split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().expect("an integer")))
        .collect()
}

fn waiting(c: &mut Conn) -> i64 {
    wait_stats(c)["waiting"]
}

/// Wait until `n` clients wait (the server has queued every call sent so far).
fn until_waiting(c: &mut Conn, n: i64) {
    wait_until(&format!("{n} waiting"), Duration::from_secs(10), || {
        waiting(c) == n
    });
}

/// RL.INFO's field `name`.
fn info_field(c: &mut Conn, key: &str, name: &str) -> Option<i64> {
    let info = c.cmd(&["RL.INFO", key]);
    let items = info.as_array()?.to_vec();
    items
        .chunks(2)
        .find(|kv| kv[0].as_str().as_deref() == Some(name))
        .and_then(|kv| kv[1].as_int())
}

fn ints(r: &Reply) -> Vec<i64> {
    r.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {r:?}"))
        .iter()
        .map(|x| x.as_int().expect("an integer"))
        .collect()
}

/// A connection that sent `RL.ACQUIRE key limit lease ID id WAIT timeout` and waits.
fn send_wait(s: &Server, key: &str, limit: u64, lease: &str, id: &str, timeout: &str) -> Conn {
    let mut c = s.conn();
    c.send(&args![
        "RL.ACQUIRE",
        key,
        limit,
        lease,
        "ID",
        id,
        "WAIT",
        timeout
    ]);
    c
}

/// 50 clients waiting on a limit of 5 are served in arrival order, one per release, each soon
/// after the release; never more than 5 units are held (from the replies, RL.INFO and the
/// counters).
#[test]
fn fifty_waiters_on_five_are_served_in_arrival_order() {
    let s = Server::start();
    let mut c = s.conn();
    let mut holders: std::collections::VecDeque<String> = (0..5).map(|i| format!("h{i}")).collect();
    for (i, h) in holders.iter().enumerate() {
        let r = c.ints(&["RL.ACQUIRE", "k", "5", "1m", "ID", h.as_str()]);
        assert_eq!(r[..3], [1, 5, 4 - i as i64], "holder {h}");
    }
    // Arrival order is fixed: each call is queued before the next is sent.
    let mut waiters = Vec::new();
    for i in 0..50 {
        waiters.push(send_wait(&s, "k", 5, "1m", &format!("w{i}"), "30s"));
        until_waiting(&mut c, i + 1);
    }
    // A full key with waiters: a new lease without WAIT does not pass them.
    assert_eq!(
        c.ints(&["RL.ACQUIRE", "k", "5", "1m", "ID", "poller"])[0],
        0
    );
    let mut slowest = Duration::ZERO;
    for (i, w) in waiters.iter_mut().enumerate() {
        let gone = holders.pop_front().unwrap();
        let released = Instant::now();
        assert_eq!(
            c.int(&["RL.RELEASE", "k", gone.as_str()]),
            1,
            "release {gone}"
        );
        let r = ints(&w.recv());
        slowest = slowest.max(released.elapsed());
        // Granted 1 of 5, nothing left; the lease of 1 minute is the last to end.
        assert_eq!(r[..4], [1, 5, 0, 0], "waiter {i}");
        assert!(
            (59_000..=60_000).contains(&r[4]),
            "waiter {i}: reset {}",
            r[4]
        );
        holders.push_back(format!("w{i}"));
        assert_eq!(info_field(&mut c, "k", "held"), Some(5), "after waiter {i}");
        assert_eq!(waiting(&mut c), 49 - i as i64, "after waiter {i}");
    }
    // The wake is in the release's own command: a missed one would wait for the lease's end
    // (a minute) or the timeout (30 s). The bound leaves room for a slow machine or valgrind.
    eprintln!("slowest wake after a release: {slowest:?}");
    assert!(
        slowest < Duration::from_secs(3),
        "a waiter was woken {slowest:?} after its release"
    );
    let st = wait_stats(&mut c);
    assert_eq!((st["waiting"], st["granted"], st["timed_out"]), (0, 50, 0));
    assert_eq!(info_field(&mut c, "k", "leases"), Some(5));
    assert_eq!(
        c.info_field("clients", "blocked_clients").as_deref(),
        Some("0")
    );
}

/// A later waiter whose cost fits never passes an earlier one that does not, nor does a call
/// without WAIT (RL.ACQUIRE, RL.ALL's CONCURRENCY); a renewal still renews.
#[test]
fn a_smaller_later_waiter_does_not_pass_the_head() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.ACQUIRE", "k", "3", "1m", "ID", "h", "COST", "2"]);
    let mut big = s.conn();
    big.send(&[
        "RL.ACQUIRE",
        "k",
        "3",
        "1m",
        "ID",
        "big",
        "COST",
        "2",
        "WAIT",
        "10s",
    ]);
    until_waiting(&mut c, 1);
    let mut small = send_wait(&s, "k", 3, "1m", "small", "10s");
    until_waiting(&mut c, 2);
    // One unit is free, but the head needs two: nobody is served, a poller neither.
    assert_eq!(c.ints(&["RL.ACQUIRE", "k", "3", "1m", "ID", "p"])[0], 0);
    assert_eq!(
        c.ints(&["RL.ACQUIRE", "k", "3", "1m", "ID", "p", "PEEK"])[0],
        0
    );
    let all = ["RL.ALL", "1", "k", "CONCURRENCY", "3", "1m", "DEDUP", "p"];
    assert_eq!(c.ints(&all)[0], 0);
    // Under DETAIL the same denial says why and which key: the limit the waiters hold.
    let mut detailed = all.to_vec();
    detailed.push("DETAIL");
    let r = c.cmd(&detailed);
    let a = r.as_array().unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(a[0].as_int(), Some(0), "{r:?}");
    assert_eq!(a[5].as_str().as_deref(), Some("k"), "{r:?}");
    assert_eq!(a[6].as_str().as_deref(), Some("limit"), "{r:?}");
    // A lease held renews while others wait.
    assert_eq!(
        c.ints(&["RL.ACQUIRE", "k", "3", "1m", "ID", "h", "COST", "2"])[0],
        2
    );
    assert_eq!(info_field(&mut c, "k", "held"), Some(2));
    assert_eq!(c.int(&["RL.RELEASE", "k", "h"]), 2);
    assert_eq!(ints(&big.recv())[..3], [2, 3, 1]);
    assert_eq!(ints(&small.recv())[..3], [1, 3, 0]);
    assert_eq!(waiting(&mut c), 0);
}

/// A wait that ends unserved replies the denied limiter reply, on time.
#[test]
fn timeout_replies_the_denied_reply_on_time() {
    let s = Server::start();
    let mut c = s.conn();
    // Taken before the call: the lease began after this, so it ends after it plus 10 s.
    let held_since = Instant::now();
    c.ints(&["RL.ACQUIRE", "k", "1", "10s", "ID", "h"]);
    let sent = Instant::now();
    let mut w = send_wait(&s, "k", 1, "10s", "w", "300ms");
    let r = ints(&w.recv());
    let waited = sent.elapsed();
    eprintln!("a WAIT of 300ms replied after {waited:?}");
    assert!(
        waited >= Duration::from_millis(299),
        "replied after {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "replied after {waited:?}");
    // Denied: nothing free until h's lease ends, 10 s after it began.
    let left = 10_000 - held_since.elapsed().as_millis() as i64;
    assert_eq!(r[..3], [0, 1, 0]);
    assert!(
        (left..=10_000 - 299).contains(&r[3]),
        "retry {} (left {left})",
        r[3]
    );
    assert!((left..=10_000 - 299).contains(&r[4]), "reset {}", r[4]);
    let st = wait_stats(&mut c);
    assert_eq!((st["waiting"], st["timed_out"], st["granted"]), (0, 1, 0));
    assert_eq!(info_field(&mut c, "k", "leases"), Some(1));
    // The connection is usable again.
    assert_eq!(w.cmd(&["PING"]).as_str().as_deref(), Some("PONG"));
}

/// A lease that ends wakes the next waiter, with nobody calling RL.RELEASE.
#[test]
fn a_lease_expiring_wakes_the_next_waiter() {
    let s = Server::start();
    let mut c = s.conn();
    // Taken before the call: the lease began after this, so it ends after it plus 400 ms.
    let held = Instant::now();
    c.ints(&["RL.ACQUIRE", "k", "1", "400ms", "ID", "h"]);
    let mut w = send_wait(&s, "k", 1, "2s", "w", "10s");
    let r = ints(&w.recv());
    let at = held.elapsed();
    assert!(at >= Duration::from_millis(399), "granted after {at:?}");
    assert!(at < Duration::from_secs(3), "granted after {at:?}");
    assert_eq!(r, [1, 1, 0, 0, 2000]);
    assert_eq!(wait_stats(&mut c)["granted"], 1);
}

/// DEL (and UNLINK) of the key wakes its waiters.
#[test]
fn del_wakes_the_waiters() {
    let s = Server::start();
    let mut c = s.conn();
    for del in ["DEL", "UNLINK"] {
        c.ints(&["RL.ACQUIRE", "k", "1", "1m", "ID", "h"]);
        let mut w = send_wait(&s, "k", 1, "1m", "w", "10s");
        until_waiting(&mut c, 1);
        let sent = Instant::now();
        assert_eq!(c.int(&[del, "k"]), 1);
        assert_eq!(ints(&w.recv())[..4], [1, 1, 0, 0], "{del}");
        assert!(sent.elapsed() < Duration::from_secs(3), "{del}");
        c.int(&["DEL", "k"]);
    }
}

/// A client killed while waiting is dropped and leaves nothing: the next release serves the
/// waiter behind it, and no lease, waiter or blocked client remains.
#[test]
fn a_killed_waiter_leaves_nothing_behind() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.ACQUIRE", "k", "1", "1m", "ID", "h"]);
    let mut a = s.conn();
    let a_id = a.int(&["CLIENT", "ID"]);
    a.send(&["RL.ACQUIRE", "k", "1", "1m", "ID", "a", "WAIT", "30s"]);
    until_waiting(&mut c, 1);
    let mut b = send_wait(&s, "k", 1, "1m", "b", "30s");
    until_waiting(&mut c, 2);
    assert_eq!(c.int(&args!["CLIENT", "KILL", "ID", a_id]), 1);
    until_waiting(&mut c, 1);
    assert_eq!(wait_stats(&mut c)["dropped"], 1);
    assert_eq!(c.int(&["RL.RELEASE", "k", "h"]), 1);
    assert_eq!(ints(&b.recv())[..3], [1, 1, 0]);
    assert_eq!(c.int(&["RL.RELEASE", "k", "a"]), 0, "a holds nothing");
    assert_eq!(info_field(&mut c, "k", "leases"), Some(1));
    assert_eq!(c.int(&["RL.RELEASE", "k", "b"]), 1);
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
    let st = wait_stats(&mut c);
    assert_eq!((st["waiting"], st["granted"], st["dropped"]), (0, 1, 1));
    assert_eq!(
        c.info_field("clients", "blocked_clients").as_deref(),
        Some("0")
    );
    // A killed head: the one behind it is served at once if it fits.
    c.ints(&["RL.ACQUIRE", "k", "3", "1m", "ID", "h", "COST", "2"]);
    let mut head = s.conn();
    let head_id = head.int(&["CLIENT", "ID"]);
    head.send(&[
        "RL.ACQUIRE",
        "k",
        "3",
        "1m",
        "ID",
        "x",
        "COST",
        "2",
        "WAIT",
        "30s",
    ]);
    until_waiting(&mut c, 1);
    let mut next = send_wait(&s, "k", 3, "1m", "y", "30s");
    until_waiting(&mut c, 2);
    assert_eq!(c.int(&args!["CLIENT", "KILL", "ID", head_id]), 1);
    assert_eq!(ints(&next.recv())[..3], [1, 3, 0]);
    assert_eq!(waiting(&mut c), 0);
}

/// Inside MULTI or a script WAIT is an error at once (nothing blocks); the transaction's other
/// commands run.
#[test]
fn wait_inside_multi_or_a_script_does_not_block() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.ACQUIRE", "k", "1", "1m", "ID", "h"]);
    let started = Instant::now();
    c.ok(&["MULTI"]);
    c.cmd(&["RL.ACQUIRE", "k", "1", "1m", "ID", "w", "WAIT", "5s"]);
    c.cmd(&["RL.ACQUIRE", "free", "1", "1m", "ID", "w", "WAIT", "5s"]);
    c.cmd(&["PING"]);
    let r = c.ok(&["EXEC"]);
    let items = r.as_array().unwrap();
    for item in &items[..2] {
        let Reply::Error(e) = item else {
            panic!("expected an error, got {item:?}")
        };
        assert_eq!(e, "ERR WAIT is not allowed inside MULTI or a script");
    }
    assert_eq!(items[2].as_str().as_deref(), Some("PONG"));
    let e = c.err(&[
        "EVAL",
        "return redis.call('RL.ACQUIRE', KEYS[1], 1, '1m', 'ID', 'w', 'WAIT', '5s')",
        "1",
        "k",
    ]);
    assert!(
        e.contains("WAIT is not allowed inside MULTI or a script"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(c.int(&["EXISTS", "free"]), 0);
    assert_eq!(waiting(&mut c), 0);
}

/// Bad WAIT arguments are errors that change nothing; ratelimit.max-wait bounds the timeout.
#[test]
fn wait_argument_errors() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["CONFIG", "SET", "ratelimit.max-wait", "1000"]);
    let base = ["RL.ACQUIRE", "k", "1", "1m", "ID", "w"];
    let t = base_ms().to_string();
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["WAIT", "0"],             "ERR invalid duration '0' for WAIT"),
        (&["WAIT", "x"],             "ERR invalid duration 'x' for WAIT"),
        (&["WAIT"],                  "ERR syntax error, WAIT needs a value"),
        (&["WAIT", "1s", "WAIT", "1s"], "ERR syntax error, WAIT given more than once"),
        (&["WAIT", "1001ms"],        "ERR WAIT timeout must be at most ratelimit.max-wait"),
        (&["WAIT", "1s", "PEEK"],    "ERR WAIT cannot be combined with PEEK"),
        (&["WAIT", "1s", "BLOCK", "1s"], "ERR WAIT cannot be combined with BLOCK"),
        (&["WAIT", "1s", "AT", t.as_str()], "ERR WAIT cannot be combined with AT"),
    ];
    for (extra, want) in cases {
        let mut argv: Vec<&str> = base.to_vec();
        argv.extend_from_slice(extra);
        assert_eq!(c.err(&argv), *want, "{extra:?}");
    }
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
    // At the bound: fits at once, granted without waiting.
    assert_eq!(
        c.ints(&["RL.ACQUIRE", "k", "1", "1m", "ID", "w", "WAIT", "1s"])[0],
        1
    );
    assert!(
        c.err(&["CONFIG", "SET", "ratelimit.max-wait", "0"])
            .starts_with("ERR")
    );
}

/// The grants of waiters replicate as the acquires they are, with their resolved time: a
/// replica and an AOF replay end with the master's leases.
#[test]
fn replica_and_aof_replay_end_with_the_masters_leases() {
    let m = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let r = Server::replica_of(&m);
    let mut c = m.conn();
    c.ints(&["RL.ACQUIRE", "k", "2", "1m", "ID", "h1"]);
    c.ints(&["RL.ACQUIRE", "k", "2", "300ms", "ID", "h2"]);
    let mut waiters: Vec<Conn> = Vec::new();
    for i in 0..3 {
        waiters.push(send_wait(&m, "k", 2, "1m", &format!("w{i}"), "10s"));
        until_waiting(&mut c, i + 1);
    }
    // w0 is served by h2's expiry, w1 by h1's release, w2 by w0's release.
    assert_eq!(ints(&waiters[0].recv())[0], 1);
    assert_eq!(c.int(&["RL.RELEASE", "k", "h1"]), 1);
    assert_eq!(ints(&waiters[1].recv())[0], 1);
    assert_eq!(c.int(&["RL.RELEASE", "k", "w0"]), 1);
    assert_eq!(ints(&waiters[2].recv())[0], 1);
    wait_replica_synced(&m, &r);
    let mut rc = r.conn();
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]);
    assert_eq!(rc.cmd(&["DEBUG", "DIGEST-VALUE", "k"]), digest);
    assert_eq!(info_field(&mut rc, "k", "leases"), Some(2));
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]), digest);
    assert_eq!(c.int(&["RL.RELEASE", "k", "w1"]), 1);
    assert_eq!(c.int(&["RL.RELEASE", "k", "w2"]), 1);
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
}

/// A waiter speaking RESP3 gets the limiter reply as a map when served; a COST above the limit
/// never fits and replies at once (`retry_after_ms` -1) instead of waiting.
#[test]
fn resp3_waiters_get_a_map_and_never_fitting_calls_do_not_wait() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.ACQUIRE", "k", "2", "1m", "ID", "h", "COST", "2"]);
    let mut w = s.conn();
    w.ok(&["HELLO", "3"]);
    w.send(&["RL.ACQUIRE", "k", "2", "1m", "ID", "w", "WAIT", "10s"]);
    until_waiting(&mut c, 1);
    assert_eq!(c.int(&["RL.RELEASE", "k", "h"]), 2);
    let Reply::Map(fields) = w.recv() else {
        panic!("expected a map")
    };
    let got: Vec<(String, i64)> = fields
        .iter()
        .map(|(k, v)| (k.as_str().unwrap(), v.as_int().unwrap()))
        .collect();
    let names = [
        "granted",
        "limit",
        "remaining",
        "retry_after_ms",
        "reset_after_ms",
    ];
    assert_eq!(
        got.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        names
    );
    assert_eq!(
        got[..4].iter().map(|(_, v)| *v).collect::<Vec<_>>(),
        [1, 2, 1, 0]
    );
    let started = Instant::now();
    let r = c.ints(&[
        "RL.ACQUIRE",
        "k",
        "2",
        "1m",
        "ID",
        "big",
        "COST",
        "3",
        "WAIT",
        "10s",
    ]);
    assert_eq!(r[..4], [0, 2, 1, -1]);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(waiting(&mut c), 0);
}

/// FLUSHALL wakes the waiters (the key is gone: the head fits). A master that becomes a
/// replica lets its waiters go at once (the server itself unblocks them with its `UNBLOCKED`
/// error, or the module ends them with the denied reply) and keeps nothing of them.
#[test]
fn a_flush_wakes_and_a_role_change_ends_the_waits() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.ACQUIRE", "k", "1", "1m", "ID", "h"]);
    let mut w = send_wait(&s, "k", 1, "1m", "w", "10s");
    until_waiting(&mut c, 1);
    c.ok(&["FLUSHALL"]);
    assert_eq!(ints(&w.recv())[..4], [1, 1, 0, 0]);
    let other = Server::start();
    let mut w = send_wait(&s, "k", 1, "1m", "x", "30s");
    until_waiting(&mut c, 1);
    let started = Instant::now();
    c.ok(&args!["REPLICAOF", "127.0.0.1", other.port]);
    match w.recv() {
        Reply::Error(e) => assert!(e.starts_with("UNBLOCKED"), "{e}"),
        r => assert_eq!(ints(&r)[..3], [0, 1, 0]),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    let st = wait_stats(&mut c);
    assert_eq!((st["waiting"], st["granted"]), (0, 1));
    assert_eq!(st["timed_out"] + st["dropped"], 1);
    assert_eq!(
        c.info_field("clients", "blocked_clients").as_deref(),
        Some("0")
    );
}

/// A waiting call with `DETAIL` gets the detailed reply when its wait ends: denied at its
/// timeout (`reason limit`, the key the denier), granted when a release frees its turn.
#[test]
fn waiters_with_detail_get_the_detailed_reply() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.ACQUIRE", "k", "1", "1m", "ID", "h"]);
    let wait_detail = |id: &str, timeout: &str| {
        let mut w = s.conn();
        w.send(&args![
            "RL.ACQUIRE",
            "k",
            1,
            "2s",
            "ID",
            id,
            "WAIT",
            timeout,
            "DETAIL"
        ]);
        w
    };
    let mut first = wait_detail("w1", "10s");
    until_waiting(&mut c, 1);
    let mut second = wait_detail("w2", "200ms");
    // The second times out while h holds the only unit: denied, detailed.
    let r = second.recv();
    let a = r.as_array().unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(a.len(), 8, "{r:?}");
    assert_eq!(ints(&Reply::Array(a[..3].to_vec())), [0, 1, 0]);
    assert!(a[3].as_int().is_some_and(|ms| ms > 0), "{r:?}");
    assert_eq!(a[5].as_str().as_deref(), Some("k"));
    assert_eq!(a[6].as_str().as_deref(), Some("limit"));
    let e = a[7].as_array().unwrap()[0].as_array().unwrap().to_vec();
    assert_eq!(e[0].as_str().as_deref(), Some("k"));
    assert_eq!(ints(&Reply::Array(e[2..6].to_vec())), [1, 0, 1, 0]);
    assert_eq!(
        e[8].as_int(),
        Some(0),
        "no window for a concurrency limiter"
    );
    // The first is granted when h releases: its lease of 2 s, detailed.
    assert_eq!(c.int(&["RL.RELEASE", "k", "h"]), 1);
    let r = first.recv();
    let a = r.as_array().unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(a.len(), 8, "{r:?}");
    assert_eq!(ints(&Reply::Array(a[..5].to_vec())), [1, 1, 0, 0, 2000]);
    assert!(a[5].is_nil());
    assert_eq!(a[6].as_str().as_deref(), Some("granted"));
    let e = a[7].as_array().unwrap()[0].as_array().unwrap().to_vec();
    assert_eq!(
        ints(&Reply::Array(e[2..9].to_vec())),
        [1, 1, 1, 0, 0, 2000, 0]
    );
}
