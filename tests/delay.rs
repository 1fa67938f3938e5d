//! `DELAY d` end to end against a real server: RL.GCRA, RL.TOKENBUCKET and RL.LEAKYBUCKET grant
//! a call allowed within `d` now, as a reservation of that moment (`retry_after_ms` the wait;
//! the leaky bucket's the queue delay), alone and in RL.ALL; every other command refuses it and
//! changes nothing. Expectations are worked out from the parameters and the `AT` times.

mod common;
use common::*;

/// `cmd key params.. [extra..] AT t+at`: the limiter reply.
fn call(c: &mut Conn, cmd: &[&str], at: u64, extra: &[&str]) -> Vec<i64> {
    let t = base_ms();
    let mut v: Vec<Vec<u8>> = cmd.iter().map(|a| a.as_bytes().to_vec()).collect();
    v.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
    v.extend(args!["AT", t + at]);
    c.ints(&v)
}

#[test]
fn gcra_delay_grants_a_wait_of_at_most_d_as_a_reservation() {
    let s = Server::start();
    let mut c = s.conn();
    // Burst 2, one unit a second (T = 1000 ms).
    let g = &["RL.GCRA", "g", "2", "1", "1s"][..];
    #[rustfmt::skip]
    let cases: &[(u64, &[&str], [i64; 5])] = &[
        // at ms, options,                    granted limit remaining retry reset
        // Both units at once: fresh again after 2 s.
        (0,    &["COST", "2"],                [2, 2, 0, 0,    2000]),
        // The next unit is allowed at +1 s: not within 999 ms.
        (0,    &["DELAY", "999"],             [0, 2, 0, 1000, 2000]),
        // PEEK: the reply the grant would give, nothing charged.
        (0,    &["DELAY", "1s", "PEEK"],      [1, 2, 0, 1000, 3000]),
        // A wait of exactly d is granted: charged as at +1 s, so fresh again at +3 s.
        (0,    &["DELAY", "1s"],              [1, 2, 0, 1000, 3000]),
        // The next waits behind it: allowed at +2 s, 1.5 s from +500 ms.
        (500,  &["DELAY", "1s"],              [0, 2, 0, 1500, 2500]),
        (500,  &["DELAY", "1500ms"],          [1, 2, 0, 1500, 3500]),
        // COST 0 reports the state; a cost above the burst is never granted, DELAY or not.
        (500,  &["COST", "0", "DELAY", "1h"], [0, 2, 0, 0,    3500]),
        (500,  &["COST", "3", "DELAY", "1h"], [0, 2, 0, -1,   3500]),
        // At +4 s both reservations have been used: fresh.
        (4000, &["COST", "0"],                [0, 2, 2, 0,    0]),
        // Granted now needs no DELAY: retry 0.
        (4000, &["DELAY", "1s"],              [1, 2, 1, 0,    1000]),
    ];
    for (i, (at, extra, want)) in cases.iter().enumerate() {
        assert_eq!(
            call(&mut c, g, *at, extra),
            want.to_vec(),
            "case {i}: {extra:?} at +{at}ms"
        );
    }
}

#[test]
fn token_bucket_delay_waits_for_the_refill() {
    let s = Server::start();
    let mut c = s.conn();
    // Capacity 3, one token a second.
    let b = &["RL.TOKENBUCKET", "tb", "3", "1", "1s"][..];
    assert_eq!(call(&mut c, b, 0, &["COST", "3"]), [3, 3, 0, 0, 3000]);
    // Two tokens are back at +2 s: granted with DELAY 2s, the bucket empty at +2 s (full at +5 s).
    assert_eq!(
        call(&mut c, b, 0, &["COST", "2", "DELAY", "2s"]),
        [2, 3, 0, 2000, 5000]
    );
    // One more token at +3 s: 3 s from now, beyond DELAY 2s.
    assert_eq!(call(&mut c, b, 0, &["DELAY", "2s"]), [0, 3, 0, 3000, 5000]);
    // BESTEFFORT with DELAY: the full cost within d if it can, else what there is now.
    assert_eq!(
        call(&mut c, b, 2500, &["COST", "2", "BESTEFFORT", "DELAY", "1s"]),
        [0, 3, 0, 1500, 2500]
    );
    // At +3 s one token is there, two at +4 s: within DELAY, so both, full again at +7 s.
    assert_eq!(
        call(&mut c, b, 3000, &["COST", "2", "BESTEFFORT", "DELAY", "1s"]),
        [2, 3, 0, 1000, 4000]
    );
    assert_eq!(
        call(&mut c, b, 8000, &["COST", "2", "BESTEFFORT", "DELAY", "1s"]),
        [2, 3, 1, 0, 2000]
    );
}

