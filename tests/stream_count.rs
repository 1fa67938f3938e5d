//! RL.STREAMCOUNT end to end: the classic Lua stream layout, limits, replication of effects.

mod common;
use common::*;

use std::time::Duration;

fn ids(c: &mut Conn, key: &str) -> Vec<String> {
    let Reply::Array(entries) = c.ok(&["XRANGE", key, "-", "+"]) else {
        panic!("XRANGE")
    };
    entries
        .iter()
        .map(|e| e.as_array().unwrap()[0].as_str().unwrap())
        .collect()
}

#[test]
fn streamcount_sums_the_window_and_enforces_the_limit() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let call = |c: &mut Conn, at: u64, extra: &[&str]| {
        let mut cmd = args!["RL.STREAMCOUNT", "s", "10s", "AT", t + at].to_vec();
        cmd.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
        c.int(&cmd)
    };
    assert_eq!(call(&mut c, 0, &[]), 1);
    assert_eq!(call(&mut c, 1000, &["ADD", "4"]), 5);
    assert_eq!(call(&mut c, 2000, &["ADD", "5", "LIMIT", "10"]), 10);
    // Over the limit: denied, nothing appended.
    assert_eq!(call(&mut c, 3000, &["LIMIT", "10"]), -1);
    assert_eq!(ids(&mut c, "s").len(), 3);
    // ADD 0 reports without writing.
    assert_eq!(call(&mut c, 3000, &["ADD", "0"]), 10);
    assert_eq!(ids(&mut c, "s").len(), 3);
    // At +10 s the first entry (at 0) is still in (ID time >= now - window); at +10.001 s not.
    assert_eq!(call(&mut c, 10_000, &["ADD", "0"]), 10);
    assert_eq!(call(&mut c, 10_001, &["ADD", "0"]), 9);
    assert_eq!(call(&mut c, 10_001, &["LIMIT", "10"]), 10);
    // The entries are the Lua layout: ID = evaluation time in ms, one field `count`.
    let Reply::Array(entries) = c.ok(&["XRANGE", "s", "-", "+"]) else {
        panic!()
    };
    assert_eq!(
        entries[0],
        Reply::Array(vec![
            Reply::Bulk(format!("{t}-0").into_bytes()),
            Reply::Array(vec![
                Reply::Bulk(b"count".to_vec()),
                Reply::Bulk(b"1".to_vec())
            ])
        ])
    );
    // The key expires one window after the last call that wrote.
    assert_eq!(c.int(&["PEXPIRETIME", "s"]), (t + 20_001) as i64);
}

#[test]
fn streamcount_ids_never_go_below_the_last_entry() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.int(&args!["RL.STREAMCOUNT", "s", "1m", "AT", t + 500]);
    c.int(&args!["RL.STREAMCOUNT", "s", "1m", "AT", t + 500]);
    c.int(&args!["RL.STREAMCOUNT", "s", "1m", "AT", t + 100]);
    assert_eq!(
        ids(&mut c, "s"),
        [
            format!("{}-0", t + 500),
            format!("{}-1", t + 500),
            format!("{}-2", t + 500)
        ]
    );
    // A deleted tail entry keeps the stream's last ID: the next append goes after it.
    c.ok(&args!["XADD", "s", format!("{}-0", t + 900), "count", 1]);
    c.int(&args!["XDEL", "s", format!("{}-0", t + 900)]);
    assert_eq!(c.int(&args!["RL.STREAMCOUNT", "s", "1m", "AT", t + 600]), 4);
    let last = ids(&mut c, "s").pop().unwrap();
    assert!(last.as_str() > format!("{}-0", t + 900).as_str(), "{last}");
}

#[test]
fn streamcount_reads_streams_written_by_the_lua_script() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    for (i, n) in [3, 4, 5].iter().enumerate() {
        c.ok(&args![
            "XADD",
            "lua",
            format!("{}-0", t + i as u64 * 1000),
            "count",
            n
        ]);
    }
    assert_eq!(
        c.int(&args![
            "RL.STREAMCOUNT",
            "lua",
            "5s",
            "ADD",
            0,
            "AT",
            t + 2000
        ]),
        12
    );
    assert_eq!(
        c.int(&args![
            "RL.STREAMCOUNT",
            "lua",
            "1s",
            "ADD",
            0,
            "AT",
            t + 2000
        ]),
        9
    );
    c.ok(&args![
        "XADD",
        "lua",
        format!("{}-0", t + 3000),
        "count",
        "many"
    ]);
    assert_eq!(
        c.err(&args!["RL.STREAMCOUNT", "lua", "5s", "AT", t + 3000]),
        format!(
            "ERR stream entry {}-0 has no integer 'count' field",
            t + 3000
        )
    );
    c.ok(&args!["XADD", "nocount", format!("{t}-5"), "other", 1]);
    assert_eq!(
        c.err(&args!["RL.STREAMCOUNT", "nocount", "5s", "AT", t]),
        format!("ERR stream entry {t}-5 has no integer 'count' field")
    );
}

