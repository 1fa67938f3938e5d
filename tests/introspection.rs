//! What Redis itself says about the module: key type, memory, command metadata (cluster key
//! specs), INFO counters, configuration and keyspace events.

mod common;
use common::*;

fn flat(r: &Reply) -> Vec<String> {
    fn walk(r: &Reply, out: &mut Vec<String>) {
        match r {
            Reply::Array(items) | Reply::Set(items) => items.iter().for_each(|i| walk(i, out)),
            Reply::Map(pairs) => pairs.iter().for_each(|(k, v)| {
                walk(k, out);
                walk(v, out)
            }),
            Reply::Int(i) => out.push(i.to_string()),
            other => out.push(other.as_str().unwrap_or_default()),
        }
    }
    let mut out = Vec::new();
    walk(r, &mut out);
    out
}

#[test]
fn keys_have_the_module_type_and_real_memory_usage() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.GCRA", "k", "10", "1", "1m"]);
    assert_eq!(c.cmd(&["TYPE", "k"]), Reply::Simple("ratelimit".into()));
    let plain = c.int(&["MEMORY", "USAGE", "k"]);
    // The key's own cost plus a 32-byte value (inline: no DEDUP id, small parameters).
    assert!(plain > 32 && plain < 256, "{plain}");
    // Remembered ids are counted.
    for i in 0..100 {
        c.ints(&args!["RL.GCRA", "k", 1000, 1, "1m", "DEDUP", i]);
    }
    let with_ids = c.int(&["MEMORY", "USAGE", "k"]);
    assert!(with_ids >= plain + 100 * 32, "{plain} -> {with_ids}");
}

#[test]
fn command_info_declares_arity_flags_and_key_specs() {
    let s = Server::start();
    let mut c = s.conn();
    for (cmd, arity, flag, key_flags) in [
        ("rl.gcra", "-5", "write", ["RW", "update"]),
        ("rl.tokenbucket", "-5", "write", ["RW", "update"]),
        ("rl.leakybucket", "-5", "write", ["RW", "update"]),
        ("cl.throttle", "-5", "write", ["RW", "update"]),
        ("rl.info", "2", "readonly", ["RO", "access"]),
    ] {
        let info = flat(&c.cmd(&["COMMAND", "INFO", cmd]));
        assert_eq!(info[0], cmd);
        assert_eq!(info[1], arity, "{cmd}: {info:?}");
        assert!(info.contains(&flag.to_string()), "{cmd}: {info:?}");
        assert!(info.contains(&"fast".to_string()), "{cmd}: {info:?}");
        let spec = info.iter().position(|f| f == "flags").and_then(|_| {
            info.windows(2)
                .position(|w| w[0] == key_flags[0] && w[1] == key_flags[1])
        });
        assert!(
            spec.is_some(),
            "{cmd} key spec flags {key_flags:?}: {info:?}"
        );
    }
    assert_eq!(
        c.cmd(&[
            "COMMAND", "GETKEYS", "RL.GCRA", "user:1", "10", "1", "1s", "COST", "2"
        ]),
        Reply::Array(vec![Reply::Bulk(b"user:1".to_vec())])
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "CL.THROTTLE", "u", "1", "1", "1"]),
        Reply::Array(vec![Reply::Bulk(b"u".to_vec())])
    );
}

