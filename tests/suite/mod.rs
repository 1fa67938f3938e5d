//! The checks every fixed-size limiter command must pass end to end, written once and run by
//! each command's test file (`tests/token_bucket.rs`, `tests/fixed.rs`, ...) with its own
//! [`Spec`]: reply shape under RESP2 and RESP3, the shared option and WRONGTYPE errors, DEDUP,
//! expiry at the reset time, nothing written or propagated by denied and PEEK calls,
//! persistence (DEBUG RELOAD, AOF rewrites with and without the RDB preamble, restart) and
//! replication to a replica held back while the master's clock moves.
//!
//! Use from a test file with `mod common; mod suite; use common::*;`.
#![allow(dead_code)]

use std::time::Duration;

use crate::common::*;

/// The checks that need nothing but the [`Spec`], one test each, for a command's test file:
/// `shared_checks!(SPEC);` (the file's name tells which command a failing test is about).
#[macro_export]
macro_rules! shared_checks {
    ($spec:expr) => {
        #[test]
        fn resp3_reply_is_the_same_reply_as_a_map() {
            suite::check_resp3_map(&$spec);
        }

        #[test]
        fn wrongtype_names_both_algorithms() {
            suite::check_wrongtype(&$spec);
        }

        #[test]
        fn dedup_charges_a_retried_request_once() {
            suite::check_dedup(&$spec);
        }

        #[test]
        fn denied_and_peek_write_and_propagate_nothing() {
            suite::check_denied_and_peek_write_nothing(&$spec);
        }

        #[test]
        fn info_describes_the_key() {
            suite::check_info(&$spec);
        }

        #[test]
        fn state_survives_debug_reload() {
            suite::check_debug_reload(&$spec);
        }

        #[test]
        fn state_survives_aof_rewrite_with_rdb_preamble() {
            suite::check_aof_rewrite(&$spec, "yes");
        }

        #[test]
        fn state_survives_aof_rewrite_without_rdb_preamble() {
            suite::check_aof_rewrite(&$spec, "no");
        }

        #[test]
        fn state_survives_restart() {
            suite::check_restart(&$spec);
        }

        #[test]
        fn replica_matches_a_master_whose_clock_moved() {
            suite::check_replication(&$spec);
        }

        #[test]
        fn refund_gives_back_units_never_past_fresh() {
            suite::check_refund(&$spec);
        }

        #[test]
        fn block_denies_uncharged_until_it_ends() {
            suite::check_block(&$spec);
        }

        #[test]
        fn check_agrees_with_peek_and_writes_nothing() {
            suite::check_check(&$spec);
        }

        #[test]
        fn copy_rename_restore_keep_block_and_refund() {
            suite::check_copy_rename_restore(&$spec);
        }
    };
}

/// One limiter command under test.
pub struct Spec {
    /// The command as users type it (`RL.FIXED`); WRONGTYPE errors name it so.
    pub command: &'static str,
    /// Positional parameters of a small limiter (a limit of about 5, a period or window of one
    /// second), after the key.
    pub params: &'static [&'static str],
    /// Other parameters of the same algorithm: calling with them changes the limiter's
    /// parameters.
    pub changed: &'static [&'static str],
    /// `params` and `changed` with periods of minutes, for traffic on the server's own clock
    /// whose keys must outlive the checks.
    pub slow: &'static [&'static str],
    pub slow_changed: &'static [&'static str],
    /// The name RL.INFO gives the algorithm.
    pub info_name: &'static str,
    /// RL.INFO's parameter names and values for `params`.
    pub info_params: &'static [(&'static str, i64)],
    /// `limit`, `remaining` and `reset_after_ms` of a fresh key with `params` right after a
    /// call of `COST 2` at a round second (worked out by hand from the parameters).
    pub after_cost_2: [i64; 3],
}

/// The command with `params` for `key`, then `extra` and, if given, `AT at`.
pub fn command(
    spec: &Spec,
    key: &str,
    params: &[&str],
    extra: &[&str],
    at: Option<u64>,
) -> Vec<Vec<u8>> {
    let mut cmd: Vec<Vec<u8>> = vec![spec.command.into(), key.into()];
    cmd.extend(params.iter().map(|p| p.as_bytes().to_vec()));
    cmd.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
    if let Some(at) = at {
        cmd.push(b"AT".to_vec());
        cmd.push(at.to_string().into_bytes());
    }
    cmd
}

/// The five-integer reply of a call with `spec.params` at `at`.
pub fn call(c: &mut Conn, spec: &Spec, key: &str, extra: &[&str], at: u64) -> Vec<i64> {
    c.ints(&command(spec, key, spec.params, extra, Some(at)))
}

fn digest(c: &mut Conn, key: &str) -> Reply {
    c.cmd(&["DEBUG", "DIGEST-VALUE", key])
}

