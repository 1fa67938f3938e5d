//! RL.SLIDING end to end against a real server: the shared limiter suite, then what is the
//! sliding log's own: exact replies and precision, memory per entry, the AOF cost of a call on a
//! big log, persistence and replication of big logs, and RL.ALL. Time is driven with `AT`, an
//! hour ahead of the real clock (expiry is absolute from `AT`).

mod common;
mod suite;
use common::*;
use suite::Spec;

use std::time::Duration;

/// At most 5 units in any 1 s.
const SPEC: Spec = Spec {
    command: "RL.SLIDING",
    params: &["5", "1s"],
    changed: &["8", "2s", "PRECISION", "100ms"],
    slow: &["5", "1m"],
    slow_changed: &["8", "2m", "PRECISION", "1s"],
    info_name: "sliding",
    info_params: &[("limit", 5), ("window_ms", 1000), ("precision_ms", 1)],
    // 2 of 5 logged now, leaving the window 1 s later.
    after_cost_2: [5, 3, 1000],
};

// The checks every limiter passes (tests/suite).
shared_checks!(SPEC);

#[test]
fn sliding_errors_name_the_argument() {
    #[rustfmt::skip]
    suite::check_errors(&SPEC, &[
        (&["0", "1s"],                          "ERR limit must be a positive integer"),
        (&["99999999999999999999", "1s"],       "ERR limit must be a positive integer"),
        (&["10", "1w"],                         "ERR invalid duration '1w' for window"),
        (&["10", "1s", "PRECISION", "2s"],      "ERR PRECISION must not be longer than window"),
        (&["10", "1s", "PRECISION", "0ms"],     "ERR invalid duration '0ms' for PRECISION"),
        (&["10", "1s", "PRECISION"],            "ERR syntax error, PRECISION needs a value"),
        (&["10", "1s", "PRECISION", "1", "precision", "1"],
                                                "ERR syntax error, PRECISION given more than once"),
    ]);
}

#[test]
fn sliding_key_expires_when_its_newest_entry_leaves() {
    suite::check_expiry_is_reset_time(
        &SPEC,
        &[
            // The key lives until its newest entry leaves the 1 s window.
            (0, &[], 1000),
            (300, &["COST", "3"], 1300),
            (900, &["PEEK"], 1300),
            (1200, &[], 2200),
            // 4 of 5 in the window at +1250 ms: denied, the expiry stays.
            (1250, &["COST", "2"], 2200),
        ],
    );
}

/// `n` granted calls, one per millisecond from `t`, pipelined.
fn fill_log(c: &mut Conn, key: &str, limit: u64, window: &str, n: u64, t: u64) {
    for i in 0..n {
        c.send(&args!["RL.SLIDING", key, limit, window, "AT", t + i]);
    }
    for i in 0..n {
        let r = c.recv();
        assert_eq!(
            r.as_array().map(|a| a[0].clone()),
            Some(Reply::Int(1)),
            "call {i}: {r:?}"
        );
    }
}

#[test]
fn sliding_replies_follow_the_log() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    #[rustfmt::skip]
    let cases: &[(u64, &[&str], [i64; 5])] = &[
        // at   options               granted limit remaining retry reset
        (0,     &[],                  [1, 3, 2, 0, 1000]),
        (100,   &[],                  [1, 3, 1, 0, 1000]),
        (200,   &[],                  [1, 3, 0, 0, 1000]),
        (300,   &[],                  [0, 3, 0, 700, 900]),
        (300,   &["COST", "0"],       [0, 3, 0, 0, 900]),
        (300,   &["COST", "4"],       [0, 3, 0, -1, 900]),
        (300,   &["PEEK"],            [0, 3, 0, 700, 900]),
        (1000,  &["PEEK"],            [1, 3, 0, 0, 1000]),
        (1000,  &[],                  [1, 3, 0, 0, 1000]),
        (1000,  &["COST", "2"],       [0, 3, 0, 200, 1000]),
        (1150,  &["COST", "3", "BESTEFFORT"], [1, 3, 0, 1000, 1000]),
    ];
    for (at, opts, want) in cases {
        let mut cmd = args!["RL.SLIDING", "k", 3, "1s", "AT", t + at].to_vec();
        cmd.extend(opts.iter().map(|o| o.as_bytes().to_vec()));
        assert_eq!(c.ints(&cmd), want, "at +{at} {opts:?}");
    }
    // AT takes microseconds: 999.999 ms after the grant at 200 it still counts.
    assert_eq!(
        c.ints(&args![
            "RL.SLIDING",
            "k",
            3,
            "1s",
            "AT",
            format!("{}.999", t + 1199)
        ])[0],
        0
    );
    assert_eq!(
        c.ints(&args!["RL.SLIDING", "k", 3, "1s", "AT", t + 1200])[0],
        1
    );
}

