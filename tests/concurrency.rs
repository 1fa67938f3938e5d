//! RL.ACQUIRE / RL.RELEASE end to end against a real server: leases, renewal, release, expiry,
//! exact retry, RL.ALL's CONCURRENCY, RL.INFO, persistence, replication, and 32 threads on one
//! key. Time is driven with `AT` (an hour ahead of the real clock) except where the server's
//! own clock is the point.

mod common;
mod suite;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use suite::Spec;

/// 5 in flight, leases of 10 s, the call's id `w`.
const SPEC: Spec = Spec {
    command: "RL.ACQUIRE",
    params: &["5", "10s", "ID", "w"],
    changed: &["8", "10s", "ID", "w"],
    slow: &["5", "10m", "ID", "w"],
    slow_changed: &["8", "10m", "ID", "w"],
    info_name: "concurrency",
    info_params: &[
        ("limit", 5),
        ("lease_ms", 10_000),
        ("leases", 1),
        ("held", 2),
    ],
    // One lease of 2 units: 3 free; the lease ends in 10 s.
    after_cost_2: [5, 3, 10_000],
};

#[test]
fn wrongtype_names_both_algorithms() {
    suite::check_wrongtype(&SPEC);
}

#[test]
fn info_describes_the_key() {
    suite::check_info(&SPEC);
}

/// Limit 3, leases of 10 s.
fn acquire(c: &mut Conn, key: &str, id: &str, cost: u64, at: u64) -> Vec<i64> {
    acquire_with(c, key, id, cost, &[], at)
}

fn release(c: &mut Conn, key: &str, id: &str, at: u64) -> i64 {
    c.int(&args!["RL.RELEASE", key, id, "AT", at])
}

#[test]
fn leases_are_taken_renewed_released_and_expire() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    #[rustfmt::skip]
    let cases: &[(&str, u64, u64, [i64; 5])] = &[
        // id  cost at (ms after t)  granted limit remaining retry reset
        ("a", 2, 0,                 [2, 3, 1, 0,      10_000]),
        ("b", 1, 1_000,             [1, 3, 0, 0,      10_000]),
        // Full: 1 unit comes back when b's lease ends (11 s), 2 or 3 when a's does (10 s).
        ("c", 1, 2_000,             [0, 3, 0, 8_000,  9_000]),
        ("c", 3, 2_000,             [0, 3, 0, 9_000,  9_000]),
        ("c", 4, 2_000,             [0, 3, 0, -1,     9_000]),
        // Renewing a (same cost) moves its end to 15 s; no new units.
        ("a", 2, 5_000,             [2, 3, 0, 0,      10_000]),
        ("c", 1, 5_000,             [0, 3, 0, 6_000,  10_000]),
        ("c", 3, 5_000,             [0, 3, 0, 10_000, 10_000]),
        // b's lease ended at 11 s: its unit is free again.
        ("c", 1, 11_000,            [1, 3, 0, 0,      10_000]),
        // The clock steps back: evaluated at the key's last update.
        ("d", 1, 3_000,             [0, 3, 0, 4_000,  10_000]),
        ("d", 0, 11_000,            [0, 3, 0, 0,      10_000]),
    ];
    for (i, (id, cost, at, want)) in cases.iter().enumerate() {
        assert_eq!(
            acquire(&mut c, "k", id, *cost, t + at),
            want.to_vec(),
            "case {i}: {id} COST {cost} at +{at}ms"
        );
    }
    // The key expires with its last lease (c's, at 21 s).
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), (t + 21_000) as i64);
    assert_eq!(
        c.err(&args![
            "RL.ACQUIRE",
            "k",
            3,
            "10s",
            "ID",
            "a",
            "COST",
            1,
            "AT",
            t + 12_000
        ]),
        "ERR COST differs from the units the lease holds"
    );
    // Release: the units come back; unknown, released or expired ids free nothing.
    assert_eq!(release(&mut c, "k", "a", t + 12_000), 2);
    assert_eq!(release(&mut c, "k", "a", t + 12_000), 0);
    assert_eq!(release(&mut c, "k", "b", t + 12_000), 0);
    assert_eq!(release(&mut c, "missing", "a", t), 0);
    assert_eq!(
        acquire(&mut c, "k", "d", 2, t + 12_000),
        [2, 3, 0, 0, 10_000]
    );
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), (t + 22_000) as i64);
    assert_eq!(release(&mut c, "k", "d", t + 12_500), 2);
    // Back to c's end.
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), (t + 21_000) as i64);
    // The last lease released: the key is gone.
    assert_eq!(release(&mut c, "k", "c", t + 13_000), 1);
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
}

