//! ACL: which users may run the module's commands, on each server.
//!
//! What to expect is worked out from the server's version, not from the module: command ACL
//! categories need `RedisModule_SetCommandACLCategories` (Redis 7.2+, Valkey), the module's own
//! `ratelimit` category needs `RedisModule_AddACLCategory` (Redis 7.4+, Valkey 8+). On Redis 7.0
//! module commands are in no category at all, which these tests assert too.

mod common;
use common::*;

/// What the server under test supports.
struct Caps {
    /// Module commands can be put in ACL categories.
    categories: bool,
    /// Modules can add their own ACL category.
    module_category: bool,
}

fn caps(s: &Server) -> Caps {
    let mut c = s.conn();
    if let Some(v) = c.info_field("server", "valkey_version") {
        let major: u32 = v
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        return Caps {
            categories: true,
            module_category: major >= 8,
        };
    }
    Caps {
        categories: s.version_at_least(7, 2),
        module_category: s.version_at_least(7, 4),
    }
}

/// Every command, a call of it that succeeds for a user allowed to run it, and its categories.
fn commands(t: u64) -> Vec<(Vec<String>, &'static [&'static str])> {
    let at = t.to_string();
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        (
            v(&["RL.GCRA", "g", "5", "1", "1s", "AT", &at]),
            &["write", "fast"],
        ),
        (
            v(&["RL.TOKENBUCKET", "t", "5", "1", "1s", "AT", &at]),
            &["write", "fast"],
        ),
        (
            v(&["RL.LEAKYBUCKET", "l", "5", "1", "1s", "AT", &at]),
            &["write", "fast"],
        ),
        (
            v(&["RL.FIXED", "f", "5", "1s", "AT", &at]),
            &["write", "fast"],
        ),
        (
            v(&["RL.SLIDING", "s", "5", "1s", "AT", &at]),
            &["write", "fast"],
        ),
        (
            v(&["RL.SLIDINGCOUNTER", "sc", "5", "1s", "AT", &at]),
            &["write", "fast"],
        ),
        (
            v(&["RL.ALL", "1", "a", "GCRA", "5", "1", "1s", "AT", &at]),
            &["write", "fast"],
        ),
        (v(&["CL.THROTTLE", "c", "5", "1", "1"]), &["write", "fast"]),
        (v(&["RL.INFO", "g"]), &["read", "fast"]),
        (v(&["RL.STREAMCOUNT", "st", "1s", "AT", &at]), &["write"]),
        (
            v(&["RL.ACQUIRE", "cc", "5", "1s", "ID", "w", "AT", &at]),
            &["write", "fast"],
        ),
        (v(&["RL.RELEASE", "cc", "w", "AT", &at]), &["write", "fast"]),
        // RL.REFUND is O(N) on a sliding log, so not fast.
        (v(&["RL.REFUND", "g", "1", "AT", &at]), &["write"]),
        // RL.SETTLE settles a reservation on each of its keys (O(N) on a sliding log).
        (v(&["RL.SETTLE", "1", "g", "h", "1", "AT", &at]), &["write"]),
        (v(&["RL.BLOCK", "b", "1s", "AT", &at]), &["write", "fast"]),
        (v(&["RL.UNBLOCK", "b"]), &["write", "fast"]),
        (
            v(&["RL.CHECK", "g", "GCRA", "5", "1", "1s", "AT", &at]),
            &["read", "fast"],
        ),
        (
            v(&["RL.CHECKALL", "1", "g", "GCRA", "5", "1", "1s", "AT", &at]),
            &["read", "fast"],
        ),
        // Under the policy [`with_policy`] makes.
        (v(&["RL.LIMIT", "pl", "p", "AT", &at]), &["write", "fast"]),
        // No key: the module's counters, for an exporter's script.
        (v(&["RL.METRICS"]), &["read", "fast"]),
    ]
}

/// Make the policy `p` the calls of [`commands`] use.
fn with_policy(s: &Server) {
    let mut c = s.conn();
    c.int(&["RL.POLICY", "SET", "p", "GCRA", "5", "1", "1s"]);
}

#[test]
fn the_list_above_names_every_module_command() {
    // So a new command cannot be left out of these tests: the server's list of the module's
    // commands is the list above plus the internal restore and set commands (checked on their own
    // below).
    let s = Server::start();
    let mut c = s.conn();
    let listed = c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "ratelimit"]);
    let mut got: Vec<String> = listed
        .as_array()
        .unwrap_or_else(|| panic!("COMMAND LIST: {listed:?}"))
        .iter()
        .filter_map(Reply::as_str)
        .map(|n| n.to_lowercase())
        .collect();
    got.sort();
    let mut want: Vec<String> = commands(base_ms())
        .into_iter()
        .map(|(call, _)| call[0].to_lowercase())
        .chain(["rl._restore".to_string(), "rl._set".to_string()])
        // RL.POLICY, a container, and its subcommands (checked on their own below).
        .chain(
            [
                "", "|set", "|get", "|del", "|list", "|dump", "|restore", "|help",
            ]
            .map(|sub| format!("rl.policy{sub}")),
        )
        .collect();
    want.sort();
    want.dedup();
    assert_eq!(got, want);
}

