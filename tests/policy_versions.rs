//! Policy versions only grow (SPEC "RL.POLICY", **Versions**): the counter outlives the last
//! policy (RDB aux data, DEBUG RELOAD, an AOF rewrite with and without preamble and a restart,
//! a replica's full sync and its promotion), a RESTORE cannot wedge SET (a payload above 2^52
//! is refused, naming why, and changes nothing, on the master and its replica), no reply caps a
//! version, and a MERGE gives each policy it adds or changes the next version. Each test is a
//! reproducer of a way the contract broke; an unknown subcommand is the server's to answer.

mod common;
use common::*;
use common::{policy_list as list, policy_set as set};

/// A policy payload written from SPEC's wire form (not by the module): `RLP`, format 1, the
/// counter, the number of policies, then per policy its name, version and arguments, every
/// number an unsigned LEB128 varint and every string length-prefixed.
fn payload(counter: u64, policies: &[(&str, u64, &[&str])]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn string(out: &mut Vec<u8>, s: &[u8]) {
        varint(out, s.len() as u64);
        out.extend_from_slice(s);
    }
    let mut out = b"RLP\x01".to_vec();
    varint(&mut out, counter);
    varint(&mut out, policies.len() as u64);
    for (name, version, args) in policies {
        string(&mut out, name.as_bytes());
        varint(&mut out, *version);
        varint(&mut out, args.len() as u64);
        for a in *args {
            string(&mut out, a.as_bytes());
        }
    }
    out
}

const GCRA: &[&str] = &["GCRA", "1", "1", "1s"];

/// `RL.POLICY DUMP`, the bytes.
fn dump(c: &mut Conn) -> Vec<u8> {
    let r = c.cmd(&["RL.POLICY", "DUMP"]);
    r.as_bytes()
        .unwrap_or_else(|| panic!("DUMP: {r:?}"))
        .to_vec()
}

/// SET a, DEL a: no policy left, the counter at 1.
fn set_and_delete(c: &mut Conn) {
    assert_eq!(set(c, &["a", "GCRA", "1", "1", "1s"]), 1);
    assert_eq!(c.int(&["RL.POLICY", "DEL", "a"]), 1);
    assert_eq!(dump(c), b"RLP\x01\x01\x00");
}

/// Issue reproducer 1: `SET a`, `DEL a`, `DEBUG RELOAD`, `SET b` gave 1 again (on servers with
/// `aux_save2` nothing was saved for an empty store); a restart from the RDB likewise.
#[test]
fn a_version_is_not_reused_after_the_last_policy_is_deleted_and_the_rdb_reloaded() {
    let mut s = Server::start_with(&["--save", "3600 1"]);
    let mut c = s.conn();
    set_and_delete(&mut c);
    c.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(dump(&mut c), b"RLP\x01\x01\x00");
    assert_eq!(set(&mut c, &["b", "GCRA", "1", "1", "1s"]), 2);
    assert_eq!(c.int(&["RL.POLICY", "DEL", "b"]), 1);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(set(&mut c, &["c", "GCRA", "1", "1", "1s"]), 3);
}