#[test]
fn errors_name_the_argument_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["RL.ACQUIRE", "k", "0", "1s", "ID", "a"],               "ERR limit must be a positive integer"),
        (&["RL.ACQUIRE", "k", "65537", "1s", "ID", "a"],           "ERR limit must be at most 65536"),
        (&["RL.ACQUIRE", "k", "5", "1x", "ID", "a"],               "ERR invalid duration '1x' for lease"),
        (&["RL.ACQUIRE", "k", "5", "1s", "COST", "1"],             "ERR syntax error, RL.ACQUIRE needs ID id"),
        (&["RL.ACQUIRE", "k", "5", "1s", "ID", "a", "BESTEFFORT"], "ERR unknown option 'BESTEFFORT'"),
        (&["RL.ACQUIRE", "k", "5", "1s", "ID", "a", "DEDUP", "x"], "ERR unknown option 'DEDUP'"),
        (&["RL.ACQUIRE", "k", "5", "1s", "ID"],                    "ERR wrong number of arguments for 'rl.acquire' command"),
        (&["RL.ACQUIRE", "k", "5", "1s", "PEEK", "ID"],            "ERR syntax error, ID needs a value"),
        (&["RL.ACQUIRE", "k", "5", "1s"],                          "ERR wrong number of arguments for 'rl.acquire' command"),
        (&["RL.RELEASE", "k"],                                     "ERR wrong number of arguments for 'rl.release' command"),
        (&["RL.RELEASE", "k", "a", "COST", "1"],                   "ERR unknown option 'COST'"),
        (&["RL.RELEASE", "k", "a", "AT"],                          "ERR syntax error, AT needs a value"),
        (&["RL.ALL", "1", "k", "CONCURRENCY", "5", "1s"],          "ERR CONCURRENCY in RL.ALL needs DEDUP id (the lease id)"),
        (&["RL.ALL", "1", "k", "CONCURRENCY", "5", "1s", "DEDUP", "a", "BESTEFFORT"],
                                                                   "ERR BESTEFFORT does not apply to CONCURRENCY"),
        (&["RL.ALL", "1", "k", "CONCURRENCY", "5"],                "ERR syntax error, CONCURRENCY needs its positional arguments"),
    ];
    for (cmd, want) in cases {
        assert_eq!(c.err(cmd), *want, "{cmd:?}");
    }
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
    // A release on a key of another algorithm, and other algorithms on a concurrency key.
    c.ints(&args!["RL.GCRA", "g", 10, 1, "1s", "AT", t]);
    assert_eq!(
        c.err(&["RL.RELEASE", "g", "a"]),
        "WRONGTYPE key holds a RL.GCRA limiter, not RL.ACQUIRE"
    );
    c.ok(&["SET", "plain", "x"]);
    assert_eq!(
        c.err(&["RL.RELEASE", "plain", "a"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    acquire(&mut c, "k", "a", 1, t);
    assert_eq!(
        c.err(&["RL.ALL", "1", "k", "GCRA", "1", "1", "1s"]),
        "WRONGTYPE key 'k' holds a RL.ACQUIRE limiter, not RL.GCRA"
    );
}

#[test]
fn rl_all_ten_per_second_and_five_in_flight() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let all = |c: &mut Conn, id: &str, at: u64| {
        c.ints(&args![
            "RL.ALL",
            2,
            "{api}:rate",
            "{api}:inflight",
            "GCRA",
            10,
            10,
            "1s",
            "CONCURRENCY",
            5,
            "30s",
            "DEDUP",
            id,
            "AT",
            at
        ])
    };
    // Five requests at once: all granted; the sixth is denied by the concurrency limit only,
    // and charges neither limiter.
    for i in 0..5 {
        let r = all(&mut c, &format!("req-{i}"), t);
        assert_eq!((r[0], r[3]), (1, 0), "req-{i}: {r:?}");
    }
    let rate = c.cmd(&["DEBUG", "DIGEST-VALUE", "{api}:rate"]);
    let r = all(&mut c, "req-5", t);
    // Denied: the in-flight limiter has 0 remaining; its retry is its first lease's end.
    assert_eq!(r, [0, 5, 0, 30_000, 30_000]);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "{api}:rate"]), rate);
    // One finishes: the next request passes both.
    assert_eq!(release(&mut c, "{api}:inflight", "req-2", t + 100), 1);
    let r = all(&mut c, "req-5", t + 100);
    assert_eq!(r[0], 1, "{r:?}");
    // A retried request (same DEDUP id) is not charged again.
    let r = all(&mut c, "req-5", t + 100);
    assert_eq!(r[0], 1, "{r:?}");
    let info = c.cmd(&["RL.INFO", "{api}:inflight"]);
    let items = info.as_array().unwrap();
    let field = |name: &str| {
        items
            .chunks(2)
            .find(|kv| kv[0].as_str().as_deref() == Some(name))
            .and_then(|kv| kv[1].as_int())
    };
    assert_eq!(field("leases"), Some(5));
    assert_eq!(field("held"), Some(5));
    assert_eq!(field("remaining"), Some(0));
}