#[test]
fn sliding_precision_buckets_and_expiry_time() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // Buckets of 100 ms: both calls are logged at t + 100 and leave together at t + 1100.
    c.ints(&args![
        "RL.SLIDING",
        "p",
        2,
        "1s",
        "PRECISION",
        "100ms",
        "AT",
        t + 120
    ]);
    c.ints(&args![
        "RL.SLIDING",
        "p",
        2,
        "1s",
        "PRECISION",
        "100ms",
        "AT",
        t + 199
    ]);
    assert_eq!(c.int(&["PEXPIRETIME", "p"]), (t + 1100) as i64);
    assert_eq!(
        c.ints(&args![
            "RL.SLIDING",
            "p",
            2,
            "1s",
            "PRECISION",
            "100ms",
            "AT",
            t + 500
        ]),
        [0, 2, 0, 600, 600]
    );
    // The key expires when its newest entry leaves the window (no PRECISION: 1 ms buckets).
    c.ints(&args![
        "RL.SLIDING",
        "q",
        5,
        "1m",
        "AT",
        format!("{}.750", t + 42)
    ]);
    assert_eq!(c.int(&["PEXPIRETIME", "q"]), (t + 42 + 60_000) as i64);
    assert_eq!(c.cmd(&["TYPE", "q"]), Reply::Simple("ratelimit".into()));
}

#[test]
fn sliding_key_vanishes_when_its_window_has_passed() {
    let s = Server::start();
    let mut c = s.conn();
    // On the server's own clock: gone about 200 ms after the call.
    c.ints(&["RL.SLIDING", "short", "5", "200ms"]);
    assert_eq!(c.int(&["EXISTS", "short"]), 1);
    let ttl = c.int(&["PTTL", "short"]);
    assert!((1..=200).contains(&ttl), "pttl {ttl}");
    wait_until("the key to expire", Duration::from_secs(3), || {
        c.int(&["EXISTS", "short"]) == 0
    });
    // A denied call on a missing key creates nothing.
    c.ints(&["RL.SLIDING", "never", "1", "1s", "COST", "2"]);
    c.ints(&["RL.SLIDING", "never", "1", "1s", "PEEK"]);
    assert_eq!(c.int(&["EXISTS", "never"]), 0);
}

#[test]
fn sliding_dedup_forgets_an_id_a_window_later() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let call = |c: &mut Conn, cost: u64, at: u64| {
        c.ints(&args![
            "RL.SLIDING",
            "d",
            5,
            "1s",
            "COST",
            cost,
            "DEDUP",
            "req-7",
            "AT",
            t + at
        ])
    };
    assert_eq!(call(&mut c, 3, 0), [3, 5, 2, 0, 1000]);
    // The retry is not charged: the remembered grant, the current state.
    assert_eq!(call(&mut c, 3, 400), [3, 5, 2, 0, 600]);
    assert_eq!(call(&mut c, 3, 999), [3, 5, 2, 0, 1]);
    // A window later the id is forgotten.
    assert_eq!(call(&mut c, 3, 1000), [3, 5, 2, 0, 1000]);
    // Another id is charged normally.
    assert_eq!(
        c.ints(&args![
            "RL.SLIDING",
            "d",
            5,
            "1s",
            "COST",
            3,
            "DEDUP",
            "req-8",
            "AT",
            t + 1001
        ]),
        [0, 5, 2, 999, 999]
    );
}

#[test]
fn sliding_parameter_change_keeps_the_log() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    fill_log(&mut c, "k", 10, "1s", 10, t);
    // Raising the limit grants on top of the 10 logged units, never fewer.
    assert_eq!(
        c.ints(&args!["RL.SLIDING", "k", 12, "1s", "COST", 2, "AT", t + 20]),
        [2, 12, 0, 0, 1000]
    );
    // A coarser precision logs new grants in its buckets, never before the newest entry.
    assert_eq!(
        c.ints(&args![
            "RL.SLIDING",
            "k",
            13,
            "1s",
            "PRECISION",
            "1s",
            "AT",
            t + 30
        ]),
        [1, 13, 0, 0, 990]
    );
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), (t + 20 + 1000) as i64);
}

