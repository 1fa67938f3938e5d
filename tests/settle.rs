//! Reservations: `HOLD ttl` on a limiter call (and on RL.ALL), settled by RL.SETTLE with the
//! units really used (given back below the units held, charged into debt above them), or given
//! back when the ttl ends unsettled, at its end — on the master, its replicas, the AOF and the
//! RDB alike, also across a crash.
//!
//! Every expectation is computed here from the parameters and the AT times the test chose.

mod common;
use common::*;

use std::time::Duration;

/// One limiter of every algorithm that takes `HOLD`, limit 10: the schedules at 10 per second
/// (T = 100 ms), the windows of one second.
const LIMITERS: &[(&str, &[&str])] = &[
    ("gcra", &["RL.GCRA", "10", "10", "1s"]),
    ("tb", &["RL.TOKENBUCKET", "10", "10", "1s"]),
    ("lb", &["RL.LEAKYBUCKET", "10", "10", "1s"]),
    ("fixed", &["RL.FIXED", "10", "1s"]),
    ("sliding", &["RL.SLIDING", "10", "1s"]),
    ("sc", &["RL.SLIDINGCOUNTER", "10", "1s"]),
];

/// `LIMITERS`' call on `key` with `extra` arguments.
fn call(cmd: &[&str], key: &str, extra: &[String]) -> Vec<String> {
    let mut v = vec![cmd[0].to_string(), key.to_string()];
    v.extend(cmd[1..].iter().map(|s| s.to_string()));
    v.extend(extra.iter().cloned());
    v
}