#[test]
fn info_lists_live_leases_once_each_name() {
    let s = Server::start();
    let mut c = s.conn();
    // On the server's clock: RL.INFO reads it.
    c.ints(&["RL.ACQUIRE", "k", "5", "1m", "ID", "a", "COST", "2"]);
    c.ints(&["RL.ACQUIRE", "k", "5", "1m", "ID", "b"]);
    let info = c.cmd(&["RL.INFO", "k"]);
    let items = info.as_array().unwrap();
    let names: Vec<String> = items.chunks(2).map(|kv| kv[0].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "algorithm",
            "limit",
            "lease_ms",
            "granted",
            "remaining",
            "retry_after_ms",
            "reset_after_ms",
            "leases",
            "held",
            "blocked_ms",
            "dedup_ids",
            "ttl_ms"
        ]
    );
    let value = |name: &str| {
        items
            .chunks(2)
            .find(|kv| kv[0].as_str().as_deref() == Some(name))
            .map(|kv| kv[1].clone())
    };
    assert_eq!(
        value("algorithm"),
        Some(Reply::Bulk(b"concurrency".to_vec()))
    );
    assert_eq!(value("limit"), Some(Reply::Int(5)));
    assert_eq!(value("lease_ms"), Some(Reply::Int(60_000)));
    assert_eq!(value("leases"), Some(Reply::Int(2)));
    assert_eq!(value("held"), Some(Reply::Int(3)));
    assert_eq!(value("remaining"), Some(Reply::Int(2)));
    // RESP3: a map, so no name twice.
    let mut c3 = s.conn();
    c3.ok(&["HELLO", "3"]);
    let Reply::Map(fields) = c3.cmd(&["RL.INFO", "k"]) else {
        panic!("map")
    };
    assert_eq!(fields.len(), names.len());
}

#[test]
fn memory_usage_counts_every_lease() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&args![
        "RL.ACQUIRE",
        "k",
        65536,
        "1h",
        "ID",
        "first",
        "AT",
        t
    ]);
    let one = c.int(&["MEMORY", "USAGE", "k"]);
    for i in 0..1000 {
        c.ints(&args!["RL.ACQUIRE", "k", 65536, "1h", "ID", i, "AT", t]);
    }
    let many = c.int(&["MEMORY", "USAGE", "k"]);
    // 56 bytes a lease in the arena.
    assert!(many >= one + 1000 * 56, "{one} -> {many}");
    assert!(many <= one + 2048 * 56 + 256, "{one} -> {many}");
}

/// A few keys with leases of several ids and costs, one released, and a parameter change.
fn fill(c: &mut Conn, t: u64) -> Vec<String> {
    let mut keys = Vec::new();
    for k in 0..3u64 {
        let key = format!("c:{k}");
        for i in 0..6u64 {
            c.ints(&args![
                "RL.ACQUIRE",
                key,
                8,
                "1m",
                "ID",
                format!("w{i}"),
                "COST",
                i % 2 + 1,
                "AT",
                t + k * 10 + i * 137
            ]);
        }
        release(c, &key, "w3", t + 900);
        c.ints(&args![
            "RL.ACQUIRE",
            key,
            12,
            "2m",
            "ID",
            "late",
            "AT",
            t + 1000
        ]);
        keys.push(key);
    }
    keys
}

fn snapshot(c: &mut Conn, keys: &[String], t: u64) -> Vec<(Reply, i64, Vec<i64>)> {
    keys.iter()
        .map(|k| {
            let state = c.ints(&args![
                "RL.ACQUIRE",
                k,
                12,
                "2m",
                "ID",
                "x",
                "PEEK",
                "AT",
                t + 1500
            ]);
            (
                c.cmd(&["DEBUG", "DIGEST-VALUE", k.as_str()]),
                c.int(&["PEXPIRETIME", k.as_str()]),
                state,
            )
        })
        .collect()
}

#[test]
fn leases_survive_reload_aof_rewrites_and_copy() {
    for preamble in ["yes", "no"] {
        let s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
        let mut c = s.conn();
        let t = base_ms();
        let keys = fill(&mut c, t);
        let before = snapshot(&mut c, &keys, t);
        // Costs 1, 2, 1, 2, 1 taken (the sixth, 2 more, is denied at 8), w3's 2 released, 1
        // late: 6 of 12 held; a new lease would end 2 min later.
        assert_eq!(before[0].2, [1, 12, 5, 0, 120_000]);
        c.ok(&["DEBUG", "RELOAD"]);
        assert_eq!(snapshot(&mut c, &keys, t), before);
        wait_rewrite_done(&mut c);
        c.ok(&["BGREWRITEAOF"]);
        wait_rewrite_done(&mut c);
        c.ok(&["DEBUG", "LOADAOF"]);
        assert_eq!(snapshot(&mut c, &keys, t), before, "preamble {preamble}");
        // Later traffic replays from the incremental file.
        release(&mut c, &keys[0], "w0", t + 1200);
        c.ints(&args![
            "RL.ACQUIRE",
            keys[1],
            12,
            "2m",
            "ID",
            "n",
            "AT",
            t + 1200
        ]);
        let after = snapshot(&mut c, &keys, t);
        assert_ne!(after, before);
        c.ok(&["DEBUG", "LOADAOF"]);
        assert_eq!(snapshot(&mut c, &keys, t), after);
    }
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let keys = fill(&mut c, t);
    assert_eq!(c.int(&["COPY", keys[0].as_str(), "copy"]), 1);
    let dump = c.cmd(&["DUMP", keys[1].as_str()]);
    let Reply::Bulk(dump) = dump else {
        panic!("DUMP")
    };
    // The digest counts whether a key has an expiry, so restore it with one.
    let expiry = c.int(&["PEXPIRETIME", keys[1].as_str()]);
    c.ok(&args!["RESTORE", "restored", expiry, dump, "ABSTTL"]);
    for (k, copy) in [(&keys[0], "copy"), (&keys[1], "restored")] {
        assert_eq!(
            c.cmd(&["DEBUG", "DIGEST-VALUE", k.as_str()]),
            c.cmd(&["DEBUG", "DIGEST-VALUE", copy])
        );
    }
    // The copy holds the same leases: releasing one there frees its units.
    assert_eq!(release(&mut c, "copy", "w1", t + 1300), 2);
    assert_eq!(release(&mut c, &keys[0], "w1", t + 1300), 2);
}