/// Under RESP3 the reply is a map with the five names in order, and the same values as RESP2.
pub fn check_resp3_map(spec: &Spec) {
    let s = Server::start();
    let mut c2 = s.conn();
    let mut c3 = s.conn();
    c3.ok(&["HELLO", "3"]);
    let t = base_ms();
    for (i, extra) in [&[][..], &["COST", "2"], &["COST", "100"], &["PEEK"]]
        .iter()
        .enumerate()
    {
        let want = call(&mut c2, spec, "two", extra, t + i as u64);
        let r = c3.cmd(&command(
            spec,
            "three",
            spec.params,
            extra,
            Some(t + i as u64),
        ));
        let Reply::Map(fields) = r else {
            panic!("{}: expected a map, got {r:?}", spec.command)
        };
        let names: Vec<String> = fields.iter().map(|(k, _)| k.as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "granted",
                "limit",
                "remaining",
                "retry_after_ms",
                "reset_after_ms"
            ]
        );
        let values: Vec<i64> = fields.iter().map(|(_, v)| v.as_int().unwrap()).collect();
        assert_eq!(values, want, "{extra:?}");
    }
}

/// The shared option errors, each naming its argument, and the command's own `cases`
/// (arguments after the key, expected error). Nothing is created by a failed call.
pub fn check_errors(spec: &Spec, cases: &[(&[&str], &str)]) {
    let s = Server::start();
    let mut c = s.conn();
    let p = spec.params;
    let long_id = "x".repeat(257);
    let shared: Vec<(Vec<&str>, String)> = vec![
        (vec!["COST"], "ERR syntax error, COST needs a value".into()),
        (
            vec!["COST", "-1"],
            "ERR COST must be a non-negative integer".into(),
        ),
        (
            vec!["COST", "9223372036854775808"],
            "ERR COST must be a non-negative integer".into(),
        ),
        (
            vec!["PEEK", "peek"],
            "ERR syntax error, PEEK given more than once".into(),
        ),
        (
            vec!["DEDUP", long_id.as_str()],
            "ERR DEDUP id must be at most 256 bytes".into(),
        ),
        (
            vec!["AT", "soon"],
            "ERR invalid time 'soon' for AT, expected unix milliseconds".into(),
        ),
        (vec!["FOO"], "ERR unknown option 'FOO'".into()),
    ];
    for (extra, want) in &shared {
        assert_eq!(
            c.err(&command(spec, "k", p, extra, None)),
            *want,
            "{extra:?}"
        );
    }
    for (args, want) in cases {
        assert_eq!(
            c.err(&command(spec, "k", args, &[], None)),
            *want,
            "{args:?}"
        );
    }
    // Too few arguments: Redis's own arity message, naming the registered command.
    let short = &p[..p.len() - 1];
    assert_eq!(
        c.err(&command(spec, "k", short, &[], None)),
        format!(
            "ERR wrong number of arguments for '{}' command",
            spec.command.to_lowercase()
        )
    );
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
}

