//! Limiter state survives every way Redis stores or moves a key: DEBUG RELOAD, RDB restart, AOF
//! (replayed commands, and rewrites with and without the RDB preamble), COPY, RENAME, MOVE and
//! DUMP/RESTORE. "Survives" means the same bytes (`DEBUG DIGEST-VALUE`) and the same absolute
//! expiry (`PEXPIRETIME`).

mod common;
use common::*;

use std::time::Duration;

/// Fill one key per algorithm with a few granted calls, DEDUP ids and a parameter change.
fn fill(c: &mut Conn) -> Vec<String> {
    let t = base_ms();
    let mut keys = Vec::new();
    for (i, cmd) in ["RL.GCRA", "RL.TOKENBUCKET", "RL.LEAKYBUCKET"]
        .iter()
        .enumerate()
    {
        let key = format!("{}:{i}", cmd.to_lowercase());
        for step in 0..5u64 {
            c.ints(&args![
                cmd,
                &key,
                10,
                3,
                "1s",
                "COST",
                2,
                "DEDUP",
                step,
                "AT",
                t + step * 137
            ]);
        }
        c.ints(&args![cmd, &key, 20, 7, "2s", "AT", t + 1000]);
        keys.push(key);
    }
    c.ints(&["CL.THROTTLE", "cell", "5", "10", "60", "3"]);
    keys.push("cell".into());
    keys
}

/// `(digest, expire time)` of every key.
fn snapshot(c: &mut Conn, keys: &[String]) -> Vec<(Reply, i64)> {
    keys.iter()
        .map(|k| {
            let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", k.as_str()]);
            let expiry = c.int(&["PEXPIRETIME", k.as_str()]);
            assert!(expiry > 0, "{k} has no expiry");
            (digest, expiry)
        })
        .collect()
}

#[test]
fn state_survives_debug_reload() {
    let s = Server::start();
    let mut c = s.conn();
    let keys = fill(&mut c);
    let before = snapshot(&mut c, &keys);
    c.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(snapshot(&mut c, &keys), before);
    // And it still decides: the GCRA key used 10 units at 3 per second (7 still pending at
    // +1 s, kept as 7 units when the rate changed to 7 per 2 s), then 1 more: 12 of 20 left.
    let t = base_ms();
    assert_eq!(
        c.ints(&args![
            "RL.GCRA",
            &keys[0],
            20,
            7,
            "2s",
            "COST",
            0,
            "AT",
            t + 1000
        ])[2],
        12
    );
}

#[test]
fn state_survives_restart_from_rdb() {
    let mut s = Server::start_with(&["--save", "3600 1"]);
    let mut c = s.conn();
    let keys = fill(&mut c);
    let before = snapshot(&mut c, &keys);
    c.ok(&["SAVE"]);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, &keys), before);
}

#[test]
fn state_survives_aof_replay_of_commands() {
    // No rewrite: the AOF holds the commands as propagated (with their resolved AT), and a
    // restart replays them into the same state, even though the clock has moved.
    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let keys = fill(&mut c);
    let before = snapshot(&mut c, &keys);
    drop(c);
    std::thread::sleep(Duration::from_millis(20));
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, &keys), before);
}

fn aof_rewrite_round_trip(preamble: &str) {
    let s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
    let mut c = s.conn();
    let keys = fill(&mut c);
    let before = snapshot(&mut c, &keys);
    wait_rewrite_done(&mut c);
    c.ok(&["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c, &keys), before);
    // Traffic after the rewrite lands in the incremental file and replays too.
    let t = base_ms();
    c.ints(&args!["RL.GCRA", &keys[0], 20, 7, "2s", "AT", t + 2000]);
    let after = snapshot(&mut c, &keys);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c, &keys), after);
}

#[test]
fn state_survives_aof_rewrite_without_rdb_preamble() {
    aof_rewrite_round_trip("no");
}

#[test]
fn state_survives_aof_rewrite_with_rdb_preamble() {
    aof_rewrite_round_trip("yes");
}

#[test]
fn state_moves_with_copy_rename_move_and_dump() {
    let s = Server::start();
    let mut c = s.conn();
    let keys = fill(&mut c);
    let before = snapshot(&mut c, &keys);
    let (digest, expiry) = before[0].clone();
    let k = keys[0].as_str();

    assert_eq!(c.int(&["COPY", k, "copied"]), 1);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "copied"]), digest);
    assert_eq!(c.int(&["PEXPIRETIME", "copied"]), expiry);

    c.ok(&["RENAME", "copied", "renamed"]);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "renamed"]), digest);
    assert_eq!(c.int(&["PEXPIRETIME", "renamed"]), expiry);

    assert_eq!(c.int(&["MOVE", "renamed", "1"]), 1);
    c.ok(&["SELECT", "1"]);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "renamed"]), digest);
    c.ok(&["SELECT", "0"]);

    let dump = c.ok(&["DUMP", k]);
    let payload = dump.as_bytes().unwrap().to_vec();
    // The digest counts whether a key has an expiry, so restore it with one.
    c.ok(&args!["RESTORE", "restored", expiry, payload, "ABSTTL"]);
    assert_eq!(c.int(&["PEXPIRETIME", "restored"]), expiry);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "restored"]), digest);
    // The copy is independent of the original.
    let t = base_ms();
    c.ints(&args!["RL.GCRA", k, 20, 7, "2s", "COST", 5, "AT", t + 1000]);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "restored"]), digest);
    assert_ne!(c.cmd(&["DEBUG", "DIGEST-VALUE", k]), digest);
}