#[test]
fn replica_matches_a_master_whose_clock_moved() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut hold = replica.conn();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for round in 0..6 {
        hold.send(&["DEBUG", "SLEEP", "0.1"]);
        for _ in 0..100 {
            let key = format!("k{}", rnd(3));
            let id = format!("w{}", rnd(8));
            if rnd(3) == 0 {
                m.int(&args!["RL.RELEASE", key, id]);
            } else {
                let limit = 4 + rnd(2);
                let cost = 1 + rnd(2);
                m.cmd(&args![
                    "RL.ACQUIRE",
                    key,
                    limit,
                    "1m",
                    "ID",
                    id,
                    "COST",
                    cost
                ]);
            }
        }
        std::thread::sleep(Duration::from_millis(5 + round * 7));
        assert_eq!(hold.recv(), Reply::Simple("OK".into()));
    }
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    let Reply::Array(names) = m.ok(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    assert!(!names.is_empty());
    for k in names {
        let k = k.as_str().unwrap();
        assert_eq!(
            m.cmd(&["DEBUG", "DIGEST-VALUE", k.as_str()]),
            r.cmd(&["DEBUG", "DIGEST-VALUE", k.as_str()]),
            "digest of {k}"
        );
        assert_eq!(
            m.int(&["PEXPIRETIME", k.as_str()]),
            r.int(&["PEXPIRETIME", k.as_str()])
        );
    }
}

/// What `master` has written and propagated so far: its replication offset and its changes
/// since the last save.
fn writes(c: &mut Conn) -> (Option<String>, Option<String>) {
    (
        c.info_field("replication", "master_repl_offset"),
        c.info_field("persistence", "rdb_changes_since_last_save"),
    )
}

#[test]
fn denied_peek_and_unknown_releases_write_and_propagate_nothing() {
    let ints = |v: &[i64]| v.iter().map(|&i| Reply::Int(i)).collect::<Vec<_>>();
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let t = base_ms();
    // Limit 3: `a` holds 2 units, 1 is free.
    assert_eq!(
        m.ints(&args![
            "RL.ACQUIRE",
            "k",
            3,
            "10s",
            "ID",
            "a",
            "COST",
            2,
            "AT",
            t
        ]),
        [2, 3, 1, 0, 10_000]
    );
    wait_replica_synced(&master, &replica);
    let before = writes(&mut m);
    assert!(before.0.is_some() && before.1.is_some(), "{before:?}");
    let at = t + 1000;
    #[rustfmt::skip]
    let calls: &[(&[&str], Reply)] = &[
        // Denied: 2 units asked, 1 free; they fit when `a`'s lease ends, 9 s later.
        (&["RL.ACQUIRE", "k", "3", "10s", "ID", "b", "COST", "2"],
         Reply::Array(ints(&[0, 3, 1, 9_000, 9_000]))),
        // Denied for good: more than the limit.
        (&["RL.ACQUIRE", "k", "3", "10s", "ID", "b", "COST", "4"],
         Reply::Array(ints(&[0, 3, 1, -1, 9_000]))),
        // PEEK: a new id that would fit, the holder's renewal, a missing key.
        (&["RL.ACQUIRE", "k", "3", "10s", "ID", "b", "PEEK"],
         Reply::Array(ints(&[1, 3, 0, 0, 10_000]))),
        (&["RL.ACQUIRE", "k", "3", "10s", "ID", "a", "COST", "2", "PEEK"],
         Reply::Array(ints(&[2, 3, 1, 0, 10_000]))),
        (&["RL.ACQUIRE", "fresh", "3", "10s", "ID", "a", "PEEK"],
         Reply::Array(ints(&[1, 3, 2, 0, 10_000]))),
        // Releases of an id that holds nothing, on the key and on a missing key.
        (&["RL.RELEASE", "k", "nobody"], Reply::Int(0)),
        (&["RL.RELEASE", "fresh", "a"], Reply::Int(0)),
        // RL.ALL's CONCURRENCY, denied.
        (&["RL.ALL", "1", "k", "CONCURRENCY", "3", "10s", "DEDUP", "b", "COST", "2"],
         Reply::Array(ints(&[0, 3, 1, 9_000, 9_000]))),
    ];
    for (call, want) in calls {
        let mut argv: Vec<String> = call.iter().map(|a| a.to_string()).collect();
        argv.extend(["AT".to_string(), at.to_string()]);
        assert_eq!(&m.cmd(&argv), want, "{argv:?}");
    }
    // Errors: a different COST for a held id, a bad limit.
    for call in [
        args!["RL.ACQUIRE", "k", 3, "10s", "ID", "a", "COST", 1, "AT", at].to_vec(),
        args!["RL.ACQUIRE", "k", "x", "10s", "ID", "b", "AT", at].to_vec(),
    ] {
        assert!(m.cmd(&call).is_error(), "{call:?}");
    }
    assert_eq!(writes(&mut m), before);
    assert_eq!(m.int(&["EXISTS", "fresh"]), 0);
    // The same offset measure sees a release that frees something.
    assert_eq!(m.int(&args!["RL.RELEASE", "k", "a", "AT", at]), 2);
    let after = writes(&mut m);
    assert_ne!(after.0, before.0);
    assert_ne!(after.1, before.1);
}