#[test]
fn streamcount_errors_and_wrong_types() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["SET", "str", "1"]);
    c.ints(&["RL.GCRA", "g", "1", "1", "1s"]);
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["RL.STREAMCOUNT", "s"],                       "ERR wrong number of arguments for 'rl.streamcount' command"),
        (&["RL.STREAMCOUNT", "s", "0"],                  "ERR invalid duration '0' for window"),
        (&["RL.STREAMCOUNT", "s", "1s", "ADD"],          "ERR syntax error, ADD needs a value"),
        (&["RL.STREAMCOUNT", "s", "1s", "ADD", "-1"],    "ERR ADD must be a non-negative integer"),
        (&["RL.STREAMCOUNT", "s", "1s", "LIMIT", "0"],   "ERR LIMIT must be a positive integer"),
        (&["RL.STREAMCOUNT", "s", "1s", "COST", "1"],    "ERR unknown option 'COST'"),
        (&["RL.STREAMCOUNT", "s", "1s", "ADD", "1", "ADD", "1"], "ERR syntax error, ADD given more than once"),
        (&["RL.STREAMCOUNT", "str", "1s"],               "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["RL.STREAMCOUNT", "g", "1s"],                 "WRONGTYPE Operation against a key holding the wrong kind of value"),
    ];
    for (cmd, want) in cases {
        assert_eq!(c.err(cmd), *want, "{cmd:?}");
    }
    assert_eq!(c.int(&["EXISTS", "s"]), 0);
}

/// Every command on limiter keys refuses a stream key of RL.STREAMCOUNT with one wording naming
/// itself, and changes nothing; a key of another non-module type gets Redis's own WRONGTYPE.
/// (RL.INFO describes a stream key: `rl_info_describes_a_stream_key`.)
#[test]
fn limiter_commands_refuse_a_stream_key_alike() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(c.int(&["RL.STREAMCOUNT", "s", "1h"]), 1);
    c.ok(&["SET", "str", "1"]);
    let entries = ids(&mut c, "s");
    let offset = c.info_field("replication", "master_repl_offset");
    #[rustfmt::skip]
    let commands: &[(&str, &[&str])] = &[
        ("RL.GCRA",           &["RL.GCRA", "{k}", "1", "1", "1s"]),
        ("RL.TOKENBUCKET",    &["RL.TOKENBUCKET", "{k}", "1", "1", "1s"]),
        ("RL.FIXED",          &["RL.FIXED", "{k}", "1", "1s", "PEEK"]),
        ("RL.ACQUIRE",        &["RL.ACQUIRE", "{k}", "1", "1s", "ID", "a"]),
        ("CL.THROTTLE",       &["CL.THROTTLE", "{k}", "1", "1", "1"]),
        ("RL.ALL",            &["RL.ALL", "1", "{k}", "GCRA", "1", "1", "1s"]),
        ("RL.CHECK",          &["RL.CHECK", "{k}", "GCRA", "1", "1", "1s"]),
        ("RL.REFUND",         &["RL.REFUND", "{k}", "1"]),
        ("RL.BLOCK",          &["RL.BLOCK", "{k}", "1s"]),
        ("RL.UNBLOCK",        &["RL.UNBLOCK", "{k}"]),
        ("RL.RELEASE",        &["RL.RELEASE", "{k}", "a"]),
    ];
    for (name, cmd) in commands {
        for (key, want) in [
            (
                "s",
                format!(
                    "WRONGTYPE key holds an RL.STREAMCOUNT stream, not a limiter: {name} applies to limiter keys only"
                ),
            ),
            (
                "str",
                "WRONGTYPE Operation against a key holding the wrong kind of value".to_string(),
            ),
        ] {
            let cmd: Vec<&str> = cmd
                .iter()
                .map(|a| if *a == "{k}" { key } else { a })
                .collect();
            assert_eq!(c.err(&cmd), want, "{cmd:?}");
        }
    }
    assert_eq!(ids(&mut c, "s"), entries);
    assert_eq!(c.info_field("replication", "master_repl_offset"), offset);
}

