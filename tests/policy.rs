//! Named policies (SPEC "RL.POLICY ... RL.LIMIT"): RL.POLICY's subcommands and replies, RL.LIMIT
//! and `POLICY name` in RL.ALL and RL.CHECKALL, a changed policy keeping the units used, DEL
//! making later calls fail naming the policy, `ratelimit.max-policies`, and policies outside
//! the keyspace surviving a restart (RDB, AOF with and without preamble, after BGREWRITEAOF),
//! reaching replicas and AOF replay with the same versions, copied by DUMP/RESTORE; the
//! per-policy INFO counters read as an exporter reads them.

mod common;
use common::*;
use common::{policy_list as list, policy_set as set};

/// `policies_checksum` of `INFO ratelimit`.
fn checksum(c: &mut Conn) -> String {
    c.info_field("ratelimit", "ratelimit_policies_checksum")
        .expect("policies_checksum")
}

#[test]
fn set_get_del_and_list_reply_as_the_spec_says() {
    let s = Server::start();
    let mut c = s.conn();
    // Versions: one counter, growing with every change.
    assert_eq!(set(&mut c, &["free", "GCRA", "10", "5", "1s"]), 1);
    assert_eq!(
        set(
            &mut c,
            &[
                "pro",
                "GCRA",
                "100",
                "50",
                "1s",
                "NAME",
                "rps",
                "FIXED",
                "10000",
                "day",
                "TZ",
                "UTC",
                "SHADOW",
                "DESC",
                "paid tier"
            ]
        ),
        2
    );
    assert_eq!(set(&mut c, &["free", "GCRA", "20", "5", "1s"]), 3);
    // GET: the arguments of the SET that made it, after the name.
    let got = c.cmd(&["RL.POLICY", "GET", "pro"]);
    let got: Vec<String> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        got,
        [
            "GCRA",
            "100",
            "50",
            "1s",
            "NAME",
            "rps",
            "FIXED",
            "10000",
            "day",
            "TZ",
            "UTC",
            "SHADOW",
            "DESC",
            "paid tier"
        ]
    );
    assert!(c.cmd(&["RL.POLICY", "GET", "nope"]).is_nil());
    assert_eq!(
        list(&mut c),
        [("free".to_string(), 3), ("pro".to_string(), 2)]
    );
    // RESP3: a map of name to version.
    c.ok(&["HELLO", "3"]);
    assert_eq!(
        c.cmd(&["RL.POLICY", "LIST"]),
        Reply::Map(vec![
            (Reply::Bulk(b"free".to_vec()), Reply::Int(3)),
            (Reply::Bulk(b"pro".to_vec()), Reply::Int(2)),
        ])
    );
    c.ok(&["HELLO", "2"]);
    assert_eq!(c.int(&["RL.POLICY", "DEL", "free"]), 1);
    assert_eq!(c.int(&["RL.POLICY", "DEL", "free"]), 0);
    // A new SET of a deleted name never reuses a version.
    assert_eq!(set(&mut c, &["free", "GCRA", "10", "5", "1s"]), 4);
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_policies").as_deref(),
        Some("2")
    );
}

#[test]
fn bad_names_and_definitions_are_refused_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    set(&mut c, &["ok", "GCRA", "1", "1", "1s"]);
    let long = "a".repeat(65);
    for name in [
        "Free",
        "a-b",
        "a.b",
        "",
        "é",
        "a b",
        long.as_str(),
        "\u{1F600}",
    ] {
        assert_eq!(
            c.err(&["RL.POLICY", "SET", name, "GCRA", "1", "1", "1s"]),
            "ERR policy name must be 1 to 64 characters of a-z, 0-9 and '_'",
            "{name:?}"
        );
    }
    assert_eq!(set(&mut c, &[&"a".repeat(64), "GCRA", "1", "1", "1s"]), 2);
    c.int(&["RL.POLICY", "DEL", &"a".repeat(64)]);
    // `ok_shadow` beside `ok`: `policy_ok_shadow_denied` would name two counters.
    assert_eq!(
        c.err(&["RL.POLICY", "SET", "ok_shadow", "GCRA", "1", "1", "1s"]),
        "ERR policy 'ok_shadow' and policy 'ok' would share INFO field names: choose another name"
    );
    let before = c.cmd(&["RL.POLICY", "DUMP"]);
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["x", "GCRA", "0", "1", "1s"],           "ERR burst must be a positive integer"),
        (&["x", "NOPE", "1"],                      "ERR unknown limiter 'NOPE'"),
        (&["x", "SHADOW"],                         "ERR syntax error, a policy needs at least one limiter"),
        (&["x", "GCRA", "1", "1", "1s", "COST", "1"], "ERR unknown limiter 'COST'"),
        (&["x", "GCRA", "1", "1", "1s", "DESC"],   "ERR syntax error, DESC needs a value"),
        (&["x", "GCRA", "1", "1", "1s", "\u{1F600}"], "ERR unknown limiter '\\xf0\\x9f\\x98\\x80'"),
    ];
    for (def, want) in cases {
        let mut call = vec!["RL.POLICY", "SET"];
        call.extend(*def);
        assert_eq!(c.err(&call), *want, "{def:?}");
    }
    assert_eq!(c.cmd(&["RL.POLICY", "DUMP"]), before);
}