#[test]
fn command_docs_describe_every_command() {
    let s = Server::start();
    let mut c = s.conn();
    // The complexity some commands' docs must state.
    let complexities = [
        ("rl.gcra", "O(1)"),
        ("rl.tokenbucket", "O(1)"),
        ("rl.leakybucket", "O(1)"),
        ("cl.throttle", "O(1)"),
        (
            "rl.info",
            "O(1); O(log N) on a concurrency key, where N is the number of leases held",
        ),
        (
            "rl.acquire",
            "O(log N) where N is the number of leases held",
        ),
        (
            "rl.release",
            "O(log N) where N is the number of leases held",
        ),
    ];
    // Every command the module registers (its command table), so a command without docs fails
    // here.
    let registered = flat(&c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "ratelimit"]));
    assert!(registered.len() >= 18, "{registered:?}");
    for (cmd, _) in complexities {
        assert!(registered.iter().any(|r| r == cmd), "{cmd}: {registered:?}");
    }
    for cmd in &registered {
        let cmd = cmd.as_str();
        // A subcommand's docs are its container's (`rl.policy|set` under `rl.policy`).
        let (top, sub) = cmd.split_once('|').unwrap_or((cmd, ""));
        let docs = flat(&c.cmd(&["COMMAND", "DOCS", top]));
        let docs = if sub.is_empty() {
            docs
        } else {
            let at = docs
                .iter()
                .position(|d| d == cmd)
                .unwrap_or_else(|| panic!("{cmd} not under {top}: {docs:?}"));
            docs[at + 1..].to_vec()
        };
        let field = |name: &str| {
            docs.iter()
                .position(|d| d == name)
                .map(|i| docs[i + 1].clone())
        };
        assert!(
            field("summary").is_some_and(|s| s.len() > 10),
            "{cmd}: {docs:?}"
        );
        let complexity = field("complexity").unwrap_or_default();
        match complexities.iter().find(|(name, _)| *name == cmd) {
            Some((_, want)) => assert_eq!(complexity, *want, "{cmd}"),
            None => assert!(complexity.starts_with("O("), "{cmd}: {complexity}"),
        }
        assert_eq!(field("since").as_deref(), Some("0.1.0"), "{cmd}");
        assert!(
            docs.windows(2)
                .any(|w| w[0] == "module" && w[1] == "ratelimit"),
            "{cmd}"
        );
        // Each command has a key argument (RL.POLICY's state and RL.METRICS's counters are
        // outside the keyspace).
        if top == "rl.policy" || top == "rl.metrics" {
            continue;
        }
        assert!(
            docs.windows(4)
                .any(|w| w[0] == "name" && w[1] == "key" && w[2] == "type" && w[3] == "key"),
            "{cmd}: {docs:?}"
        );
    }
    let gcra = flat(&c.cmd(&["COMMAND", "DOCS", "rl.gcra"]));
    for token in ["COST", "PEEK", "BESTEFFORT", "DEDUP", "AT"] {
        assert!(gcra.contains(&token.to_string()), "{token}: {gcra:?}");
    }
}

#[test]
fn info_counts_calls_granted_and_denied_per_command() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.GCRA", "k", "2", "1", "1m"]);
    c.ints(&["RL.GCRA", "k", "2", "1", "1m"]);
    c.ints(&["RL.GCRA", "k", "2", "1", "1m"]);
    c.ints(&["CL.THROTTLE", "t", "0", "1", "60"]);
    c.err(&["RL.GCRA", "k", "0", "1", "1m"]);
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_rl_gcra").as_deref(),
        Some("calls=3,granted=2,denied=1,shadow_denied=0")
    );
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_cl_throttle")
            .as_deref(),
        Some("calls=1,granted=1,denied=0,shadow_denied=0")
    );
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_rl_tokenbucket")
            .as_deref(),
        Some("calls=0,granted=0,denied=0,shadow_denied=0")
    );
}

/// The `field:value` lines of `INFO ratelimit`.
fn info_lines(c: &mut Conn) -> Vec<(String, String)> {
    let info = c.ok(&["INFO", "ratelimit"]);
    let text = info
        .as_str()
        .unwrap_or_else(|| panic!("INFO ratelimit: {info:?}"));
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap_or_else(|| panic!("line {l:?}"));
            (k.to_string(), v.trim_end().to_string())
        })
        .collect()
}