/// `cmd key payload` refuses payloads that do not decode, whatever they are.
fn refuses_bad_payloads(c: &mut Conn, cmd: &str, k: &str) {
    for bad in [
        &b""[..],
        b"\x01",
        b"\x01\x01",
        b"\x09\x01\x00",
        &[0xff; 300],
    ] {
        assert_eq!(
            c.err(&args![cmd, k, bad.to_vec()]),
            "ERR invalid rate limiter payload"
        );
    }
}

/// LEB128, as the module's payloads write integers.
fn varint(mut v: u128, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A payload written by hand after the codec's layout: `version`, `kind`, then `fields` as
/// varints (the last update, the algorithm's fields, ..., the number of `DEDUP` ids).
fn payload(version: u8, kind: u8, fields: &[u128]) -> Vec<u8> {
    let mut p = vec![version, kind];
    for &f in fields {
        varint(f, &mut p);
    }
    p
}

/// Payloads that decode but hold a value the module could not have written (times and counts
/// outside what its arithmetic assumes) are refused by RL._SET and RL._RESTORE, changing
/// nothing; one at the edge is accepted and RL.INFO works on it.
#[test]
fn restore_and_set_refuse_values_the_module_could_not_have_written() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let t_us = u128::from(t) * 1000;
    let span = u128::from(i64::MAX as u64);
    let hour = 3_600_000_000u128;
    // An exhausted GCRA limiter (burst 3, one unit an hour).
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 3, 1, "1h", "COST", 3, "AT", t]),
        [3, 3, 0, 0, 10_800_000]
    );
    let before = c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]);
    let expiry = c.int(&["PEXPIRETIME", "k"]);
    // GCRA (version 1, kind 1): last update, burst, rate, period (µs), TAT (ticks of 1/rate
    // µs, here µs), no DEDUP id.
    let gcra = |last: u128, tat: u128| payload(1, 1, &[last, 3, 1, hour, tat, 0]);
    let bad = [
        // The TAT 2^63 µs after the last update: RL.INFO's reset_after would not fit.
        ("TAT", gcra(t_us, t_us + span + 1)),
        // A last update after 9999-12-31, the latest AT.
        ("last update", gcra(253_402_300_800_000_000, 0)),
        // RL.FIXED (kind 4): limit 5, window 1 s, offset 0, window end, count 2^63.
        (
            "count",
            payload(
                1,
                4,
                &[t_us, 5, 1_000_000, 0, t_us + 1_000_000, span + 1, 0],
            ),
        ),
        // Version 2 with a block ending 2^63 µs after the last update.
        (
            "block",
            payload(2, 1, &[t_us, 3, 1, hour, 0, t_us + span + 1, 0]),
        ),
    ];
    for (what, p) in &bad {
        for cmd in ["RL._SET", "RL._RESTORE"] {
            for key in ["k", "missing"] {
                assert_eq!(
                    c.err(&args![cmd, key, p.clone()]),
                    "ERR invalid rate limiter payload",
                    "{cmd} {key}: {what}"
                );
            }
        }
    }
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]), before);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), expiry);
    assert_eq!(c.int(&["EXISTS", "missing"]), 0);
    // At the edge (the TAT 2^63 - 1 µs ahead): accepted, and RL.INFO works on it.
    c.ok(&args!["RL._SET", "edge", gcra(t_us, t_us + span)]);
    let info = c.cmd(&["RL.INFO", "edge"]);
    assert!(info.as_array().is_some(), "{info:?}");
    // The limiter is then exhausted: one unit fits once the TAT is within the burst of now
    // (2^63 - 1 µs less 2 h), and it is fresh 2^63 - 1 µs from now (both in ms, rounded up).
    let ms = |us: u128| us.div_ceil(1000) as i64;
    assert_eq!(
        c.ints(&args!["RL.GCRA", "edge", 3, 1, "1h", "AT", t]),
        [0, 3, 0, ms(span - 2 * hour), ms(span)]
    );
}

#[test]
fn restore_command_rejects_bad_payloads_without_touching_the_key() {
    let s = Server::start();
    let mut c = s.conn();
    let keys = fill(&mut c);
    let k = keys[0].as_str();
    let before = c.cmd(&["DEBUG", "DIGEST-VALUE", k]);
    refuses_bad_payloads(&mut c, "RL._RESTORE", k);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", k]), before);
    c.ok(&["SET", "str", "x"]);
    assert_eq!(c.int(&["EXISTS", "nothing"]), 0);
}