/// `COST n DEDUP id HOLD ttl AT t`.
fn hold(n: u64, id: &str, ttl: &str, t: u64) -> Vec<String> {
    [
        "COST",
        &n.to_string(),
        "DEDUP",
        id,
        "HOLD",
        ttl,
        "AT",
        &t.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn at(t: u64) -> Vec<String> {
    vec!["AT".to_string(), t.to_string()]
}

/// RL.SETTLE on `keys` with `units`: per key its five integers, or `None` for nil.
fn settle(c: &mut Conn, keys: &[&str], id: &str, units: &[u64], t: u64) -> Vec<Option<Vec<i64>>> {
    let mut v = vec!["RL.SETTLE".to_string(), keys.len().to_string()];
    v.extend(keys.iter().map(|k| k.to_string()));
    v.push(id.to_string());
    v.extend(units.iter().map(u64::to_string));
    v.extend(at(t));
    let reply = c.cmd(&v);
    let items = reply
        .as_array()
        .unwrap_or_else(|| panic!("RL.SETTLE {v:?}: {reply:?}"));
    items
        .iter()
        .map(|i| {
            i.as_array().map(|five| {
                five.iter()
                    .map(|x| x.as_int().expect("an integer"))
                    .collect()
            })
        })
        .collect()
}

fn settle1(c: &mut Conn, key: &str, id: &str, units: u64, t: u64) -> Vec<i64> {
    settle(c, &[key], id, &[units], t)[0]
        .clone()
        .expect("a limiter reply")
}

#[test]
fn settle_below_equal_and_above_the_units_held_per_algorithm() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // Per algorithm, after holding 4 units of 10 and settling with 1, 4 and 25 at the same time
    // (a round second, the windows' start):
    // - reset_after with 1 and 4 units used: the schedules drain them at 100 ms a unit; the
    //   fixed and sliding windows end 1 s after; the sliding counter's current count decays over
    //   the next window (2 W − 0).
    // - with 25: 15 units of debt. The schedules' TAT is t + 2500 ms, and one unit fits once
    //   TAT + T − burst·T ≤ now: 1600 ms. The fixed window and the sliding log free everything
    //   when the window ends or the entry leaves it: 1000 ms. The sliding counter, with c = 25 at
    //   e = 0, allows one unit in the next window once 25·(1000 − e'')/1000 + 1 ≤ 10, e'' = 640:
    //   1640 ms.
    #[rustfmt::skip]
    type Row = (&'static str, [i64; 2], [i64; 2], [i64; 2]);
    let want: &[Row] = &[
        //          reset (1 used) reset (4 used)  (retry, reset) at 25
        ("gcra", [100, 0], [400, 0], [1600, 2500]),
        ("tb", [100, 0], [400, 0], [1600, 2500]),
        ("lb", [100, 0], [400, 0], [1600, 2500]),
        ("fixed", [1000, 0], [1000, 0], [1000, 1000]),
        ("sliding", [1000, 0], [1000, 0], [1000, 1000]),
        ("sc", [2000, 0], [2000, 0], [1640, 2000]),
    ];
    for ((name, cmd), (wname, below, equal, above)) in LIMITERS.iter().zip(want) {
        assert_eq!(name, wname);
        let cases: [(u64, i64, [i64; 2]); 3] = [(1, 9, *below), (4, 6, *equal), (25, 0, *above)];
        for (units, remaining, [a, b]) in cases {
            let key = format!("{name}:{units}");
            let r = c.ints(&call(cmd, &key, &hold(4, "r", "10s", t)));
            assert_eq!(&r[..3], &[4, 10, 6], "{key}: hold");
            let (retry, reset) = if units > 10 { (a, b) } else { (0, a) };
            let want = vec![units as i64, 10, remaining, retry, reset];
            assert_eq!(settle1(&mut c, &key, "r", units, t), want, "{key}");
            // A retried settle changes nothing and replies the same, whatever its units.
            let before = digest(&mut c, &key);
            assert_eq!(settle1(&mut c, &key, "r", 2, t), want, "{key}: retried");
            assert_eq!(digest(&mut c, &key), before, "{key}: retried");
            // An id never held settles nothing.
            let mut unknown = want.clone();
            unknown[0] = 0;
            assert_eq!(
                settle1(&mut c, &key, "x", 3, t),
                unknown,
                "{key}: unknown id"
            );
            assert_eq!(digest(&mut c, &key), before, "{key}: unknown id");
            if units > 10 {
                // Denied until the debt is repaid, to the ms; granted then.
                let cost1 = |t: u64| {
                    let mut extra = vec!["COST".to_string(), "1".to_string()];
                    extra.extend(at(t));
                    call(cmd, &key, &extra)
                };
                let early = c.ints(&cost1(t + retry as u64 - 1));
                assert_eq!(
                    (early[0], early[2], early[3]),
                    (0, 0, 1),
                    "{key}: 1 ms early"
                );
                assert_eq!(c.ints(&cost1(t + retry as u64))[0], 1, "{key}: repaid");
            }
        }
    }
    // A missing key is nil, next to a key that has the id.
    assert_eq!(
        settle(&mut c, &["gcra:4", "nothing"], "r", &[4, 4], t),
        vec![Some(vec![4, 10, 6, 0, 400]), None]
    );
}

#[test]
fn a_reservation_not_settled_gives_its_units_back_at_its_end() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // Burst 10, one unit every 6 minutes: 4 units held for 2 s would take 24 minutes to drain.
    let gcra = ["RL.GCRA", "10", "10", "1h"];
    assert_eq!(
        c.ints(&call(&gcra, "g", &hold(4, "r", "2s", t))),
        [4, 10, 6, 0, 1_440_000]
    );
    let peek = |t: u64| {
        let mut extra = vec!["PEEK".to_string(), "COST".to_string(), "0".to_string()];
        extra.extend(at(t));
        call(&gcra, "g", &extra)
    };
    let before = digest(&mut c, "g");
    // Live while the time is before its end; ended at exactly t + 2 s: given back then.
    assert_eq!(c.ints(&peek(t + 1999)), [0, 10, 6, 0, 1_440_000 - 1999]);
    assert_eq!(c.ints(&peek(t + 2000)), [0, 10, 10, 0, 0]);
    // Reads see it and write nothing: PEEK, RL.CHECK, RL.INFO, a denied call.
    let check = c.ints(&args![
        "RL.CHECK",
        "g",
        "GCRA",
        10,
        10,
        "1h",
        "COST",
        0,
        "AT",
        t + 2000
    ]);
    assert_eq!(check, [0, 10, 10, 0, 0]);
    let mut cost11 = vec!["COST".to_string(), "11".to_string()];
    cost11.extend(at(t + 2000));
    let denied = c.ints(&call(&gcra, "g", &cost11));
    assert_eq!(denied[..3], [0, 10, 10]);
    assert!(c.cmd(&["RL.INFO", "g"]).as_array().is_some());
    assert_eq!(digest(&mut c, "g"), before, "reads wrote nothing");
    // Settling it after its end settles nothing: it was given back (as if settled with 0).
    assert_eq!(settle1(&mut c, "g", "r", 4, t + 3000), [0, 10, 10, 0, 0]);
    assert_ne!(
        digest(&mut c, "g"),
        before,
        "the settle wrote the give-back"
    );
    // A later call charges from the state the give-back left: 1 unit, 6 minutes to drain.
    assert_eq!(
        c.ints(&call(&gcra, "g", &at(t + 3000))),
        [1, 10, 9, 0, 360_000]
    );
}

#[test]
fn a_key_with_a_reservation_does_not_expire_before_its_end() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // A window of 1 s would expire the key at t + 1 s; the hold keeps it to t + 5 s.
    c.ints(&call(
        &["RL.FIXED", "10", "1s"],
        "f",
        &hold(3, "r", "5s", t),
    ));
    assert_eq!(c.int(&["PEXPIRETIME", "f"]), (t + 5000) as i64);
    // Settled, the key keeps the id (a retried settle replies the same) until then.
    assert_eq!(settle1(&mut c, "f", "r", 2, t + 10), [2, 10, 8, 0, 990]);
    assert_eq!(c.int(&["PEXPIRETIME", "f"]), (t + 5000) as i64);
}