/// 32 threads take and give back units of one key (limit 8, COST 1 or 2) on the server's own
/// clock for 3 seconds. Each thread adds what it was granted to a shared count while it holds
/// it and takes it off before it releases: the count never exceeds the limit, every release
/// frees exactly what was granted, and at the end the key is gone (no lease lost).
#[test]
fn thirty_two_threads_never_hold_more_than_the_limit() {
    const LIMIT: i64 = 8;
    let s = Server::start();
    let port = s.port;
    let in_flight = Arc::new(AtomicI64::new(0));
    let max_seen = Arc::new(AtomicI64::new(0));
    let granted_total = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(3);
    let threads: Vec<_> = (0..32u64)
        .map(|n| {
            let (in_flight, max_seen, granted_total) =
                (in_flight.clone(), max_seen.clone(), granted_total.clone());
            std::thread::spawn(move || {
                let mut c = Conn::connect(port);
                let mut i = 0u64;
                while Instant::now() < end {
                    i += 1;
                    let id = format!("t{n}-{i}");
                    let cost = (i % 2 + 1) as i64;
                    let r = c.ints(&args![
                        "RL.ACQUIRE",
                        "shared",
                        LIMIT,
                        "30s",
                        "ID",
                        id,
                        "COST",
                        cost
                    ]);
                    if r[0] == 0 {
                        continue;
                    }
                    assert_eq!(r[0], cost);
                    let now = in_flight.fetch_add(cost, Ordering::SeqCst) + cost;
                    max_seen.fetch_max(now, Ordering::SeqCst);
                    granted_total.fetch_add(1, Ordering::Relaxed);
                    // Work, renewing once, then give the units back first.
                    let renew = c.ints(&args![
                        "RL.ACQUIRE",
                        "shared",
                        LIMIT,
                        "30s",
                        "ID",
                        id,
                        "COST",
                        cost
                    ]);
                    assert_eq!(renew[0], cost);
                    in_flight.fetch_sub(cost, Ordering::SeqCst);
                    assert_eq!(c.int(&args!["RL.RELEASE", "shared", id]), cost);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let max = max_seen.load(Ordering::SeqCst);
    assert!(max <= LIMIT, "{max} units held at once");
    assert!(max >= 2, "no contention: {max}");
    assert!(granted_total.load(Ordering::Relaxed) > 100);
    let mut c = s.conn();
    assert_eq!(c.int(&["EXISTS", "shared"]), 0);
}

/// `AT` obeys `ratelimit.at-max-ahead` for both commands; INFO counts both.
#[test]
fn at_ahead_is_refused_and_info_counts_both_commands() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["CONFIG", "SET", "ratelimit.at-max-ahead", "1000"]);
    let far = base_ms() + 3_600_000;
    for cmd in [
        args!["RL.ACQUIRE", "k", 5, "1m", "ID", "a", "AT", far].to_vec(),
        args!["RL.RELEASE", "k", "a", "AT", far].to_vec(),
        args![
            "RL.ALL",
            1,
            "k",
            "CONCURRENCY",
            5,
            "1m",
            "DEDUP",
            "a",
            "AT",
            far
        ]
        .to_vec(),
    ] {
        assert_eq!(
            c.err(&cmd),
            "ERR AT is ahead of the server clock",
            "{cmd:?}"
        );
    }
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
    c.ints(&["RL.ACQUIRE", "k", "1", "1m", "ID", "a"]);
    c.ints(&["RL.ACQUIRE", "k", "1", "1m", "ID", "b"]); // denied
    c.int(&["RL.RELEASE", "k", "a"]);
    c.int(&["RL.RELEASE", "k", "a"]); // nothing to free
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_rl_acquire").as_deref(),
        Some("calls=2,granted=1,denied=1,shadow_denied=0")
    );
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_rl_release").as_deref(),
        Some("calls=2,granted=1,denied=1,shadow_denied=0")
    );
}

/// The README's worker recipe and RL.ALL example, as written there.
#[test]
fn readme_examples() {
    let s = Server::start();
    let mut c = s.conn();
    let lease_id = "host:42:job-7";
    let r = c.ints(&["RL.ACQUIRE", "llm:inflight", "5", "30s", "ID", lease_id]);
    assert_eq!(r, [1, 5, 4, 0, 30_000]);
    // Renew while working: still one lease, no new units.
    let r = c.ints(&["RL.ACQUIRE", "llm:inflight", "5", "30s", "ID", lease_id]);
    assert_eq!((r[0], r[2]), (1, 4));
    assert_eq!(c.int(&["RL.RELEASE", "llm:inflight", lease_id]), 1);
    assert_eq!(c.int(&["EXISTS", "llm:inflight"]), 0);
    let r = c.ints(&[
        "RL.ALL",
        "2",
        "{api}:rate",
        "{api}:inflight",
        "GCRA",
        "10",
        "10",
        "1s",
        "CONCURRENCY",
        "5",
        "30s",
        "DEDUP",
        "req-1",
    ]);
    assert_eq!(r, [1, 5, 4, 0, 30_000]);
    assert_eq!(c.int(&["RL.RELEASE", "{api}:inflight", "req-1"]), 1);
}

#[test]
fn refund_is_refused_and_names_rl_release() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    assert_eq!(acquire(&mut c, "k", "a", 2, t), [2, 3, 1, 0, 10_000]);
    let d = c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]);
    assert_eq!(
        c.err(&args!["RL.REFUND", "k", 1, "AT", t]),
        "ERR RL.REFUND does not apply to a concurrency limiter (RL.ACQUIRE), use RL.RELEASE"
    );
    assert_eq!(
        c.err(&args!["RL.REFUND", "k", 1, "DEDUP", "a", "AT", t]),
        "ERR RL.REFUND does not apply to a concurrency limiter (RL.ACQUIRE), use RL.RELEASE"
    );
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]), d, "nothing changed");
}

