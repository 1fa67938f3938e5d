//! `AT` may not move a key's clock ahead of the server's: `ratelimit.at-max-ahead` (ms, default
//! 1000, -1 = no bound). Commands from a master or replayed from the AOF are exempt.

mod common;
use common::*;

/// The server's clock in Unix ms (TIME).
fn server_ms(c: &mut Conn) -> u64 {
    let t = c.cmd(&["TIME"]);
    let t = t.as_array().expect("TIME array");
    let secs: u64 = t[0].as_str().unwrap().parse().unwrap();
    let micros: u64 = t[1].as_str().unwrap().parse().unwrap();
    secs * 1000 + micros / 1000
}

/// One call of every command that takes AT, at `at` (ms), each on its own key.
fn every_command(at: u64) -> Vec<Vec<String>> {
    let at = at.to_string();
    let calls: &[&[&str]] = &[
        &["RL.GCRA", "g", "3", "1", "1h"],
        &["RL.TOKENBUCKET", "t", "3", "1", "1h"],
        &["RL.LEAKYBUCKET", "l", "3", "1", "1h"],
        &["RL.FIXED", "f", "3", "1h"],
        &["RL.SLIDING", "s", "3", "1h"],
        &["RL.SLIDINGCOUNTER", "c", "3", "1h"],
        &[
            "RL.ALL", "2", "{a}1", "{a}2", "GCRA", "3", "1", "1h", "FIXED", "3", "1h",
        ],
        &["CL.THROTTLE", "ct", "2", "1", "3600", "1"],
        &["RL.STREAMCOUNT", "sc", "1h", "ADD", "1"],
        &["RL.REFUND", "g", "1"],
        &["RL.BLOCK", "b", "1h"],
        &["RL.CHECK", "g", "GCRA", "3", "1", "1h"],
    ];
    calls
        .iter()
        .map(|call| {
            let mut v: Vec<String> = call.iter().map(|s| s.to_string()).collect();
            v.extend(["AT".to_string(), at.clone()]);
            v
        })
        .collect()
}

#[test]
fn at_max_ahead_defaults_to_one_second() {
    let s = Server::start_with_exact_module_args(&[], &[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "ratelimit.at-max-ahead"]),
        Reply::Array(vec![
            Reply::Bulk(b"ratelimit.at-max-ahead".to_vec()),
            Reply::Bulk(b"1000".to_vec())
        ])
    );
    // A minute ahead: refused by every command, and nothing is written.
    let ahead = server_ms(&mut c) + 60_000;
    for call in every_command(ahead) {
        assert_eq!(
            c.err(&call),
            "ERR AT is ahead of the server clock",
            "{call:?}"
        );
    }
    assert_eq!(c.int(&["DBSIZE"]), 0);
    assert_eq!(
        c.info_field("persistence", "rdb_changes_since_last_save"),
        Some("0".into())
    );
    // Half a second ahead is within the bound (the server's clock has only moved on since).
    let near = server_ms(&mut c) + 500;
    for call in every_command(near) {
        assert!(!c.cmd(&call).is_error(), "{call:?}");
    }
    assert_eq!(c.int(&["DBSIZE"]), 11);
    // The past within `ratelimit.at-max-behind` (a minute by default) is accepted (clamped to
    // each key's last update); tests/at_behind.rs covers the bound.
    for call in every_command(near - 30_000) {
        assert!(!c.cmd(&call).is_error(), "{call:?}");
    }
}