/// A key of another algorithm, or of another Redis type, is a WRONGTYPE error naming both
/// algorithms, and is left untouched.
pub fn check_wrongtype(spec: &Spec) {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // A key of another algorithm (GCRA, or the token bucket when GCRA is under test).
    let foreign = if spec.command == "RL.GCRA" {
        "RL.TOKENBUCKET"
    } else {
        "RL.GCRA"
    };
    c.ints(&crate::args![foreign, "other", 10, 1, "1s", "AT", t]);
    let before = digest(&mut c, "other");
    assert_eq!(
        c.err(&command(spec, "other", spec.params, &[], Some(t))),
        format!(
            "WRONGTYPE key holds a {foreign} limiter, not {}",
            spec.command
        )
    );
    assert_eq!(digest(&mut c, "other"), before);
    call(&mut c, spec, "mine", &[], t);
    for other in [
        &crate::args!["RL.GCRA", "mine", 10, 1, "1s"][..],
        &crate::args!["RL.TOKENBUCKET", "mine", 10, 1, "1s"],
        &crate::args!["RL.FIXED", "mine", 10, "1s"],
        &crate::args!["RL.SLIDINGCOUNTER", "mine", 10, "1s"],
    ] {
        if other[0] == spec.command.as_bytes() {
            continue;
        }
        let name = String::from_utf8(other[0].clone()).unwrap();
        assert_eq!(
            c.err(other),
            format!("WRONGTYPE key holds a {} limiter, not {name}", spec.command)
        );
    }
    c.ok(&["SET", "plain", "x"]);
    assert_eq!(
        c.err(&command(spec, "plain", spec.params, &[], Some(t))),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(c.cmd(&["GET", "plain"]), Reply::Bulk(b"x".to_vec()));
    assert!(c.err(&["GET", "mine"]).starts_with("WRONGTYPE"));
}

/// A retried request carrying the same DEDUP id is not charged again: it gets the remembered
/// grant and the current state, writes nothing, propagates nothing. Other ids are charged; a
/// denied call does not remember its id.
pub fn check_dedup(spec: &Spec) {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut c = master.conn();
    let t = base_ms();
    let [limit, remaining, reset] = spec.after_cost_2;
    let first = call(&mut c, spec, "k", &["COST", "2", "DEDUP", "req-1"], t);
    assert_eq!(first, [2, limit, remaining, 0, reset]);
    let before = digest(&mut c, "k");
    let expiry = c.int(&["PEXPIRETIME", "k"]);
    // The key lives until the limiter is fresh and the id forgotten: every `params` has a
    // period or window of 1 s, for which the id is remembered.
    assert_eq!(expiry, t as i64 + reset.max(1000));
    wait_replica_synced(&master, &replica);
    let offset = c.info_field("replication", "master_repl_offset");
    // 1 ms later the retry is not charged: the same units remain, the reset is 1 ms nearer.
    let again = call(&mut c, spec, "k", &["COST", "2", "DEDUP", "req-1"], t + 1);
    assert_eq!(again, [2, limit, remaining, 0, reset - 1]);
    assert_eq!(digest(&mut c, "k"), before);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), expiry);
    assert_eq!(c.info_field("replication", "master_repl_offset"), offset);
    // Ids are binary-safe: another id is charged.
    let other = call(&mut c, spec, "k", &["COST", "2", "DEDUP", "req-1\0"], t + 1);
    assert_eq!((other[0], other[2]), (2, remaining - 2));
    // A denied call (cost above the limit) does not remember its id.
    let denied = call(&mut c, spec, "k", &["COST", "1000", "DEDUP", "big"], t + 1);
    assert_eq!((denied[0], denied[3]), (0, -1));
    let charged = call(&mut c, spec, "k", &["COST", "1", "DEDUP", "big"], t + 1);
    assert_eq!((charged[0], charged[2]), (1, remaining - 3));
    let info = c.cmd(&["RL.INFO", "k"]);
    let info = info.as_array().expect("RL.INFO array");
    let ids = info
        .chunks(2)
        .find(|kv| kv[0].as_str().as_deref() == Some("dedup_ids"))
        .map(|kv| kv[1].as_int());
    assert_eq!(ids, Some(Some(3)));
    wait_replica_synced(&master, &replica);
    assert_eq!(
        replica.conn().cmd(&["DEBUG", "DIGEST-VALUE", "k"]),
        digest(&mut c, "k")
    );
}

/// Every write sets the key's absolute expiry to the moment the limiter is fresh again, and a
/// call that writes nothing leaves it. `calls` are (ms after the base, extra arguments, the
/// expiry in ms after the base that the test worked out from the parameters); a granted call's
/// expiry is also its time plus its `reset_after_ms`.
pub fn check_expiry_is_reset_time(spec: &Spec, calls: &[(u64, &[&str], u64)]) {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    for (at, extra, expiry) in calls {
        let r = call(&mut c, spec, "k", extra, t + at);
        let want = (t + expiry) as i64;
        assert_eq!(
            c.int(&["PEXPIRETIME", "k"]),
            want,
            "+{at}ms {extra:?}: {r:?}"
        );
        if r[0] > 0 && !extra.contains(&"PEEK") {
            assert_eq!((t + at) as i64 + r[4], want, "+{at}ms {extra:?}: {r:?}");
        }
    }
}

/// A denied call, a PEEK, COST 0 and errors change nothing, on a missing key (nothing is
/// created) or an existing one (same value, same expiry), and propagate nothing.
pub fn check_denied_and_peek_write_nothing(spec: &Spec) {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut c = master.conn();
    let t = base_ms();
    let cost = |n: &'static str| -> Vec<&'static str> { vec!["COST", n] };
    call(&mut c, spec, "k", &cost("1000"), t);
    call(&mut c, spec, "k", &["PEEK"], t);
    call(&mut c, spec, "k", &cost("0"), t);
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
    // Exhaust the limiter.
    call(&mut c, spec, "k", &["COST", "1000", "BESTEFFORT"], t);
    wait_replica_synced(&master, &replica);
    let before = digest(&mut c, "k");
    let expiry = c.int(&["PEXPIRETIME", "k"]);
    let offset = c.info_field("replication", "master_repl_offset");
    let dirty = c.info_field("persistence", "rdb_changes_since_last_save");
    let denied = call(&mut c, spec, "k", &[], t + 1);
    assert_eq!(denied[0], 0, "{denied:?}");
    call(&mut c, spec, "k", &["PEEK"], t + 2);
    call(&mut c, spec, "k", &["COST", "0"], t + 2);
    call(&mut c, spec, "k", &["BESTEFFORT"], t + 1);
    call(&mut c, spec, "k", &["COST", "1000"], t + 2);
    c.cmd(&command(spec, "k", spec.changed, &["PEEK"], Some(t + 2)));
    c.cmd(&command(
        spec,
        "k",
        spec.params,
        &["COST", "x"],
        Some(t + 2),
    ));
    c.cmd(&crate::args!["RL.GCRA", "k", 1, 1, "1s"]);
    c.cmd(&["RL.INFO", "k"]);
    assert_eq!(digest(&mut c, "k"), before);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), expiry);
    assert_eq!(c.info_field("replication", "master_repl_offset"), offset);
    assert_eq!(
        c.info_field("persistence", "rdb_changes_since_last_save"),
        dirty
    );
}