#[test]
fn info_field_names_are_prometheus_metric_names() {
    let s = Server::start();
    let mut c = s.conn();
    let lines = info_lines(&mut c);
    let names: Vec<&str> = lines.iter().map(|(k, _)| k.as_str()).collect();
    // One line per command the module registers, named after it with `_` for `.`: every
    // command but the internal ones (`rl._*`), RL.INFO and RL.METRICS, which only read.
    let commands = flat(&c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "ratelimit"]));
    let mut want: Vec<String> = commands
        .iter()
        .filter(|cmd| !cmd.starts_with("rl._") && *cmd != "rl.info" && *cmd != "rl.metrics")
        .map(|cmd| format!("ratelimit_{}", cmd.replace('.', "_")))
        .collect();
    // And the waits of `RL.ACQUIRE ... WAIT`, and the named policies (their count and
    // checksum; none is defined here, so no per-policy counters). RL.POLICY's subcommands are
    // counted per policy instead.
    want.retain(|name| !name.starts_with("ratelimit_rl_policy"));
    want.push("ratelimit_rl_acquire_wait".to_string());
    want.push("ratelimit_policies".to_string());
    want.push("ratelimit_policies_checksum".to_string());
    // And the module's version (tests/version.rs checks its value).
    want.push("ratelimit_version".to_string());
    want.sort();
    let mut counted: Vec<&str> = names.clone();
    counted.sort();
    assert_eq!(counted, want);
    assert!(want.contains(&"ratelimit_rl_gcra".to_string()), "{want:?}");
    let valid = |n: &str| {
        n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    for (name, value) in &lines {
        assert!(valid(name), "{name}");
        if name == "ratelimit_policies_checksum" {
            assert!(value.len() == 16 && value.chars().all(|c| c.is_ascii_hexdigit()));
            continue;
        }
        if name == "ratelimit_policies" {
            assert_eq!(value, "0");
            continue;
        }
        if name == "ratelimit_version" {
            continue;
        }
        for kv in value.split(',') {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("{name}: {value}"));
            assert!(valid(k), "{name}: {k}");
            assert!(v.parse::<u64>().is_ok(), "{name}: {kv}");
        }
    }
}

/// SPEC: the module costs nothing to commands it does not own, so it does not watch for
/// `CONFIG RESETSTAT` (no server tells modules about it): `INFO ratelimit`'s counters are
/// monotonic from the module's load, as Prometheus counters are, while the server's own
/// statistics are reset.
#[test]
fn config_resetstat_leaves_the_counters_as_they_were() {
    let s = Server::start();
    let mut c = s.conn();
    let count = |c: &mut Conn| {
        c.ints(&["RL.GCRA", "k", "1", "1", "1m"]);
        c.ints(&["RL.GCRA", "k", "1", "1", "1m"]);
        c.ints(&["RL.FIXED", "f", "5", "1m"]);
    };
    let gcra = |c: &mut Conn| c.info_field("ratelimit", "ratelimit_rl_gcra");
    let fixed = |c: &mut Conn| c.info_field("ratelimit", "ratelimit_rl_fixed");
    count(&mut c);
    assert_eq!(
        gcra(&mut c).as_deref(),
        Some("calls=2,granted=1,denied=1,shadow_denied=0")
    );
    assert!(c.info_field("commandstats", "cmdstat_rl.gcra").is_some());
    c.ok(&["config", "resetstat"]);
    // The server reset its own statistics...
    assert_eq!(c.info_field("commandstats", "cmdstat_rl.gcra"), None);
    // ...and the module's counters are as they were, then go on counting.
    assert_eq!(
        gcra(&mut c).as_deref(),
        Some("calls=2,granted=1,denied=1,shadow_denied=0")
    );
    assert_eq!(
        fixed(&mut c).as_deref(),
        Some("calls=1,granted=1,denied=0,shadow_denied=0")
    );
    count(&mut c);
    assert_eq!(
        gcra(&mut c).as_deref(),
        Some("calls=4,granted=1,denied=3,shadow_denied=0")
    );
    assert_eq!(
        fixed(&mut c).as_deref(),
        Some("calls=2,granted=2,denied=0,shadow_denied=0")
    );
}