#[test]
fn max_policies_is_enforced_for_new_names() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["CONFIG", "SET", "ratelimit.max-policies", "2"]);
    set(&mut c, &["a", "GCRA", "1", "1", "1s"]);
    set(&mut c, &["b", "GCRA", "1", "1", "1s"]);
    let e = c.err(&["RL.POLICY", "SET", "c", "GCRA", "1", "1", "1s"]);
    assert!(e.starts_with("ERR too many policies"), "{e}");
    // Replacing one is not a new one.
    assert_eq!(set(&mut c, &["a", "GCRA", "2", "1", "1s"]), 3);
    // A payload of three is refused whole.
    let dump3 = {
        let other = Server::start();
        let mut o = other.conn();
        for n in ["x", "y", "z"] {
            set(&mut o, &[n, "GCRA", "1", "1", "1s"]);
        }
        o.cmd(&["RL.POLICY", "DUMP"]).as_bytes().unwrap().to_vec()
    };
    assert!(
        c.cmd(&args!["RL.POLICY", "RESTORE", dump3.clone()])
            .is_error()
    );
    assert!(
        c.cmd(&args!["RL.POLICY", "RESTORE", dump3, "MERGE"])
            .is_error()
    );
    assert_eq!(list(&mut c), [("a".into(), 3), ("b".into(), 2)]);
    c.int(&["RL.POLICY", "DEL", "b"]);
    set(&mut c, &["c", "GCRA", "1", "1", "1s"]);
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_policies").as_deref(),
        Some("2")
    );
}

/// RL.LIMIT decides as the limiter's own command with the same arguments (burst 5, 1 per
/// second: five granted at one instant, remaining 4..0, then denied for a second).
#[test]
fn rl_limit_replies_as_the_limiters_own_command() {
    let s = Server::start();
    let mut c = s.conn();
    set(&mut c, &["p", "GCRA", "5", "1", "1s"]);
    let t = base_ms();
    for i in 0..5i64 {
        let want = vec![1, 5, 4 - i, 0, (i + 1) * 1000];
        assert_eq!(c.ints(&args!["RL.LIMIT", "a", "p", "AT", t]), want);
        assert_eq!(c.ints(&args!["RL.GCRA", "b", 5, 1, "1s", "AT", t]), want);
    }
    let denied = vec![0, 5, 0, 1000, 5000];
    assert_eq!(c.ints(&args!["RL.LIMIT", "a", "p", "AT", t]), denied);
    assert_eq!(c.ints(&args!["RL.GCRA", "b", 5, 1, "1s", "AT", t]), denied);
    // Options as the command's: 2 s later 2 units are back; BESTEFFORT grants them, and the
    // full 3 would be granted 3 s later.
    let want = vec![2, 5, 0, 3000, 5000];
    assert_eq!(
        c.ints(&args![
            "RL.LIMIT",
            "a",
            "p",
            "COST",
            3,
            "BESTEFFORT",
            "AT",
            t + 2000
        ]),
        want
    );
    assert_eq!(
        c.ints(&args![
            "RL.GCRA",
            "b",
            5,
            1,
            "1s",
            "COST",
            3,
            "BESTEFFORT",
            "AT",
            t + 2000
        ]),
        want
    );
    // Same key state (the key is a GCRA limiter like any other).
    assert_eq!(c.cmd(&["TYPE", "a"]), Reply::Simple("ratelimit".into()));
    let e = c.err(&args!["RL.LIMIT", "a", "nope", "AT", t]);
    assert_eq!(e, "ERR unknown policy 'nope'");
}

#[test]
fn detail_names_the_policy_of_each_limiter() {
    let s = Server::start();
    let mut c = s.conn();
    set(&mut c, &["one", "GCRA", "5", "1", "1s", "NAME", "rps"]);
    set(
        &mut c,
        &[
            "two", "GCRA", "5", "1", "1s", "FIXED", "2", "1m", "NAME", "minute",
        ],
    );
    let t = base_ms();
    let r = c.cmd(&args!["RL.LIMIT", "k", "one", "DETAIL", "AT", t]);
    let items = r.as_array().unwrap();
    let entry = items[7].as_array().unwrap()[0].as_array().unwrap().to_vec();
    assert_eq!(entry[0], Reply::Bulk(b"rps".to_vec()));
    assert_eq!(entry[1], Reply::Bulk(b"k".to_vec()));
    assert_eq!(entry[9], Reply::Bulk(b"one".to_vec()));
    let r = c.cmd(&args![
        "RL.ALL", 2, "{u}a", "{u}b", "POLICY", "two", "DETAIL", "AT", t
    ]);
    let entries = r.as_array().unwrap()[7].as_array().unwrap().to_vec();
    let names: Vec<Reply> = entries
        .iter()
        .map(|e| e.as_array().unwrap()[0].clone())
        .collect();
    assert_eq!(
        names,
        [
            Reply::Bulk(b"{u}a".to_vec()),
            Reply::Bulk(b"minute".to_vec())
        ]
    );
    for e in &entries {
        assert_eq!(e.as_array().unwrap()[9], Reply::Bulk(b"two".to_vec()));
    }
}

