//! The fuzzer's dataset-wide checks: a replica holds exactly the master's dataset after every
//! batch, and every key survives an AOF rewrite (no RDB preamble) + `DEBUG LOADAOF` and a
//! `DEBUG RELOAD` with the same `DUMP` (the same `DEBUG DIGEST-VALUE` for the non-module keys,
//! whose encoding a reload may change) and `PEXPIRETIME`.
//!
//! The master runs with active expiry off (`DEBUG SET-ACTIVE-EXPIRE 0`), so a key is only ever
//! deleted by a command: each check reads the master inside a MULTI (time frozen) after a full
//! SCAN that expires what is due, and nothing changes between that and the replica's answer.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::args;
use crate::common::*;

/// A key's `TYPE`, `DUMP` (or `DEBUG DIGEST-VALUE` for a stream), `PEXPIRETIME`.
type KeyState = (Reply, Reply, i64);

/// Every key of the master at one instant, and that instant (Unix ms).
pub struct Snapshot {
    pub time_ms: u64,
    pub keys: BTreeMap<Vec<u8>, KeyState>,
}

/// Read every key at one instant: `KEYS *`, then in one MULTI a full SCAN (expires what is due
/// at the transaction's time), `TIME`, and each key's type, value and expiry. A key gone by then
/// (expired) is left out.
pub fn snapshot(c: &mut Conn) -> Snapshot {
    let names: Vec<Vec<u8>> = match c.ok(&["KEYS", "*"]) {
        Reply::Array(items) => items
            .into_iter()
            .map(|k| match k {
                Reply::Bulk(b) => b,
                other => panic!("KEYS item {other:?}"),
            })
            .collect(),
        other => panic!("KEYS replied {other:?}"),
    };
    c.send(&["MULTI"]);
    c.send(&args!["SCAN", 0, "COUNT", 100000]);
    c.send(&["TIME"]);
    for k in &names {
        c.send(&args!["TYPE", k]);
        c.send(&args!["DUMP", k]);
        c.send(&args!["DEBUG", "DIGEST-VALUE", k]);
        c.send(&args!["PEXPIRETIME", k]);
    }
    c.send(&["EXEC"]);
    for _ in 0..3 + 4 * names.len() {
        let queued = c.recv();
        assert!(!queued.is_error(), "snapshot MULTI: {queued:?}");
    }
    let Reply::Array(parts) = c.recv() else {
        panic!("snapshot EXEC failed")
    };
    let time_ms = match &parts[1] {
        Reply::Array(t) => {
            let s: u64 = t[0].as_str().unwrap().parse().unwrap();
            let us: u64 = t[1].as_str().unwrap().parse().unwrap();
            s * 1000 + us / 1000
        }
        other => panic!("TIME replied {other:?}"),
    };
    let mut keys = BTreeMap::new();
    for (k, r) in names.into_iter().zip(parts[2..].chunks(4)) {
        let Reply::Int(expiry) = r[3] else {
            panic!("PEXPIRETIME replied {:?}", r[3]);
        };
        if expiry == -2 {
            continue;
        }
        let value = if r[0] == Reply::Simple("stream".into()) {
            r[2].clone()
        } else {
            r[1].clone()
        };
        keys.insert(k, (r[0].clone(), value, expiry));
    }
    Snapshot { time_ms, keys }
}

/// What differs from `before` in `after` (taken later), on a dataset nothing but the round
/// trip `what` touched: every key must still be there with its value and expiry, except one
/// whose expiry had passed by `after`'s time (a load drops those); no key may appear.
pub fn compare(before: &Snapshot, after: &Snapshot, what: &str) -> Result<(), String> {
    let mut problems = Vec::new();
    for (k, (ty, value, expiry)) in &before.keys {
        match after.keys.get(k) {
            None if *expiry >= 0 && *expiry as u64 <= after.time_ms => {}
            None => problems.push(format!(
                "key {} ({ty:?}, expiring at {expiry}, now {}) vanished",
                show_key(k),
                after.time_ms
            )),
            Some(a) if a != &(ty.clone(), value.clone(), *expiry) => problems.push(format!(
                "key {} changed: {:?} -> {a:?}",
                show_key(k),
                (ty, value, expiry)
            )),
            Some(_) => {}
        }
    }
    for k in after.keys.keys().filter(|k| !before.keys.contains_key(*k)) {
        problems.push(format!("key {} appeared", show_key(k)));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{what} ({} keys before) lost or changed keys:\n  {}",
            before.keys.len(),
            problems.join("\n  ")
        ))
    }
}

fn show_key(k: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(k))
}