/// Limit 3, leases of 10 s, as `acquire`, with extra options.
fn acquire_with(c: &mut Conn, key: &str, id: &str, cost: u64, extra: &[&str], at: u64) -> Vec<i64> {
    let mut cmd = args![
        "RL.ACQUIRE",
        key,
        3,
        "10s",
        "ID",
        id,
        "COST",
        cost,
        "AT",
        at
    ]
    .to_vec();
    cmd.extend(extra.iter().map(|s| s.as_bytes().to_vec()));
    c.ints(&cmd)
}

fn check(c: &mut Conn, key: &str, cost: u64, at: u64) -> Vec<i64> {
    c.ints(&args![
        "RL.CHECK",
        key,
        "CONCURRENCY",
        3,
        "10s",
        "COST",
        cost,
        "AT",
        at
    ])
}

fn info_field(c: &mut Conn, key: &str, name: &str) -> Option<i64> {
    let info = c.cmd(&["RL.INFO", key]);
    info.as_array()?
        .chunks(2)
        .find(|kv| kv[0].as_str().as_deref() == Some(name))
        .and_then(|kv| kv[1].as_int())
}

#[test]
fn a_block_denies_acquires_uncharged_releases_still_free_and_it_ends_as_if_never_charged() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    assert_eq!(acquire(&mut c, "k", "a", 2, t), [2, 3, 1, 0, 10_000]);
    // b's 2 units do not fit: denied, and BLOCK 5s blocks the key until t + 6 s. The reply
    // waits for the later of the block (5 s) and a's lease (9 s).
    assert_eq!(
        acquire_with(&mut c, "k", "b", 2, &["BLOCK", "5s"], t + 1_000),
        [0, 3, 0, 9_000, 9_000]
    );
    // RL.INFO reads the server's clock, behind the key's last update (AT is an hour ahead).
    assert_eq!(info_field(&mut c, "k", "blocked_ms"), Some(5_000));
    assert_eq!(info_field(&mut c, "k", "held"), Some(2));
    // While blocked: a renewal and an acquire that would fit are denied, not charged; a
    // denial does not extend the block; PEEK and RL.CHECK say the same.
    assert_eq!(
        acquire_with(&mut c, "k", "c", 1, &["BLOCK", "1m"], t + 2_000),
        [0, 3, 0, 4_000, 8_000]
    );
    assert_eq!(
        acquire(&mut c, "k", "a", 2, t + 2_000),
        [0, 3, 0, 4_000, 8_000]
    );
    assert_eq!(check(&mut c, "k", 1, t + 2_000), [0, 3, 0, 4_000, 8_000]);
    assert_eq!(
        acquire_with(&mut c, "k", "c", 1, &["PEEK"], t + 2_000),
        [0, 3, 0, 4_000, 8_000]
    );
    // More than the limit: never, blocked or not.
    assert_eq!(check(&mut c, "k", 4, t + 2_000), [0, 3, 0, -1, 8_000]);
    // Releasing is never denied: a's 2 units come back while the key is blocked, and the
    // key lives on for its block.
    assert_eq!(release(&mut c, "k", "a", t + 3_000), 2);
    assert_eq!(info_field(&mut c, "k", "held"), Some(0));
    assert_eq!(info_field(&mut c, "k", "leases"), Some(0));
    assert_eq!(info_field(&mut c, "k", "blocked_ms"), Some(3_000));
    assert_eq!(c.int(&["EXISTS", "k"]), 1);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), (t + 6_000) as i64);
    assert_eq!(
        acquire(&mut c, "k", "c", 1, t + 3_000),
        [0, 3, 0, 3_000, 3_000]
    );
    assert_eq!(check(&mut c, "k", 1, t + 3_000), [0, 3, 0, 3_000, 3_000]);
    // At the block's end the key is as if no blocked call had happened: all 3 units free.
    assert_eq!(check(&mut c, "k", 3, t + 6_000), [3, 3, 0, 0, 10_000]);
    assert_eq!(
        acquire(&mut c, "k", "c", 3, t + 6_000),
        [3, 3, 0, 0, 10_000]
    );
    assert_eq!(info_field(&mut c, "k", "blocked_ms"), Some(0));
    // RL.BLOCK and RL.UNBLOCK on a concurrency key, and a block-only key RL.ACQUIRE honours.
    assert_eq!(c.int(&args!["RL.BLOCK", "k", "2s", "AT", t + 7_000]), 2_000);
    assert_eq!(
        acquire(&mut c, "k", "c", 3, t + 7_000),
        [0, 3, 0, 2_000, 9_000]
    );
    assert_eq!(c.int(&["RL.UNBLOCK", "k"]), 1);
    assert_eq!(
        acquire(&mut c, "k", "c", 3, t + 7_000),
        [3, 3, 0, 0, 10_000]
    );
    assert_eq!(c.int(&args!["RL.BLOCK", "new", "1s", "AT", t]), 1_000);
    assert_eq!(release(&mut c, "new", "x", t), 0);
    assert_eq!(acquire(&mut c, "new", "x", 1, t + 500), [0, 3, 0, 500, 500]);
    assert_eq!(
        acquire(&mut c, "new", "x", 1, t + 1_000),
        [1, 3, 2, 0, 10_000]
    );
}

