//! Old times never grant extra, even across a key's expiry: an `AT` more than
//! `ratelimit.at-max-behind` ms (default 60000, -1 = no bound) behind the server's clock is
//! refused, and a key written by a call behind the clock is kept at least until the server's
//! clock plus that bound; replicas and the AOF get that expiry. Commands from a master or
//! replayed from the AOF are exempt.

mod common;
use common::*;

/// Two hours, the distance behind the clock the reproducers replay at.
const TWO_HOURS: u64 = 7_200_000;

/// Three hours: a bound under which calls two hours back are accepted.
const THREE_HOURS: u64 = 10_800_000;

/// The server's clock in Unix ms (TIME).
fn server_ms(c: &mut Conn) -> u64 {
    let t = c.cmd(&["TIME"]);
    let t = t.as_array().expect("TIME array");
    let secs: u64 = t[0].as_str().unwrap().parse().unwrap();
    let micros: u64 = t[1].as_str().unwrap().parse().unwrap();
    secs * 1000 + micros / 1000
}

fn with_at(call: &[&str], at: u64) -> Vec<String> {
    let mut v: Vec<String> = call.iter().map(|s| s.to_string()).collect();
    v.extend(["AT".to_string(), at.to_string()]);
    v
}

/// One call of every command that takes `AT`, each on its own key (RL.RELEASE on a missing key,
/// RL.REFUND on a key the earlier RL.GCRA wrote).
const EVERY_COMMAND: &[&[&str]] = &[
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
    &["RL.ACQUIRE", "lk", "3", "1h", "ID", "w"],
    &["RL.RELEASE", "lk", "w"],
    &["RL.REFUND", "g", "1"],
    &["RL.BLOCK", "b", "1h"],
    &["RL.CHECK", "g", "GCRA", "3", "1", "1h"],
];

#[test]
fn at_max_behind_defaults_to_a_minute() {
    let s = Server::start_with_exact_module_args(&[], &[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "ratelimit.at-max-behind"]),
        Reply::Array(vec![
            Reply::Bulk(b"ratelimit.at-max-behind".to_vec()),
            Reply::Bulk(b"60000".to_vec())
        ])
    );
    // Two hours back: refused by every command (RL.CHECK too, as the PEEK it previews), and
    // nothing is written.
    let old = server_ms(&mut c) - TWO_HOURS;
    for call in EVERY_COMMAND {
        assert_eq!(
            c.err(&with_at(call, old)),
            "ERR AT is behind the server clock",
            "{call:?}"
        );
    }
    assert_eq!(c.int(&["DBSIZE"]), 0);
    assert_eq!(
        c.info_field("persistence", "rdb_changes_since_last_save"),
        Some("0".into())
    );
    // Half a minute back is within the bound.
    let near = server_ms(&mut c) - 30_000;
    for call in EVERY_COMMAND {
        assert!(!c.cmd(&with_at(call, near)).is_error(), "{call:?}");
    }
    // Every key but RL.ACQUIRE's, which RL.RELEASE freed (and so deleted).
    assert_eq!(c.int(&["DBSIZE"]), 11);
}

#[test]
fn at_max_behind_is_a_module_config() {
    // From the loadmodule line.
    let s = Server::start_with_exact_module_args(&[], &["at-max-behind", "5000"]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "ratelimit.at-max-behind"])
            .as_array()
            .unwrap()[1],
        Reply::Bulk(b"5000".to_vec())
    );
    let now = server_ms(&mut c);
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 3, 1, "1s", "AT", now - 4000]),
        [1, 3, 2, 0, 1000]
    );
    assert_eq!(
        c.err(&args!["RL.GCRA", "k", 3, 1, "1s", "AT", now - 60_000]),
        "ERR AT is behind the server clock"
    );
    // CONFIG SET: 0 refuses any time behind, -1 none.
    c.ok(&["CONFIG", "SET", "ratelimit.at-max-behind", "0"]);
    let before = server_ms(&mut c) - 2000;
    assert_eq!(
        c.err(&args!["RL.GCRA", "k0", 3, 1, "1s", "AT", before]),
        "ERR AT is behind the server clock"
    );
    c.ok(&["CONFIG", "SET", "ratelimit.at-max-behind", "-1"]);
    assert_eq!(
        c.ints(&args!["RL.GCRA", "epoch", 3, 1, "1s", "AT", 1]),
        [1, 3, 2, 0, 1000]
    );
    // Without a bound, a key's expiry is its own (counted from the old AT): long gone.
    assert_eq!(c.int(&["EXISTS", "epoch"]), 0);
    // At most i64::MAX µs (about 292,000 years), so a kept expiry is never capped.
    let (most, beyond) = (i64::MAX / 1000, i64::MAX / 1000 + 1);
    for bad in ["-2".to_string(), beyond.to_string()] {
        assert!(
            c.cmd(&["CONFIG", "SET", "ratelimit.at-max-behind", &bad])
                .is_error(),
            "{bad}"
        );
    }
    c.ok(&[
        "CONFIG",
        "SET",
        "ratelimit.at-max-behind",
        &most.to_string(),
    ]);
    let clock = server_ms(&mut c);
    c.ints(&args!["RL.GCRA", "forever", 3, 1, "1s", "AT", 1]);
    let kept = c.int(&["PEXPIRETIME", "forever"]);
    assert!(kept >= clock as i64 + most && kept <= server_ms(&mut c) as i64 + most + 1);
}