/// RL.INFO names the algorithm and its parameters, and shows the reply of a `PEEK COST 0` at
/// the last update (the server's clock is an hour before it).
pub fn check_info(spec: &Spec) {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    assert_eq!(c.cmd(&["RL.INFO", "k"]), Reply::Nil);
    call(&mut c, spec, "k", &["COST", "2"], t);
    let info = c.cmd(&["RL.INFO", "k"]);
    let items = info.as_array().expect("RL.INFO array");
    assert_eq!(items[0], Reply::Bulk(b"algorithm".to_vec()));
    assert_eq!(items[1].as_str().as_deref(), Some(spec.info_name));
    let field = |name: &str| {
        items
            .chunks(2)
            .find(|kv| kv[0].as_str().as_deref() == Some(name))
            .and_then(|kv| kv[1].as_int())
    };
    for (name, value) in spec.info_params {
        assert_eq!(field(name), Some(*value), "{name}");
    }
    let [limit, remaining, reset] = spec.after_cost_2;
    assert_eq!(field("granted"), Some(0));
    assert_eq!(field("limit"), Some(limit));
    assert_eq!(field("remaining"), Some(remaining));
    assert_eq!(field("retry_after_ms"), Some(0));
    assert_eq!(field("reset_after_ms"), Some(reset));
    assert_eq!(field("blocked_ms"), Some(0));
    assert_eq!(field("dedup_ids"), Some(0));
    assert_eq!(c.cmd(&["TYPE", "k"]), Reply::Simple("ratelimit".into()));
    // No name twice, in either protocol (a RESP3 map with a repeated key loses a value).
    let names: Vec<String> = items.chunks(2).filter_map(|kv| kv[0].as_str()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    c.ok(&["HELLO", "3"]);
    let Reply::Map(map) = c.cmd(&["RL.INFO", "k"]) else {
        panic!("RL.INFO under RESP3 is not a map")
    };
    let map_names: Vec<String> = map.iter().filter_map(|(k, _)| k.as_str()).collect();
    assert_eq!(map_names, names);
}

/// Fill a few keys with granted calls, DEDUP ids and a parameter change, all at `AT` times
/// from `t`.
fn fill(c: &mut Conn, spec: &Spec, t: u64) -> Vec<String> {
    let mut keys = Vec::new();
    for i in 0..3u64 {
        let key = format!("{}:{i}", spec.command.to_lowercase());
        for step in 0..5u64 {
            let id = format!("id-{step}");
            call(
                c,
                spec,
                &key,
                &["COST", "1", "DEDUP", id.as_str()],
                t + i * 10 + step * 137,
            );
        }
        c.ints(&command(spec, &key, spec.changed, &[], Some(t + 1000)));
        // A settled refund, a block, or a block placed by a denied call.
        let at = (t + 1001).to_string();
        match i {
            0 => {
                // Settles the id (a changed FIXED or SLIDINGCOUNTER window has nothing to give).
                let r = c.cmd(&["RL.REFUND", &key, "1", "DEDUP", "id-4", "AT", &at]);
                assert!(r.as_array().is_some_and(|a| a.len() == 5), "{r:?}");
            }
            1 => assert_eq!(c.int(&["RL.BLOCK", &key, "1h", "AT", &at]), 3_600_000),
            _ => {
                let r = c.ints(&command(
                    spec,
                    &key,
                    spec.changed,
                    &["COST", "1000", "BLOCK", "1h"],
                    Some(t + 1001),
                ));
                assert_eq!((r[0], r[3]), (0, -1));
            }
        }
        keys.push(key);
    }
    keys
}

/// `(digest, expiry, state)` of every key, the state as a `PEEK COST 0` at `t` + 1.5 s.
fn snapshot(c: &mut Conn, spec: &Spec, keys: &[String], t: u64) -> Vec<(Reply, i64, Vec<i64>)> {
    let at = t + 1500;
    keys.iter()
        .map(|k| {
            let expiry = c.int(&["PEXPIRETIME", k.as_str()]);
            assert!(expiry > 0, "{k} has no expiry");
            let state = c.ints(&command(
                spec,
                k,
                spec.changed,
                &["PEEK", "COST", "0"],
                Some(at),
            ));
            (digest(c, k), expiry, state)
        })
        .collect()
}

/// The state survives DEBUG RELOAD (RDB save and load) byte for byte, with its expiry.
pub fn check_debug_reload(spec: &Spec) {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let keys = fill(&mut c, spec, t);
    let before = snapshot(&mut c, spec, &keys, t);
    c.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(snapshot(&mut c, spec, &keys, t), before);
}

/// The state survives an AOF rewrite (`preamble`: `yes` stores it as RDB, `no` as RL._RESTORE
/// commands) and the replay of later traffic from the incremental file.
pub fn check_aof_rewrite(spec: &Spec, preamble: &str) {
    let s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
    let mut c = s.conn();
    let t = base_ms();
    let keys = fill(&mut c, spec, t);
    let before = snapshot(&mut c, spec, &keys, t);
    wait_rewrite_done(&mut c);
    c.ok(&["BGREWRITEAOF"]);
    wait_rewrite_done(&mut c);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c, spec, &keys, t), before);
    // Traffic after the rewrite is in the incremental file, with its resolved AT.
    for (i, k) in keys.iter().enumerate() {
        c.ints(&command(
            spec,
            k,
            spec.changed,
            &["COST", "1"],
            Some(t + 1200 + i as u64),
        ));
    }
    let after = snapshot(&mut c, spec, &keys, t);
    assert_ne!(after, before);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(snapshot(&mut c, spec, &keys, t), after);
}

