//! A replica ends with exactly the master's state even though the master's clock moved: granted
//! calls propagate deterministically (a small limiter's new value as `RL._SET`, else the command
//! with the resolved `AT`), never verbatim; denied, PEEK and COST 0 calls propagate nothing.

mod common;
use common::*;

use std::time::Duration;

/// A small deterministic generator, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One random limiter call on one of a few keys, on the server's own clock. Rates are per
/// minute, so keys outlive the test (a key expiring between the two KEYS calls would fail it).
fn random_call(c: &mut Conn, rng: &mut Rng) {
    let key = format!("k{}", rng.below(6));
    let burst = 3 + rng.below(3);
    let rate = 50 + rng.below(50);
    let cost = rng.below(4);
    let mut cmd = match rng.below(4) {
        0 => args!["RL.GCRA", &key, burst, rate, "1m", "COST", cost].to_vec(),
        1 => args!["RL.TOKENBUCKET", &key, burst, rate, "1m", "COST", cost].to_vec(),
        2 => args!["RL.LEAKYBUCKET", &key, burst, rate, "1m", "COST", cost].to_vec(),
        _ => args!["CL.THROTTLE", &key, burst, rate, 60, cost].to_vec(),
    };
    if !cmd[0].starts_with(b"CL") {
        match rng.below(6) {
            0 => cmd.push(b"PEEK".to_vec()),
            1 => cmd.push(b"BESTEFFORT".to_vec()),
            2 => cmd.extend([b"DEDUP".to_vec(), rng.below(3).to_string().into_bytes()]),
            _ => {}
        }
    }
    // Another algorithm on the same key is a WRONGTYPE error: fine, it must write nothing.
    let _ = c.cmd(&cmd);
}

fn keys(c: &mut Conn) -> Vec<String> {
    let Reply::Array(items) = c.ok(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    let mut keys: Vec<String> = items.iter().map(|k| k.as_str().unwrap()).collect();
    keys.sort();
    keys
}

fn assert_same_state(master: &Server, replica: &Server) {
    wait_replica_synced(master, replica);
    let (mut m, mut r) = (master.conn(), replica.conn());
    let names = keys(&mut m);
    assert!(!names.is_empty());
    assert_eq!(keys(&mut r), names);
    for k in &names {
        let k = k.as_str();
        assert_eq!(
            m.cmd(&["DEBUG", "DIGEST-VALUE", k]),
            r.cmd(&["DEBUG", "DIGEST-VALUE", k]),
            "digest of {k}"
        );
        assert_eq!(
            m.int(&["PEXPIRETIME", k]),
            r.int(&["PEXPIRETIME", k]),
            "expiry of {k}"
        );
        assert_eq!(
            m.cmd(&["RL.INFO", k]).as_array().map(|a| a[..8].to_vec()),
            r.cmd(&["RL.INFO", k]).as_array().map(|a| a[..8].to_vec())
        );
    }
    assert_eq!(m.cmd(&["DEBUG", "DIGEST"]), r.cmd(&["DEBUG", "DIGEST"]));
}

#[test]
fn replica_matches_master_under_random_traffic_while_held_back() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut hold = replica.conn();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..8 {
        // The replica sleeps while the master takes traffic and its clock moves on.
        hold.send(&["DEBUG", "SLEEP", "0.1"]);
        for _ in 0..150 {
            random_call(&mut m, &mut rng);
        }
        std::thread::sleep(Duration::from_millis(5 + round * 7));
        assert_eq!(hold.recv(), Reply::Simple("OK".into()));
    }
    assert_same_state(&master, &replica);
}

#[test]
fn delayed_grants_replicate_exactly() {
    // DELAY grants reservations of later moments (each key charged as of it): single-limiter
    // calls replicate their new value, RL.ALL its call with the resolved AT; the replica, held
    // back while the master's clock moves on, ends with the master's state.
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut hold = replica.conn();
    let mut rng = Rng(0x5eed_de1a_u64);
    // Grants that wait (a reservation, or a leaky bucket's queue).
    let mut waits = 0;
    for _ in 0..6 {
        hold.send(&["DEBUG", "SLEEP", "0.05"]);
        for _ in 0..60 {
            let key = format!("d{}", rng.below(3));
            let delay = format!("{}ms", 1 + rng.below(20_000));
            let cmd = match rng.below(4) {
                0 => args!["RL.GCRA", &key, 3, 60, "1m", "DELAY", &delay].to_vec(),
                1 => args!["RL.TOKENBUCKET", &key, 3, 60, "1m", "DELAY", &delay].to_vec(),
                2 => args!["RL.LEAKYBUCKET", &key, 3, 60, "1m", "DELAY", &delay].to_vec(),
                _ => args![
                    "RL.ALL",
                    2,
                    "{a}x",
                    "{a}y",
                    "GCRA",
                    2,
                    60,
                    "1m",
                    "LEAKYBUCKET",
                    3,
                    30,
                    "1m",
                    "COST",
                    1 + rng.below(2),
                    "DELAY",
                    &delay
                ]
                .to_vec(),
            };
            // WRONGTYPE on a key of another schedule algorithm: fine, it writes nothing.
            if let Reply::Array(r) = m.cmd(&cmd) {
                waits += usize::from(r[0] != Reply::Int(0) && r[3] != Reply::Int(0));
            }
        }
        assert_eq!(hold.recv(), Reply::Simple("OK".into()));
    }
    assert!(waits > 20, "only {waits} grants that wait");
    assert_same_state(&master, &replica);
}