/// Reproducer 1 through the AOF: `SET a`, `DEL a`, BGREWRITEAOF (the rewritten AOF no longer has
/// the SET), a restart from the AOF alone, then `SET b` must be 2. Without a preamble the
/// counter reaches the new incremental file (a base file holds keys only); with one, the
/// preamble's aux data holds it.
fn aof_rewrite_keeps_the_counter(preamble: &str) {
    let mut s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
    let mut c = s.conn();
    set_and_delete(&mut c);
    c.cmd(&["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    drop(c);
    s.kill_nosave();
    assert!(!s.dir.join("dump.rdb").exists());
    let again = Server::start_in(
        &s.dir,
        &["--appendonly", "yes", "--aof-use-rdb-preamble", preamble],
    );
    let mut c = again.conn();
    assert_eq!(dump(&mut c), b"RLP\x01\x01\x00", "preamble {preamble}");
    assert_eq!(set(&mut c, &["b", "GCRA", "1", "1", "1s"]), 2);
}

#[test]
fn an_aof_rewrite_without_preamble_keeps_the_counter_of_an_empty_store() {
    aof_rewrite_keeps_the_counter("no");
}

#[test]
fn an_aof_rewrite_with_preamble_keeps_the_counter_of_an_empty_store() {
    aof_rewrite_keeps_the_counter("yes");
}

/// An AOF turned on at runtime (its first file written by a rewrite) after the last policy was
/// deleted: a server started on that AOF alone keeps the counter.
#[test]
fn an_aof_turned_on_at_runtime_keeps_the_counter_of_an_empty_store() {
    let mut s = Server::start_with(&["--aof-use-rdb-preamble", "no"]);
    let mut c = s.conn();
    set_and_delete(&mut c);
    c.ok(&["CONFIG", "SET", "appendonly", "yes"]);
    wait_rewrite_done(&mut c);
    drop(c);
    s.kill_nosave();
    let again = Server::start_in(
        &s.dir,
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"],
    );
    let mut c = again.conn();
    assert_eq!(set(&mut c, &["b", "GCRA", "1", "1", "1s"]), 2);
}

/// Reproducer 1 on a replica: attached after `SET a`, `DEL a`, it got `RLP\x01\x00\x00` where
/// its master had `RLP\x01\x01\x00`, and once promoted (a failover) gave version 1 again.
#[test]
fn a_replica_attached_after_the_last_delete_keeps_the_counter_through_a_failover() {
    let master = Server::start();
    let mut m = master.conn();
    set_and_delete(&mut m);
    let replica = Server::replica_of(&master);
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(dump(&mut r), dump(&mut m));
    // A later SET and DEL reach it as commands: still equal.
    assert_eq!(set(&mut m, &["b", "GCRA", "1", "1", "1s"]), 2);
    assert_eq!(m.int(&["RL.POLICY", "DEL", "b"]), 1);
    wait_replica_synced(&master, &replica);
    assert_eq!(dump(&mut r), b"RLP\x01\x02\x00");
    // Failover: the replica promoted, the old master made its replica.
    r.ok(&["REPLICAOF", "NO", "ONE"]);
    assert_eq!(set(&mut r, &["c", "GCRA", "1", "1", "1s"]), 3);
    m.ok(&["REPLICAOF", "127.0.0.1", &replica.port.to_string()]);
    wait_until(
        "the old master's link to the new one",
        std::time::Duration::from_secs(10),
        || m.info_field("replication", "master_link_status").as_deref() == Some("up"),
    );
    wait_replica_synced(&replica, &master);
    assert_eq!(dump(&mut m), dump(&mut r));
    assert_eq!(list(&mut m), [("c".to_string(), 3)]);
}

/// Reproducer 2 (and 3): a RESTORE of a payload whose counter and version are 2^64 − 1 was
/// accepted, after which every SET failed (also after DEBUG RELOAD and on the replica), and
/// LIST replied 2^63 − 1 for it. It is refused, naming why, and changes nothing anywhere.
#[test]
fn a_restore_above_the_version_bound_is_refused_and_changes_nothing() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    assert_eq!(set(&mut m, &["a", "GCRA", "1", "1", "1s"]), 1);
    let issue = b"RLP\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x01\x01a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x04\x04GCRA\x011\x011\x021s";
    assert_eq!(
        issue.as_slice(),
        payload(u64::MAX, &[("a", u64::MAX, GCRA)])
    );
    let before = dump(&mut m);
    let reason = "ERR invalid policy payload: its version counter is above 4503599627370496 (2^52)";
    // Versions 2^63 and 2^64 - 1 (LIST would have shown both as 2^63 - 1), 2^52 + 1, and a
    // counter alone above the bound.
    let too_large = [
        issue.to_vec(),
        payload(u64::MAX, &[("x", 1 << 63, GCRA), ("y", u64::MAX, GCRA)]),
        payload((1 << 52) + 1, &[("x", (1 << 52) + 1, GCRA)]),
        payload((1 << 52) + 1, &[]),
    ];
    for p in &too_large {
        for merge in [false, true] {
            let mut call = args!["RL.POLICY", "RESTORE", p.clone()].to_vec();
            if merge {
                call.push(b"MERGE".to_vec());
            }
            assert_eq!(m.err(&call), reason, "merge {merge}");
            assert!(reason.bytes().all(|b| (0x20..0x7f).contains(&b)));
        }
    }
    assert_eq!(dump(&mut m), before);
    assert_eq!(set(&mut m, &["b", "GCRA", "1", "1", "1s"]), 2);
    m.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(set(&mut m, &["c", "GCRA", "1", "1", "1s"]), 3);
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(dump(&mut r), dump(&mut m));
    assert_eq!(
        list(&mut r),
        [
            ("a".to_string(), 1),
            ("b".to_string(), 2),
            ("c".to_string(), 3)
        ]
    );
}

/// Reproducer 3: the largest versions a payload may hold are replied exactly (two versions are
/// never the same number), and SET goes on from them, on the master and the replica, also
/// after a DEBUG RELOAD.
#[test]
fn the_largest_versions_are_replied_exactly_and_set_goes_on_from_them() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let top: i64 = 1 << 52;
    m.ok(&args![
        "RL.POLICY",
        "RESTORE",
        payload(1 << 52, &[("x", (1 << 52) - 1, GCRA), ("y", 1 << 52, GCRA)])
    ]);
    assert_eq!(
        list(&mut m),
        [("x".to_string(), top - 1), ("y".to_string(), top)]
    );
    assert_eq!(set(&mut m, &["z", "GCRA", "1", "1", "1s"]), top + 1);
    m.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(set(&mut m, &["x", "GCRA", "2", "1", "1s"]), top + 2);
    let want = [
        ("x".to_string(), top + 2),
        ("y".to_string(), top),
        ("z".to_string(), top + 1),
    ];
    assert_eq!(list(&mut m), want);
    m.ok(&["HELLO", "3"]);
    let map = m.cmd(&["RL.POLICY", "LIST"]);
    assert!(
        format!("{map:?}").contains(&(top + 2).to_string()),
        "{map:?}"
    );
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(list(&mut r), want);
}