fn is_noperm(r: &Reply) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with("NOPERM"))
}

/// A connection authenticated as `user` (password `pw`).
fn login(s: &Server, user: &str) -> Conn {
    let mut c = s.conn();
    c.ok(&["AUTH", user, "pw"]);
    c
}

#[test]
fn command_info_lists_each_commands_acl_categories() {
    let s = Server::start();
    let caps = caps(&s);
    let mut c = s.conn();
    for (call, cats) in commands(base_ms()) {
        let name = call[0].to_lowercase();
        let info = c.cmd(&["COMMAND", "INFO", &name]);
        let entry = info
            .as_array()
            .and_then(|a| a.first())
            .and_then(|e| e.as_array())
            .unwrap_or_else(|| panic!("COMMAND INFO {name}: {info:?}"));
        // The seventh field is the ACL categories, as `@write`.
        let got: Vec<String> = entry[6]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {entry:?}"))
            .iter()
            .filter_map(Reply::as_str)
            .collect();
        let mut want: Vec<String> = Vec::new();
        if caps.categories {
            want.extend(cats.iter().map(|c| format!("@{c}")));
        }
        if caps.module_category {
            want.push("@ratelimit".into());
        }
        let mut got_sorted = got.clone();
        got_sorted.sort();
        want.sort();
        assert_eq!(got_sorted, want, "{name}: {got:?}");
    }
    // The internal commands that write raw state: @admin and @dangerous, nothing else (not
    // @write, @fast or the module's category).
    for name in INTERNAL {
        let want: &[&str] = if caps.categories {
            &["@admin", "@dangerous"]
        } else {
            &[]
        };
        let mut got = acl_categories(&mut c, name);
        got.sort();
        assert_eq!(got, want, "{name}");
    }
}

/// The internal commands: replication and AOF write raw state with them.
const INTERNAL: [&str; 2] = ["rl._restore", "rl._set"];

/// The ACL categories `COMMAND INFO` lists for `name` (its seventh field, as `@write`).
fn acl_categories(c: &mut Conn, name: &str) -> Vec<String> {
    let info = c.cmd(&["COMMAND", "INFO", name]);
    let entry = info
        .as_array()
        .and_then(|a| a.first())
        .and_then(|e| e.as_array())
        .unwrap_or_else(|| panic!("COMMAND INFO {name}: {info:?}"));
    entry[6]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: {entry:?}"))
        .iter()
        .filter_map(Reply::as_str)
        .collect()
}

#[test]
fn a_write_fast_user_can_rate_limit_where_the_server_has_command_categories() {
    let s = Server::start();
    with_policy(&s);
    let caps = caps(&s);
    let mut admin = s.conn();
    admin.ok(&[
        "ACL", "SETUSER", "app", "on", ">pw", "+@write", "+@fast", "~*",
    ]);
    admin.ok(&[
        "ACL", "SETUSER", "writer", "on", ">pw", "+@write", "-@fast", "~*",
    ]);
    admin.ok(&["ACL", "SETUSER", "reader", "on", ">pw", "+@read", "~*"]);
    let mut app = login(&s, "app");
    let mut writer = login(&s, "writer");
    let mut reader = login(&s, "reader");
    for (call, cats) in commands(base_ms()) {
        let r = app.cmd(&call);
        // +@write +@fast: every command is in one of them (RL.INFO is read+fast, RL.STREAMCOUNT
        // write only).
        if caps.categories {
            assert!(!r.is_error(), "app: {call:?}: {r:?}");
        } else {
            assert!(
                is_noperm(&r),
                "app on a server without categories: {call:?}: {r:?}"
            );
        }
        // +@write -@fast: only the write commands that are not fast.
        let r = writer.cmd(&call);
        let allowed = caps.categories && cats.contains(&"write") && !cats.contains(&"fast");
        assert_eq!(!is_noperm(&r), allowed, "writer: {call:?}: {r:?}");
        // +@read: only RL.INFO and RL.CHECK.
        let r = reader.cmd(&call);
        let allowed = caps.categories && cats.contains(&"read");
        assert_eq!(!is_noperm(&r), allowed, "reader: {call:?}: {r:?}");
    }
    // The internal restore and set commands are in neither @write nor @fast (nor @read).
    for cmd in INTERNAL {
        for (who, conn) in [
            ("app", &mut app),
            ("writer", &mut writer),
            ("reader", &mut reader),
        ] {
            let r = conn.cmd(&[cmd, "x", "not-a-payload"]);
            assert!(is_noperm(&r), "{who}: {cmd}: {r:?}");
        }
    }
}

