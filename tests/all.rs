//! RL.ALL end to end: all-or-nothing over several keys, key declaration for Redis Cluster.

mod common;
use common::*;

use std::time::Duration;

#[test]
fn all_charges_every_limiter_or_none() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let call = |c: &mut Conn, at: u64, cost: u64| {
        c.ints(&args![
            "RL.ALL",
            2,
            "{u1}:sec",
            "{u1}:min",
            "GCRA",
            3,
            3,
            "1s",
            "TOKENBUCKET",
            5,
            5,
            "1m",
            "COST",
            cost,
            "AT",
            t + at
        ])
    };
    assert_eq!(call(&mut c, 0, 2), [2, 3, 1, 0, 24000]);
    assert_eq!(call(&mut c, 1000, 2), [2, 3, 1, 0, 47000]);
    let sec = c.cmd(&["DEBUG", "DIGEST-VALUE", "{u1}:sec"]);
    // The per-minute bucket has 1 token: denied, and the per-second limiter is not charged.
    assert_eq!(call(&mut c, 2000, 2), [0, 5, 1, 10000, 46000]);
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "{u1}:sec"]), sec);
    // Each key is an ordinary limiter of its algorithm, with its own expiry.
    assert_eq!(
        c.ints(&args![
            "RL.TOKENBUCKET",
            "{u1}:min",
            5,
            5,
            "1m",
            "COST",
            0,
            "AT",
            t + 2000
        ])[2],
        1
    );
    assert_eq!(c.int(&["PEXPIRETIME", "{u1}:min"]), (t + 48_000) as i64);
    assert_eq!(c.int(&["PEXPIRETIME", "{u1}:sec"]), (t + 1_667) as i64);
}

#[test]
fn all_options_and_errors() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let base = |extra: &[&str]| {
        let mut v = args![
            "RL.ALL",
            2,
            "a",
            "b",
            "GCRA",
            10,
            1,
            "1m",
            "LEAKYBUCKET",
            4,
            1,
            "1m",
            "AT",
            t
        ]
        .to_vec();
        v.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
        v
    };
    assert_eq!(c.ints(&base(&["PEEK", "COST", "3"])), [3, 4, 1, 0, 180000]);
    assert_eq!(c.int(&["EXISTS", "a", "b"]), 0);
    // 6 never fits the leaky bucket of 4: granted what fits, and retry -1.
    assert_eq!(
        c.ints(&base(&["COST", "6", "BESTEFFORT"])),
        [4, 4, 0, -1, 240000]
    );
    assert_eq!(c.ints(&base(&["DEDUP", "x"])), [0, 4, 0, 60000, 240000]);
    assert_eq!(c.ints(&base(&["COST", "9"])), [0, 4, 0, -1, 240000]);
    c.ok(&["SET", "str", "1"]);
    c.ints(&["RL.GCRA", "g", "1", "1", "1s"]);
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["RL.ALL", "1", "a"],                                   "ERR wrong number of arguments for 'rl.all' command"),
        (&["RL.ALL", "x", "a", "GCRA", "1", "1", "1s"],           "ERR numkeys must be a positive integer"),
        (&["RL.ALL", "2", "a", "GCRA", "1", "1", "1s"],           "ERR unknown limiter '1'"),
        (&["RL.ALL", "2", "a", "b", "GCRA", "1", "1", "1s"],      "ERR syntax error, a limiter is missing for a key"),
        (&["RL.ALL", "1", "a", "CELL", "1", "1", "1"],            "ERR unknown limiter 'CELL'"),
        (&["RL.ALL", "1", "a", "GCRA", "1", "1", "0"],            "ERR invalid duration '0' for period"),
        (&["RL.ALL", "1", "g", "TOKENBUCKET", "1", "1", "1s"],    "WRONGTYPE key 'g' holds a RL.GCRA limiter, not RL.TOKENBUCKET"),
        (&["RL.ALL", "2", "a", "str", "GCRA", "1", "1", "1s", "GCRA", "1", "1", "1s"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
    ];
    for (cmd, want) in cases {
        assert_eq!(c.err(cmd), *want, "{cmd:?}");
    }
    assert_eq!(
        c.cmd(&[
            "COMMAND", "GETKEYS", "RL.ALL", "2", "k1", "k2", "GCRA", "1", "1", "1s", "GCRA", "1",
            "1", "1s"
        ]),
        Reply::Array(vec![
            Reply::Bulk(b"k1".to_vec()),
            Reply::Bulk(b"k2".to_vec())
        ])
    );
}

