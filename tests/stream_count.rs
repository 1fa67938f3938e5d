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