/// The master's digest, read in a MULTI after a full SCAN (so what is due is expired, and the
/// deletions propagated, before it is taken); then the replica's, once it has acknowledged
/// everything. `Err` names the keys whose value or expiry differ.
pub fn replica_matches(m: &mut Conn, r: &mut Conn) -> Result<(), String> {
    m.send(&["MULTI"]);
    m.send(&args!["SCAN", 0, "COUNT", 100000]);
    m.send(&["DEBUG", "DIGEST"]);
    m.send(&["EXEC"]);
    for _ in 0..3 {
        let queued = m.recv();
        assert!(!queued.is_error(), "digest MULTI: {queued:?}");
    }
    let Reply::Array(parts) = m.recv() else {
        panic!("digest EXEC failed")
    };
    // Not WAIT: it waits for this connection's own writes only (on Redis 7.2 and later), and
    // the fuzzed calls came on another one. The replica has applied everything once its offset
    // reaches the master's, read after the digest.
    let offset = |c: &mut Conn, field: &str| -> u64 {
        c.info_field("replication", field)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let target = offset(m, "master_repl_offset");
    wait_until(
        &format!("the replica to reach offset {target}"),
        Duration::from_secs(10),
        || offset(r, "master_repl_offset") >= target,
    );
    let master = parts[1].clone();
    let replica = r.cmd(&["DEBUG", "DIGEST"]);
    // The named policies too (outside the keyspace, so not in the digest), versions included.
    let (pm, pr) = (m.cmd(&["RL.POLICY", "DUMP"]), r.cmd(&["RL.POLICY", "DUMP"]));
    if pm != pr {
        return Err(format!("the replica's policies differ: {pm:?} vs {pr:?}"));
    }
    if master == replica {
        return Ok(());
    }
    // Name the keys (both read now: nothing has changed since on either side).
    let mut names: Vec<Vec<u8>> = Vec::new();
    for c in [&mut *m, &mut *r] {
        if let Reply::Array(items) = c.cmd(&args!["SCAN", 0, "COUNT", 100000])
            && let Some(Reply::Array(ks)) = items.get(1)
        {
            names.extend(ks.iter().filter_map(|k| match k {
                Reply::Bulk(b) => Some(b.clone()),
                _ => None,
            }));
        }
    }
    names.sort();
    names.dedup();
    let mut differ = Vec::new();
    for k in &names {
        let read = |c: &mut Conn| {
            (
                c.cmd(&args!["DEBUG", "DIGEST-VALUE", k]),
                c.cmd(&args!["PEXPIRETIME", k]),
            )
        };
        let (a, b) = (read(m), read(r));
        if a != b {
            differ.push(format!("key {}: master {a:?}, replica {b:?}", show_key(k)));
        }
    }
    Err(format!(
        "replica digest {replica:?} != master digest {master:?}:\n  {}",
        differ.join("\n  ")
    ))
}

/// The sequence number of the base file the server's AOF manifest names (0 if none).
fn manifest_base_seq(dir: &Path) -> u64 {
    let aof_dir = dir.join("appendonlydir");
    let Ok(entries) = std::fs::read_dir(&aof_dir) else {
        return 0;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().ends_with(".manifest") {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            // `file appendonly.aof.2.base.aof seq 2 type b`
            for line in text.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                if words.ends_with(&["type", "b"])
                    && let Some(i) = words.iter().position(|w| *w == "seq")
                    && let Some(seq) = words.get(i + 1).and_then(|s| s.parse().ok())
                    && dir.join("appendonlydir").join(words[1]).exists()
                {
                    return seq;
                }
            }
        }
    }
    0
}

/// `BGREWRITEAOF`, and wait (20 s) until it has finished and taken effect: one more completed
/// rewrite (`aof_rewrites`), none running or scheduled, the last one ok, and the manifest
/// naming a newer base file that exists.
pub fn rewrite_aof(c: &mut Conn, dir: &Path) {
    let count = |c: &mut Conn| -> u64 {
        c.info_field("persistence", "aof_rewrites")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    wait_rewrite_done(c);
    let (rewrites, seq) = (count(c), manifest_base_seq(dir));
    c.ok(&["BGREWRITEAOF"]);
    wait_until("BGREWRITEAOF to finish", Duration::from_secs(20), || {
        count(c) > rewrites
            && c.info_field("persistence", "aof_rewrite_in_progress")
                .as_deref()
                == Some("0")
            && c.info_field("persistence", "aof_rewrite_scheduled")
                .as_deref()
                == Some("0")
            && manifest_base_seq(dir) > seq
    });
    let status = c.info_field("persistence", "aof_last_bgrewrite_status");
    assert_eq!(status.as_deref(), Some("ok"), "BGREWRITEAOF status");
}

/// The round trips on the master's dataset as it is: AOF on without the RDB preamble, an AOF
/// rewrite and `DEBUG LOADAOF`; AOF off again; `DEBUG RELOAD`. After each, every key must be as
/// before ([`compare`]). Returns the number of keys compared. The replica is not told of keys a load dropped as expired: run this
/// only when the next thing is a `FLUSHALL`.
pub fn round_trips(c: &mut Conn, dir: &Path) -> Result<usize, String> {
    let before = snapshot(c);
    // The named policies (outside the keyspace) round-trip too, versions included.
    let policies = c.cmd(&["RL.POLICY", "DUMP"]);
    let same_policies = |c: &mut Conn, how: &str| -> Result<(), String> {
        let now = c.cmd(&["RL.POLICY", "DUMP"]);
        if now == policies {
            Ok(())
        } else {
            Err(format!(
                "{how}: the policies changed: {policies:?} -> {now:?}"
            ))
        }
    };
    c.ok(&["CONFIG", "SET", "aof-use-rdb-preamble", "no"]);
    // Turning the AOF on rewrites it first; wait until it is on.
    c.ok(&["CONFIG", "SET", "appendonly", "yes"]);
    wait_until("appendonly yes", Duration::from_secs(20), || {
        c.info_field("persistence", "aof_enabled").as_deref() == Some("1")
    });
    rewrite_aof(c, dir);
    c.ok(&["DEBUG", "LOADAOF"]);
    let loaded = snapshot(c);
    same_policies(c, "AOF rewrite (aof-use-rdb-preamble no) + DEBUG LOADAOF")?;
    c.ok(&["CONFIG", "SET", "appendonly", "no"]);
    compare(
        &before,
        &loaded,
        "AOF rewrite (aof-use-rdb-preamble no) + DEBUG LOADAOF",
    )?;
    c.ok(&["DEBUG", "RELOAD"]);
    compare(&before, &snapshot(c), "DEBUG RELOAD")?;
    same_policies(c, "DEBUG RELOAD")?;
    Ok(before.keys.len())
}