#[test]
fn sliding_memory_usage_is_a_few_bytes_per_entry() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&args!["RL.SLIDING", "one", 1000, "1m", "AT", t]);
    let one = c.int(&["MEMORY", "USAGE", "one"]);
    for (entries, spacing) in [(100u64, 1u64), (1000, 1), (1000, 59)] {
        let key = format!("log:{entries}:{spacing}");
        for i in 0..entries {
            c.send(&args![
                "RL.SLIDING",
                &key,
                1000,
                "1m",
                "AT",
                t + i * spacing
            ]);
        }
        for _ in 0..entries {
            assert_eq!(c.recv().as_array().unwrap()[0], Reply::Int(1));
        }
        let usage = c.int(&["MEMORY", "USAGE", key.as_str()]);
        let per_entry = (usage - one) as f64 / (entries - 1) as f64;
        eprintln!(
            "{entries} entries {spacing} ms apart: MEMORY USAGE {usage} B, {per_entry:.2} B per extra entry, {:.2} B per entry in all",
            usage as f64 / entries as f64
        );
        assert!(per_entry <= 4.0, "{per_entry} bytes per entry");
        if entries == 1000 {
            assert!(usage <= 4 * 1000 + 200, "{usage} bytes for 1000 entries");
        }
    }
    // A sorted set of the same 1000 timestamps, for scale.
    for i in 0..1000u64 {
        c.send(&args!["ZADD", "zset", t + i, t + i]);
    }
    for _ in 0..1000 {
        c.recv();
    }
    let zset = c.int(&["MEMORY", "USAGE", "zset"]);
    let ours = c.int(&["MEMORY", "USAGE", "log:1000:1"]);
    eprintln!("a sorted set of the same 1000 timestamps: {zset} B");
    assert!(ours * 10 < zset, "{ours} vs sorted set {zset}");
    // Once the window has slid past, the next grant drops the old entries and the buffers.
    c.ints(&args![
        "RL.SLIDING",
        "log:1000:1",
        1000,
        "1m",
        "AT",
        t + 120_000
    ]);
    assert!(c.int(&["MEMORY", "USAGE", "log:1000:1"]) <= one + 64);
}

#[test]
fn sliding_aof_costs_one_short_command_per_granted_call() {
    let s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let t = base_ms();
    fill_log(&mut c, "big", 100_000, "1h", 1000, t);
    let aof = aof_file(&s.dir, ".incr.aof");
    let size = || std::fs::metadata(&aof).unwrap().len();
    let before = size();
    let calls = 100u64;
    for i in 0..calls {
        c.ints(&args![
            "RL.SLIDING",
            "big",
            100_000,
            "1h",
            "AT",
            format!("{}.{:03}", t + 2000 + i, i)
        ]);
    }
    let per_call = (size() - before) as f64 / calls as f64;
    eprintln!("AOF bytes per granted call on a 1000-entry log: {per_call:.1}");
    assert!(per_call < 120.0, "{per_call} AOF bytes per call");
    // What is logged is the command itself with its resolved time, never the state.
    let text = String::from_utf8_lossy(&std::fs::read(&aof).unwrap()).into_owned();
    assert!(text.contains("rl.sliding"));
    assert!(!text.contains("rl._restore"));
    assert!(text.contains(&format!("{}.099", t + 2099)));
    // Denied and PEEK calls write nothing.
    let before = size();
    c.ints(&args![
        "RL.SLIDING",
        "big",
        1100,
        "1h",
        "COST",
        1000,
        "AT",
        t + 3000
    ]);
    c.ints(&args![
        "RL.SLIDING",
        "big",
        100_000,
        "1h",
        "PEEK",
        "AT",
        t + 3000
    ]);
    assert_eq!(size(), before);
}