#[test]
fn rl_all_holds_each_keys_charge_and_settles_per_key() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // 60 requests a minute and 1000 tokens a minute: one request reserving 400 tokens.
    let r = c.ints(&args![
        "RL.ALL",
        2,
        "{u}:rpm",
        "{u}:tpm",
        "GCRA",
        60,
        60,
        "1m",
        "TOKENBUCKET",
        1000,
        1000,
        "1m",
        "CHARGE",
        400,
        "DEDUP",
        "req",
        "HOLD",
        "30s",
        "AT",
        t
    ]);
    assert_eq!(r[0], 1);
    // It used 150 tokens: the request stays charged, 250 tokens come back. The token bucket
    // refills 150 tokens in 150 · 60 ms.
    assert_eq!(
        settle(&mut c, &["{u}:rpm", "{u}:tpm"], "req", &[1, 150], t),
        vec![
            Some(vec![1, 60, 59, 0, 1000]),
            Some(vec![150, 1000, 850, 0, 9000])
        ]
    );
    // Another request reserved 300 tokens (550 left) and used 1200: 900 more are charged, 350
    // tokens short of zero. One token is back after 351 · 60 ms, all 1000 after 1350 · 60 ms.
    let r = c.ints(&args![
        "RL.ALL",
        2,
        "{u}:rpm",
        "{u}:tpm",
        "GCRA",
        60,
        60,
        "1m",
        "TOKENBUCKET",
        1000,
        1000,
        "1m",
        "CHARGE",
        300,
        "DEDUP",
        "req2",
        "HOLD",
        "30s",
        "AT",
        t
    ]);
    assert_eq!(r[0], 1);
    assert_eq!(
        settle(&mut c, &["{u}:rpm", "{u}:tpm"], "req2", &[1, 1200], t),
        vec![
            Some(vec![1, 60, 58, 0, 2000]),
            Some(vec![1200, 1000, 0, 21_060, 81_000])
        ]
    );
    // HOLD applies to the whole call: not with a concurrency limiter, not without DEDUP.
    let e = c.err(&args![
        "RL.ALL",
        1,
        "{u}:c",
        "CONCURRENCY",
        5,
        "1m",
        "DEDUP",
        "x",
        "HOLD",
        "1s",
        "AT",
        t
    ]);
    assert!(
        e.contains("HOLD does not apply to a concurrency limiter"),
        "{e}"
    );
    let e = c.err(&args![
        "RL.ALL", 1, "{u}:rpm", "GCRA", 60, 60, "1m", "HOLD", "1s"
    ]);
    assert!(e.contains("HOLD needs DEDUP"), "{e}");
}