#[test]
fn all_replicates_deterministically() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut hold = replica.conn();
    for round in 0..4u64 {
        hold.send(&["DEBUG", "SLEEP", "0.05"]);
        for i in 0..100u64 {
            let _ = m.cmd(&args![
                "RL.ALL",
                2,
                format!("a{}", i % 3),
                format!("b{}", i % 2),
                "GCRA",
                5,
                100,
                "1m",
                "LEAKYBUCKET",
                8,
                60,
                "1m",
                "COST",
                1 + i % 2,
                "DEDUP",
                i % 7
            ]);
        }
        std::thread::sleep(Duration::from_millis(2 * round));
        assert_eq!(hold.recv(), Reply::Simple("OK".into()));
    }
    wait_replica_synced(&master, &replica);
    assert_eq!(
        m.cmd(&["DEBUG", "DIGEST"]),
        replica.conn().cmd(&["DEBUG", "DIGEST"])
    );
}

#[test]
fn all_in_cluster_mode_needs_one_slot() {
    let s = Server::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ]);
    let mut c = s.conn();
    c.ok(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    wait_until("cluster state ok", Duration::from_secs(10), || {
        c.info_field("cluster", "cluster_enabled").as_deref() == Some("1")
            && matches!(c.cmd(&["CLUSTER", "INFO"]), Reply::Bulk(ref b) if String::from_utf8_lossy(b).contains("cluster_state:ok"))
    });
    let err = c.err(&[
        "RL.ALL", "2", "user:1", "user:2", "GCRA", "1", "1", "1s", "GCRA", "1", "1", "1s",
    ]);
    assert!(err.starts_with("CROSSSLOT"), "{err}");
    assert_eq!(
        c.ints(&[
            "RL.ALL", "2", "{user}:1", "{user}:2", "GCRA", "1", "1", "1s", "GCRA", "1", "1", "1s"
        ])[0],
        1
    );
    assert_eq!(c.ints(&["RL.GCRA", "solo", "1", "1", "1s"])[0], 1);
}