/// Bytes of `v` as a LEB128 varint.
fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[test]
fn sliding_log_replicates_as_its_value_until_too_long_then_as_its_command() {
    // One grant per millisecond: each adds a one-byte entry to the value, which is replicated
    // as itself (`RL._SET`, at most 48 bytes) until it no longer fits, then as the command.
    let master = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = Server::replica_of(&master);
    let mut c = master.conn();
    let t = base_ms();
    let aof = aof_file(&master.dir, ".incr.aof");
    let n = 40u64;
    fill_log(&mut c, "grow", 1000, "1h", n, t);
    // The codec's length after call i: version, kind, last update (µs), limit, window and
    // precision (µs), count, the first entry's ms since the epoch (shifted by its flag bit),
    // i one-byte entries, and no DEDUP id.
    let len = |i: u64| {
        2 + varint_len((t + i) * 1000)
            + varint_len(1000)
            + varint_len(3_600_000_000)
            + varint_len(1000)
            + varint_len(i + 1)
            + varint_len(t * 2)
            + i as usize
            + 1
    };
    let as_value = (0..n).filter(|&i| len(i) <= 48).count();
    assert!(as_value > 0 && as_value < n as usize, "{as_value}");
    let text = String::from_utf8_lossy(&std::fs::read(&aof).unwrap()).into_owned();
    assert_eq!(text.matches("rl._set").count(), as_value);
    assert_eq!(text.matches("rl.sliding").count(), n as usize - as_value);
    wait_replica_synced(&master, &replica);
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "grow"]);
    let expiry = c.int(&["PEXPIRETIME", "grow"]);
    let mut r = replica.conn();
    assert_eq!(r.cmd(&["DEBUG", "DIGEST-VALUE", "grow"]), digest);
    assert_eq!(r.int(&["PEXPIRETIME", "grow"]), expiry);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "grow"]), digest);
    assert_eq!(c.int(&["PEXPIRETIME", "grow"]), expiry);
}

/// A few keys with big and small logs, DEDUP ids, several precisions and a parameter change.
fn fill_various(c: &mut Conn) -> Vec<String> {
    let t = base_ms();
    fill_log(c, "big", 5000, "1h", 1000, t);
    for i in 0..20u64 {
        c.ints(&args![
            "RL.SLIDING",
            "mixed",
            50,
            "10s",
            "PRECISION",
            "250ms",
            "COST",
            1 + i % 4,
            "DEDUP",
            i % 7,
            "AT",
            t + i * 97
        ]);
    }
    c.ints(&args!["RL.SLIDING", "mixed", 60, "20s", "AT", t + 5000]);
    c.ints(&args![
        "RL.SLIDING",
        "huge",
        2_000_000,
        "1m",
        "COST",
        1_000_000,
        "AT",
        t
    ]);
    vec!["big".into(), "mixed".into(), "huge".into()]
}

/// `(digest, expiry, a PEEK reply)` of every key.
fn snapshot(c: &mut Conn, keys: &[String]) -> Vec<(Reply, i64, Reply)> {
    let t = base_ms() + 6000;
    keys.iter()
        .map(|k| {
            let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", k.as_str()]);
            let expiry = c.int(&["PEXPIRETIME", k.as_str()]);
            assert!(expiry > 0, "{k} has no expiry");
            let peek = c.cmd(&args![
                "RL.SLIDING",
                k,
                100,
                "1h",
                "PEEK",
                "COST",
                3,
                "AT",
                t
            ]);
            (digest, expiry, peek)
        })
        .collect()
}

#[test]
fn sliding_log_survives_debug_reload_copy_and_restart() {
    let mut s = Server::start_with(&["--save", "3600 1"]);
    let mut c = s.conn();
    let keys = fill_various(&mut c);
    let before = snapshot(&mut c, &keys);
    c.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(snapshot(&mut c, &keys), before);
    assert_eq!(c.int(&["COPY", "big", "big2"]), 1);
    assert_eq!(
        c.cmd(&["DEBUG", "DIGEST-VALUE", "big2"]),
        before[0].0,
        "a copy has the same log"
    );
    c.ok(&["SAVE"]);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, &keys), before);
}

#[test]
fn sliding_log_survives_aof_replay_and_restart() {
    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let keys = fill_various(&mut c);
    let before = snapshot(&mut c, &keys);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, &keys), before);
}