/// A policy of several limiters: RL.ALL and RL.CHECKALL take one key per limiter, all or
/// nothing (FIXED 2 per minute denies the third call, and GCRA is not charged for it).
#[test]
fn several_limiters_apply_through_rl_all_and_rl_checkall() {
    let s = Server::start();
    let mut c = s.conn();
    set(&mut c, &["two", "GCRA", "5", "1", "1s", "FIXED", "2", "1m"]);
    let t = base_ms() / 60_000 * 60_000;
    let call =
        |c: &mut Conn, cmd: &str| c.ints(&args![cmd, 2, "{u}g", "{u}f", "POLICY", "two", "AT", t]);
    assert_eq!(call(&mut c, "RL.CHECKALL")[0], 1);
    assert_eq!(call(&mut c, "RL.ALL")[..3], [1, 2, 1]);
    assert_eq!(call(&mut c, "RL.ALL")[..3], [1, 2, 0]);
    assert_eq!(call(&mut c, "RL.ALL")[0], 0);
    assert_eq!(call(&mut c, "RL.CHECKALL")[0], 0);
    // GCRA charged twice, not three times: 3 of 5 left.
    assert_eq!(
        c.ints(&args![
            "RL.GCRA", "{u}g", 5, 1, "1s", "PEEK", "COST", 0, "AT", t
        ])[2],
        3
    );
    let e = c.err(&args!["RL.LIMIT", "k", "two", "AT", t]);
    assert_eq!(
        e,
        "ERR policy 'two' has 2 limiter(s) and needs one key per limiter, got 1"
    );
    let e = c.err(&args!["RL.ALL", 1, "k", "POLICY", "two", "AT", t]);
    assert_eq!(
        e,
        "ERR policy 'two' has 2 limiter(s) and needs one key per limiter, got 1"
    );
    let e = c.err(&args!["RL.CHECKALL", 3, "a", "b", "c", "POLICY", "two"]);
    assert!(e.contains("policy 'two'"), "{e}");
}

/// An application must not silently lose its limit: after DEL, every call under the policy is
/// an error naming it, and nothing is charged.
#[test]
fn del_makes_later_calls_fail_naming_the_policy() {
    let s = Server::start();
    let mut c = s.conn();
    set(&mut c, &["gone", "GCRA", "5", "1", "1s"]);
    let t = base_ms();
    c.ints(&args!["RL.LIMIT", "k", "gone", "AT", t]);
    c.int(&["RL.POLICY", "DEL", "gone"]);
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]);
    for call in [
        args!["RL.LIMIT", "k", "gone", "AT", t].to_vec(),
        args!["RL.ALL", 1, "k", "POLICY", "gone", "AT", t].to_vec(),
        args!["RL.CHECKALL", 1, "k", "POLICY", "gone"].to_vec(),
    ] {
        assert_eq!(c.err(&call), "ERR unknown policy 'gone'");
    }
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]), digest);
}

/// A changed policy keeps the units used (the parameter-change rule): 8 of a GCRA burst of 10
/// used, the policy raised to a burst of 20 at the same rate leaves 12, never 20.
#[test]
fn a_changed_policy_keeps_the_units_used() {
    let s = Server::start();
    let mut c = s.conn();
    set(&mut c, &["tier", "GCRA", "10", "1", "1s"]);
    let t = base_ms();
    assert_eq!(
        c.ints(&args!["RL.LIMIT", "k", "tier", "COST", 8, "AT", t])[..3],
        [8, 10, 2]
    );
    set(&mut c, &["tier", "GCRA", "20", "1", "1s"]);
    assert_eq!(
        c.ints(&args!["RL.LIMIT", "k", "tier", "COST", 0, "AT", t])[..3],
        [0, 20, 12]
    );
    // Lowered below the units used: denied until they drain (8 used, burst 5: 3 s).
    set(&mut c, &["tier", "GCRA", "5", "1", "1s"]);
    assert_eq!(
        c.ints(&args!["RL.LIMIT", "k", "tier", "AT", t]),
        [0, 5, 0, 4000, 8000]
    );
}

