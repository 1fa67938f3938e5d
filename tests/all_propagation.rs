//! How RL.ALL reaches replicas and the AOF (README "Replication"): a granted call over small
//! limiters propagates the new value of every key it wrote, in one `RL._SET key payload [key
//! payload ...]`; a call over a key whose value is long (`DEDUP` ids) propagates the call with its
//! resolved `AT`. Either way a replica and an AOF replay end with exactly the master's state.
//! RL._SET with several pairs checks every pair before it writes any.

mod common;
use common::*;

/// The gateway call: requests, tokens and a calendar budget, on three keys of one slot.
fn gateway(at: u64, extra: &[&str]) -> Vec<Vec<u8>> {
    let mut v = args![
        "RL.ALL",
        3,
        "{g}rpm",
        "{g}tpm",
        "{g}budget",
        "GCRA",
        600,
        10,
        "1m",
        "NAME",
        "rpm",
        "TOKENBUCKET",
        90000,
        1500,
        "1s",
        "CHARGE",
        100,
        "NAME",
        "tpm",
        "FIXED",
        100000000,
        "month",
        "TZ",
        "Europe/Paris",
        "CHARGE",
        100,
        "NAME",
        "budget",
        "AT",
        at
    ]
    .to_vec();
    v.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
    v
}

const KEYS: [&str; 3] = ["{g}rpm", "{g}tpm", "{g}budget"];

/// Each key's digest and absolute expiry.
fn state(c: &mut Conn) -> Vec<(Reply, i64)> {
    KEYS.iter()
        .map(|k| (digest(c, k), c.int(&["PEXPIRETIME", k])))
        .collect()
}

/// The commands (lower case) in an AOF's text, in order.
fn commands(aof: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(aof);
    let mut lines = text.split("\r\n");
    let mut out = Vec::new();
    while let Some(line) = lines.next() {
        if line.starts_with('*') {
            lines.next();
            if let Some(name) = lines.next() {
                out.push(name.to_ascii_lowercase());
            }
        }
    }
    out
}

#[test]
fn all_over_small_limiters_propagates_one_set_of_every_written_value() {
    let s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let t = base_ms();
    let aof = aof_file(&s.dir, ".incr.aof");
    let before = std::fs::read(&aof).unwrap();
    for step in 0..20u64 {
        assert_eq!(c.ints(&gateway(t + step * 250, &[]))[0], 1, "call {step}");
    }
    let appended = std::fs::read(&aof).unwrap()[before.len()..].to_vec();
    let names: Vec<String> = commands(&appended)
        .into_iter()
        .filter(|n| n != "select")
        .collect();
    // One RL._SET per granted call (three pairs), nothing else: no MULTI, no RL.ALL.
    assert_eq!(names, vec!["rl._set".to_string(); 20], "{names:?}");
    let text = String::from_utf8_lossy(&appended);
    let first = text.split("*7\r\n").count() - 1;
    assert_eq!(first, 20, "each RL._SET carries three key-value pairs");
    let master = state(&mut c);
    c.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(state(&mut c), master);
}

#[test]
fn all_with_long_values_propagates_the_call_and_replicas_match() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let t = base_ms();
    for step in 0..30u64 {
        let id = format!("req-{step}");
        // Short values (one pair per key), then `DEDUP` ids (long values: the call itself).
        let extra: Vec<&str> = if step % 2 == 0 {
            vec![]
        } else {
            vec!["DEDUP", id.as_str()]
        };
        assert_eq!(
            m.ints(&gateway(t + step * 100, &extra))[0],
            1,
            "call {step}"
        );
    }
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(state(&mut r), state(&mut m));
}

#[test]
fn set_with_several_pairs_writes_all_or_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // Two values made by a real call, as RL.ALL propagated them to a second server's AOF.
    let src = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut sc = src.conn();
    assert_eq!(
        sc.ints(&args![
            "RL.ALL", 2, "{p}a", "{p}b", "GCRA", 10, 1, "1m", "FIXED", 10, "1h", "AT", t
        ])[0],
        1
    );
    let aof = std::fs::read(aof_file(&src.dir, ".incr.aof")).unwrap();
    let text = aof.as_slice();
    let start = text
        .windows(7)
        .position(|w| w.eq_ignore_ascii_case(b"rl._set"))
        .expect("an RL._SET in the AOF");
    // `rl._set\r\n$<n>\r\n{p}a\r\n$<n>\r\n<payload>\r\n...`: read the bulk strings after it.
    let mut bulks = Vec::new();
    let mut at = start + 7 + 2;
    while bulks.len() < 4 {
        let end = at + text[at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let len: usize = std::str::from_utf8(&text[at + 1..end])
            .unwrap()
            .parse()
            .unwrap();
        bulks.push(text[end + 2..end + 2 + len].to_vec());
        at = end + 2 + len + 2;
    }
    assert_eq!(bulks[0], b"{p}a");
    assert_eq!(bulks[2], b"{p}b");
    // A bad payload in the second pair, or a key of another type: nothing is written.
    c.ok(&["SET", "{p}b", "x"]);
    let refused = [
        vec![
            b"RL._SET".to_vec(),
            bulks[0].clone(),
            bulks[1].clone(),
            bulks[2].clone(),
            b"junk".to_vec(),
        ],
        vec![
            b"RL._SET".to_vec(),
            bulks[0].clone(),
            bulks[1].clone(),
            bulks[2].clone(),
            bulks[3].clone(),
        ],
    ];
    for call in &refused {
        assert!(c.cmd(call).is_error(), "{call:?}");
        assert_eq!(c.int(&["EXISTS", "{p}a"]), 0);
    }
    assert!(c.cmd(&["RL._SET", "{p}a", "x", "{p}b"]).is_error());
    c.int(&["DEL", "{p}b"]);
    c.ok(&[
        b"RL._SET".to_vec(),
        bulks[0].clone(),
        bulks[1].clone(),
        bulks[2].clone(),
        bulks[3].clone(),
    ]);
    assert_eq!(digest(&mut c, "{p}a"), digest(&mut sc, "{p}a"));
    assert_eq!(digest(&mut c, "{p}b"), digest(&mut sc, "{p}b"));
    assert_eq!(
        c.int(&["PEXPIRETIME", "{p}b"]),
        sc.int(&["PEXPIRETIME", "{p}b"])
    );
}