#[test]
fn settle_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    let e = c.err(&args!["RL.GCRA", "g", 10, 10, "1s", "HOLD", "1s"]);
    assert!(e.starts_with("ERR HOLD needs DEDUP"), "{e}");
    let e = c.err(&args![
        "RL.ACQUIRE",
        "c",
        5,
        "1m",
        "ID",
        "w",
        "HOLD",
        "1s",
        "AT",
        t
    ]);
    assert!(
        e.starts_with("ERR HOLD does not apply to a concurrency limiter"),
        "{e}"
    );
    c.ints(&args!["RL.ACQUIRE", "c", 5, "1m", "ID", "w", "AT", t]);
    let e = c.err(&args!["RL.SETTLE", 1, "c", "w", 1, "AT", t]);
    assert!(
        e.starts_with("ERR RL.SETTLE does not apply to a concurrency limiter"),
        "{e}"
    );
    // Debt beyond what a state may hold (a TAT more than 2^63 - 1 µs ahead): refused, and
    // nothing changes on any key of the call. One unit per 106751991 days fits; two do not.
    let slow = ["RL.GCRA", "1", "1", "106751991d"];
    c.ints(&call(&slow, "slow", &hold(1, "r", "1h", t)));
    c.ints(&call(LIMITERS[0].1, "other", &hold(1, "r", "1h", t)));
    let before = (digest(&mut c, "slow"), digest(&mut c, "other"));
    let e = c.err(&args!["RL.SETTLE", 2, "other", "slow", "r", 0, 2, "AT", t]);
    assert!(
        e.starts_with("ERR settle would put the limiter in debt"),
        "{e}"
    );
    assert_eq!((digest(&mut c, "slow"), digest(&mut c, "other")), before);
    assert_eq!(settle1(&mut c, "slow", "r", 1, t)[0], 1);
    // Bad arguments.
    for (call, want) in [
        (
            args!["RL.SETTLE", 2, "a", "r", 1].to_vec(),
            "ERR syntax error, numkeys",
        ),
        (
            args!["RL.SETTLE", 1, "a", "r", -1].to_vec(),
            "ERR units must be",
        ),
        (
            args!["RL.SETTLE", 1, "a", "r", 1, "COST", 1].to_vec(),
            "ERR unknown option",
        ),
    ] {
        let e = c.err(&call);
        assert!(e.starts_with(want), "{call:?}: {e}");
    }
}

#[test]
fn settle_runs_when_the_server_is_out_of_memory() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&call(LIMITERS[0].1, "g", &hold(4, "r", "1h", t)));
    c.ok(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    c.ok(&["CONFIG", "SET", "maxmemory", "1"]);
    let e = c.err(&call(LIMITERS[0].1, "g", &at(t)));
    assert!(e.starts_with("OOM"), "{e}");
    assert_eq!(settle1(&mut c, "g", "r", 1, t), [1, 10, 9, 0, 100]);
    c.ok(&["CONFIG", "SET", "maxmemory", "0"]);
}

/// Holds on every algorithm's key, settled below, above, left to end, read after their end:
/// the state of each key then depends on when each reservation's end was applied.
fn traffic(c: &mut Conn, t: u64) -> Vec<String> {
    let mut keys = Vec::new();
    for (i, (name, cmd)) in LIMITERS.iter().enumerate() {
        let key = format!("{name}:t");
        let ti = t + i as u64 * 10;
        c.ints(&call(cmd, &key, &hold(3, "a", "1s", ti)));
        c.ints(&call(cmd, &key, &hold(2, "b", "2s", ti + 1)));
        c.ints(&call(cmd, &key, &hold(1, "c", "3s", ti + 2)));
        settle(c, &[&key], "a", &[7], ti + 100);
        // b ends at ti + 2001 unsettled; a read after it writes nothing.
        let mut peek = vec!["PEEK".to_string()];
        peek.extend(at(ti + 2500));
        c.ints(&call(cmd, &key, &peek));
        // A write at ti + 2600 gives b back (at its end) before it charges.
        c.ints(&call(cmd, &key, &at(ti + 2600)));
        keys.push(key);
    }
    // RL.ALL: each key holds its own charge; one left to end, one settled into debt.
    let all = |id: &str, t: u64| {
        args![
            "RL.ALL",
            2,
            "{all}:a",
            "{all}:b",
            "GCRA",
            10,
            10,
            "1s",
            "SLIDINGCOUNTER",
            10,
            "1s",
            "CHARGE",
            3,
            "DEDUP",
            id,
            "HOLD",
            "1s",
            "AT",
            t
        ]
        .to_vec()
    };
    c.ints(&all("x", t));
    c.ints(&all("y", t + 5));
    settle(c, &["{all}:a", "{all}:b"], "y", &[4, 12], t + 10);
    // x ends at t + 1 s; the next RL.ALL gives it back on both keys, then charges.
    c.ints(&all("z", t + 1500));
    keys.extend(["{all}:a".to_string(), "{all}:b".to_string()]);
    keys
}