/// The state survives a restart on the same dir, from the RDB file and from the AOF.
pub fn check_restart(spec: &Spec) {
    let mut s = Server::start_with(&["--save", "3600 1"]);
    let mut c = s.conn();
    let t = base_ms();
    let keys = fill(&mut c, spec, t);
    let before = snapshot(&mut c, spec, &keys, t);
    c.ok(&["SAVE"]);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, spec, &keys, t), before);
    drop(c);

    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let t = base_ms();
    let keys = fill(&mut c, spec, t);
    let before = snapshot(&mut c, spec, &keys, t);
    drop(c);
    std::thread::sleep(Duration::from_millis(20));
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, spec, &keys, t), before);
}

/// A small deterministic generator, so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One random call on the server's own clock: a few keys, costs 0 to 3, PEEK, BESTEFFORT or a
/// DEDUP id now and then, and the other parameters one call in five.
fn random_call(c: &mut Conn, spec: &Spec, rng: &mut Rng) {
    let key = format!("k{}", rng.below(4));
    let params = if rng.below(5) == 0 {
        spec.slow_changed
    } else {
        spec.slow
    };
    let cost = rng.below(4).to_string();
    let id = rng.below(3).to_string();
    let mut extra = vec!["COST", cost.as_str()];
    match rng.below(10) {
        0 => extra.push("PEEK"),
        1 => extra.push("BESTEFFORT"),
        2 => extra.extend(["DEDUP", id.as_str()]),
        3 => extra.extend(["BLOCK", "300ms"]),
        4 => {
            // RL.REFUND, settling an id now and then: the limiter reply, or nil when missing.
            let mut cmd = vec!["RL.REFUND", key.as_str(), cost.as_str()];
            if rng.below(2) == 0 {
                cmd.extend(["DEDUP", id.as_str()]);
            }
            if cost != "0" {
                let r = c.cmd(&cmd);
                assert!(
                    r.is_nil() || r.as_array().is_some_and(|a| a.len() == 5),
                    "{r:?}"
                );
            }
            return;
        }
        5 if rng.below(3) == 0 => {
            assert!(c.int(&["RL.BLOCK", key.as_str(), "200ms"]) > 0);
            return;
        }
        6 if rng.below(3) == 0 => {
            assert!((0..=1).contains(&c.int(&["RL.UNBLOCK", key.as_str()])));
            return;
        }
        _ => {}
    }
    c.ints(&command(spec, &key, params, &extra, None));
}

