//! The option table (`src/commands/call/options.rs`) holds: every command of it, called with every
//! option alone and with every ordered pair of options (the same one twice included), is
//! accepted or refused exactly as the table says, with the table's error text, and a refused
//! call changes nothing (`DEBUG DIGEST` before and after). The refusals that depend on a
//! limiter (`LIMITER_RULES`) are each refused with their text, changing nothing.

mod common;
use common::*;

#[allow(dead_code)]
#[path = "../src/commands/call/options.rs"]
mod options;

use options::{LIMITER_RULES, TABLE, Token, UNIVERSE};

/// The policy RL.LIMIT applies: one GCRA limiter, as the table's RL.LIMIT row assumes.
const POLICY: &str = "options_table";

/// The call of `command` on fresh keys named from `n`, without options.
fn base(command: &str, n: usize) -> Vec<String> {
    let k = format!("{{o{n}}}:k");
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    match command {
        "RL.GCRA" | "RL.TOKENBUCKET" | "RL.LEAKYBUCKET" => s(&[command, &k, "10", "10", "1h"]),
        "RL.FIXED" | "RL.SLIDING" | "RL.SLIDINGCOUNTER" => s(&[command, &k, "10", "1h"]),
        "RL.ALL" => {
            let k2 = format!("{{o{n}}}:k2");
            s(&[
                command, "2", &k, &k2, "GCRA", "10", "10", "1h", "GCRA", "10", "10", "1h",
            ])
        }
        "RL.LIMIT" => s(&[command, &k, POLICY]),
        "RL.ACQUIRE" => s(&[command, &k, "10", "1h", "ID", "lease"]),
        "RL.CHECK" => s(&[command, &k, "GCRA", "10", "10", "1h"]),
        "RL.CHECKALL" => s(&[command, "1", &k, "GCRA", "10", "10", "1h"]),
        "RL.REFUND" => s(&[command, &k, "1"]),
        "RL.SETTLE" => s(&[command, "1", &k, "id", "1"]),
        "RL.BLOCK" => s(&[command, &k, "1h"]),
        other => panic!("no call of {other}"),
    }
}

/// `option` with its value, if it takes one.
fn with_value(option: Token, n: usize, now_ms: u64) -> Vec<String> {
    let t = String::from_utf8_lossy(option).into_owned();
    let value = match option {
        b"COST" => Some("1".to_string()),
        b"DEDUP" => Some(format!("id{n}")),
        b"BLOCK" | b"HOLD" => Some("1h".to_string()),
        b"DELAY" => Some("1s".to_string()),
        b"AT" => Some(now_ms.to_string()),
        b"WAIT" => Some("100ms".to_string()),
        _ => None,
    };
    std::iter::once(t).chain(value).collect()
}

fn now_ms(c: &mut Conn) -> u64 {
    let t = c.cmd(&["TIME"]);
    let t = t.as_array().expect("TIME");
    let secs: u64 = t[0].as_str().unwrap().parse().unwrap();
    let us: u64 = t[1].as_str().unwrap().parse().unwrap();
    secs * 1000 + us / 1000
}

#[test]
fn every_command_option_and_pair_is_as_the_table_says() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["RL.POLICY", "SET", POLICY, "GCRA", "10", "10", "1h"]);
    let mut n = 0usize;
    let mut failures = Vec::new();
    for row in TABLE {
        let (mut accepted, mut refused) = (0usize, 0usize);
        let mut cases: Vec<Vec<Token>> = UNIVERSE.iter().map(|&a| vec![a]).collect();
        for &a in UNIVERSE {
            for &b in UNIVERSE {
                cases.push(vec![a, b]);
            }
        }
        for given in cases {
            n += 1;
            let now = now_ms(&mut c);
            let mut call = base(row.command, n);
            for &o in &given {
                call.extend(with_value(o, n, now));
            }
            let want = row.verdict(&given);
            // The keys hold a state first (the call without options), so a refused call has
            // something to leave alone; nothing expires within the test (hour-long periods).
            let plain = c.cmd(&base(row.command, n));
            assert!(!plain.is_error(), "{:?}: {plain:?}", base(row.command, n));
            let before = c.cmd(&["DEBUG", "DIGEST"]);
            let got = c.cmd(&call);
            match (&want, &got) {
                (Ok(()), Reply::Error(e)) => {
                    failures.push(format!("{call:?}: refused with {e}, the table accepts it"))
                }
                (Ok(()), _) => accepted += 1,
                (Err(w), Reply::Error(e)) => {
                    if *e != format!("ERR {w}") {
                        failures.push(format!("{call:?}: {e}, the table says ERR {w}"));
                    }
                    let after = c.cmd(&["DEBUG", "DIGEST"]);
                    if after != before {
                        failures.push(format!("{call:?}: refused, but the dataset changed"));
                    }
                    refused += 1;
                }
                (Err(w), r) => failures.push(format!(
                    "{call:?}: accepted ({r:?}), the table says ERR {w}"
                )),
            }
        }
        // Each row is held in both directions: something it takes, something it refuses.
        assert!(
            accepted > 0 && refused > 0,
            "{}: {accepted} {refused}",
            row.command
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {n} calls:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_limiter_rule_is_refused_with_its_text() {
    let s = Server::start();
    let mut c = s.conn();
    // Something in the dataset for a refused call to leave alone.
    c.ints(&["RL.GCRA", "present", "10", "10", "1h"]);
    for (i, rule) in LIMITER_RULES.iter().enumerate() {
        let key = format!("lr{i}");
        let mut call: Vec<String> = vec![rule.command.to_string()];
        match rule.command {
            "RL.ALL" => call.extend(["1".to_string(), key]),
            "RL.CHECK" => call.push(key),
            "RL.LIMIT" => {
                let spec = rule.args[0]
                    .strip_prefix("<policy:")
                    .and_then(|p| p.strip_suffix('>'))
                    .expect("a policy");
                let name = format!("lr{i}");
                let mut set = vec!["RL.POLICY", "SET", &name];
                set.extend(spec.split(' '));
                assert!(!c.cmd(&set).is_error(), "{set:?}");
                call.extend([key, name]);
            }
            other => panic!("no call of {other}"),
        }
        if rule.command != "RL.LIMIT" {
            call.extend(rule.args.iter().map(|a| a.to_string()));
        }
        let before = c.cmd(&["DEBUG", "DIGEST"]);
        assert_eq!(c.err(&call), format!("ERR {}", rule.error), "{call:?}");
        assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), before, "{call:?}");
    }
}