#[test]
fn leaky_bucket_delay_replies_the_queue_delay() {
    let s = Server::start();
    let mut c = s.conn();
    // Capacity 2, draining one unit a second.
    let b = &["RL.LEAKYBUCKET", "lb", "2", "1", "1s"][..];
    assert_eq!(call(&mut c, b, 0, &[]), [1, 2, 1, 0, 1000]);
    assert_eq!(call(&mut c, b, 0, &[]), [1, 2, 0, 1000, 2000]);
    // Full: the third fits at +1 s, and leaves after the two before it, at +2 s.
    assert_eq!(
        call(&mut c, b, 0, &["DELAY", "999ms"]),
        [0, 2, 0, 1000, 2000]
    );
    assert_eq!(call(&mut c, b, 0, &["DELAY", "1s"]), [1, 2, 0, 2000, 3000]);
    // The queue now drains at +3 s: a fourth fits at +2 s and is processed at +3 s.
    assert_eq!(
        call(&mut c, b, 500, &["DELAY", "1500"]),
        [1, 2, 0, 2500, 3500]
    );
}

#[test]
fn all_delay_reserves_every_key_as_of_the_latest_moment() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // {a}: GCRA 1 at once, 1 a second; {b}: a leaky bucket of 1 draining 1 every 2 s.
    let all = |extra: &[&str], at: u64| -> Vec<Vec<u8>> {
        let mut v = args![
            "RL.ALL",
            2,
            "{x}a",
            "{x}b",
            "GCRA",
            1,
            1,
            "1s",
            "LEAKYBUCKET",
            1,
            1,
            "2s"
        ]
        .to_vec();
        v.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
        v.extend(args!["AT", t + at]);
        v
    };
    assert_eq!(c.ints(&all(&[], 0)), [1, 1, 0, 0, 2000]);
    // {a} allows the next at +1 s, {b} at +2 s: the call waits for both.
    assert_eq!(c.ints(&all(&["DELAY", "1999"], 0)), [0, 1, 0, 2000, 2000]);
    assert_eq!(
        c.ints(&all(&["DELAY", "2s", "PEEK"], 0)),
        [1, 1, 0, 2000, 4000]
    );
    assert_eq!(c.ints(&all(&["DELAY", "2s"], 0)), [1, 1, 0, 2000, 4000]);
    // {a} is charged as at +2 s (not at +1 s, when it alone allowed it): its next unit is at +3 s.
    let a = |at: u64| args!["RL.GCRA", "{x}a", 1, 1, "1s", "PEEK", "AT", t + at];
    assert_eq!(c.ints(&a(2999))[0], 0);
    assert_eq!(c.ints(&a(3000))[0], 1);
    // {b} holds the unit until +4 s.
    let b = |at: u64| args!["RL.LEAKYBUCKET", "{x}b", 1, 1, "2s", "PEEK", "AT", t + at];
    assert_eq!(c.ints(&b(3999))[0], 0);
    assert_eq!(c.ints(&b(4000))[0], 1);
}

#[test]
fn delay_with_dedup_and_block() {
    let s = Server::start();
    let mut c = s.conn();
    let g = &["RL.GCRA", "d", "1", "1", "1s"][..];
    assert_eq!(call(&mut c, g, 0, &[]), [1, 1, 0, 0, 1000]);
    assert_eq!(
        call(&mut c, g, 0, &["DELAY", "1s", "DEDUP", "job-1"]),
        [1, 1, 0, 1000, 2000]
    );
    // A retry of the same id is not charged again: the remembered grant, retry 0 (SPEC DEDUP).
    assert_eq!(
        call(&mut c, g, 100, &["DELAY", "1s", "DEDUP", "job-1"]),
        [1, 1, 0, 0, 1900]
    );
    // Beyond DELAY the call is denied, and BLOCK blocks the key; within it, granted, no block.
    let b = &["RL.GCRA", "blk", "1", "1", "1s"][..];
    assert_eq!(call(&mut c, b, 0, &[]), [1, 1, 0, 0, 1000]);
    assert_eq!(
        call(&mut c, b, 0, &["DELAY", "1s", "BLOCK", "1m"]),
        [1, 1, 0, 1000, 2000]
    );
    // Not blocked: granted at +2 s, when the reservation has been used.
    assert_eq!(call(&mut c, b, 2000, &["PEEK"])[0], 1);
    assert_eq!(
        call(&mut c, b, 0, &["DELAY", "1s", "BLOCK", "10s"]),
        [0, 1, 0, 10_000, 10_000]
    );
    // A blocked key denies whatever DELAY says.
    assert_eq!(
        call(&mut c, b, 100, &["DELAY", "1h"]),
        [0, 1, 0, 9_900, 9_900]
    );
}