/// Reproducer 4: SET a, SET b, SET a (versions 1, 2, 3); a MERGE of a changed `a` carried at
/// version 1 left a at 1 (its version went down), and a MERGE adding `c` at version 2 left b and
/// c both at 2. Each policy a MERGE adds or changes takes the next version; one equal to the
/// stored policy keeps its own. The replica and an AOF replay end the same.
#[test]
fn a_merge_gives_each_policy_it_adds_or_changes_the_next_version() {
    let master = Server::start_with(&["--appendonly", "yes"]);
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    assert_eq!(set(&mut m, &["a", "GCRA", "1", "1", "1s"]), 1);
    assert_eq!(set(&mut m, &["b", "GCRA", "2", "1", "1s"]), 2);
    assert_eq!(set(&mut m, &["a", "GCRA", "3", "1", "1s"]), 3);
    let changed_a = payload(1, &[("a", 1, &["GCRA", "9", "1", "1s"])]);
    m.ok(&args!["RL.POLICY", "RESTORE", changed_a, "MERGE"]);
    assert_eq!(list(&mut m), [("a".to_string(), 4), ("b".to_string(), 2)]);
    let new_c = payload(2, &[("c", 2, &["GCRA", "2", "1", "1s"])]);
    m.ok(&args!["RL.POLICY", "RESTORE", new_c, "MERGE"]);
    // b carried unchanged at version 1: kept at 2.
    let same_b = payload(1, &[("b", 1, &["GCRA", "2", "1", "1s"])]);
    m.ok(&args!["RL.POLICY", "RESTORE", same_b, "MERGE"]);
    let want = [
        ("a".to_string(), 4),
        ("b".to_string(), 2),
        ("c".to_string(), 5),
    ];
    assert_eq!(list(&mut m), want);
    assert_eq!(
        m.cmd(&["RL.POLICY", "GET", "a"]),
        Reply::Array(["GCRA", "9", "1", "1s"].map(bulk).to_vec())
    );
    assert_eq!(set(&mut m, &["d", "GCRA", "1", "1", "1s"]), 6);
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    let on_master = dump(&mut m);
    assert_eq!(dump(&mut r), on_master);
    m.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(dump(&mut m), on_master);
    // A full RESTORE keeps the payload's versions (the shards of a cluster agree) and the larger
    // counter.
    let full = payload(3, &[("p", 3, GCRA), ("q", 1, GCRA)]);
    m.ok(&args!["RL.POLICY", "RESTORE", full]);
    assert_eq!(list(&mut m), [("p".to_string(), 3), ("q".to_string(), 1)]);
    assert_eq!(set(&mut m, &["r", "GCRA", "1", "1", "1s"]), 7);
}