/// Sum of what `n` calls of `call` at `at` grant; `granted` reads one reply.
fn grants(c: &mut Conn, call: &[&str], at: u64, n: usize, granted: Granted) -> i64 {
    (0..n)
        .map(|i| {
            let call: Vec<String> = call
                .iter()
                .map(|a| a.replace("{i}", &i.to_string()))
                .collect();
            let refs: Vec<&str> = call.iter().map(String::as_str).collect();
            let r = c.cmd(&with_at(&refs, at));
            assert!(!r.is_error(), "{call:?}: {r:?}");
            granted(&r)
        })
        .sum()
}

/// How many units one reply granted.
type Granted = fn(&Reply) -> i64;

/// The limiter reply's `granted`.
fn first(r: &Reply) -> i64 {
    r.as_array().unwrap()[0].as_int().unwrap()
}

/// Reproducer for D4: `for i in 1 2 3 4 5; do redis-cli RL.GCRA k 1 1 1h AT <two hours back>;
/// done` granted 5 at a limit of 1 an hour (the key's expiry, counted from the old AT, had passed,
/// so each call found a fresh limiter). Under a bound of three hours, 20 calls at one time two
/// hours back grant what a limiter of 1 an hour grants once: 1 (on every command that writes),
/// and each key is kept until the server's clock at the write plus the bound.
#[test]
fn old_at_grants_once_across_the_keys_expiry() {
    let s = Server::start_with_exact_module_args(&[], &["at-max-behind", "10800000"]);
    let mut c = s.conn();
    let clock = server_ms(&mut c);
    let old = clock - TWO_HOURS;
    let limited = |r: &Reply| i64::from(r.as_array().unwrap()[0].as_int() == Some(0));
    let appended = |r: &Reply| i64::from(r.as_int() != Some(-1));
    #[rustfmt::skip]
    let cases: &[(&str, &[&str], Granted)] = &[
        ("g",     &["RL.GCRA", "g", "1", "1", "1h"],                  first),
        ("t",     &["RL.TOKENBUCKET", "t", "1", "1", "1h"],           first),
        ("l",     &["RL.LEAKYBUCKET", "l", "1", "1", "1h"],           first),
        ("f",     &["RL.FIXED", "f", "1", "1h"],                      first),
        ("s",     &["RL.SLIDING", "s", "1", "1h"],                    first),
        ("c",     &["RL.SLIDINGCOUNTER", "c", "1", "1h"],             first),
        ("{a}1",  &["RL.ALL", "2", "{a}1", "{a}2", "GCRA", "1", "1", "1h", "FIXED", "1", "1h"], first),
        ("ct",    &["CL.THROTTLE", "ct", "0", "1", "3600", "1"],      limited),
        ("sc",    &["RL.STREAMCOUNT", "sc", "1h", "ADD", "1", "LIMIT", "1"], appended),
        ("lk",    &["RL.ACQUIRE", "lk", "1", "1h", "ID", "w{i}"],     first),
    ];
    for (key, call, granted) in cases {
        assert_eq!(grants(&mut c, call, old, 20, *granted), 1, "{call:?}");
        let kept = c.int(&["PEXPIRETIME", key]) as u64;
        let after = server_ms(&mut c);
        assert!(
            kept >= clock + THREE_HOURS && kept <= after + THREE_HOURS + 1,
            "{key}: expires at {kept}, clock {clock}..{after}"
        );
    }

    // RL.REFUND: 2 an hour, both taken, one given back: one more call is granted, not a
    // fresh limiter's 2.
    assert_eq!(
        c.ints(&args!["RL.GCRA", "r", 2, 1, "1h", "COST", 2, "AT", old])[0],
        2
    );
    assert_eq!(c.ints(&args!["RL.REFUND", "r", 1, "AT", old])[0], 1);
    assert_eq!(
        grants(&mut c, &["RL.GCRA", "r", "2", "1", "1h"], old, 20, first),
        1
    );

    // RL.BLOCK: a key blocked for 30 minutes from the old time grants nothing at that time.
    assert_eq!(c.int(&args!["RL.BLOCK", "b", "30m", "AT", old]), 1_800_000);
    assert_eq!(
        grants(&mut c, &["RL.GCRA", "b", "1", "1", "1h"], old, 20, first),
        0
    );

    // RL.RELEASE: two in flight, one released: one more lease is granted, not a fresh
    // limiter's 2.
    for id in ["a", "b"] {
        assert_eq!(
            c.ints(&args!["RL.ACQUIRE", "rel", 2, "1h", "ID", id, "AT", old])[0],
            1
        );
    }
    assert_eq!(c.int(&args!["RL.RELEASE", "rel", "a", "AT", old]), 1);
    assert_eq!(
        grants(
            &mut c,
            &["RL.ACQUIRE", "rel", "2", "1h", "ID", "n{i}"],
            old,
            20,
            first
        ),
        1
    );
}