fn fill(c: &mut Conn) {
    set(c, &["free", "GCRA", "10", "5", "1s", "DESC", "free tier"]);
    set(c, &["pro", "TOKENBUCKET", "100", "10", "1s", "SHADOW"]);
    set(c, &["old", "FIXED", "5", "1m"]);
    set(c, &["pro", "TOKENBUCKET", "200", "10", "1s"]);
    c.int(&["RL.POLICY", "DEL", "old"]);
    set(
        c,
        &[
            "multi",
            "SLIDING",
            "3",
            "1s",
            "SLIDINGCOUNTER",
            "9",
            "1m",
            "NAME",
            "m",
        ],
    );
}

/// (LIST, checksum, DUMP) of a server.
fn policies(c: &mut Conn) -> (Vec<(String, i64)>, String, Reply) {
    (list(c), checksum(c), c.cmd(&["RL.POLICY", "DUMP"]))
}

#[test]
fn policies_survive_debug_reload_and_an_rdb_restart() {
    let mut s = Server::start_with(&["--save", "3600 1"]);
    let mut c = s.conn();
    fill(&mut c);
    let before = policies(&mut c);
    assert_eq!(
        before.0,
        [
            ("free".to_string(), 1),
            ("multi".to_string(), 5),
            ("pro".to_string(), 4)
        ]
    );
    c.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(policies(&mut c), before);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(policies(&mut c), before);
    // And they apply.
    assert_eq!(c.ints(&["RL.LIMIT", "k", "free"])[..2], [1, 10]);
}