/// Item 5: RL.POLICY is a container (each subcommand its own ACL and flags), which the server
/// requires to have no handler of its own, so an unknown subcommand is refused by the server
/// before the module sees it (SPEC states the exception). The module's own errors for its
/// subcommands stay printable ASCII.
#[test]
fn an_unknown_subcommand_is_the_servers_error_and_the_modules_own_are_printable() {
    let s = Server::start();
    let mut c = s.conn();
    let e = c.err(&["RL.POLICY", "NOPE"]);
    assert!(
        e.starts_with("ERR unknown subcommand 'NOPE'. Try RL.POLICY HELP."),
        "{e}"
    );
    let e = c.err(&args![
        "RL.POLICY",
        "RESTORE",
        b"x".to_vec(),
        b"\xffM\x01".to_vec()
    ]);
    assert_eq!(e, "ERR unknown option '\\xffM\\x01'");
    assert!(c.cmd(&["RL.POLICY", "HELP"]).as_array().is_some());
}

/// The state an earlier version of the module could save after reproducer 2 (a counter and a
/// version of 2^64 - 1, here in an AOF of the old single-file form, which the server upgrades)
/// still loads, as every stored form must: LIST then refuses to cap the version (an error
/// saying why), SET says no version is left, and nothing else breaks.
#[test]
fn a_saved_counter_above_the_bound_loads_and_no_reply_caps_it() {
    let dir = std::env::temp_dir().join(format!(
        "rl-policy-versions-{}-{}",
        std::process::id(),
        base_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let p = payload(u64::MAX, &[("a", u64::MAX, GCRA)]);
    let mut aof = b"*3\r\n".to_vec();
    for arg in [&b"RL.POLICY"[..], b"RESTORE", &p] {
        aof.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        aof.extend_from_slice(arg);
        aof.extend_from_slice(b"\r\n");
    }
    std::fs::write(dir.join("appendonly.aof"), aof).unwrap();
    let s = Server::start_in(&dir, &["--appendonly", "yes"]);
    let mut c = s.conn();
    assert_eq!(dump(&mut c), p);
    assert_eq!(
        c.err(&["RL.POLICY", "LIST"]),
        "ERR a policy version is above 2^63-1, more than a reply can hold"
    );
    assert_eq!(
        c.err(&["RL.POLICY", "SET", "b", "GCRA", "1", "1", "1s"]),
        "ERR no policy version left: versions stop at 9007199254740991 (2^53-1)"
    );
    assert_eq!(dump(&mut c), p);
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