/// RL.CHECK on a replica agrees with a PEEK acquire under an id that holds nothing on the
/// master, for random states of leases, releases and blocks; neither writes anything.
#[test]
fn check_on_a_replica_agrees_with_peek_for_random_lease_states() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let t = base_ms();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut below = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut now = t;
    for _ in 0..120 {
        now += below(3_000);
        let key = format!("k{}", below(3));
        let id = format!("w{}", below(4));
        match below(8) {
            0 => {
                release(&mut m, &key, &id, now);
            }
            1 => {
                m.int(&args!["RL.BLOCK", &key, "2s", "AT", now]);
            }
            n => {
                // BLOCK 3s one call in three; a renewal with another cost is an error.
                let block = if n == 2 { "3s" } else { "1ms" };
                let cmd = args![
                    "RL.ACQUIRE",
                    &key,
                    3,
                    "10s",
                    "ID",
                    &id,
                    "COST",
                    1 + below(3),
                    "AT",
                    now
                ];
                let mut cmd = cmd.to_vec();
                if n < 4 {
                    cmd.extend([b"BLOCK".to_vec(), block.as_bytes().to_vec()]);
                }
                let r = m.cmd(&cmd);
                let ok = r.as_array().is_some_and(|a| a.len() == 5)
                    || r == Reply::Error("ERR COST differs from the units the lease holds".into());
                assert!(ok, "{r:?}");
            }
        }
        wait_replica_synced(&master, &replica);
        let mut r = replica.conn();
        let offset = m.info_field("replication", "master_repl_offset");
        for cost in 0..=4 {
            let at = now + below(12_000);
            let peek = acquire_with(&mut m, &key, "probe", cost, &["PEEK"], at);
            assert_eq!(
                check(&mut r, &key, cost, at),
                peek,
                "{key} COST {cost} at {at}"
            );
            assert_eq!(
                check(&mut m, &key, cost, at),
                peek,
                "{key} COST {cost} at {at}"
            );
        }
        assert_eq!(m.info_field("replication", "master_repl_offset"), offset);
    }
}