#[test]
fn delay_on_other_commands_is_an_error_that_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&args!["RL.GCRA", "kept", 1, 1, "1s", "AT", t]);
    let digest = c.cmd(&["DEBUG", "DIGEST"]);
    let refused = |what: &str| {
        format!("ERR DELAY does not apply to {what}, only to GCRA, TOKENBUCKET and LEAKYBUCKET")
    };
    #[rustfmt::skip]
    let cases: Vec<(Vec<Vec<u8>>, String)> = vec![
        (args!["RL.FIXED", "f", 10, "1s", "DELAY", "1s"].to_vec(), refused("FIXED")),
        (args!["RL.SLIDING", "s", 10, "1s", "DELAY", "1s"].to_vec(), refused("SLIDING")),
        (args!["RL.SLIDINGCOUNTER", "s", 10, "1s", "DELAY", "1s"].to_vec(), refused("SLIDINGCOUNTER")),
        (args!["RL.ACQUIRE", "c", 1, "1s", "ID", "x", "DELAY", "1s"].to_vec(), refused("CONCURRENCY")),
        (args!["RL.ALL", 2, "{y}a", "{y}b", "GCRA", 1, 1, "1s", "FIXED", 1, "1s", "DELAY", "1s"].to_vec(), refused("FIXED")),
        (args!["RL.CHECK", "kept", "GCRA", 1, 1, "1s", "DELAY", "1s"].to_vec(), "ERR unknown option 'DELAY'".into()),
        (args!["RL.GCRA", "kept", 1, 1, "1s", "DELAY", 0].to_vec(), "ERR invalid duration '0' for DELAY".into()),
        (args!["RL.GCRA", "kept", 1, 1, "1s", "DELAY", "soon"].to_vec(), "ERR invalid duration 'soon' for DELAY".into()),
        (args!["RL.GCRA", "kept", 1, 1, "1s", "DELAY"].to_vec(), "ERR syntax error, DELAY needs a value".into()),
        (args!["RL.TOKENBUCKET", "kept", 1, 1, "1s", "DELAY", "1s", "DELAY", "2s"].to_vec(), "ERR syntax error, DELAY given more than once".into()),
    ];
    for (cmd, want) in &cases {
        assert_eq!(
            &c.err(cmd),
            want,
            "{:?}",
            String::from_utf8_lossy(&cmd.concat())
        );
    }
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(c.int(&["DBSIZE"]), 1);
}

#[test]
fn command_docs_list_delay() {
    let s = Server::start();
    let mut c = s.conn();
    for (cmd, has) in [
        ("rl.gcra", true),
        ("rl.tokenbucket", true),
        ("rl.leakybucket", true),
        ("rl.all", true),
        ("rl.fixed", false),
        ("rl.check", false),
    ] {
        let mut words = Vec::new();
        strings(&c.cmd(&["COMMAND", "DOCS", cmd]), &mut words);
        assert!(words.iter().any(|w| w == "COST"), "{cmd}: {words:?}");
        assert_eq!(words.iter().any(|w| w == "DELAY"), has, "{cmd}: {words:?}");
    }
}

/// Every string in a (RESP2) reply, nested arrays included.
fn strings(r: &Reply, out: &mut Vec<String>) {
    match r.as_array() {
        Some(items) => items.iter().for_each(|i| strings(i, out)),
        None => out.extend(r.as_str()),
    }
}

#[test]
fn delayed_grants_replay_from_the_aof() {
    // No rewrite: the AOF holds the grants as propagated (a value, or RL.ALL with its resolved
    // AT); a restart replays them into the master's state, the reservations included.
    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let keys = ["g", "tb", "lb", "{z}a", "{z}b"];
    let mut replies = Vec::new();
    for step in 0..4u64 {
        let at = step * 300;
        call(
            &mut c,
            &["RL.GCRA", "g", "2", "3", "1s"],
            at,
            &["DELAY", "2s"],
        );
        let tb = ["RL.TOKENBUCKET", "tb", "2", "3", "1s"];
        let tb = call(&mut c, &tb, at, &["COST", "2", "DELAY", "2s"]);
        call(
            &mut c,
            &["RL.LEAKYBUCKET", "lb", "2", "3", "1s"],
            at,
            &["DELAY", "2s"],
        );
        let all = [
            "RL.ALL",
            "2",
            "{z}a",
            "{z}b",
            "GCRA",
            "1",
            "2",
            "1s",
            "LEAKYBUCKET",
            "2",
            "1",
            "1s",
        ];
        let all = call(&mut c, &all, at, &["DELAY", "3s"]);
        replies.push((tb, all));
    }
    // At +300 ms both are reservations. The token bucket (2 tokens, 3 a second) is full again
    // at +666.67 ms: a wait of 366.67 ms, the bucket then empty (full at +1333.33 ms). RL.ALL:
    // {z}a (1 at once, 2 a second) allows it at +500 ms, {z}b (a leaky bucket of 2 draining 1
    // a second, holding 1 until +1 s) at once: reserved as at +500 ms, {z}b's queue delay
    // then 500 ms (700 ms from the call), {z}b fresh at +2 s.
    assert_eq!(replies[1].0, [2, 2, 0, 367, 1034]);
    assert_eq!(replies[1].1, [1, 1, 0, 700, 1700]);
    let snapshot = |c: &mut Conn| -> Vec<(Reply, i64)> {
        keys.iter()
            .map(|k| {
                (
                    c.cmd(&["DEBUG", "DIGEST-VALUE", k]),
                    c.int(&["PEXPIRETIME", k]),
                )
            })
            .collect()
    };
    let before = snapshot(&mut c);
    assert!(before.iter().all(|(_, e)| *e > 0), "{before:?}");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c), before);
}