fn keys(c: &mut Conn) -> Vec<String> {
    let Reply::Array(items) = c.ok(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    let mut keys: Vec<String> = items.iter().map(|k| k.as_str().unwrap()).collect();
    keys.sort();
    keys
}

/// A replica held back with `DEBUG SLEEP` while the master takes traffic on its own clock ends
/// with exactly the master's values (`DEBUG DIGEST-VALUE`, which covers the last update time to
/// the microsecond) and expiries: granted calls propagate with their resolved `AT`.
pub fn check_replication(spec: &Spec) {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut hold = replica.conn();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..6 {
        hold.send(&["DEBUG", "SLEEP", "0.1"]);
        for _ in 0..100 {
            random_call(&mut m, spec, &mut rng);
        }
        std::thread::sleep(Duration::from_millis(5 + round * 7));
        assert_eq!(hold.recv(), Reply::Simple("OK".into()));
    }
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    let names = keys(&mut m);
    assert!(!names.is_empty());
    assert_eq!(keys(&mut r), names);
    for k in &names {
        let k = k.as_str();
        assert_eq!(digest(&mut m, k), digest(&mut r, k), "digest of {k}");
        assert_eq!(
            m.int(&["PEXPIRETIME", k]),
            r.int(&["PEXPIRETIME", k]),
            "expiry of {k}"
        );
    }
    // RL.CHECK runs on the replica and agrees with PEEK on the master, at the same time (the
    // master's clock, a little ahead of both keys' last update).
    let at = (now_ms() + 50).to_string();
    let offset = m.info_field("replication", "master_repl_offset");
    for k in &names {
        for cost in ["0", "1", "3"] {
            let peek = m.ints(
                &command(spec, k, spec.slow, &["COST", cost, "PEEK"], None::<u64>)
                    .into_iter()
                    .chain([b"AT".to_vec(), at.clone().into_bytes()])
                    .collect::<Vec<_>>(),
            );
            let mut check: Vec<&str> = vec!["RL.CHECK", k.as_str(), spec.info_name];
            check.extend(spec.slow.iter().copied());
            check.extend(["COST", cost, "AT", at.as_str()]);
            assert_eq!(
                r.ints(&check),
                peek,
                "RL.CHECK {k} COST {cost} on the replica"
            );
        }
    }
    assert_eq!(m.info_field("replication", "master_repl_offset"), offset);
}

/// The server's clock in ms.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `[granted, limit, remaining, retry_after_ms, reset_after_ms]` of RL.REFUND.
fn refund(c: &mut Conn, key: &str, units: u64, extra: &[&str], at: u64) -> Vec<i64> {
    let units = units.to_string();
    let at = at.to_string();
    let mut cmd = vec!["RL.REFUND", key, units.as_str()];
    cmd.extend(extra);
    cmd.extend(["AT", at.as_str()]);
    c.ints(&cmd)
}

/// RL.REFUND gives back units already charged, at most what was used (never fresher than
/// fresh), at most once per DEDUP id, and writes and propagates only when it changes something.
pub fn check_refund(spec: &Spec) {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let [limit, remaining, reset] = spec.after_cost_2;
    assert!(c.cmd(&["RL.REFUND", "k", "1"]).is_nil(), "missing key");
    // Charge 3, give 1 back: the state after a charge of 2 (worked out by hand in the spec).
    call(&mut c, spec, "k", &["COST", "3"], t);
    assert_eq!(
        refund(&mut c, "k", 1, &[], t),
        [1, limit, remaining, 0, reset]
    );
    // More than was used: only what was used, and the limiter is fresh.
    assert_eq!(refund(&mut c, "k", 100, &[], t), [2, limit, limit, 0, 0]);
    let d = digest(&mut c, "k");
    let offset = c.info_field("replication", "master_repl_offset");
    assert_eq!(refund(&mut c, "k", 1, &[], t), [0, limit, limit, 0, 0]);
    assert_eq!(
        digest(&mut c, "k"),
        d,
        "a refund that gives nothing writes nothing"
    );
    assert_eq!(c.info_field("replication", "master_repl_offset"), offset);

    // DEDUP: at most what the id was granted, once; an unknown id gives nothing.
    let first = call(&mut c, spec, "d", &["COST", "2", "DEDUP", "r1"], t);
    assert_eq!(first, [2, limit, remaining, 0, reset]);
    call(&mut c, spec, "d", &["COST", "1"], t);
    assert_eq!(refund(&mut c, "d", 1, &["DEDUP", "nope"], t)[0], 0);
    assert_eq!(refund(&mut c, "d", 5, &["DEDUP", "r1"], t)[0], 2);
    let again = refund(&mut c, "d", 5, &["DEDUP", "r1"], t);
    assert_eq!((again[0], again[2]), (0, limit - 1));
    // The retried call is still not charged again: it gets its remembered grant.
    let retried = call(&mut c, spec, "d", &["COST", "2", "DEDUP", "r1"], t);
    assert_eq!((retried[0], retried[2]), (2, limit - 1));
    // The refund persisted with its settled id: a reload keeps it.
    c.ok(&["DEBUG", "RELOAD"]);
    assert_eq!(refund(&mut c, "d", 5, &["DEDUP", "r1"], t)[0], 0);

    // Errors change nothing.
    c.ok(&["XADD", "s", "*", "count", "1"]);
    assert_eq!(
        c.err(&["RL.REFUND", "s", "1"]),
        "WRONGTYPE key holds an RL.STREAMCOUNT stream, not a limiter: RL.REFUND applies to limiter keys only"
    );
    c.ok(&["SET", "str", "x"]);
    assert!(
        c.err(&["RL.REFUND", "str", "1"])
            .starts_with("WRONGTYPE Operation")
    );
    assert_eq!(
        c.err(&["RL.REFUND", "k", "0"]),
        "ERR units must be a positive integer"
    );
    assert_eq!(
        c.err(&["RL.REFUND", "k", "1", "PEEK"]),
        "ERR unknown option 'PEEK'"
    );
}

/// `BLOCK d` on a denied call and RL.BLOCK deny every call until the block ends, charging
/// nothing; then the limiter is as if the block had never been.
pub fn check_block(spec: &Spec) {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let [limit, remaining, reset] = spec.after_cost_2;
    let hour = 3_600_000i64;
    let lim = limit.to_string();
    // Use it all up, then a denied call blocks for an hour.
    assert_eq!(call(&mut c, spec, "k", &["COST", &lim], t)[0], limit);
    let denied_before = c.info_field(
        "ratelimit",
        &format!(
            "ratelimit_{}",
            spec.command.to_lowercase().replace('.', "_")
        ),
    );
    let r = call(&mut c, spec, "k", &["BLOCK", "1h"], t);
    assert_eq!((r[0], r[1], r[2], r[3]), (0, limit, 0, hour));
    assert!(r[4] >= hour);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), t as i64 + hour);
    // Blocked: denied, not extended by another denial with BLOCK, PEEK and COST 0 too.
    for extra in [
        &["COST", "1"][..],
        &["BLOCK", "2h"],
        &["PEEK"],
        &["COST", "0"],
        &["BESTEFFORT"],
    ] {
        let r = call(&mut c, spec, "k", extra, t + 1000);
        assert_eq!((r[0], r[2], r[3]), (0, 0, hour - 1000), "{extra:?}");
    }
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), t as i64 + hour);
    assert_ne!(
        c.info_field(
            "ratelimit",
            &format!(
                "ratelimit_{}",
                spec.command.to_lowercase().replace('.', "_")
            )
        ),
        denied_before
    );
    // RL.INFO shows it.
    let info = c.cmd(&["RL.INFO", "k"]);
    let field = |name: &str| {
        info.as_array()
            .unwrap()
            .chunks(2)
            .find(|kv| kv[0].as_str().as_deref() == Some(name))
            .and_then(|kv| kv[1].as_int())
    };
    assert!(field("blocked_ms").is_some_and(|b| b > 0 && b <= hour));
    assert_eq!(field("remaining"), Some(0));
    // When it ends, the limiter is as if it never was: a call of 2 gets what a fresh one does.
    let after = call(&mut c, spec, "k", &["COST", "2"], t + hour as u64);
    assert_eq!(after, [2, limit, remaining, 0, reset]);

    // A BESTEFFORT call that got something is not denied: no block.
    call(&mut c, spec, "b", &["COST", "1"], t);
    let big = (limit + 5).to_string();
    let r = call(
        &mut c,
        spec,
        "b",
        &["COST", &big, "BESTEFFORT", "BLOCK", "1h"],
        t,
    );
    assert_eq!(r[0], limit - 1);
    assert_eq!(
        call(&mut c, spec, "b", &["PEEK", "COST", "0"], t + 1000)[3],
        0
    );
    // PEEK never blocks.
    let r = call(
        &mut c,
        spec,
        "b",
        &["COST", &big, "PEEK", "BLOCK", "1h"],
        t + 1000,
    );
    assert_eq!(r[0], 0);
    assert_eq!(call(&mut c, spec, "b", &["COST", "0"], t + 1000)[3], 0);

    // RL.BLOCK: until max(current end, now + d); RL.UNBLOCK removes it.
    let at = |ms: u64| (t + ms).to_string();
    call(&mut c, spec, "m", &["COST", "1"], t);
    assert_eq!(c.int(&["RL.BLOCK", "m", "10s", "AT", &at(0)]), 10_000);
    assert_eq!(c.int(&["RL.BLOCK", "m", "5s", "AT", &at(1000)]), 9_000);
    let r = call(&mut c, spec, "m", &["COST", "1"], t + 2000);
    assert_eq!((r[0], r[3]), (0, 8_000));
    assert_eq!(c.int(&["RL.UNBLOCK", "m"]), 1);
    assert_eq!(c.int(&["RL.UNBLOCK", "m"]), 0);
    assert_eq!(call(&mut c, spec, "m", &["COST", "1"], t + 2000)[0], 1);

    // RL.BLOCK on a missing key: a key holding only the block, honoured by every call.
    assert_eq!(c.int(&["RL.BLOCK", "new", "1m", "AT", &at(0)]), 60_000);
    assert_eq!(c.int(&["PEXPIRETIME", "new"]), t as i64 + 60_000);
    let info = c.cmd(&["RL.INFO", "new"]);
    assert_eq!(
        info.as_array().unwrap()[1].as_str().as_deref(),
        Some("none")
    );
    let r = call(&mut c, spec, "new", &["COST", "1"], t + 1000);
    assert_eq!((r[0], r[1], r[2], r[3]), (0, limit, 0, 59_000));
    assert!(c.cmd(&["RL.REFUND", "new", "1"]).is_nil());
    assert_eq!(c.int(&["RL.UNBLOCK", "new"]), 1);
    assert_eq!(c.int(&["EXISTS", "new"]), 0);
    // Errors.
    assert_eq!(
        c.err(&["RL.BLOCK", "k", "0"]),
        "ERR invalid duration '0' for duration"
    );
    assert_eq!(
        c.err(&["RL.BLOCK", "k", "1s", "PEEK"]),
        "ERR unknown option 'PEEK'"
    );
    assert!(
        c.err(&["RL.UNBLOCK", "k", "x"])
            .starts_with("ERR wrong number")
    );
}