/// LEB128, as the module's payloads write integers.
fn varint(mut v: u128, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The payload of a fresh GCRA limiter (burst `burst`, `rate` per `period_us`) last updated at
/// `at_us`, written by hand after the codec's version 1 layout: version 1, kind 1 (GCRA), the
/// last update, burst, rate, period, the TAT (0: fresh) and no `DEDUP` id.
fn fresh_gcra_payload(at_us: u64, burst: u64, rate: u64, period_us: u64) -> Vec<u8> {
    let mut p = vec![1u8, 1];
    for v in [at_us, burst, rate, period_us, 0, 0] {
        varint(u128::from(v), &mut p);
    }
    p
}

/// D1: a user who may only rate-limit cannot overwrite a limiter's state with the internal
/// commands (reset an exhausted limiter, or date its clock ahead), whether it was granted the
/// module's category (`+@ratelimit`, as the README recommends), `+@write`, or everything but
/// `@dangerous`. A user granted everything still can (replication and the AOF run as such).
#[test]
fn users_who_may_only_rate_limit_cannot_overwrite_a_limiters_state() {
    let s = Server::start();
    let caps = caps(&s);
    let mut admin = s.conn();
    let t = base_ms();
    let gcra = |c: &mut Conn| c.ints(&args!["RL.GCRA", "rl:k", 3, 1, "1h", "COST", 3, "AT", t]);
    // An exhausted limiter (burst 3, one unit an hour): 3 units granted, the next 3 denied for
    // the 3 hours the limiter takes to be fresh again.
    assert_eq!(gcra(&mut admin), [3, 3, 0, 0, 10_800_000]);
    assert_eq!(gcra(&mut admin), [0, 3, 0, 10_800_000, 10_800_000]);
    let fresh = fresh_gcra_payload(t * 1000, 3, 1, 3_600_000_000);
    let pxat = (t + 3_600_000).to_string();

    let mut users: Vec<(&str, Vec<&str>)> = vec![
        ("writer", vec!["+@write", "~*"]),
        ("app", vec!["+@write", "+@fast", "~rl:*"]),
        ("nodanger", vec!["+@all", "-@dangerous", "~*"]),
    ];
    if caps.module_category {
        users.push(("rl", vec!["+@ratelimit", "~rl:*"]));
    } else {
        // The category does not exist on this server.
        let e = admin.err(&["ACL", "SETUSER", "rl", "on", ">pw", "+@ratelimit"]);
        assert!(e.contains("+@ratelimit"), "{e}");
    }
    for (user, rules) in &users {
        let mut setuser = vec!["ACL", "SETUSER", user, "on", ">pw"];
        setuser.extend(rules);
        admin.ok(&setuser);
        let mut c = login(&s, user);
        for call in [
            args!["RL._SET", "rl:k", fresh.clone()].to_vec(),
            args!["RL._RESTORE", "rl:k", fresh.clone(), "PXAT", pxat.clone()].to_vec(),
        ] {
            let r = c.cmd(&call);
            // `+@all -@dangerous` grants every command in no category, and Redis 7.0 puts module
            // commands in none: there only naming them (`-rl._set -rl._restore`) denies them.
            let allowed = *user == "nodanger" && !caps.categories;
            if allowed {
                assert_eq!(r, Reply::Simple("OK".into()), "{user}: {r:?}");
                // Exhaust it again for the next user.
                assert_eq!(gcra(&mut admin), [3, 3, 0, 0, 10_800_000]);
            } else {
                assert!(is_noperm(&r), "{user}: {r:?}");
            }
        }
        // Nothing changed: still exhausted.
        assert_eq!(
            gcra(&mut admin),
            [0, 3, 0, 10_800_000, 10_800_000],
            "{user}"
        );
    }
    // The payload is a valid one: a user granted everything resets the limiter with it.
    admin.ok(&args!["RL._SET", "rl:k", fresh]);
    assert_eq!(gcra(&mut admin), [3, 3, 0, 0, 10_800_000]);
}

#[test]
fn a_ratelimit_user_runs_every_module_command_and_nothing_else() {
    let s = Server::start();
    with_policy(&s);
    let caps = caps(&s);
    let mut admin = s.conn();
    let r = admin.cmd(&["ACL", "SETUSER", "rl", "on", ">pw", "+@ratelimit", "~*"]);
    if !caps.module_category {
        // The category does not exist: the user cannot be given it.
        match &r {
            Reply::Error(e) => assert!(e.starts_with("ERR") && e.contains("+@ratelimit"), "{e}"),
            other => panic!("+@ratelimit on a server without module categories: {other:?}"),
        }
        assert!(admin.cmd(&["ACL", "CAT", "ratelimit"]).is_error());
        // What such a server offers instead: the commands by name.
        admin.ok(&["ACL", "SETUSER", "byname", "on", ">pw", "+rl.gcra", "~*"]);
        let mut byname = login(&s, "byname");
        assert!(!byname.cmd(&["RL.GCRA", "g", "5", "1", "1s"]).is_error());
        assert!(is_noperm(&byname.cmd(&["RL.FIXED", "f", "5", "1s"])));
        return;
    }
    assert_eq!(r, Reply::Simple("OK".into()));
    let mut rl = login(&s, "rl");
    for (call, _) in commands(base_ms()) {
        let r = rl.cmd(&call);
        assert!(!r.is_error(), "rl: {call:?}: {r:?}");
    }
    assert!(is_noperm(&rl.cmd(&["GET", "g"])));
    assert!(is_noperm(&rl.cmd(&["SET", "g", "1"])));
    assert!(is_noperm(&rl.cmd(&["DEL", "g"])));
}

#[test]
fn without_categories_all_commands_still_reaches_the_module() {
    // `+@all` is the way on servers without module categories (Redis 7.0), and works everywhere.
    let s = Server::start();
    with_policy(&s);
    let mut admin = s.conn();
    admin.ok(&["ACL", "SETUSER", "all", "on", ">pw", "+@all", "~*"]);
    let mut all = login(&s, "all");
    for (call, _) in commands(base_ms()) {
        let r = all.cmd(&call);
        assert!(!r.is_error(), "all: {call:?}: {r:?}");
    }
}

/// RL.POLICY's subcommands: GET and LIST are `@read` and in the module's category (an
/// application reads its policies), SET, DEL, DUMP and RESTORE `@admin` only: a user with
/// `+@ratelimit` (or `+@read +@write`) can GET, LIST and RL.LIMIT but not change policies.
#[test]
fn applications_read_policies_and_only_admins_change_them() {
    let s = Server::start();
    let caps = caps(&s);
    with_policy(&s);
    let mut admin = s.conn();
    let dump = admin
        .cmd(&["RL.POLICY", "DUMP"])
        .as_bytes()
        .unwrap()
        .to_vec();
    let reads: Vec<Vec<Vec<u8>>> = vec![
        args!["RL.POLICY", "GET", "p"].to_vec(),
        args!["RL.POLICY", "LIST"].to_vec(),
        args!["RL.POLICY", "HELP"].to_vec(),
        args!["RL.LIMIT", "pl", "p"].to_vec(),
    ];
    let admins: Vec<Vec<Vec<u8>>> = vec![
        args!["RL.POLICY", "SET", "q", "GCRA", "1", "1", "1s"].to_vec(),
        args!["RL.POLICY", "DEL", "p"].to_vec(),
        args!["RL.POLICY", "DUMP"].to_vec(),
        args!["RL.POLICY", "RESTORE", dump.clone()].to_vec(),
    ];
    let mut users: Vec<(&str, Vec<&str>)> = vec![("rw", vec!["+@read", "+@write", "+@fast", "~*"])];
    if caps.module_category {
        users.push(("app", vec!["+@ratelimit", "~*"]));
    }
    for (user, rules) in &users {
        let mut setuser = vec!["ACL", "SETUSER", user, "on", ">pw"];
        setuser.extend(rules);
        admin.ok(&setuser);
        let mut c = login(&s, user);
        for call in &reads {
            let r = c.cmd(call);
            if caps.categories {
                assert!(!r.is_error(), "{user}: {call:?}: {r:?}");
            } else {
                assert!(
                    is_noperm(&r),
                    "{user} on a server without categories: {r:?}"
                );
            }
        }
        for call in &admins {
            assert!(is_noperm(&c.cmd(call)), "{user}: {call:?}");
        }
    }
    // An admin (`+@admin`) changes them; by name works everywhere (Redis 7.0 included).
    admin.ok(&[
        "ACL",
        "SETUSER",
        "ops",
        "on",
        ">pw",
        "+rl.policy|set",
        "+rl.policy|get",
    ]);
    let mut ops = login(&s, "ops");
    assert_eq!(
        ops.int(&["RL.POLICY", "SET", "q", "GCRA", "1", "1", "1s"]),
        2
    );
    assert!(is_noperm(&ops.cmd(&["RL.POLICY", "DEL", "q"])));
    if caps.categories {
        admin.ok(&["ACL", "SETUSER", "root", "on", ">pw", "+@admin"]);
        let mut root = login(&s, "root");
        assert_eq!(root.int(&["RL.POLICY", "DEL", "q"]), 1);
        assert!(!root.cmd(&args!["RL.POLICY", "RESTORE", dump]).is_error());
        // `@admin` alone does not rate-limit.
        assert!(is_noperm(&root.cmd(&["RL.LIMIT", "pl", "p"])));
    }
}