#[test]
fn dedup_max_is_a_config_set_at_load_startup_or_runtime() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        flat(&c.cmd(&["CONFIG", "GET", "ratelimit.dedup-max"])),
        ["ratelimit.dedup-max", "1000"]
    );
    c.ok(&["CONFIG", "SET", "ratelimit.dedup-max", "5"]);
    assert_eq!(
        flat(&c.cmd(&["CONFIG", "GET", "ratelimit.dedup-max"]))[1],
        "5"
    );
    assert!(
        c.err(&["CONFIG", "SET", "ratelimit.dedup-max", "2000000"])
            .starts_with("ERR")
    );
    // Set at startup, as a line of redis.conf would (queued until the module loads).
    let s = Server::start_with(&["--ratelimit.dedup-max", "7"]);
    assert_eq!(
        flat(&s.conn().cmd(&["CONFIG", "GET", "ratelimit.dedup-max"]))[1],
        "7"
    );
}

#[test]
fn granted_calls_emit_keyspace_events() {
    let s = Server::start();
    let mut c = s.conn();
    // `d`: module key-type events (ours); `g`: generic ones (DEL).
    c.ok(&["CONFIG", "SET", "notify-keyspace-events", "Kgd"]);
    let mut sub = s.conn();
    sub.ok(&["SUBSCRIBE", "__keyspace@0__:k"]);
    c.ints(&["RL.GCRA", "k", "1", "1", "1m"]);
    c.ints(&["RL.GCRA", "k", "1", "1", "1m"]); // denied: no event
    c.ints(&["CL.THROTTLE", "k", "0", "1", "60", "0"]); // nothing charged: no event
    c.ok(&["DEL", "k"]);
    let event = |r: Reply| flat(&r).last().cloned().unwrap();
    assert_eq!(event(sub.recv()), "rl.gcra");
    assert_eq!(event(sub.recv()), "del");
}

#[test]
fn repeated_calls_on_live_keys_leak_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // Every command, its options included, on 20 keys that stay alive: memory must not grow.
    let round = |c: &mut Conn, at: u64| {
        for k in 0..20u64 {
            for (cmd, args) in [
                ("RL.GCRA", &["1000000", "1", "1m", "DEDUP", "a"][..]),
                ("RL.TOKENBUCKET", &["1000000", "1", "1m", "PEEK"]),
                ("RL.LEAKYBUCKET", &["1000000", "1", "1m", "BESTEFFORT"]),
                ("RL.FIXED", &["1000000", "1h", "OFFSET", "5m"]),
                ("RL.SLIDINGCOUNTER", &["1000000", "1h"]),
                ("RL.SLIDING", &["1000000", "1h", "PRECISION", "1s"]),
            ] {
                let mut v = args![cmd, format!("{cmd}:{k}")].to_vec();
                v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
                v.extend(args!["AT", at]);
                c.ints(&v);
            }
            c.ints(&args![
                "RL.ALL",
                2,
                format!("{{a{k}}}:1"),
                format!("{{a{k}}}:2"),
                "GCRA",
                1000000,
                1,
                "1m",
                "SLIDING",
                1000000,
                "1h",
                "PRECISION",
                "1s",
                "AT",
                at
            ]);
            c.cmd(&args!["RL.INFO", format!("RL.GCRA:{k}")]);
            c.cmd(&args!["RL.GCRA", format!("RL.FIXED:{k}"), 1, 1, "1s"]); // WRONGTYPE
            c.cmd(&args!["RL.GCRA", format!("RL.GCRA:{k}"), 0, 1, "1s"]); // bad argument
        }
    };
    let used = |c: &mut Conn| -> i64 {
        c.info_field("memory", "used_memory")
            .unwrap()
            .parse()
            .unwrap()
    };
    for i in 0..20 {
        round(&mut c, t + i);
    }
    let before = used(&mut c);
    for i in 20..220 {
        round(&mut c, t + i * 1000);
    }
    let after = used(&mut c);
    // 200 rounds × 20 keys × 10 calls; the sliding logs gain one 1 s bucket per round (a few
    // bytes each), everything else is fixed-size.
    assert!(
        after - before < 256 * 1024,
        "used_memory grew by {} bytes",
        after - before
    );
}