/// The keys a master writes two hours behind its clock, with every command that writes (long
/// sliding logs and DEDUP ids replicate as the command with its `AT`, small values as
/// `RL._SET`).
fn write_old(c: &mut Conn, old: u64) -> Vec<&'static str> {
    let calls: Vec<Vec<String>> = vec![
        with_at(&["RL.GCRA", "g", "2", "1", "1h"], old),
        with_at(&["RL.GCRA", "g", "2", "1", "1h"], old),
        with_at(&["RL.REFUND", "g", "1"], old),
        with_at(&["RL.TOKENBUCKET", "t", "3", "1", "1h", "DEDUP", "d"], old),
        with_at(&["RL.LEAKYBUCKET", "l", "3", "1", "1h"], old),
        with_at(&["RL.FIXED", "f", "3", "1h"], old),
        with_at(&["RL.SLIDINGCOUNTER", "c", "3", "1h"], old),
        with_at(
            &[
                "RL.ALL", "2", "{a}1", "{a}2", "GCRA", "3", "1", "1h", "FIXED", "3", "1h",
            ],
            old,
        ),
        with_at(&["CL.THROTTLE", "ct", "2", "1", "3600", "1"], old),
        with_at(&["RL.STREAMCOUNT", "sc", "1h", "ADD", "1"], old),
        with_at(&["RL.ACQUIRE", "lk", "3", "1h", "ID", "w1"], old),
        with_at(&["RL.ACQUIRE", "lk", "3", "1h", "ID", "w2"], old),
        with_at(&["RL.RELEASE", "lk", "w1"], old),
        with_at(&["RL.BLOCK", "b", "30m"], old),
    ];
    for call in calls {
        assert!(!c.cmd(&call).is_error(), "{call:?}");
    }
    // A log of 30 entries: replicated as the command.
    for i in 0..30 {
        let r = c.ints(&args!["RL.SLIDING", "s", 100, "1h", "AT", old + i]);
        assert_eq!(r[0], 1);
    }
    vec![
        "g", "t", "l", "f", "c", "{a}1", "{a}2", "ct", "sc", "lk", "b", "s",
    ]
}

fn state(c: &mut Conn, keys: &[&str]) -> Vec<(Reply, i64)> {
    keys.iter()
        .map(|k| {
            (
                c.cmd(&["DEBUG", "DIGEST-VALUE", k]),
                c.int(&["PEXPIRETIME", k]),
            )
        })
        .collect()
}

/// A replica (whose own bound would refuse the master's times) and an AOF replay end with the
/// master's values and its kept expiry, the server's clock at the write plus the bound.
#[test]
fn kept_expiry_reaches_replicas_and_the_aof() {
    let master = Server::start_with_exact_module_args(
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"],
        &["at-max-behind", "10800000"],
    );
    let replica = Server::start_with_exact_module_args(&[], &[]);
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
    let clock = server_ms(&mut m);
    let keys = write_old(&mut m, clock - TWO_HOURS);
    let after = server_ms(&mut m);
    let on_master = state(&mut m, &keys);
    for ((_, kept), key) in on_master.iter().zip(&keys) {
        let kept = *kept as u64;
        assert!(
            kept >= clock + THREE_HOURS && kept <= after + THREE_HOURS + 1,
            "{key}: expires at {kept}, clock {clock}..{after}"
        );
    }
    wait_replica_synced(&master, &replica);
    assert_eq!(state(&mut r, &keys), on_master);
    assert_eq!(r.int(&["DBSIZE"]), m.int(&["DBSIZE"]));

    // The AOF replayed later, under a bound that would refuse its times.
    m.ok(&["CONFIG", "SET", "ratelimit.at-max-behind", "0"]);
    m.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(state(&mut m, &keys), on_master);
    assert_eq!(m.int(&["DBSIZE"]), keys.len() as i64);
    // And after a rewrite (each value, then the key's own PEXPIREAT).
    m.ok(&["BGREWRITEAOF"]);
    wait_rewrite_done(&mut m);
    m.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(state(&mut m, &keys), on_master);
}