#[test]
fn at_max_ahead_is_a_module_config() {
    // From the loadmodule line.
    let s = Server::start_with_exact_module_args(&[], &["at-max-ahead", "5000"]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "ratelimit.at-max-ahead"])
            .as_array()
            .unwrap()[1],
        Reply::Bulk(b"5000".to_vec())
    );
    let now = server_ms(&mut c);
    assert!(
        !c.cmd(&args!["RL.GCRA", "k", 3, 1, "1s", "AT", now + 4000])
            .is_error()
    );
    // CONFIG SET: 0 refuses any time ahead, -1 none.
    c.ok(&["CONFIG", "SET", "ratelimit.at-max-ahead", "0"]);
    let soon = server_ms(&mut c) + 2000;
    assert_eq!(
        c.err(&args!["RL.GCRA", "k", 3, 1, "1s", "AT", soon]),
        "ERR AT is ahead of the server clock"
    );
    c.ok(&["CONFIG", "SET", "ratelimit.at-max-ahead", "-1"]);
    assert_eq!(
        c.ints(&args![
            "RL.GCRA",
            "far",
            3,
            1,
            "1s",
            "AT",
            "253402300799999"
        ]),
        [1, 3, 2, 0, 1000]
    );
    assert!(
        c.cmd(&["CONFIG", "SET", "ratelimit.at-max-ahead", "-2"])
            .is_error()
    );
}

/// Reproducer: one call with AT a day ahead refilled an exhausted limiter and dragged the key
/// into the future.
#[test]
fn at_ahead_cannot_refill_a_limiter() {
    let s = Server::start_with_exact_module_args(&[], &[]);
    let mut c = s.conn();
    let now = server_ms(&mut c);
    assert_eq!(
        c.ints(&args!["RL.GCRA", "g", 3, 1, "1h", "COST", 3, "AT", now])[0],
        3
    );
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "g"]);
    let expiry = c.int(&["PEXPIRETIME", "g"]);
    assert_eq!(
        c.err(&args!["RL.GCRA", "g", 3, 1, "1h", "AT", now + 86_400_000]),
        "ERR AT is ahead of the server clock"
    );
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "g"]), digest);
    assert_eq!(c.int(&["PEXPIRETIME", "g"]), expiry);
}

/// A replica applies the master's resolved time even when its own bound would refuse it.
#[test]
fn replicated_at_is_exempt() {
    let master = Server::start_with_exact_module_args(&[], &["at-max-ahead", "-1"]);
    let replica = Server::start_with_exact_module_args(&[], &["at-max-ahead", "0"]);
    replica
        .conn()
        .ok(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    let mut r = replica.conn();
    wait_until(
        "replica link up",
        std::time::Duration::from_secs(10),
        || r.info_field("replication", "master_link_status").as_deref() == Some("up"),
    );
    let mut m = master.conn();
    let far = server_ms(&mut m) + 86_400_000;
    for call in every_command(far) {
        assert!(!m.cmd(&call).is_error(), "{call:?}");
    }
    wait_replica_synced(&master, &replica);
    assert_eq!(r.int(&["DBSIZE"]), 11);
    assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), m.cmd(&["DEBUG", "DIGEST"]));
    for key in ["g", "t", "l", "f", "s", "c", "{a}1", "{a}2", "ct", "sc"] {
        assert_eq!(
            r.int(&["PEXPIRETIME", key]),
            m.int(&["PEXPIRETIME", key]),
            "{key}"
        );
    }
    // The replica's own clients are still bounded (on a read-only command's path too).
    r.ok(&["CONFIG", "SET", "replica-read-only", "no"]);
    assert_eq!(
        r.err(&args!["RL.GCRA", "mine", 3, 1, "1h", "AT", far]),
        "ERR AT is ahead of the server clock"
    );
}

/// An AOF holding calls with a future AT replays them exactly, whatever the bound at load time.
#[test]
fn aof_replay_is_exempt() {
    let s = Server::start_with_exact_module_args(
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"],
        &["at-max-ahead", "-1"],
    );
    let mut c = s.conn();
    let far = server_ms(&mut c) + 86_400_000;
    for call in every_command(far) {
        assert!(!c.cmd(&call).is_error(), "{call:?}");
    }
    let digest = c.cmd(&["DEBUG", "DIGEST"]);
    c.ok(&["CONFIG", "SET", "ratelimit.at-max-ahead", "0"]);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(c.int(&["DBSIZE"]), 11);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), digest);
    // Clients are bounded again after the load.
    assert_eq!(
        c.err(&args!["RL.GCRA", "g", 3, 1, "1h", "AT", far]),
        "ERR AT is ahead of the server clock"
    );
}
