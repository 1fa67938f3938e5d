//! Self-test of the integration harness (`tests/common`) against a real server with the module
//! loaded: process management, the RESP2/RESP3 client, replication and restart helpers.

mod common;
use common::*;

#[test]
fn harness_server_answers_ping() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(c.cmd(&["ECHO", "hi"]), Reply::Bulk(b"hi".to_vec()));
    assert!(
        s.log().contains("Ready to accept connections"),
        "log:\n{}",
        s.log()
    );
}

#[test]
fn harness_module_list_includes_ratelimit() {
    let s = Server::start();
    let mut c = s.conn();
    let modules = c.ok(&["MODULE", "LIST"]);
    let list = modules
        .as_array()
        .unwrap_or_else(|| panic!("MODULE LIST: {modules:?}"));
    // Each entry is a flat [name, <name>, ver, <ver>, ...] list; Valkey 9 also lists `lua`.
    let names: Vec<String> = list
        .iter()
        .filter_map(|m| {
            let fields = m.as_array()?;
            let i = fields
                .iter()
                .position(|f| f.as_str().as_deref() == Some("name"))?;
            fields.get(i + 1)?.as_str()
        })
        .collect();
    assert!(
        names.iter().any(|n| n == "ratelimit"),
        "MODULE LIST names: {names:?}"
    );
}

#[test]
fn harness_parses_resp3_maps() {
    let s = Server::start();
    let mut c = s.conn();
    let hello = c.ok(&["HELLO", "3"]);
    let Reply::Map(fields) = &hello else {
        panic!("HELLO 3: expected a map, got {hello:?}")
    };
    let proto = fields
        .iter()
        .find(|(k, _)| k.as_str().as_deref() == Some("proto"));
    assert_eq!(
        proto.map(|(_, v)| v),
        Some(&Reply::Int(3)),
        "HELLO 3: {hello:?}"
    );

    c.ok(&["HSET", "h", "f", "v"]);
    assert_eq!(
        c.cmd(&["HGETALL", "h"]),
        Reply::Map(vec![(
            Reply::Bulk(b"f".to_vec()),
            Reply::Bulk(b"v".to_vec())
        )])
    );
    assert_eq!(c.cmd(&["GET", "missing"]), Reply::Nil);
    c.ok(&["SADD", "s", "m"]);
    assert_eq!(
        c.cmd(&["SMEMBERS", "s"]),
        Reply::Set(vec![Reply::Bulk(b"m".to_vec())])
    );
    c.ok(&["ZADD", "z", "1.5", "m"]);
    assert_eq!(c.cmd(&["ZSCORE", "z", "m"]), Reply::Double("1.5".into()));
    // Still one reply per command after all of the above (no bytes left over).
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn harness_returns_errors_with_full_text() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["GET"]),
        Reply::Error("ERR wrong number of arguments for 'get' command".into())
    );
    c.ok(&["SET", "k", "v"]);
    assert!(
        c.err(&["INCR", "k"])
            .starts_with("ERR value is not an integer")
    );
    assert!(c.err(&["LPUSH", "k", "x"]).starts_with("WRONGTYPE "));
    // The connection is still usable after an error.
    assert_eq!(c.int(&["INCRBY", "n", "5"]), 5);
}

#[test]
fn harness_pipelines_and_builds_mixed_args() {
    let s = Server::start();
    let mut c = s.conn();
    for i in 0..100 {
        c.send(&args!["RPUSH", "l", i]);
    }
    for i in 1..=100 {
        assert_eq!(c.recv(), Reply::Int(i));
    }
    let key = String::from("l");
    assert_eq!(c.ints(&args!["LPOS", key, 7, "COUNT", 0]), vec![7]);
    c.ok(&args!["SET", b"\xff\x00bin", vec![0u8, 1, 2]]);
    assert_eq!(
        c.cmd(&args![b"GET", &b"\xff\x00bin"[..]]),
        Reply::Bulk(vec![0, 1, 2])
    );
}

#[test]
fn harness_replica_syncs_writes() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    master.conn().ok(&["SET", "k", "v"]);
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(r.cmd(&["GET", "k"]), Reply::Bulk(b"v".to_vec()));
    assert!(r.err(&["SET", "x", "1"]).starts_with("READONLY"));
}

#[test]
fn harness_restart_keeps_saved_data() {
    let mut s = Server::start();
    let first_pid = s.pid();
    s.conn().ok(&["SET", "k", "v"]);
    s.conn().ok(&["SAVE"]);
    s.restart();
    assert_ne!(s.pid(), first_pid);
    assert_eq!(s.conn().cmd(&["GET", "k"]), Reply::Bulk(b"v".to_vec()));

    // Unsaved writes are gone after SHUTDOWN NOSAVE and a start on the same dir.
    s.conn().ok(&["SET", "unsaved", "1"]);
    s.kill_nosave();
    let again = Server::start_in(&s.dir, &[]);
    let mut c = again.conn();
    assert_eq!(c.cmd(&["GET", "k"]), Reply::Bulk(b"v".to_vec()));
    assert_eq!(c.cmd(&["GET", "unsaved"]), Reply::Nil);
}

#[test]
fn harness_extra_args_override_defaults() {
    let s = Server::start_with(&["--appendonly", "yes"]);
    let mut c = s.conn();
    assert_eq!(
        c.info_field("persistence", "aof_enabled").as_deref(),
        Some("1")
    );
    assert!(s.version_at_least(7, 0));
    assert!(!s.version_at_least(99, 0));
    // Independently of INFO: the binary's own `--version` line names the server.
    let mut version = std::process::Command::new(server_bin());
    version.arg("--version");
    if let Ok(dir) = std::env::var("RL_LD_LIBRARY_PATH")
        && !dir.is_empty()
    {
        version.env("LD_LIBRARY_PATH", dir);
    }
    let out = version.output().expect("server --version");
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        line.starts_with("Valkey server") || line.starts_with("Redis server"),
        "{line}"
    );
    assert_eq!(s.is_valkey(), line.starts_with("Valkey server"), "{line}");
}

#[test]
fn harness_passes_module_args_per_server() {
    let s = Server::start_with_module_args(&[], &["dedup-max", "7"]);
    let reply = s.conn().ok(&["CONFIG", "GET", "ratelimit.dedup-max"]);
    let values: Vec<String> = reply
        .as_array()
        .unwrap_or_default()
        .iter()
        .filter_map(Reply::as_str)
        .collect();
    assert_eq!(
        values,
        ["ratelimit.dedup-max", "7"],
        "CONFIG GET: {reply:?}"
    );
}