fn snapshot(c: &mut Conn, keys: &[String]) -> Vec<(Reply, i64)> {
    keys.iter()
        .map(|k| (digest(c, k), c.int(&["PEXPIRETIME", k])))
        .collect()
}

#[test]
fn replica_and_master_agree_while_the_replica_is_behind() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut held = replica.conn();
    let t = base_ms();
    // The replica sleeps while the master settles and reservations end.
    held.send(&["DEBUG", "SLEEP", "0.2"]);
    let keys = traffic(&mut m, t);
    assert_eq!(held.recv(), Reply::Simple("OK".into()));
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(snapshot(&mut r, &keys), snapshot(&mut m, &keys));
    // c's end (t + 3 s and later) passes on neither's clock; read on the replica: the same.
    for k in &keys {
        let info = |c: &mut Conn| {
            let v = c.cmd(&["RL.INFO", k]);
            v.as_array().map(|a| a[..8].to_vec())
        };
        assert_eq!(info(&mut r), info(&mut m), "{k}");
    }
    // Reads on the master after c's end (PEEK, RL.CHECKALL, RL.INFO) write nothing: the replica,
    // which sees no command, still has the same values.
    for ((_, cmd), k) in LIMITERS.iter().zip(&keys) {
        let mut peek = vec!["PEEK".to_string()];
        peek.extend(at(t + 4000));
        m.ints(&call(cmd, k, &peek));
        m.cmd(&["RL.INFO", k]);
    }
    m.ints(&args![
        "RL.CHECKALL",
        2,
        "{all}:a",
        "{all}:b",
        "GCRA",
        10,
        10,
        "1s",
        "SLIDINGCOUNTER",
        10,
        "1s",
        "AT",
        t + 4000
    ]);
    wait_replica_synced(&master, &replica);
    assert_eq!(snapshot(&mut r, &keys), snapshot(&mut m, &keys));
    // A settle of c on the master after its end reaches the replica as the same give-back.
    for k in &keys {
        settle(&mut m, &[k], "c", &[5], t + 4000);
    }
    wait_replica_synced(&master, &replica);
    assert_eq!(snapshot(&mut r, &keys), snapshot(&mut m, &keys));
}

#[test]
fn aof_replay_and_rdb_restore_the_reservations() {
    let t = base_ms();
    // AOF: the commands as propagated replay into the same state.
    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let keys = traffic(&mut c, t);
    c.ints(&call(LIMITERS[3].1, "held", &hold(4, "h", "1h", t)));
    let before = snapshot(&mut c, &keys);
    drop(c);
    std::thread::sleep(Duration::from_millis(20));
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, &keys), before);
    // Still held after the replay: settled with 1 (a fixed window of 1 s from t).
    assert_eq!(settle1(&mut c, "held", "h", 1, t + 10), [1, 10, 9, 0, 990]);
    // RDB: saved and loaded as it is (the value's codec, reservations included).
    let mut s = Server::start_with(&["--save", "3600 1"]);
    let mut c = s.conn();
    let keys = traffic(&mut c, t);
    c.ints(&call(LIMITERS[3].1, "held", &hold(4, "h", "1h", t)));
    let before = snapshot(&mut c, &keys);
    c.ok(&["SAVE"]);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, &keys), before);
    assert_eq!(settle1(&mut c, "held", "h", 1, t + 10), [1, 10, 9, 0, 990]);
}