#[test]
fn small_limiters_propagate_their_new_state_in_a_few_bytes() {
    // A granted call of a limiter whose value encodes in a few bytes propagates that value
    // (`RL._SET key payload`, expiring as the value says), not the command; the AOF replays
    // into exactly the same values and expiries, and costs O(1) bytes per call.
    let s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let t = base_ms();
    let aof = aof_file(&s.dir, ".incr.aof");
    let size = || std::fs::metadata(&aof).unwrap().len();
    let calls: [&[&str]; 6] = [
        &["RL.GCRA", "10000000", "1", "1m"],
        &["RL.TOKENBUCKET", "10000000", "1", "1m"],
        &["RL.LEAKYBUCKET", "10000000", "1", "1m"],
        &["RL.FIXED", "10000000", "1m"],
        &["RL.SLIDINGCOUNTER", "10000000", "1m"],
        &["CL.THROTTLE", "9999999", "1", "60"],
    ];
    let mut keys = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        let key = format!("small:{i}");
        let before = size();
        let n = 50u64;
        for step in 0..n {
            let mut argv: Vec<String> = vec![call[0].to_string(), key.clone()];
            argv.extend(call[1..].iter().map(|a| a.to_string()));
            argv.extend(["AT".to_string(), format!("{}.{:03}", t + step * 7, step)]);
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            c.ints(&argv);
        }
        let per_call = (size() - before) as f64 / n as f64;
        eprintln!("{}: {per_call:.1} AOF bytes per granted call", call[0]);
        assert!(
            per_call < 100.0,
            "{}: {per_call} AOF bytes per call",
            call[0]
        );
        keys.push(key);
    }
    let text = String::from_utf8_lossy(&std::fs::read(&aof).unwrap()).into_owned();
    assert_eq!(text.matches("rl._set").count(), 50 * calls.len());
    let before = snapshot(&mut c, &keys);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c, &keys), before);
    // A call with DEDUP ids keeps them in the value: it propagates as its command with AT.
    c.ints(&args![
        "RL.GCRA",
        "small:0",
        10000000,
        1,
        "1m",
        "DEDUP",
        "a",
        "AT",
        t + 999
    ]);
    let text = String::from_utf8_lossy(&std::fs::read(&aof).unwrap()).into_owned();
    assert!(text.contains("rl.gcra"));
    assert!(text.contains(&format!("{}.000", t + 999)));
    let before = snapshot(&mut c, &keys);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c, &keys), before);
}

#[test]
fn set_command_rejects_bad_calls_without_touching_the_key() {
    let s = Server::start();
    let mut c = s.conn();
    let keys = fill(&mut c);
    let k = keys[0].as_str();
    let before = c.cmd(&["DEBUG", "DIGEST-VALUE", k]);
    refuses_bad_payloads(&mut c, "RL._SET", k);
    for argv in [&["RL._SET", k][..], &["RL._SET", k, "x", "y"]] {
        let e = c.err(argv);
        assert!(e.starts_with("ERR wrong number of arguments"), "{e}");
    }
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", k]), before);
    // A string key is not ours to overwrite.
    c.ok(&["SET", "str", "x"]);
    // A real payload: the one RL._SET of another server's AOF, after one granted call.
    let fresh = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut f = fresh.conn();
    let t = base_ms();
    f.ints(&args!["RL.GCRA", "g", 10, 1, "1m", "AT", t]);
    let aof = std::fs::read(aof_file(&fresh.dir, ".incr.aof")).unwrap();
    // `$7\r\nrl._set\r\n$<n>\r\n<key>\r\n$<n>\r\n<payload>\r\n`
    let mut rest = &aof[aof
        .windows(9)
        .position(|w| w == b"rl._set\r\n")
        .expect("RL._SET")
        + 9..];
    let mut bulk = || {
        let nl = rest.iter().position(|&b| b == b'\n').unwrap();
        let len: usize = std::str::from_utf8(&rest[1..nl - 1])
            .unwrap()
            .parse()
            .unwrap();
        let value = rest[nl + 1..nl + 1 + len].to_vec();
        rest = &rest[nl + 1 + len + 2..];
        value
    };
    assert_eq!(bulk(), b"g");
    let payload = bulk();
    assert!(
        c.err(&args!["RL._SET", "str", payload.clone()])
            .starts_with("WRONGTYPE"),
    );
    assert_eq!(c.cmd(&["GET", "str"]), Reply::Bulk(b"x".to_vec()));
    // And the payload sets a limiter with the expiry it implies: the master's.
    c.ok(&args!["RL._SET", "copy", payload]);
    assert_eq!(
        c.int(&["PEXPIRETIME", "copy"]),
        f.int(&["PEXPIRETIME", "g"])
    );
    assert_eq!(
        c.cmd(&["DEBUG", "DIGEST-VALUE", "copy"]),
        f.cmd(&["DEBUG", "DIGEST-VALUE", "g"])
    );
}