/// AOF with and without the RDB preamble, replayed as it is and after BGREWRITEAOF (without a
/// preamble the rewritten base file holds only keys: the policies reach the new incremental
/// file), with changes after the rewrite.
fn aof_round_trip(preamble: &str) {
    let mut s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
    let mut c = s.conn();
    fill(&mut c);
    let before = policies(&mut c);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(policies(&mut c), before, "replayed");
    c.cmd(&["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    // The rewrite is not propagated (replicas and the AOF never get BGREWRITEAOF).
    for f in aof_files(&s.dir, ".incr.aof") {
        let text = std::fs::read(&f).unwrap();
        assert!(
            !text
                .windows(12)
                .any(|w| w.eq_ignore_ascii_case(b"bgrewriteaof")),
            "{}",
            f.display()
        );
    }
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(policies(&mut c), before, "after BGREWRITEAOF");
    set(&mut c, &["late", "GCRA", "1", "1", "1s"]);
    c.int(&["RL.POLICY", "DEL", "free"]);
    let after = policies(&mut c);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(policies(&mut c), after, "after a restart");
    // A second rewrite keeps them too.
    c.cmd(&["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(
        policies(&mut c),
        after,
        "after a second rewrite and a restart"
    );
}

#[test]
fn policies_survive_aof_without_rdb_preamble_and_its_rewrite() {
    aof_round_trip("no");
}

#[test]
fn policies_survive_aof_with_rdb_preamble_and_its_rewrite() {
    aof_round_trip("yes");
}

/// `CONFIG SET appendonly yes` on a running server writes its first AOF by a rewrite: the
/// policies made before are in it (a server started on that AOF alone has them).
#[test]
fn policies_reach_an_aof_turned_on_at_runtime() {
    let mut s = Server::start_with(&["--aof-use-rdb-preamble", "no"]);
    let mut c = s.conn();
    fill(&mut c);
    let before = policies(&mut c);
    c.ok(&["CONFIG", "SET", "appendonly", "yes"]);
    wait_rewrite_done(&mut c);
    drop(c);
    s.kill_nosave();
    assert!(!s.dir.join("dump.rdb").exists());
    let again = Server::start_in(
        &s.dir,
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"],
    );
    let mut c = again.conn();
    assert_eq!(policies(&mut c), before);
}

#[test]
fn a_replica_and_an_aof_replay_end_with_the_same_policies_and_versions() {
    let master = Server::start_with(&["--appendonly", "yes"]);
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    fill(&mut m);
    // A RESTORE MERGE and a full RESTORE from another server.
    let other = Server::start();
    let mut o = other.conn();
    set(&mut o, &["x", "GCRA", "3", "1", "1s"]);
    set(&mut o, &["y", "GCRA", "4", "1", "1s"]);
    let dump = o.cmd(&["RL.POLICY", "DUMP"]).as_bytes().unwrap().to_vec();
    m.ok(&args!["RL.POLICY", "RESTORE", dump.clone(), "MERGE"]);
    set(&mut m, &["z", "GCRA", "5", "1", "1s"]);
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    let on_master = policies(&mut m);
    assert_eq!(policies(&mut r), on_master);
    assert_eq!(on_master.0.len(), 6);
    m.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(policies(&mut m), on_master);
    // A full RESTORE replaces everything, on both.
    m.ok(&args!["RL.POLICY", "RESTORE", dump]);
    wait_replica_synced(&master, &replica);
    let on_master = policies(&mut m);
    assert_eq!(on_master.0, [("x".to_string(), 1), ("y".to_string(), 2)]);
    assert_eq!(policies(&mut r), on_master);
    // A replica refuses policy writes from clients.
    let e = r.err(&["RL.POLICY", "SET", "q", "GCRA", "1", "1", "1s"]);
    assert!(e.starts_with("READONLY"), "{e}");
    // And calls under a policy replicate the key exactly.
    let t = base_ms();
    m.ints(&args!["RL.LIMIT", "k", "x", "COST", 2, "AT", t]);
    wait_replica_synced(&master, &replica);
    assert_eq!(
        r.cmd(&["DEBUG", "DIGEST-VALUE", "k"]),
        m.cmd(&["DEBUG", "DIGEST-VALUE", "k"])
    );
}

/// A replica that syncs after the policies were made gets them from the master's RDB (aux data),
/// and the ones it held before are gone.
#[test]
fn a_full_sync_replaces_a_replicas_policies() {
    let master = Server::start();
    let mut m = master.conn();
    fill(&mut m);
    let stale = Server::start();
    let mut r = stale.conn();
    set(&mut r, &["stale", "GCRA", "1", "1", "1s"]);
    r.ok(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until(
        "the replica's link",
        std::time::Duration::from_secs(10),
        || r.info_field("replication", "master_link_status").as_deref() == Some("up"),
    );
    wait_replica_synced(&master, &stale);
    assert_eq!(policies(&mut r), policies(&mut m));
}

#[test]
fn dump_and_restore_copy_the_policies_to_another_server() {
    let a = Server::start();
    let b = Server::start();
    let (mut ca, mut cb) = (a.conn(), b.conn());
    fill(&mut ca);
    set(&mut cb, &["theirs", "GCRA", "1", "1", "1s"]);
    let dump = ca.cmd(&["RL.POLICY", "DUMP"]).as_bytes().unwrap().to_vec();
    // A damaged payload changes nothing.
    let before_b = policies(&mut cb);
    for bad in [
        dump[..dump.len() - 1].to_vec(),
        [dump.as_slice(), b"x"].concat(),
        b"RLP".to_vec(),
        Vec::new(),
    ] {
        let e = cb.err(&args!["RL.POLICY", "RESTORE", bad]);
        assert!(e.starts_with("ERR invalid policy payload"), "{e}");
    }
    assert_eq!(policies(&mut cb), before_b);
    // MERGE adds; without it the target ends with exactly the source's policies.
    cb.ok(&args!["RL.POLICY", "RESTORE", dump.clone(), "MERGE"]);
    assert_eq!(list(&mut cb).len(), 4);
    cb.ok(&args!["RL.POLICY", "RESTORE", dump]);
    assert_eq!(policies(&mut cb), policies(&mut ca));
}

/// The INFO section read as redis_exporter reads a module section: `name:value` lines under a
/// `# ratelimit...` header, every value numeric except the known text fields; the per-policy
/// counters add up to the calls made.
#[test]
fn info_counters_add_up_to_the_calls_made_as_an_exporter_reads_them() {
    let s = Server::start();
    let mut c = s.conn();
    set(&mut c, &["api", "GCRA", "10", "1", "1m"]);
    set(
        &mut c,
        &["pair", "GCRA", "3", "1", "1m", "FIXED", "100", "1m"],
    );
    let t = base_ms();
    // api: 10 granted (remaining 9..0: the last two, remaining 1 and 0, are below the default
    // ratelimit.near-limit-percent, 20% of 10), then 4 denied.
    for _ in 0..14 {
        c.ints(&args!["RL.LIMIT", "k", "api", "AT", t]);
    }
    // pair: 3 granted (remaining 2, 1, 0 of 3: the last below 20%), 2 denied.
    for _ in 0..5 {
        c.ints(&args![
            "RL.ALL", 2, "{p}a", "{p}b", "POLICY", "pair", "AT", t
        ]);
    }
    let text = c.ok(&["INFO", "ratelimit"]).as_str().unwrap();
    let mut section = None;
    let mut fields = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("# ") {
            section = Some(h.to_string());
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let sec = section.as_deref().expect("a line before any section");
        assert!(sec.starts_with("ratelimit"), "{sec}");
        let (name, value) = line.split_once(':').expect("name:value");
        assert!(
            name.starts_with(|ch: char| ch.is_ascii_alphabetic())
                && name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_'),
            "{name}"
        );
        let numeric = value.parse::<f64>().is_ok();
        // Text fields: the checksum, the version, and the per-command dictionaries
        // (`calls=..,granted=..`).
        let known_text = name == "ratelimit_policies_checksum"
            || name == "ratelimit_version"
            || value.contains('=');
        assert!(numeric || known_text, "{line}");
        if numeric {
            fields.insert(name.to_string(), value.parse::<u64>().unwrap());
        }
    }
    let f = |n: &str| fields[&format!("ratelimit_policy_{n}")];
    assert_eq!(fields["ratelimit_policies"], 2);
    for (p, calls, granted, near) in [("api", 14, 10, 2), ("pair", 5, 3, 1)] {
        assert_eq!(f(&format!("{p}_calls")), calls, "{p}");
        assert_eq!(f(&format!("{p}_granted")), granted, "{p}");
        assert_eq!(f(&format!("{p}_denied")), calls - granted, "{p}");
        assert_eq!(f(&format!("{p}_shadow_denied")), 0, "{p}");
        assert_eq!(f(&format!("{p}_near_limit")), near, "{p}");
    }
    // The checksum is 16 hex digits, the same on a server restored from a DUMP.
    let sum = checksum(&mut c);
    assert_eq!(sum.len(), 16);
    assert!(sum.chars().all(|ch| ch.is_ascii_hexdigit()));
}

/// A damaged policy payload in the RDB's aux data fails the load cleanly: the server says so and
/// exits (no panic), rather than starting with policies missing or wrong.
#[test]
fn a_damaged_policy_payload_in_the_rdb_fails_the_load_cleanly() {
    // Neither compressed nor checksummed, so the definition's bytes can be changed in place.
    let mut s = Server::start_with(&["--rdbcompression", "no", "--rdbchecksum", "no"]);
    let mut c = s.conn();
    set(&mut c, &["free", "GCRA", "10", "1", "1s"]);
    c.ok(&["SAVE"]);
    drop(c);
    s.kill_nosave();
    let rdb = s.dir.join("dump.rdb");
    let mut bytes = std::fs::read(&rdb).unwrap();
    let at = bytes
        .windows(4)
        .position(|w| w == b"GCRA")
        .expect("the definition in the RDB");
    bytes[at + 3] = b'X';
    std::fs::write(&rdb, bytes).unwrap();
    let log = s.dir.join("damaged.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut cmd = std::process::Command::new(server_bin());
    cmd.args([
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ])
    .arg("--dir")
    .arg(&s.dir)
    .arg("--logfile")
    .arg(&log)
    .arg("--loadmodule")
    .arg(module_path());
    if let Some(ld) = std::env::var_os("RL_LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        cmd.env("LD_LIBRARY_PATH", ld);
    }
    let mut child = cmd.spawn().unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server loaded a damaged policy payload");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // It exited (the server's exit status after an unloadable RDB is its own: 0 on 7.0, which
    // runs its RDB check first), saying why.
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("not able to load"), "{status}: {text}");
    assert!(
        text.contains(
            "ratelimit: the RDB's named policies (aux data) are invalid \
             (ERR invalid policy payload: policy 'free': ERR unknown limiter 'GCRX')"
        ),
        "{text}"
    );
    assert!(!text.contains("panic"), "{text}");
}

/// DUMP of a key's value (independent of its name), to compare two keys' states.
fn value_of(c: &mut Conn, key: &str) -> Reply {
    c.cmd(&["DUMP", key])
}

/// A policy set with SHADOW behaves as the SHADOW option on every call under it: the state
/// changes exactly as enforced (a would-be denial charges nothing), the reply grants, DETAIL
/// says `reason shadow`, the counters count `shadow_denied`. Switching the policy to enforced
/// changes no state: the next calls decide from the state the shadow calls left, as an
/// enforced policy would have all along.
#[test]
fn a_shadow_policy_charges_as_enforced_and_switching_to_enforced_changes_no_state() {
    let s = Server::start();
    let mut c = s.conn();
    set(&mut c, &["enforced", "GCRA", "3", "1", "1s"]);
    set(&mut c, &["rollout", "GCRA", "3", "1", "1s", "SHADOW"]);
    let t = base_ms();
    // Five calls at one instant, burst 3: enforcement grants 3 and denies 2 (retry 1 s).
    for i in 0..5i64 {
        let enforced = c.ints(&args!["RL.LIMIT", "e", "enforced", "AT", t]);
        let shadow = c.ints(&args!["RL.LIMIT", "s", "rollout", "AT", t]);
        if i < 3 {
            assert_eq!(enforced, [1, 3, 2 - i, 0, (i + 1) * 1000]);
            assert_eq!(shadow, enforced);
        } else {
            assert_eq!(enforced, [0, 3, 0, 1000, 3000]);
            // Let through: granted the cost, no wait, the state after the call.
            assert_eq!(shadow, [1, 3, 0, 0, 3000]);
        }
        assert_eq!(value_of(&mut c, "s"), value_of(&mut c, "e"), "call {i}");
    }
    // DETAIL: reason shadow, denied_by the would-be denier, the entry as enforcement replies.
    let r = c.cmd(&args!["RL.LIMIT", "s", "rollout", "DETAIL", "AT", t]);
    let items = r.as_array().unwrap();
    assert_eq!(items[..5], [1, 3, 0, 0, 3000].map(Reply::Int));
    assert_eq!(items[5], Reply::Bulk(b"s".to_vec()));
    assert_eq!(items[6], Reply::Bulk(b"shadow".to_vec()));
    let entry = items[7].as_array().unwrap()[0].as_array().unwrap().to_vec();
    assert_eq!(
        entry[3],
        Reply::Int(0),
        "the entry shows enforcement's grant"
    );
    assert_eq!(entry[9], Reply::Bulk(b"rollout".to_vec()));
    // Counters: 6 calls, all granted, 3 of them would have been denied.
    let field = |c: &mut Conn, f: &str| {
        c.info_field("ratelimit", &format!("ratelimit_policy_rollout_{f}"))
            .unwrap()
    };
    assert_eq!(field(&mut c, "calls"), "6");
    assert_eq!(field(&mut c, "granted"), "6");
    assert_eq!(field(&mut c, "denied"), "0");
    assert_eq!(field(&mut c, "shadow_denied"), "3");
    // Enforce it: no state changes, and from now on both keys decide alike.
    let before = value_of(&mut c, "s");
    set(&mut c, &["rollout", "GCRA", "3", "1", "1s"]);
    assert_eq!(value_of(&mut c, "s"), before);
    for dt in [0, 500, 1000, 1000, 2500] {
        let enforced = c.ints(&args!["RL.LIMIT", "e", "enforced", "AT", t + dt]);
        let now_enforced = c.ints(&args!["RL.LIMIT", "s", "rollout", "AT", t + dt]);
        assert_eq!(now_enforced, enforced, "at +{dt}");
        assert_eq!(value_of(&mut c, "s"), value_of(&mut c, "e"), "at +{dt}");
    }
    // The bucket was full at t (TAT t + 3 s, one unit a second): denied at +0 and +500, granted
    // at +1000, denied again at +1000, granted at +2500.
    assert_eq!(field(&mut c, "denied"), "3");
}

/// A policy of several limiters set with SHADOW: RL.ALL lets the call through and names the
/// would-be denier; RL.CHECKALL previews the same.
#[test]
fn a_shadow_policy_of_several_limiters_lets_rl_all_through() {
    let s = Server::start();
    let mut c = s.conn();
    set(
        &mut c,
        &[
            "pair", "GCRA", "5", "1", "1s", "FIXED", "1", "1m", "NAME", "minute", "SHADOW",
        ],
    );
    let t = base_ms() / 60_000 * 60_000;
    let call = |c: &mut Conn, cmd: &str| {
        c.cmd(&args![
            cmd, 2, "{u}g", "{u}f", "POLICY", "pair", "DETAIL", "AT", t
        ])
    };
    let first = call(&mut c, "RL.ALL");
    assert_eq!(
        first.as_array().unwrap()[6],
        Reply::Bulk(b"granted".to_vec())
    );
    for cmd in ["RL.CHECKALL", "RL.ALL"] {
        let r = call(&mut c, cmd);
        let items = r.as_array().unwrap();
        assert_eq!(items[0], Reply::Int(1), "{cmd}");
        assert_eq!(items[5], Reply::Bulk(b"minute".to_vec()), "{cmd}");
        assert_eq!(items[6], Reply::Bulk(b"shadow".to_vec()), "{cmd}");
    }
    // The second RL.ALL charged nothing (FIXED would deny it): GCRA has 4 of 5 left.
    assert_eq!(
        c.ints(&args!["RL.GCRA", "{u}g", 5, 1, "1s", "COST", 0, "AT", t])[2],
        4
    );
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_policy_pair_shadow_denied")
            .as_deref(),
        Some("1")
    );
}

/// RL.POLICY HELP lists the subcommands (the server's reply to an unknown one points to it);
/// a CONCURRENCY policy takes its lease id from DEDUP, as in RL.ALL.
#[test]
fn help_and_a_concurrency_policy() {
    let s = Server::start();
    let mut c = s.conn();
    let help = c.cmd(&["RL.POLICY", "HELP"]);
    let lines: Vec<String> = help
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Reply::as_str)
        .collect();
    for sub in ["SET", "GET", "DEL", "LIST", "DUMP", "RESTORE", "HELP"] {
        assert!(lines.iter().any(|l| l.starts_with(sub)), "{sub}: {lines:?}");
    }
    assert!(c.err(&["RL.POLICY", "NOPE"]).contains("RL.POLICY HELP"));
    set(&mut c, &["slots", "CONCURRENCY", "2", "1m"]);
    let t = base_ms();
    assert_eq!(
        c.err(&args!["RL.LIMIT", "k", "slots", "AT", t]),
        "ERR a CONCURRENCY policy needs DEDUP id (the lease id)"
    );
    assert_eq!(
        c.ints(&args!["RL.LIMIT", "k", "slots", "DEDUP", "a", "AT", t])[..3],
        [1, 2, 1]
    );
    assert_eq!(
        c.ints(&args!["RL.LIMIT", "k", "slots", "DEDUP", "b", "AT", t])[..3],
        [1, 2, 0]
    );
    assert_eq!(
        c.ints(&args!["RL.LIMIT", "k", "slots", "DEDUP", "x", "AT", t])[..3],
        [0, 2, 0]
    );
    assert_eq!(c.int(&args!["RL.RELEASE", "k", "a", "AT", t]), 1);
}

/// `GET plain` on the server at `port`, the raw reply; `None` if the connection fails.
fn get_plain(port: u16) -> Option<Vec<u8>> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .ok()?;
    s.write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nplain\r\n").ok()?;
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).ok()?;
    Some(buf.get(..n)?.to_vec())
}