#[test]
fn denied_peek_and_cost_zero_propagate_nothing() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    m.ints(&["RL.GCRA", "k", "2", "1", "1m", "COST", "2"]);
    wait_replica_synced(&master, &replica);
    let offset = m.info_field("replication", "master_repl_offset");
    for cmd in [
        &["RL.GCRA", "k", "2", "1", "1m"][..],
        &["RL.GCRA", "k", "2", "1", "1m", "PEEK"],
        &["RL.GCRA", "k", "2", "1", "1m", "COST", "0"],
        &["RL.GCRA", "fresh", "2", "1", "1m", "PEEK"],
        &["RL.GCRA", "k", "x", "1", "1m"],
        &["CL.THROTTLE", "k", "1", "1", "60"],
        &["RL.INFO", "k"],
    ] {
        m.cmd(cmd);
    }
    assert_eq!(m.info_field("replication", "master_repl_offset"), offset);
    assert_eq!(m.int(&["EXISTS", "fresh"]), 0);
}

#[test]
fn replica_refuses_writes_and_answers_info() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    master.conn().ints(&["CL.THROTTLE", "c", "5", "10", "60"]);
    assert_same_state(&master, &replica);
    let mut r = replica.conn();
    assert!(
        r.err(&["RL.GCRA", "c", "6", "10", "60s"])
            .starts_with("READONLY")
    );
    assert_eq!(
        r.cmd(&["RL.INFO", "c"]).as_array().unwrap()[1],
        Reply::Bulk(b"gcra".to_vec())
    );
}

#[test]
fn chained_replica_matches_too() {
    let master = Server::start();
    let middle = Server::replica_of(&master);
    let leaf = Server::replica_of(&middle);
    let mut m = master.conn();
    let mut rng = Rng(42);
    for _ in 0..200 {
        random_call(&mut m, &mut rng);
    }
    assert_same_state(&master, &middle);
    wait_replica_synced(&middle, &leaf);
    assert_same_state(&master, &leaf);
}

/// A GCRA value in the fixed-width payload of `RL._SET` (version 3, kind 1): last update (µs),
/// TAT (ticks of 1/rate µs), `burst | rate << 32`, period (µs, 6 bytes).
fn gcra_payload(last_update: u64, tat: u64, burst: u64, rate: u64, period: u64) -> Vec<u8> {
    let mut p = vec![3u8, 1];
    p.extend_from_slice(&last_update.to_le_bytes());
    p.extend_from_slice(&tat.to_le_bytes());
    p.extend_from_slice(&(burst | rate << 32).to_le_bytes());
    p.extend_from_slice(&period.to_le_bytes()[..6]);
    p
}

#[test]
fn payloads_past_the_bounds_change_nothing_and_refunds_at_them_replicate() {
    // A GCRA value (1 per second) may hold a TAT up to 2^63 - 1 µs after its last update; one
    // past that is refused by RL._SET (an error changes nothing and replicates nothing). A
    // refund on a value at the bound gives its unit back, and the replica follows it exactly.
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let now_ms = base_ms();
    let last = (now_ms - 1_000) * 1000;
    let furthest = last + i64::MAX as u64;
    let offset = m.info_field("replication", "master_repl_offset");
    for tat in [furthest + 1, u64::MAX] {
        let e = m.err(&args![
            "RL._SET",
            "k",
            gcra_payload(last, tat, 1, 1, 1_000_000)
        ]);
        assert!(e.starts_with("ERR invalid rate limiter payload"), "{e}");
    }
    assert_eq!(m.int(&["EXISTS", "k"]), 0);
    assert_eq!(m.info_field("replication", "master_repl_offset"), offset);
    m.ok(&args![
        "RL._SET",
        "k",
        gcra_payload(last, furthest, 1, 1, 1_000_000)
    ]);
    let r = m.ints(&args!["RL.REFUND", "k", 1, "AT", now_ms]);
    assert_eq!(r[0], 1, "{r:?}");
    assert_eq!(m.int(&["WAIT", "1", "5000"]), 1);
    assert_same_state(&master, &replica);
}