/// Two windows on one stream ("so many a minute and so many an hour") keep the longer one's
/// entries and expiry: a one-minute call neither trims what the hour still counts (also right
/// after a reload, when no running total is known) nor shortens the key's life to a minute.
#[test]
fn a_shorter_window_never_drops_what_a_longer_one_counts() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // 600 entries over 50 minutes (one each 5 s), counted by the hour window.
    for i in 0..600u64 {
        assert_eq!(
            c.int(&args!["RL.STREAMCOUNT", "s", "1h", "AT", t + i * 5_000]),
            (i + 1) as i64
        );
    }
    let last = t + 599 * 5_000;
    c.ok(&["DEBUG", "RELOAD"]);
    // A one-minute call after the reload: the entries of its minute (12 of them, the last at
    // `last`), and its own.
    let at = last + 1;
    assert_eq!(c.int(&args!["RL.STREAMCOUNT", "s", "1m", "AT", at]), 12 + 1);
    // The hour still holds all 600 and the new one.
    assert_eq!(
        c.int(&args!["RL.STREAMCOUNT", "s", "1h", "ADD", 0, "AT", at + 1]),
        601
    );
    // The key lives an hour after the last hour-window call, not a minute after the
    // one-minute call.
    assert_eq!(c.int(&["PEXPIRETIME", "s"]), (last + 3_600_000) as i64);
    assert!(c.int(&["XLEN", "s"]) >= 601);
}