/// SPEC "ACL": commands that only free or give back are not `deny-oom`. With `maxmemory 1` and
/// `noeviction` the server refuses every command that may take memory (OOM), but a worker still
/// releases its lease, units are still refunded and a block is still removed, so a limiter does
/// not stay saturated exactly while the server is short of memory.
#[test]
fn release_refund_and_unblock_run_when_the_server_is_out_of_memory() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // Limit 5, leases of 1 h: w1 takes 2 units.
    assert_eq!(
        c.ints(&args![
            "RL.ACQUIRE",
            "k",
            5,
            "1h",
            "ID",
            "w1",
            "COST",
            2,
            "AT",
            t
        ]),
        [2, 5, 3, 0, 3_600_000]
    );
    // Burst 5, one unit an hour: 2 units used, back in 2 h.
    assert_eq!(
        c.ints(&args!["RL.GCRA", "g", 5, 1, "1h", "COST", 2, "AT", t]),
        [2, 5, 3, 0, 7_200_000]
    );
    assert_eq!(c.int(&args!["RL.BLOCK", "b", "1h", "AT", t]), 3_600_000);
    c.ok(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    c.ok(&["CONFIG", "SET", "maxmemory", "1"]);
    // What may take memory is refused before it runs.
    for call in [
        args!["RL.ACQUIRE", "k", 5, "1h", "ID", "w2", "AT", t].to_vec(),
        args!["RL.GCRA", "g", 5, 1, "1h", "AT", t].to_vec(),
        args!["RL.BLOCK", "b2", "1h", "AT", t].to_vec(),
        args!["SET", "x", 1].to_vec(),
    ] {
        let e = c.err(&call);
        assert!(e.starts_with("OOM"), "{e}");
    }
    // What frees or gives back runs: w1's 2 units, the GCRA's 2 units, the block.
    assert_eq!(release(&mut c, "k", "w1", t), 2);
    assert_eq!(
        c.ints(&args!["RL.REFUND", "g", 2, "AT", t]),
        [2, 5, 5, 0, 0]
    );
    assert_eq!(c.int(&["RL.UNBLOCK", "b"]), 1);
    // The lease is gone: once memory is back, the whole limit can be acquired.
    c.ok(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(
        c.ints(&args![
            "RL.ACQUIRE",
            "k",
            5,
            "1h",
            "ID",
            "w2",
            "COST",
            5,
            "AT",
            t
        ]),
        [5, 5, 0, 0, 3_600_000]
    );
}

/// Reproducer for D5: `RL.ACQUIRE lk 10 1h ID w1 COST 5`, then `RL.ACQUIRE lk 3 1h ID w1 COST 5`
/// replied `5 3 0 0 3600000`: a holder above a lowered limit renewed forever. A renewal is
/// granted only if the units held, its own included, fit the limit given; a denied renewal
/// writes nothing and the lease keeps its end.
#[test]
fn renewal_above_a_lowered_limit_is_denied_and_the_lease_keeps_its_end() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    const HOUR: u64 = 3_600_000;
    let acquire = |c: &mut Conn, limit: u64, id: &str, extra: &[&str], at: u64| {
        let mut cmd = args!["RL.ACQUIRE", "lk", limit, "1h", "ID", id, "COST", 5].to_vec();
        cmd.extend(extra.iter().map(|s| s.as_bytes().to_vec()));
        cmd.extend(args!["AT", at]);
        c.ints(&cmd)
    };
    // w1 ends at t + 1 h, w2 at t + 1 h + 1 s: 10 held.
    assert_eq!(
        acquire(&mut c, 10, "w1", &[], t),
        [5, 10, 5, 0, HOUR as i64]
    );
    assert_eq!(
        acquire(&mut c, 10, "w2", &[], t + 1_000),
        [5, 10, 0, 0, HOUR as i64]
    );
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "lk"]);
    // Limit 6 at t + 2 s: w1 fits again once w2, the other lease, has ended (t + 1 h + 1 s).
    let at = t + 2_000;
    let left = (t + HOUR + 1_000 - at) as i64;
    assert_eq!(acquire(&mut c, 6, "w1", &[], at), [0, 6, 0, left, left]);
    // Limit 3: 5 units never fit.
    assert_eq!(acquire(&mut c, 3, "w1", &[], at), [0, 3, 0, -1, left]);
    // Nothing was written: the key's value, its expiry (w2's end) and RL.INFO are unchanged.
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "lk"]), digest);
    assert_eq!(c.int(&["PEXPIRETIME", "lk"]) as u64, t + HOUR + 1_000);
    assert_eq!(info_field(&mut c, "lk", "limit"), Some(10));
    assert_eq!(info_field(&mut c, "lk", "leases"), Some(2));
    assert_eq!(info_field(&mut c, "lk", "held"), Some(10));
    // w1 still ends at t + 1 h: a µs before, nothing is free; at its end, its 5 units are.
    let before = format!("{}.999", t + HOUR - 1);
    assert_eq!(
        c.ints(&args![
            "RL.ACQUIRE",
            "lk",
            10,
            "1h",
            "ID",
            "w3",
            "COST",
            5,
            "PEEK",
            "AT",
            before
        ]),
        [0, 10, 0, 1, 1_001]
    );
    assert_eq!(
        acquire(&mut c, 10, "w3", &["PEEK"], t + HOUR),
        [5, 10, 0, 0, HOUR as i64]
    );
}