fn aof_rewrite_round_trip(preamble: &str) {
    let s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
    let mut c = s.conn();
    let keys = fill_various(&mut c);
    let before = snapshot(&mut c, &keys);
    wait_rewrite_done(&mut c);
    c.ok(&["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    if preamble == "no" {
        // Without the preamble, the rewrite stores each log as one RL._RESTORE payload.
        let base = std::fs::read(aof_file(&s.dir, ".base.aof")).unwrap();
        let text = String::from_utf8_lossy(&base);
        assert_eq!(text.matches("rl._restore").count(), keys.len());
    }
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c, &keys), before);
    // Traffic after the rewrite lands in the incremental file and replays too.
    let t = base_ms();
    c.ints(&args![
        "RL.SLIDING",
        "big",
        5000,
        "1h",
        "COST",
        7,
        "AT",
        t + 5500
    ]);
    let after = snapshot(&mut c, &keys);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c, &keys), after);
}

#[test]
fn sliding_log_survives_aof_rewrite_without_rdb_preamble() {
    aof_rewrite_round_trip("no");
}

#[test]
fn sliding_log_survives_aof_rewrite_with_rdb_preamble() {
    aof_rewrite_round_trip("yes");
}

/// A small deterministic generator, so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One random RL.SLIDING call on the server's own clock.
fn random_call(c: &mut Conn, rng: &mut Rng) {
    let key = format!("s{}", rng.below(5));
    let limit = 20 + rng.below(200);
    let window = ["50ms", "300ms", "1s", "5s"][rng.below(4) as usize];
    let mut cmd = args!["RL.SLIDING", key, limit, window, "COST", rng.below(5)].to_vec();
    match rng.below(8) {
        0 => cmd.push(b"PEEK".to_vec()),
        1 => cmd.push(b"BESTEFFORT".to_vec()),
        2 => cmd.extend([b"DEDUP".to_vec(), rng.below(4).to_string().into_bytes()]),
        3 => cmd.extend([b"PRECISION".to_vec(), b"10ms".to_vec()]),
        _ => {}
    }
    let reply = c.cmd(&cmd);
    assert!(reply.as_array().is_some(), "{reply:?}");
}

#[test]
fn sliding_replica_matches_master_while_held_back() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut hold = replica.conn();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let t = base_ms();
    // One big log, replicated as commands.
    fill_log(&mut m, "big", 100_000, "1h", 1000, t);
    for round in 0..8 {
        // The replica sleeps while the master takes traffic and its clock moves on.
        hold.send(&["DEBUG", "SLEEP", "0.1"]);
        for _ in 0..200 {
            random_call(&mut m, &mut rng);
        }
        m.ints(&args![
            "RL.SLIDING",
            "big",
            100_000,
            "1h",
            "COST",
            round,
            "AT",
            t + 1000 + round
        ]);
        std::thread::sleep(Duration::from_millis(5 + round * 7));
        assert_eq!(hold.recv(), Reply::Simple("OK".into()));
    }
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    let Reply::Array(names) = m.ok(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    assert!(names.len() >= 2);
    for k in names.iter().map(|k| k.as_str().unwrap()) {
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
    }
    assert_eq!(m.cmd(&["DEBUG", "DIGEST"]), r.cmd(&["DEBUG", "DIGEST"]));
}

#[test]
fn sliding_in_rl_all_charges_only_when_every_limiter_grants() {
    let s = Server::start();
    let mut c = s.conn();
    // A whole minute, so the hourly limiter's 1-minute buckets start at `t`.
    let t = base_ms() / 60_000 * 60_000;
    let call = |c: &mut Conn, at: u64| {
        c.ints(&args![
            "RL.ALL",
            2,
            "{u}:s",
            "{u}:h",
            "SLIDING",
            2,
            "1s",
            "SLIDING",
            3,
            "1h",
            "PRECISION",
            "1m",
            "AT",
            t + at
        ])
    };
    assert_eq!(call(&mut c, 0)[0], 1);
    assert_eq!(call(&mut c, 10)[0], 1);
    // The per-second log is full: nothing is charged on the hourly one.
    assert_eq!(call(&mut c, 20), [0, 2, 0, 980, 3_599_980]);
    assert_eq!(call(&mut c, 1000)[0], 1);
    // Now the hourly one is full (its three units share the bucket at t).
    assert_eq!(call(&mut c, 2000), [0, 3, 0, 3_598_000, 3_598_000]);
}