/// RL.CHECK gives PEEK's reply for random states, a missing key being fresh, and writes and
/// propagates nothing.
pub fn check_check(spec: &Spec) {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let check = |c: &mut Conn, key: &str, extra: &[&str], at: u64| {
        let at = at.to_string();
        let mut cmd = vec!["RL.CHECK", key, spec.info_name];
        cmd.extend(spec.params.iter().copied());
        cmd.extend(extra);
        cmd.extend(["AT", at.as_str()]);
        c.ints(&cmd)
    };
    let offset = c.info_field("replication", "master_repl_offset");
    let fresh = check(&mut c, "none", &["COST", "2"], t);
    assert_eq!(
        fresh,
        [
            2,
            spec.after_cost_2[0],
            spec.after_cost_2[1],
            0,
            spec.after_cost_2[2]
        ]
    );
    assert_eq!(c.int(&["EXISTS", "none"]), 0);
    assert_eq!(c.info_field("replication", "master_repl_offset"), offset);
    let mut now = t;
    for _ in 0..150 {
        now += rng.below(400);
        let key = format!("k{}", rng.below(3));
        let cost = rng.below(5).to_string();
        match rng.below(8) {
            0 => {
                c.cmd(&["RL.REFUND", &key, "2", "AT", &now.to_string()]);
            }
            1 => {
                c.cmd(&["RL.BLOCK", &key, "300ms", "AT", &now.to_string()]);
            }
            _ => {
                call(&mut c, spec, &key, &["COST", &cost], now);
            }
        }
        let probe = (rng.below(5) + 1).to_string();
        let d = digest(&mut c, &key);
        let offset = c.info_field("replication", "master_repl_offset");
        for be in [false, true] {
            let mut extra = vec!["COST", probe.as_str()];
            if be {
                extra.push("BESTEFFORT");
            }
            let got = check(&mut c, &key, &extra, now + 1);
            extra.push("PEEK");
            assert_eq!(
                got,
                call(&mut c, spec, &key, &extra, now + 1),
                "{key} {extra:?}"
            );
        }
        assert_eq!(digest(&mut c, &key), d);
        assert_eq!(c.info_field("replication", "master_repl_offset"), offset);
    }
    // Another algorithm's key is WRONGTYPE; a stream key names RL.STREAMCOUNT.
    let other = if spec.info_name == "gcra" {
        "fixed"
    } else {
        "gcra"
    };
    let mut cmd = vec!["RL.CHECK", "k0", other, "5", "1s"];
    if other == "gcra" {
        cmd.insert(3, "5");
    }
    assert!(c.err(&cmd).starts_with("WRONGTYPE key holds a"));
    c.ok(&["XADD", "s", "*", "count", "1"]);
    let mut cmd = vec!["RL.CHECK", "s", spec.info_name];
    cmd.extend(spec.params.iter().copied());
    assert!(c.err(&cmd).contains("RL.STREAMCOUNT"));
}