/// SPEC "RL.INFO": a stream key of RL.STREAMCOUNT is described as `algorithm streamcount`, its
/// entries and its TTL (no total: that needs a window); another type is WRONGTYPE.
#[test]
fn rl_info_describes_a_stream_key() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // Three calls, ADD 2 each: three entries; the key expires an hour after the last call.
    for i in 0..3u64 {
        assert_eq!(
            c.int(&args!["RL.STREAMCOUNT", "s", "1h", "ADD", 2, "AT", t + i]),
            (2 * (i + 1)) as i64
        );
    }
    c.ok(&["SET", "str", "1"]);
    let info = c.cmd(&["RL.INFO", "s"]);
    let Reply::Array(items) = info else {
        panic!("RL.INFO s: {info:?}")
    };
    assert_eq!(items.len(), 6, "{items:?}");
    assert_eq!(items[0], Reply::Bulk(b"algorithm".to_vec()));
    assert_eq!(items[1], Reply::Bulk(b"streamcount".to_vec()));
    assert_eq!(items[2], Reply::Bulk(b"entries".to_vec()));
    assert_eq!(items[3], Reply::Int(3));
    assert_eq!(items[4], Reply::Bulk(b"ttl_ms".to_vec()));
    let pttl = c.int(&["PTTL", "s"]);
    let Reply::Int(ttl) = items[5] else {
        panic!("ttl_ms: {:?}", items[5])
    };
    // One window after the last call's time.
    assert_eq!(c.int(&["PEXPIRETIME", "s"]), (t + 2 + 3_600_000) as i64);
    assert!(ttl > 0 && (ttl - pttl).abs() <= 50, "{ttl} vs {pttl}");
    assert_eq!(
        c.err(&["RL.INFO", "str"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn streamcount_replicates_effects_not_the_clock() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut hold = replica.conn();
    for round in 0..5u64 {
        hold.send(&["DEBUG", "SLEEP", "0.05"]);
        for i in 0..200u64 {
            let key = format!("s{}", i % 4);
            let _ = m.int(&args![
                "RL.STREAMCOUNT",
                &key,
                "1m",
                "ADD",
                1 + i % 3,
                "LIMIT",
                40
            ]);
        }
        std::thread::sleep(Duration::from_millis(3 * round));
        assert_eq!(hold.recv(), Reply::Simple("OK".into()));
    }
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    for k in ["s0", "s1", "s2", "s3"] {
        assert_eq!(ids(&mut m, k), ids(&mut r, k), "{k}");
        assert_eq!(
            m.int(&["PEXPIRETIME", k]),
            r.int(&["PEXPIRETIME", k]),
            "{k}"
        );
    }
    assert_eq!(m.cmd(&["DEBUG", "DIGEST"]), r.cmd(&["DEBUG", "DIGEST"]));
}

#[test]
fn streamcount_scans_leak_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    for i in 0..200u64 {
        c.ok(&args!["XADD", "s", format!("{}-0", t + i), "count", 1]);
    }
    let used = |c: &mut Conn| -> i64 {
        c.info_field("memory", "used_memory")
            .unwrap()
            .parse()
            .unwrap()
    };
    // Warm up allocator caches, then measure: 500 scans of 200 entries each.
    for _ in 0..50 {
        c.int(&args!["RL.STREAMCOUNT", "s", "1h", "ADD", 0, "AT", t + 300]);
    }
    let before = used(&mut c);
    for _ in 0..500 {
        assert_eq!(
            c.int(&args!["RL.STREAMCOUNT", "s", "1h", "ADD", 0, "AT", t + 300]),
            200
        );
    }
    let after = used(&mut c);
    // Leaking the two strings of each field read would be ~100k strings, megabytes.
    assert!(
        after - before < 64 * 1024,
        "used_memory grew by {} bytes",
        after - before
    );
}

// ---------------------------------------------------------------------------------------------
// The running total against a model of the stream: every reply is compared with a sum the test
// computes from the entries it made, with the AT times and counts it chose.
// ---------------------------------------------------------------------------------------------

/// The test's own picture of one stream key: its entries `(ms, seq, count)` in ID order and the
/// stream's last ID (which stays after its entries are deleted or trimmed).
#[derive(Debug, Clone, Default)]
struct Model {
    entries: Vec<(u64, u64, u64)>,
    top: Option<(u64, u64)>,
}

impl Model {
    /// The window's total at `at_ms` for a window of `window_ms`.
    fn total(&self, at_ms: u64, window_ms: u64) -> u64 {
        let start = at_ms.saturating_sub(window_ms);
        self.entries
            .iter()
            .filter(|e| e.0 >= start)
            .map(|e| e.2)
            .sum()
    }

    /// The ID XADD gives an entry asked for at `ms-seq` (`None`: `ms-*`).
    fn push(&mut self, ms: u64, seq: Option<u64>, count: u64) -> (u64, u64) {
        let id = match (seq, self.top) {
            (Some(seq), _) => (ms, seq),
            (None, Some((tms, tseq))) if tms == ms => (ms, tseq + 1),
            (None, _) => (ms, 0),
        };
        assert!(
            self.top.is_none_or(|t| id > t),
            "model: {id:?} after {:?}",
            self.top
        );
        self.entries.push((id.0, id.1, count));
        self.top = Some(id);
        id
    }

    /// What RL.STREAMCOUNT appends at `at_ms`: the evaluation time's ID, never below the last
    /// entry; the next ID after the stream's last ID when that is higher.
    fn module_push(&mut self, at_ms: u64, count: u64) {
        let last = self.entries.last().map(|e| (e.0, e.1));
        let want = match last {
            Some((ms, seq)) if ms >= at_ms => (ms, seq + 1),
            _ => (at_ms, 0),
        };
        let id = match self.top {
            Some(top) if want <= top => (top.0, top.1 + 1),
            _ => want,
        };
        self.push(id.0, Some(id.1), count);
    }

    /// After a write that may trim (`MINID ~ start`): the server holds `len` entries, so the
    /// oldest ones went; each must have been before `start`.
    fn trimmed_to(&mut self, len: usize, start: u64) {
        assert!(len <= self.entries.len(), "{len} > {}", self.entries.len());
        let gone = self.entries.len() - len;
        for e in self.entries.drain(..gone) {
            assert!(e.0 < start, "trimmed {e:?}, inside the window from {start}");
        }
    }
}

/// A small deterministic generator (xorshift64*), so a failing sequence can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The Lua stream counter the module replaces (bench/lua), as another writer of the same keys.
const LUA_COUNTER: &str = include_str!("../bench/lua/stream_counter.lua");

fn xlen(c: &mut Conn, key: &str) -> usize {
    c.int(&["XLEN", key]) as usize
}

/// Random sequences of RL.STREAMCOUNT mixed with every other way a stream key changes.
#[test]
fn streamcount_matches_a_model_under_random_sequences() {
    let s = Server::start();
    let mut c = s.conn();
    let t0 = base_ms();
    // Small nodes, so the approximate trims of the module and of the Lua script remove entries.
    c.ok(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
    let keys = ["a", "b"];
    let far = t0 + 36_000_000;
    for seed in [1u64, 7, 42, 2024] {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut now = t0 + seed * 100_000;
        let mut db = 0usize;
        c.ok(&["SELECT", "0"]);
        c.ok(&["FLUSHALL"]);
        // models[db][key]
        let mut models: [[Model; 2]; 2] = Default::default();
        for step in 0..400 {
            let k = rng.below(2) as usize;
            let key = keys[k];
            // Time moves forward by 0..300 ms, sometimes back (AT is the caller's).
            now += rng.below(300);
            if rng.below(8) == 0 {
                now -= rng.below(500);
            }
            let window = [1_000u64, 2_000, 5_000][rng.below(3) as usize];
            let ctx = format!("seed {seed} step {step} db {db} key {key}");
            match rng.below(16) {
                0..=5 => {
                    let m = &mut models[db][k];
                    let add = rng.below(4);
                    let limit = (rng.below(3) == 0).then(|| 1 + rng.below(40));
                    let total = m.total(now, window);
                    let mut cmd =
                        args!["RL.STREAMCOUNT", key, window, "ADD", add, "AT", now].to_vec();
                    if let Some(l) = limit {
                        cmd.extend(args!["LIMIT", l]);
                    }
                    let want = match limit {
                        Some(l) if total + add > l => -1,
                        _ => (total + add) as i64,
                    };
                    assert_eq!(c.int(&cmd), want, "{ctx}: {cmd:?}");
                    if want >= 0 && add > 0 {
                        m.module_push(now, add);
                        m.trimmed_to(xlen(&mut c, key), now - window);
                    }
                }
                6 | 7 => {
                    // The Lua script: XRANGE sum, XADD `ms-*` MINID ~ start, PEXPIRE.
                    let m = &mut models[db][k];
                    let add = 1 + rng.below(3);
                    let ms = now.max(m.top.map_or(0, |t| t.0));
                    let want = (m.total(ms, window) + add) as i64;
                    let r = c.int(&args!["EVAL", LUA_COUNTER, 1, key, window, add, 0, ms]);
                    assert_eq!(r, want, "{ctx}: lua");
                    m.push(ms, None, add);
                    m.trimmed_to(xlen(&mut c, key), ms - window);
                    // Its PEXPIRE counts from the real clock; keep the key for the test.
                    c.int(&args!["PEXPIREAT", key, far]);
                }
                8 => {
                    let m = &mut models[db][k];
                    let ms = now.max(m.top.map_or(0, |t| t.0));
                    let n = 1 + rng.below(5);
                    c.ok(&args!["XADD", key, format!("{ms}-*"), "count", n]);
                    m.push(ms, None, n);
                }
                9 => {
                    let m = &mut models[db][k];
                    if !m.entries.is_empty() {
                        let i = rng.below(m.entries.len() as u64) as usize;
                        let (ms, seq, _) = m.entries.remove(i);
                        let r = c.int(&args!["XDEL", key, format!("{ms}-{seq}")]);
                        assert_eq!(r, 1, "{ctx}: XDEL");
                    }
                }
                10 => {
                    let m = &mut models[db][k];
                    if m.top.is_some() {
                        let keep = rng.below(m.entries.len() as u64 + 1) as usize;
                        let gone = m.entries.len() - keep;
                        let r = c.int(&args!["XTRIM", key, "MAXLEN", keep]);
                        assert_eq!(r, gone as i64, "{ctx}: XTRIM");
                        m.entries.drain(..gone);
                    }
                }
                11 => {
                    let m = &mut models[db][k];
                    let r = c.int(&["DEL", key]);
                    assert_eq!(r == 1, m.top.is_some(), "{ctx}: DEL");
                    *m = Model::default();
                }
                12 => {
                    if models[db][0].top.is_some() && models[db][1].top.is_some() {
                        // Swap the two keys' contents by RENAME, through a third name.
                        c.ok(&["RENAME", "a", "tmp"]);
                        c.ok(&["RENAME", "b", "a"]);
                        c.ok(&["RENAME", "tmp", "b"]);
                        models[db].swap(0, 1);
                    }
                }
                13 => {
                    // MULTI: the module, another writer, the module again.
                    let m = &mut models[db][k];
                    let add = 1 + rng.below(2);
                    let first = m.total(now, window) + add;
                    m.module_push(now, add);
                    let ms = (now + 1).max(m.top.map_or(0, |t| t.0));
                    c.ok(&["MULTI"]);
                    c.cmd(&args!["RL.STREAMCOUNT", key, window, "ADD", add, "AT", now]);
                    c.cmd(&args!["XADD", key, format!("{ms}-*"), "count", 5]);
                    c.cmd(&args![
                        "RL.STREAMCOUNT",
                        key,
                        window,
                        "ADD",
                        0,
                        "AT",
                        now + 1
                    ]);
                    let Reply::Array(r) = c.ok(&["EXEC"]) else {
                        panic!("{ctx}: EXEC")
                    };
                    // The module's trim ran before the XADD, whose entry is kept.
                    m.trimmed_to(xlen(&mut c, key) - 1, now - window);
                    m.push(ms, None, 5);
                    assert_eq!(r[0], Reply::Int(first as i64), "{ctx}: MULTI 1 {r:?}");
                    let third = m.total(now + 1, window) as i64;
                    assert_eq!(r[2], Reply::Int(third), "{ctx}: MULTI 3 {r:?}");
                }
                14 => {
                    // A script calling the module.
                    let want = models[db][k].total(now, window) as i64;
                    let r = c.int(&args![
                        "EVAL",
                        "return redis.call('RL.STREAMCOUNT', KEYS[1], ARGV[1], 'ADD', 0, 'AT', ARGV[2])",
                        1,
                        key,
                        window,
                        now
                    ]);
                    assert_eq!(r, want, "{ctx}: EVAL");
                }
                _ => match rng.below(4) {
                    0 => {
                        c.ok(&["DEBUG", "RELOAD"]);
                    }
                    1 => {
                        c.ok(&["SWAPDB", "0", "1"]);
                        models.swap(0, 1);
                    }
                    2 => {
                        db = 1 - db;
                        c.ok(&args!["SELECT", db]);
                    }
                    _ => {
                        if rng.below(4) == 0 {
                            c.ok(&["FLUSHALL"]);
                            models = Default::default();
                        }
                    }
                },
            }
            // Every few steps, read every key of this database without adding.
            if step % 10 == 0 {
                for (k, key) in keys.iter().enumerate() {
                    let want = models[db][k].total(now, 2_000) as i64;
                    let got = c.int(&args!["RL.STREAMCOUNT", key, "2s", "ADD", 0, "AT", now]);
                    assert_eq!(
                        got, want,
                        "seed {seed} step {step} db {db} key {key}: check"
                    );
                }
            }
        }
    }
}

/// "100 a minute and 1,000 an hour" on one stream, and now and then a third to fifth window
/// (10 s, 5 m, 20 m: past four the least recently used cut is dropped): every reply is the sum
/// the test computes from the entries it made, and an appending call of a shorter window never
/// trims an entry the hour still counts, only entries older than an hour.
#[test]
fn streamcount_windows_on_one_stream_keep_every_total() {
    let s = Server::start();
    let mut c = s.conn();
    // Small nodes, so that the approximate trims remove entries.
    c.ok(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
    let t0 = base_ms();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut m = Model::default();
    let mut now = t0;
    let hour = 3_600_000;
    let mut hour_trimmed = 0;
    for step in 0..1_500 {
        now += 1_000 + rng.below(15_000);
        let (window, ms) = match (step, rng.below(20)) {
            (0, _) | (_, 0..=8) => ("1h", hour),
            (_, 9..=17) => ("1m", 60_000),
            (_, 18) => (["10s", "5m", "20m"][rng.below(3) as usize], 0),
            _ => ("1m", 60_000),
        };
        let ms = match window {
            "10s" => 10_000,
            "5m" => 300_000,
            "20m" => 1_200_000,
            _ => ms,
        };
        let add = rng.below(3);
        let limit = (rng.below(4) == 0).then(|| 1 + rng.below(400));
        let total = m.total(now, ms);
        let mut cmd = args!["RL.STREAMCOUNT", "k", window, "ADD", add, "AT", now].to_vec();
        if let Some(l) = limit {
            cmd.extend(args!["LIMIT", l]);
        }
        let want = match limit {
            Some(l) if total + add > l => -1,
            _ => (total + add) as i64,
        };
        assert_eq!(c.int(&cmd), want, "step {step}: {cmd:?}");
        if want >= 0 && add > 0 {
            m.module_push(now, add);
            let before = m.entries.len();
            // Only entries older than the hour may go.
            m.trimmed_to(xlen(&mut c, "k"), now - hour);
            hour_trimmed += before - m.entries.len();
        }
    }
    // The trims did run (the stream spans well over an hour).
    assert!(hour_trimmed > 0, "nothing trimmed");
    assert!(now - t0 > 3 * hour, "{}", now - t0);
}

/// Other writers that append and trim as many entries as they add, so the stream's length is
/// what the running total last saw: the total follows the new entries, whether the writes come
/// between two calls, in one script, in one MULTI with the module, or from a script that calls
/// the module between them.
#[test]
fn streamcount_counts_other_writers_that_keep_the_length() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let total =
        |c: &mut Conn, at: u64| c.int(&args!["RL.STREAMCOUNT", "s", "1m", "ADD", 0, "AT", at]);
    for i in 0..3 {
        c.ok(&args!["XADD", "s", format!("{}-0", t + i), "count", 1]);
    }
    // Entries t, t+1, t+2 of count 1.
    assert_eq!(total(&mut c, t + 10), 3);
    // Another writer adds t+5 (count 5) and trims t: t+1, t+2, t+5.
    c.ok(&args!["XADD", "s", format!("{}-0", t + 5), "count", 5]);
    assert_eq!(c.int(&["XTRIM", "s", "MAXLEN", "3"]), 1);
    assert_eq!(total(&mut c, t + 10), 7);
    // The module adds t+10 (count 2): t+2, t+5, t+10 after a script adds t+11 (count 4) and
    // trims t+1.
    assert_eq!(
        c.int(&args!["RL.STREAMCOUNT", "s", "1m", "ADD", 2, "AT", t + 10]),
        9
    );
    let script = "redis.call('XADD', KEYS[1], ARGV[1], 'count', ARGV[2]) \
                  return redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[3])";
    assert_eq!(
        c.int(&args![
            "EVAL",
            script,
            1,
            "s",
            format!("{}-0", t + 11),
            4,
            4
        ]),
        1
    );
    assert_eq!(total(&mut c, t + 20), 12);
    // In one MULTI: the module (count 1 at t+20), another writer's add (count 3 at t+21) and
    // trim of one entry, the module again: t+5, t+10, t+11, t+20, t+21.
    c.ok(&["MULTI"]);
    c.cmd(&args!["RL.STREAMCOUNT", "s", "1m", "ADD", 1, "AT", t + 20]);
    c.cmd(&args!["XADD", "s", format!("{}-0", t + 21), "count", 3]);
    c.cmd(&["XTRIM", "s", "MAXLEN", "5"]);
    c.cmd(&args!["RL.STREAMCOUNT", "s", "1m", "ADD", 0, "AT", t + 21]);
    let Reply::Array(r) = c.ok(&["EXEC"]) else {
        panic!("EXEC")
    };
    assert_eq!(r[0], Reply::Int(1 + 5 + 2 + 4 + 1), "{r:?}");
    assert_eq!(r[2], Reply::Int(1), "{r:?}");
    assert_eq!(r[3], Reply::Int(5 + 2 + 4 + 1 + 3), "{r:?}");
    // A script: the module (count 1 at t+30), another writer's add (count 6 at t+31) and trim
    // of one entry, the module: t+10, t+11, t+20, t+21, t+30, t+31.
    let script = "redis.call('RL.STREAMCOUNT', KEYS[1], '1m', 'ADD', 1, 'AT', ARGV[1]) \
                  redis.call('XADD', KEYS[1], ARGV[2], 'count', 6) \
                  redis.call('XTRIM', KEYS[1], 'MAXLEN', 6) \
                  return redis.call('RL.STREAMCOUNT', KEYS[1], '1m', 'ADD', 0, 'AT', ARGV[1])";
    assert_eq!(
        c.int(&args![
            "EVAL",
            script,
            1,
            "s",
            t + 30,
            format!("{}-0", t + 31)
        ]),
        2 + 4 + 1 + 3 + 1 + 6
    );
    assert_eq!(c.int(&["XLEN", "s"]), 6);
}

/// Every way a key can come to hold another stream with the same length and IDs (so the
/// stream's own figures match the old ones) but other counts: the total follows the new counts.
#[test]
fn streamcount_sees_a_replaced_stream_with_the_same_ids() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // `fill(key, n)`: entries t-0, t+1-0, t+2-0, each of count n.
    let fill = |c: &mut Conn, key: &str, n: u64| {
        for i in 0..3 {
            c.ok(&args!["XADD", key, format!("{}-0", t + i), "count", n]);
        }
    };
    let total = |c: &mut Conn, key: &str| {
        c.int(&args!["RL.STREAMCOUNT", key, "1m", "ADD", 0, "AT", t + 10])
    };
    type Replace = fn(&mut Conn, &dyn Fn(&mut Conn, &str, u64));
    let cases: &[(&str, Replace)] = &[
        ("DEL", |c, fill| {
            c.int(&["DEL", "s"]);
            fill(c, "s", 5);
        }),
        ("UNLINK", |c, fill| {
            c.int(&["UNLINK", "s"]);
            fill(c, "s", 5);
        }),
        ("RENAME", |c, fill| {
            fill(c, "other", 5);
            c.ok(&["RENAME", "other", "s"]);
        }),
        ("COPY REPLACE", |c, fill| {
            fill(c, "other", 5);
            c.int(&["COPY", "other", "s", "REPLACE"]);
        }),
        ("RESTORE REPLACE", |c, fill| {
            fill(c, "other", 5);
            let Reply::Bulk(dump) = c.ok(&["DUMP", "other"]) else {
                panic!("DUMP")
            };
            c.ok(&[
                b"RESTORE".to_vec(),
                b"s".to_vec(),
                b"0".to_vec(),
                dump,
                b"REPLACE".to_vec(),
            ]);
        }),
        ("MOVE", |c, fill| {
            c.int(&["DEL", "s"]);
            c.ok(&["SELECT", "1"]);
            fill(c, "s", 5);
            c.int(&["MOVE", "s", "0"]);
            c.ok(&["SELECT", "0"]);
        }),
        ("SWAPDB", |c, fill| {
            c.ok(&["SELECT", "1"]);
            fill(c, "s", 5);
            c.ok(&["SWAPDB", "0", "1"]);
            c.ok(&["SELECT", "0"]);
        }),
        ("FLUSHALL", |c, fill| {
            c.ok(&["FLUSHALL"]);
            fill(c, "s", 5);
        }),
        ("XDEL XSETID XADD", |c, _| {
            // The last entry deleted, the last ID set back, an entry of the same ID re-added
            // (same length, same last ID). Servers after 7.0 refuse to set the last ID below a
            // deleted entry; there the entry is re-added just after the deleted one (same
            // length, the deletion only seen by its event).
            let last = format!("{}-0", base_ms() + 2);
            c.int(&args!["XDEL", "s", last]);
            let setid = c.cmd(&args!["XSETID", "s", format!("{}-0", base_ms() + 1)]);
            let id = if setid.is_error() {
                format!("{}-1", base_ms() + 2)
            } else {
                last
            };
            c.ok(&args!["XADD", "s", id, "count", 14]);
        }),
        ("expiry", |c, fill| {
            c.int(&["PEXPIRE", "s", "1"]);
            wait_until("s expired", Duration::from_secs(5), || {
                c.int(&["EXISTS", "s"]) == 0
            });
            fill(c, "s", 5);
        }),
    ];
    for (name, replace) in cases {
        c.ok(&["FLUSHALL"]);
        fill(&mut c, "s", 1);
        assert_eq!(total(&mut c, "s"), 3, "{name}: before");
        // Twice, so the total is known to the module (a call that finds no total rebuilds it).
        assert_eq!(total(&mut c, "s"), 3, "{name}: before");
        replace(&mut c, &fill);
        let want = if *name == "XDEL XSETID XADD" {
            1 + 1 + 14
        } else {
            15
        };
        assert_eq!(total(&mut c, "s"), want, "{name}: after");
        // And counting on from there: one more entry of 2.
        assert_eq!(
            c.int(&args!["RL.STREAMCOUNT", "s", "1m", "ADD", 2, "AT", t + 20]),
            want + 2,
            "{name}: after an append"
        );
    }
}

/// Role changes: a former master that was a replica in between (and got another history of the
/// key by a full sync) counts the stream it holds now, not the one it knew.
#[test]
fn streamcount_after_role_changes_counts_the_stream_held_now() {
    let a = Server::start();
    let b = Server::replica_of(&a);
    let t = base_ms();
    let mut ca = a.conn();
    let mut cb = b.conn();
    let call = |c: &mut Conn, add: u64, at: u64| {
        c.int(&args![
            "RL.STREAMCOUNT",
            "s",
            "1m",
            "ADD",
            add,
            "AT",
            t + at
        ])
    };
    assert_eq!(call(&mut ca, 1, 0), 1);
    assert_eq!(call(&mut ca, 1, 1), 2);
    wait_replica_synced(&a, &b);
    // B takes over; A becomes its replica. The same number of entries, other IDs and counts:
    // B's stream is rewritten to 2 entries of 7 at other times.
    cb.ok(&["REPLICAOF", "NO", "ONE"]);
    cb.int(&["DEL", "s"]);
    cb.ok(&args!["XADD", "s", format!("{}-0", t), "count", 7]);
    cb.ok(&args!["XADD", "s", format!("{}-0", t + 1), "count", 7]);
    let port = b.port.to_string();
    ca.ok(&["REPLICAOF", "127.0.0.1", port.as_str()]);
    wait_until("A linked to B", Duration::from_secs(10), || {
        ca.info_field("replication", "master_link_status")
            .as_deref()
            == Some("up")
    });
    wait_replica_synced(&b, &a);
    // A takes over again: 7 + 7, and on from there.
    ca.ok(&["REPLICAOF", "NO", "ONE"]);
    assert_eq!(call(&mut ca, 0, 2), 14);
    assert_eq!(call(&mut ca, 1, 3), 15);
}