/// Reproducer: with BESTEFFORT and nothing granted, RL.ALL replied the retry of the state each
/// limiter's own partial grant would have left (22500 ms) instead of 7500 ms.
#[test]
fn all_besteffort_retry_counts_no_uncharged_units() {
    let s = Server::start();
    let mut c = s.conn();
    let call = |c: &mut Conn, at: &str, opts: &[&str]| {
        let mut argv: Vec<String> = [
            "RL.ALL",
            "3",
            "k1",
            "k2",
            "k3",
            "LEAKYBUCKET",
            "3",
            "10",
            "2500",
            "GCRA",
            "11",
            "1000000",
            "1166",
            "LEAKYBUCKET",
            "5",
            "1",
            "7500",
            "COST",
            "3",
            "AT",
            at,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.extend(opts.iter().map(|s| s.to_string()));
        c.ints(&argv)
    };
    // Empty buckets: granted, with the third bucket's 3 units then draining 1 per 7.5 s.
    assert_eq!(call(&mut c, "6683323024398.920", &[]), [3, 3, 0, 0, 22500]);
    // The third bucket holds 3 of 5: 3 more fit once 1 has drained, 7.5 s from now.
    assert_eq!(
        call(&mut c, "6683323024398.920", &["PEEK"]),
        [0, 3, 0, 7500, 22500]
    );
    assert_eq!(
        call(&mut c, "6683323024398.920", &["PEEK", "BESTEFFORT"]),
        [0, 3, 0, 7500, 22500]
    );
    assert_eq!(call(&mut c, "6683323031898.919", &["PEEK"])[0], 0);
    assert_eq!(call(&mut c, "6683323031898.920", &["PEEK"])[0], 3);
}

/// `BLOCK d` on RL.ALL blocks only the keys that denied; a blocked key denies the whole call and
/// is honoured by the single-limiter command and CL.THROTTLE on the same key.
#[test]
fn all_blocks_the_keys_that_denied() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let at = |ms: u64| (t + ms).to_string();
    // {u}a allows 2, {u}b allows 10; `opts` after the limiters.
    let all = |c: &mut Conn, opts: &[&str]| {
        let head = [
            "RL.ALL", "2", "{u}a", "{u}b", "FIXED", "2", "1m", "FIXED", "10", "1m",
        ];
        c.ints(&[&head[..], opts].concat())
    };
    // The third call is denied by {u}a alone.
    for _ in 0..2 {
        let r = all(&mut c, &["AT", &at(0)]);
        assert_eq!(r[0], 1);
    }
    let r = all(&mut c, &["BLOCK", "1h", "AT", &at(0)]);
    assert_eq!((r[0], r[3]), (0, 3_600_000));
    assert_eq!(c.int(&["PEXPIRETIME", "{u}a"]), t as i64 + 3_600_000);
    // {u}b did not deny: it expires with its window (epoch-aligned minutes).
    let window_end = (t / 60_000 + 1) * 60_000;
    assert_eq!(c.int(&["PEXPIRETIME", "{u}b"]), window_end as i64);
    // {u}b alone still grants; {u}a denies every call until the block ends, charging nothing.
    assert_eq!(
        c.ints(&["RL.FIXED", "{u}b", "10", "1m", "AT", &at(1000)])[0],
        1
    );
    let r = c.ints(&["RL.FIXED", "{u}a", "2", "1m", "AT", &at(120_000)]);
    assert_eq!((r[0], r[2], r[3]), (0, 0, 3_600_000 - 120_000));
    // After the block, a fresh window: as if the block had never been.
    let r = all(&mut c, &["AT", &at(3_600_000)]);
    assert_eq!((r[0], r[1], r[2]), (1, 2, 1));
    // CL.THROTTLE honours a block on its key.
    assert_eq!(c.int(&["RL.BLOCK", "cell", "10s", "AT", &at(0)]), 10_000);
    let r = c.ints(&["CL.THROTTLE", "cell", "4", "1", "1", "1", "AT", &at(1000)]);
    assert_eq!((r[0], r[3]), (1, 9));
}

/// RL.ALL over one key replies as that key's own command, `COST 0` on a blocked key included:
/// the block's time left, as every call on a blocked key.
#[test]
fn all_over_one_blocked_key_replies_as_its_own_command() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    assert_eq!(c.int(&args!["RL.BLOCK", "k", "10s", "AT", t]), 10_000);
    for (cost, at) in [(0u64, 1_000u64), (1, 2_500), (5, 3_000)] {
        let own = c.ints(&args![
            "RL.GCRA",
            "k",
            3,
            1,
            "1s",
            "COST",
            cost,
            "AT",
            t + at
        ]);
        let all = c.ints(&args![
            "RL.ALL",
            1,
            "k",
            "GCRA",
            3,
            1,
            "1s",
            "COST",
            cost,
            "AT",
            t + at
        ]);
        // Denied, nothing remaining, retry when the block ends (never for a cost above 3).
        let retry = if cost > 3 { -1 } else { (10_000 - at) as i64 };
        assert_eq!(own, [0, 3, 0, retry, (10_000 - at) as i64], "COST {cost}");
        assert_eq!(all, own, "COST {cost}");
    }
}