/// A block, a settled id and a refund travel with the value: COPY, RENAME, DUMP + RESTORE.
pub fn check_copy_rename_restore(spec: &Spec) {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    call(&mut c, spec, "k", &["COST", "3", "DEDUP", "x"], t);
    refund(&mut c, "k", 1, &["DEDUP", "x"], t);
    c.int(&["RL.BLOCK", "k", "1h", "AT", &t.to_string()]);
    let d = digest(&mut c, "k");
    let expiry = c.int(&["PEXPIRETIME", "k"]);
    assert_eq!(c.int(&["COPY", "k", "k2"]), 1);
    assert_eq!(digest(&mut c, "k2"), d);
    c.ok(&["RENAME", "k2", "k3"]);
    assert_eq!(digest(&mut c, "k3"), d);
    let Reply::Bulk(dump) = c.cmd(&["DUMP", "k"]) else {
        panic!("DUMP")
    };
    c.ok(&[
        &b"RESTORE"[..],
        b"k4",
        expiry.to_string().as_bytes(),
        &dump,
        b"ABSTTL",
    ]);
    assert_eq!(digest(&mut c, "k4"), d);
    // The restored key is blocked and its id settled.
    let r = call(&mut c, spec, "k4", &["COST", "1"], t + 1000);
    assert_eq!((r[0], r[3]), (0, 3_600_000 - 1000));
    assert_eq!(refund(&mut c, "k4", 1, &["DEDUP", "x"], t + 1000)[0], 0);
}