#[test]
fn a_reservation_survives_a_crash_and_a_failover() {
    let t = base_ms();
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let s = Server::start_with(&aof);
    let mut c = s.conn();
    // Two reservations of 4 units (burst 10, one unit every 6 minutes), held for 1 s.
    let gcra = ["RL.GCRA", "10", "10", "1h"];
    c.ints(&call(&gcra, "g1", &hold(4, "r", "1s", t)));
    c.ints(&call(&gcra, "g2", &hold(4, "r", "1s", t)));
    drop(c);
    let pid = s.pid().expect("a running server");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    std::thread::sleep(Duration::from_millis(100));
    // The same dir, a new process: the AOF, written before each reply, replays both.
    let again = Server::start_in(&s.dir, &aof);
    let mut c = again.conn();
    // RL.INFO shows each key's reservation not settled yet.
    for k in ["g1", "g2"] {
        let info = c.cmd(&["RL.INFO", k]);
        let items = info.as_array().expect("RL.INFO");
        let held = items
            .chunks(2)
            .find(|p| p[0].as_str().as_deref() == Some("reservations"))
            .and_then(|p| p[1].as_int());
        assert_eq!(held, Some(1), "{k}: {info:?}");
    }
    // g1 is still held: settled with 1, 3 units come back (6 minutes to drain the one used).
    assert_eq!(
        settle1(&mut c, "g1", "r", 1, t + 500),
        [1, 10, 9, 0, 359_500]
    );
    // g2 is given back at its end (t + 1 s), as if settled with 0.
    let mut peek = vec!["PEEK".to_string(), "COST".to_string(), "0".to_string()];
    peek.extend(at(t + 1000));
    assert_eq!(c.ints(&call(&gcra, "g2", &peek)), [0, 10, 10, 0, 0]);
    assert_eq!(settle1(&mut c, "g2", "r", 4, t + 1000), [0, 10, 10, 0, 0]);
    drop(c);
    drop(again);

    // Failover: the master dies with the reservation held; the promoted replica settles it.
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    m.ints(&call(&gcra, "g", &hold(4, "r", "1s", t)));
    wait_replica_synced(&master, &replica);
    let digest_on_master = digest(&mut m, "g");
    drop(m);
    let pid = master.pid().expect("a running master");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    let mut r = replica.conn();
    r.ok(&["REPLICAOF", "NO", "ONE"]);
    assert_eq!(digest(&mut r, "g"), digest_on_master);
    assert_eq!(
        settle1(&mut r, "g", "r", 1, t + 500),
        [1, 10, 9, 0, 359_500]
    );
}

#[test]
fn info_counts_a_settle_of_a_reservation_as_granted() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&call(LIMITERS[0].1, "g", &hold(4, "r", "1h", t)));
    // A request that failed before using anything settles 0: still a settled reservation.
    assert_eq!(settle1(&mut c, "g", "r", 0, t)[0], 0);
    // An id never held settles nothing: counted as denied.
    assert_eq!(settle1(&mut c, "g", "nope", 3, t)[0], 0);
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_rl_settle").as_deref(),
        Some("calls=2,granted=1,denied=1,shadow_denied=0")
    );
}

#[test]
fn reservations_are_not_pushed_out_by_newer_ids() {
    // Two ids per key: two unsettled reservations fill it, and a third HOLD is refused, changing
    // nothing; once one is settled its id may make room.
    let s = Server::start_with_module_args(&[], &["dedup-max", "2"]);
    let mut c = s.conn();
    let t = base_ms();
    let gcra = LIMITERS[0].1;
    c.ints(&call(gcra, "g", &hold(1, "a", "1h", t)));
    c.ints(&call(gcra, "g", &hold(1, "b", "1h", t)));
    let before = digest(&mut c, "g");
    let e = c.err(&call(gcra, "g", &hold(1, "c", "1h", t)));
    assert!(e.starts_with("ERR too many reservations"), "{e}");
    // A plain DEDUP id could not be remembered either (a retry would be charged again): refused.
    let plain: Vec<String> = ["DEDUP", "p", "AT", &t.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let e = c.err(&call(gcra, "g", &plain));
    assert!(e.starts_with("ERR too many reservations"), "{e}");
    assert_eq!(digest(&mut c, "g"), before);
    // Both are still held: settled, each gives its unit back.
    assert_eq!(settle1(&mut c, "g", "a", 0, t)[..3], [0, 10, 9]);
    c.ints(&call(gcra, "g", &hold(1, "c", "1h", t)));
    assert_eq!(settle1(&mut c, "g", "b", 0, t)[..3], [0, 10, 9]);
    assert_eq!(settle1(&mut c, "g", "c", 1, t)[..3], [1, 10, 9]);
}