/// Whether an RDB saved by a server with the module (after a policy was set and deleted, or
/// none ever) loads in a server without it, and whether the server has `aux_save2`.
fn rdb_loads_without_the_module(had_policy: bool) -> (bool, bool) {
    let mut s = Server::start();
    let aux_save2 = s.is_valkey() || s.version_at_least(7, 2);
    let mut c = s.conn();
    c.ok(&["SET", "plain", "1"]);
    if had_policy {
        set(&mut c, &["gone", "GCRA", "1", "1", "1s"]);
        c.int(&["RL.POLICY", "DEL", "gone"]);
    }
    c.ok(&["SAVE"]);
    drop(c);
    s.kill_nosave();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = s.dir.join("bare.log");
    let mut cmd = std::process::Command::new(server_bin());
    cmd.args([
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
    ])
    .arg("--dir")
    .arg(&s.dir)
    .arg("--logfile")
    .arg(&log);
    if let Some(ld) = std::env::var_os("RL_LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        cmd.env("LD_LIBRARY_PATH", ld);
    }
    let mut child = cmd.spawn().unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut loaded = false;
    while std::time::Instant::now() < end {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        // A server that fails the load may accept a connection first and exit under it: a
        // reset is "not loaded (yet)", never a panic of the test.
        if get_plain(port).as_deref() == Some(b"$1\r\n1\r\n".as_slice()) {
            loaded = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(loaded || text.contains("ratelimit"), "{text}");
    (loaded, aux_save2)
}

/// Where the server has `aux_save2` (Redis 7.2+, Valkey), the RDB of a server that never had a
/// policy has no aux data of the module: a server without the module loads it (a downgrade or a
/// removal stays possible while no policy was ever defined). Redis 7.0 always writes the aux
/// record. Once a version was given, the aux record keeps the counter even with no policy left
/// (a version is never reused), so such an RDB needs the module on every server.
#[test]
fn an_rdb_without_policies_loads_without_the_module_where_the_server_allows() {
    let (loaded, aux_save2) = rdb_loads_without_the_module(false);
    assert_eq!(loaded, aux_save2);
    let (loaded, _) = rdb_loads_without_the_module(true);
    assert!(!loaded);
}

/// `HOLD` under `POLICY name` follows the same rules as with the limiters written out: it needs
/// `DEDUP id` and no concurrency limiter (refused, nothing charged), and with them the units are
/// a reservation RL.SETTLE settles per key.
#[test]
fn hold_under_a_policy_needs_dedup_and_is_settled() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    set(
        &mut c,
        &[
            "tokens",
            "GCRA",
            "10",
            "1",
            "1s",
            "TOKENBUCKET",
            "100",
            "10",
            "1s",
            "CHARGE",
            "40",
        ],
    );
    set(&mut c, &["slots", "CONCURRENCY", "3", "1m"]);
    let at = t.to_string();
    let e = c.err(&[
        "RL.ALL", "2", "{u}r", "{u}t", "POLICY", "tokens", "HOLD", "1m", "AT", &at,
    ]);
    assert!(e.contains("HOLD needs DEDUP id"), "{e}");
    let e = c.err(&[
        "RL.ALL", "1", "{u}c", "POLICY", "slots", "DEDUP", "x", "HOLD", "1m", "AT", &at,
    ]);
    assert!(
        e.contains("HOLD does not apply to a concurrency limiter"),
        "{e}"
    );
    assert_eq!(
        c.int(&["EXISTS", "{u}r", "{u}t", "{u}c"]),
        0,
        "nothing charged"
    );
    // Held: 1 request and 40 tokens; the settle charges 1 and 25, giving 15 tokens back.
    let r = c.ints(&[
        "RL.ALL", "2", "{u}r", "{u}t", "POLICY", "tokens", "DEDUP", "q", "HOLD", "1m", "AT", &at,
    ]);
    assert_eq!(r[0], 1);
    let r = c.cmd(&["RL.SETTLE", "2", "{u}r", "{u}t", "q", "1", "25", "AT", &at]);
    let replies = r.as_array().unwrap_or_else(|| panic!("{r:?}"));
    let tokens: Vec<i64> = replies[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_int().unwrap())
        .collect();
    // 100 tokens, 25 used: 75 remaining.
    assert_eq!(tokens[..3], [25, 100, 75]);
}
