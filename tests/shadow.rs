//! `SHADOW` end to end (SPEC "Conventions", "The detailed reply", "Introspection"): a shadow
//! call is evaluated and charged exactly as the enforced call (a call enforcement would deny
//! charges nothing, writes nothing, propagates nothing), and its reply grants the cost: no
//! wait, the limit, remaining and reset of the state after the call; under `DETAIL` reason
//! `shadow` and the would-be denier, each limiter's entry as enforcement replies it; counted as
//! granted and as `shadow_denied`. Every expectation is computed from the parameters and `AT`
//! times the test chose.

mod common;
use common::*;

/// The start of a minute after [`base_ms`]: fixed windows of a minute begin there.
fn minute() -> u64 {
    (base_ms() / 60_000 + 1) * 60_000
}

/// Whether `r` holds the bulk string `text`, at any depth.
fn holds(r: &Reply, text: &str) -> bool {
    match r {
        Reply::Bulk(b) => b == text.as_bytes(),
        Reply::Array(items) | Reply::Set(items) => items.iter().any(|i| holds(i, text)),
        Reply::Map(pairs) => pairs.iter().any(|(k, v)| holds(k, text) || holds(v, text)),
        _ => false,
    }
}

/// `calls`, `granted`, `denied`, `shadow_denied` of a command in `INFO ratelimit`.
fn counters(c: &mut Conn, command: &str) -> [u64; 4] {
    let line = c
        .info_field("ratelimit", &format!("ratelimit_{command}"))
        .unwrap_or_else(|| panic!("no INFO line for {command}"));
    let mut out = [0u64; 4];
    for (slot, name) in out
        .iter_mut()
        .zip(["calls", "granted", "denied", "shadow_denied"])
    {
        let field = line
            .split(',')
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {line}"));
        *slot = field.parse().unwrap();
    }
    out
}

/// GCRA burst 2, 1 per second (T = 1 s): two calls at `t` use it up (TAT = t + 2 s); a third is
/// denied for 1 s (enforced: `[0, 2, 0, 1000, 2000]`). With SHADOW it is granted with no wait,
/// nothing left and fresh in 2 s, and it charges nothing.
#[test]
fn shadow_gcra_grants_what_enforcement_denies_with_and_without_detail() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // A shadow call enforcement grants replies as enforcement: 1 left, fresh in 1 s.
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1s", "SHADOW", "AT", t]),
        [1, 2, 1, 0, 1000]
    );
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1s", "AT", t]),
        [1, 2, 0, 0, 2000]
    );
    let before = digest(&mut c, "k");
    let expiry = c.int(&["PEXPIRETIME", "k"]);
    assert_eq!(expiry, (t + 2000) as i64);
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1s", "shadow", "AT", t]),
        [1, 2, 0, 0, 2000]
    );
    let r = c.cmd(&args![
        "RL.GCRA", "k", 2, 1, "1s", "SHADOW", "DETAIL", "AT", t
    ]);
    assert_eq!(
        r,
        detailed(
            [1, 2, 0, 0, 2000],
            Some("k"),
            "shadow",
            vec![entry("k", "k", [1, 0, 2, 0, 1000, 2000, 2000])]
        )
    );
    // COST 3 can never pass: let through, the entry says never.
    let r = c.cmd(&args![
        "RL.GCRA", "k", 2, 1, "1s", "COST", 3, "SHADOW", "DETAIL", "AT", t
    ]);
    assert_eq!(
        r,
        detailed(
            [3, 2, 0, 0, 2000],
            Some("k"),
            "shadow",
            vec![entry("k", "k", [3, 0, 2, 0, -1, 2000, 2000])]
        )
    );
    // Nothing was charged: the value and its expiry are as two calls left them, and the
    // enforced call is still denied for 1 s (its reply byte for byte as without SHADOW ever).
    assert_eq!(digest(&mut c, "k"), before);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), expiry);
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1s", "AT", t]),
        [0, 2, 0, 1000, 2000]
    );
    // A second later one unit is back, and a shadow call takes it as enforcement would.
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1s", "SHADOW", "AT", t + 1000]),
        [1, 2, 0, 0, 2000]
    );
    assert_eq!(
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1s", "PEEK", "AT", t + 1000]),
        [0, 2, 0, 1000, 2000]
    );
}

/// RESP3: the reply is the same map as without SHADOW, the detailed one with reason `shadow`.
#[test]
fn shadow_resp3_replies_maps() {
    let s = Server::start();
    let mut c = s.conn();
    let t = minute();
    c.ok(&["HELLO", "3"]);
    c.cmd(&args!["RL.FIXED", "f", 1, "1m", "AT", t]);
    let names = [
        "granted",
        "limit",
        "remaining",
        "retry_after_ms",
        "reset_after_ms",
    ];
    let r = c.cmd(&args!["RL.FIXED", "f", 1, "1m", "SHADOW", "AT", t + 500]);
    let want: Vec<(Reply, Reply)> = names
        .iter()
        .zip([1, 1, 0, 0, 59_500])
        .map(|(n, v)| (bulk(n), int(v)))
        .collect();
    assert_eq!(r, Reply::Map(want.clone()));
    let r = c.cmd(&args![
        "RL.FIXED",
        "f",
        1,
        "1m",
        "SHADOW",
        "DETAIL",
        "AT",
        t + 500
    ]);
    let Reply::Map(fields) = r else {
        panic!("expected a map, got {r:?}")
    };
    assert_eq!(fields[..5], want[..]);
    assert_eq!(fields[5], (bulk("denied_by"), bulk("f")));
    assert_eq!(fields[6], (bulk("reason"), bulk("shadow")));
    let Some([Reply::Map(entry)]) = fields[7].1.as_array() else {
        panic!("{:?}", fields[7])
    };
    let values: Vec<Reply> = entry.iter().skip(2).map(|(_, v)| v.clone()).collect();
    // Enforcement: denied until the window ends.
    assert_eq!(
        values,
        [1, 0, 1, 0, 59_500, 59_500, 60_000].map(int).to_vec()
    );
    // Nothing was counted in the window: still one unit used.
    c.ok(&["HELLO", "2"]);
    assert_eq!(
        c.ints(&args!["RL.FIXED", "f", 1, "1m", "PEEK", "AT", t + 500]),
        [0, 1, 0, 59_500, 59_500]
    );
}

/// Every algorithm (and RL.ACQUIRE): once used up, a shadow call is granted with no wait and
/// changes nothing (`DEBUG DIGEST-VALUE` and the expiry as they were).
#[test]
fn shadow_denied_call_changes_nothing_on_any_algorithm() {
    let s = Server::start();
    let mut c = s.conn();
    let t = minute();
    // Limit 1, a minute: after one call at t, nothing is left; fresh again (reset_after_ms)
    // after the minute, or at the end of the window after (the sliding counter's previous
    // window weighs until then).
    #[rustfmt::skip]
    let cases: Vec<(Vec<Vec<u8>>, i64)> = vec![
        (args!["RL.GCRA", "g", 1, 1, "1m"].to_vec(),              60_000),
        (args!["RL.TOKENBUCKET", "tb", 1, 1, "1m"].to_vec(),      60_000),
        (args!["RL.LEAKYBUCKET", "lb", 1, 1, "1m"].to_vec(),      60_000),
        (args!["RL.FIXED", "f", 1, "1m"].to_vec(),                60_000),
        (args!["RL.SLIDING", "s", 1, "1m"].to_vec(),              60_000),
        (args!["RL.SLIDINGCOUNTER", "sc", 1, "1m"].to_vec(),      120_000),
        (args!["RL.ACQUIRE", "cc", 1, "1m", "ID", "a"].to_vec(),  60_000),
    ];
    for (call, reset) in cases {
        let key = String::from_utf8(call[1].clone()).unwrap();
        let at = |mut call: Vec<Vec<u8>>, extra: &[Vec<u8>]| {
            call.extend_from_slice(extra);
            call.extend(args!["AT", t]);
            call
        };
        assert_eq!(c.ints(&at(call.clone(), &[]))[0], 1, "{key}");
        let before = (digest(&mut c, &key), c.int(&["PEXPIRETIME", &key]));
        // Another lease id for the concurrency limiter: a new lease that does not fit.
        let mut other = call.clone();
        if key == "cc" {
            *other.last_mut().unwrap() = b"b".to_vec();
        }
        let enforced = c.ints(&at(other.clone(), &[]));
        assert_eq!(enforced[0], 0, "{key}: {enforced:?}");
        assert!(enforced[3] > 0, "{key}: {enforced:?}");
        let shadow = c.ints(&at(other.clone(), &args!["SHADOW"]));
        assert_eq!(shadow, [1, 1, 0, 0, reset], "{key}");
        let detail = c.cmd(&at(other, &args!["SHADOW", "DETAIL"]));
        let a = detail.as_array().unwrap();
        assert_eq!(a[..5], [1, 1, 0, 0, reset].map(int), "{key}");
        assert_eq!((&a[5], &a[6]), (&bulk(&key), &bulk("shadow")), "{key}");
        let e = a[7].as_array().unwrap()[0].as_array().unwrap().to_vec();
        assert_eq!(e[3], int(0), "{key}: enforcement granted nothing");
        assert_eq!(
            (digest(&mut c, &key), c.int(&["PEXPIRETIME", &key])),
            before,
            "{key}"
        );
    }
}

/// The same calls with and without SHADOW leave byte-identical values, on every algorithm,
/// with every option that changes state: plain calls, COST, BESTEFFORT, DEDUP, BLOCK, DELAY,
/// time behind the last update, and RL.ALL.
#[test]
fn shadow_calls_leave_the_values_enforced_calls_leave() {
    let s = Server::start();
    let mut c = s.conn();
    let t = minute();
    let limiters: Vec<Vec<Vec<u8>>> = vec![
        args!["RL.GCRA", 3, 2, "1s"].to_vec(),
        args!["RL.TOKENBUCKET", 3, 2, "1s"].to_vec(),
        args!["RL.LEAKYBUCKET", 3, 2, "1s"].to_vec(),
        args!["RL.FIXED", 3, "1s"].to_vec(),
        args!["RL.SLIDING", 3, "1s", "PRECISION", "100ms"].to_vec(),
        args!["RL.SLIDINGCOUNTER", 3, "1s"].to_vec(),
    ];
    // (ms after t, options): granted, denied, partial, remembered, blocked, delayed calls.
    let plan: Vec<(u64, Vec<Vec<u8>>)> = vec![
        (0, vec![]),
        (0, args!["COST", 2].to_vec()),
        (10, vec![]),
        (20, args!["COST", 2, "BESTEFFORT"].to_vec()),
        (30, args!["DEDUP", "x"].to_vec()),
        (30, args!["DEDUP", "x"].to_vec()),
        (40, args!["COST", 4].to_vec()),
        (400, args!["COST", 2, "DELAY", "1s"].to_vec()),
        (350, vec![]),
        (500, args!["BLOCK", "3s"].to_vec()),
        (600, vec![]),
        (5000, args!["COST", 0].to_vec()),
        (5100, vec![]),
        (5200, args!["PEEK"].to_vec()),
    ];
    for limiter in &limiters {
        let algo = String::from_utf8(limiter[0].clone()).unwrap();
        let (ke, ks) = (format!("{algo}:e"), format!("{algo}:s"));
        for (dt, opts) in &plan {
            if opts.contains(&b"DELAY".to_vec())
                && !["RL.GCRA", "RL.TOKENBUCKET", "RL.LEAKYBUCKET"].contains(&algo.as_str())
            {
                continue;
            }
            for (key, shadow) in [(&ke, false), (&ks, true)] {
                let mut call = vec![limiter[0].clone(), key.as_bytes().to_vec()];
                call.extend_from_slice(&limiter[1..]);
                call.extend_from_slice(opts);
                call.extend(args!["AT", t + dt]);
                if shadow {
                    call.push(b"SHADOW".to_vec());
                }
                let r = c.cmd(&call);
                assert!(!r.is_error(), "{call:?}: {r:?}");
            }
            assert_eq!(digest(&mut c, &ke), digest(&mut c, &ks), "{algo} {opts:?}");
            assert_eq!(
                c.int(&["PEXPIRETIME", &ke]),
                c.int(&["PEXPIRETIME", &ks]),
                "{algo} {opts:?}"
            );
        }
    }
    // RL.ALL, with a block placed by a denied call.
    for (suffix, shadow) in [("e", false), ("s", true)] {
        let (a, b) = (format!("{{all{suffix}}}a"), format!("{{all{suffix}}}b"));
        for (dt, cost) in [(0u64, 2u64), (10, 2), (20, 1), (30, 1)] {
            let mut call = args![
                "RL.ALL",
                2,
                &a,
                &b,
                "GCRA",
                5,
                1,
                "1s",
                "FIXED",
                3,
                "1m",
                "COST",
                cost,
                "BLOCK",
                "2s",
                "AT",
                t + dt
            ]
            .to_vec();
            if shadow {
                call.push(b"SHADOW".to_vec());
            }
            assert!(!c.cmd(&call).is_error());
        }
    }
    for k in ["a", "b"] {
        let (e, s) = (format!("{{alle}}{k}"), format!("{{alls}}{k}"));
        assert_eq!(digest(&mut c, &e), digest(&mut c, &s), "RL.ALL {k}");
        assert_eq!(c.int(&["PEXPIRETIME", &e]), c.int(&["PEXPIRETIME", &s]));
    }
    // The second call was denied by the FIXED limiter (2 + 2 > 3) and blocked it for 2 s.
    let info = c.cmd(&["RL.INFO", "{alls}b"]);
    assert!(holds(&info, "blocked_ms"), "{info:?}");
}

/// `BLOCK d` under SHADOW: the key is blocked as enforcement would block it (the shadow key's
/// state is enforcement's), and the shadow calls that follow are let through, `reason shadow`,
/// while an enforced call is denied by the block.
#[test]
fn shadow_with_block_blocks_the_key_and_lets_the_calls_through() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&args!["RL.GCRA", "k", 1, 1, "1s", "AT", t]);
    // Denied (TAT t + 1 s): blocked for 10 s from t.
    assert_eq!(
        c.ints(&args![
            "RL.GCRA", "k", 1, 1, "1s", "BLOCK", "10s", "SHADOW", "AT", t
        ]),
        [1, 1, 0, 0, 10_000]
    );
    // At t + 2 s the limiter itself is fresh; the block denies for 8 s more.
    let r = c.cmd(&args![
        "RL.GCRA",
        "k",
        1,
        1,
        "1s",
        "SHADOW",
        "DETAIL",
        "AT",
        t + 2000
    ]);
    assert_eq!(
        r,
        detailed(
            [1, 1, 0, 0, 8000],
            Some("k"),
            "shadow",
            vec![entry("k", "k", [1, 0, 1, 0, 8000, 8000, 1000])]
        )
    );
    let r = c.cmd(&args!["RL.GCRA", "k", 1, 1, "1s", "DETAIL", "AT", t + 2000]);
    assert_eq!(
        r,
        detailed(
            [0, 1, 0, 8000, 8000],
            Some("k"),
            "blocked",
            vec![entry("k", "k", [1, 0, 1, 0, 8000, 8000, 1000])]
        )
    );
}

/// RL.ALL under SHADOW: all or nothing as enforced (nothing charged on any key when one
/// denies), the reply grants the call's cost and names the would-be denier.
#[test]
fn shadow_rl_all_names_the_would_be_denier_and_charges_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = minute();
    // {u}:rpm GCRA 60 per minute (T = 1 s), {u}:tpm FIXED 100 per minute, 90 used.
    c.ints(&args![
        "RL.FIXED", "{u}:tpm", 100, "1m", "COST", 90, "AT", t
    ]);
    let before = digest(&mut c, "{u}:tpm");
    let call = |c: &mut Conn, detail: bool| {
        let mut call = args![
            "RL.ALL", 2, "{u}:rpm", "{u}:tpm", "GCRA", 60, 1, "1s", "NAME", "rpm", "FIXED", 100,
            "1m", "NAME", "tpm", "CHARGE", 20, "SHADOW", "AT", t
        ]
        .to_vec();
        if detail {
            call.push(b"DETAIL".to_vec());
        }
        c.cmd(&call)
    };
    // Enforcement: tpm denies (90 + 20 > 100) until the minute ends; rpm would grant 1 of 60.
    // The merged reply: COST 1 granted, no wait; limit and remaining of the limiter allowing
    // the fewest more calls of this shape (tpm: 10 left / 20 = 0), reset the largest (60 s).
    let r = call(&mut c, true);
    assert_eq!(
        r,
        detailed(
            [1, 100, 10, 0, 60_000],
            Some("tpm"),
            "shadow",
            vec![
                entry("rpm", "{u}:rpm", [1, 0, 60, 60, 0, 0, 60_000]),
                entry("tpm", "{u}:tpm", [20, 0, 100, 10, 60_000, 60_000, 60_000]),
            ]
        )
    );
    assert_eq!(
        call(&mut c, false),
        Reply::Array([1, 100, 10, 0, 60_000].map(int).to_vec())
    );
    assert_eq!(digest(&mut c, "{u}:tpm"), before);
    assert_eq!(c.int(&["EXISTS", "{u}:rpm"]), 0);
}

/// RL.CHECK and RL.CHECKALL take SHADOW: the reply the shadow call would give, read-only.
#[test]
fn shadow_check_and_checkall_reply_as_the_shadow_call() {
    let s = Server::start();
    let mut c = s.conn();
    let t = minute();
    c.ints(&args!["RL.FIXED", "{c}f", 2, "1m", "COST", 2, "AT", t]);
    let before = digest(&mut c, "{c}f");
    assert_eq!(
        c.ints(&args!["RL.CHECK", "{c}f", "FIXED", 2, "1m", "AT", t]),
        [0, 2, 0, 60_000, 60_000]
    );
    assert_eq!(
        c.ints(&args![
            "RL.CHECK", "{c}f", "FIXED", 2, "1m", "SHADOW", "AT", t
        ]),
        [1, 2, 0, 0, 60_000]
    );
    let r = c.cmd(&args![
        "RL.CHECK", "{c}f", "FIXED", 2, "1m", "NAME", "daily", "SHADOW", "DETAIL", "AT", t
    ]);
    assert_eq!(
        r,
        detailed(
            [1, 2, 0, 0, 60_000],
            Some("daily"),
            "shadow",
            vec![entry("daily", "{c}f", [1, 0, 2, 0, 60_000, 60_000, 60_000])]
        )
    );
    let r = c.cmd(&args![
        "RL.CHECKALL",
        2,
        "{c}g",
        "{c}f",
        "GCRA",
        5,
        1,
        "1s",
        "FIXED",
        2,
        "1m",
        "SHADOW",
        "DETAIL",
        "AT",
        t
    ]);
    assert_eq!(
        r,
        detailed(
            [1, 2, 0, 0, 60_000],
            Some("{c}f"),
            "shadow",
            vec![
                entry("{c}g", "{c}g", [1, 0, 5, 5, 0, 0, 5000]),
                entry("{c}f", "{c}f", [1, 0, 2, 0, 60_000, 60_000, 60_000]),
            ]
        )
    );
    assert_eq!(digest(&mut c, "{c}f"), before);
    assert_eq!(c.int(&["EXISTS", "{c}g"]), 0);
}

/// RL.ACQUIRE under SHADOW: a lease that does not fit is let through and recorded nowhere
/// (the limit is never exceeded in the state); with WAIT it does not wait.
#[test]
fn shadow_acquire_lets_a_lease_through_without_taking_it() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    assert_eq!(
        c.ints(&args!["RL.ACQUIRE", "l", 1, "10s", "ID", "a", "AT", t]),
        [1, 1, 0, 0, 10_000]
    );
    let before = digest(&mut c, "l");
    assert_eq!(
        c.ints(&args![
            "RL.ACQUIRE",
            "l",
            1,
            "10s",
            "ID",
            "b",
            "SHADOW",
            "AT",
            t
        ]),
        [1, 1, 0, 0, 10_000]
    );
    assert_eq!(digest(&mut c, "l"), before);
    // On the server's clock (WAIT takes no AT): a wait of 5 s would block; SHADOW answers now.
    c.ints(&["RL.ACQUIRE", "w", "1", "1m", "ID", "a"]);
    let started = std::time::Instant::now();
    let r = c.ints(&[
        "RL.ACQUIRE",
        "w",
        "1",
        "1m",
        "ID",
        "b",
        "SHADOW",
        "WAIT",
        "5s",
    ]);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!((r[0], r[1], r[2], r[3]), (1, 1, 0, 0));
    // Only lease a is held: releasing b frees nothing.
    assert_eq!(c.int(&["RL.RELEASE", "w", "b"]), 0);
    assert_eq!(c.int(&["RL.RELEASE", "w", "a"]), 1);
}

/// BESTEFFORT with SHADOW charges what enforcement grants (here 1 of 3) and replies the cost,
/// reason `granted` (a call granted in part is not denied); DELAY with SHADOW keeps the
/// delayed grant's wait, and lets a call beyond the delay through with none.
#[test]
fn shadow_with_besteffort_and_delay() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&args![
        "RL.TOKENBUCKET",
        "b",
        3,
        1,
        "1s",
        "COST",
        2,
        "AT",
        t
    ]);
    let r = c.cmd(&args![
        "RL.TOKENBUCKET",
        "b",
        3,
        1,
        "1s",
        "COST",
        3,
        "BESTEFFORT",
        "SHADOW",
        "DETAIL",
        "AT",
        t
    ]);
    // Enforcement grants the 1 token left; the bucket is empty, full again in 3 s.
    assert_eq!(
        r,
        detailed(
            [3, 3, 0, 0, 3000],
            None,
            "granted",
            vec![entry("b", "b", [3, 1, 3, 0, 3000, 3000, 3000])]
        )
    );
    assert_eq!(
        c.ints(&args![
            "RL.TOKENBUCKET",
            "b",
            3,
            1,
            "1s",
            "PEEK",
            "COST",
            0,
            "AT",
            t
        ]),
        [0, 3, 0, 0, 3000]
    );
    // GCRA 1 per second, used at t: DELAY 2s grants the next call as of t + 1 s.
    c.ints(&args!["RL.GCRA", "d", 1, 1, "1s", "AT", t]);
    assert_eq!(
        c.ints(&args![
            "RL.GCRA", "d", 1, 1, "1s", "DELAY", "2s", "SHADOW", "AT", t
        ]),
        [1, 1, 0, 1000, 2000]
    );
    // The next one would wait 2 s, beyond DELAY 1s: let through with no wait, charging nothing.
    let before = digest(&mut c, "d");
    assert_eq!(
        c.ints(&args![
            "RL.GCRA", "d", 1, 1, "1s", "DELAY", "1s", "SHADOW", "AT", t
        ]),
        [1, 1, 0, 0, 2000]
    );
    assert_eq!(digest(&mut c, "d"), before);
}

/// `INFO ratelimit` counts a shadow call that enforcement would deny as granted and as
/// shadow_denied; the counts add up to the calls made.
#[test]
fn shadow_calls_are_counted_granted_and_shadow_denied() {
    let s = Server::start();
    let mut c = s.conn();
    let t = minute();
    // RL.GCRA burst 2: 2 granted, 1 denied, 3 shadow denied, then 1 shadow granted (new key).
    for _ in 0..3 {
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1m", "AT", t]);
    }
    for _ in 0..3 {
        c.ints(&args!["RL.GCRA", "k", 2, 1, "1m", "SHADOW", "AT", t]);
    }
    c.ints(&args!["RL.GCRA", "k2", 2, 1, "1m", "SHADOW", "AT", t]);
    assert_eq!(counters(&mut c, "rl_gcra"), [7, 6, 1, 3]);
    // RL.ALL: one granted, one shadow denied; RL.CHECK, RL.CHECKALL and RL.ACQUIRE alike.
    for _ in 0..2 {
        c.cmd(&args![
            "RL.ALL", 2, "{a}x", "{a}y", "FIXED", 1, "1m", "GCRA", 5, 1, "1s", "SHADOW", "AT", t
        ]);
    }
    assert_eq!(counters(&mut c, "rl_all"), [2, 2, 0, 1]);
    c.ints(&args![
        "RL.CHECK", "k", "GCRA", 2, 1, "1m", "SHADOW", "AT", t
    ]);
    c.ints(&args!["RL.CHECK", "k", "GCRA", 2, 1, "1m", "AT", t]);
    assert_eq!(counters(&mut c, "rl_check"), [2, 1, 1, 1]);
    c.ints(&args![
        "RL.CHECKALL",
        1,
        "{a}x",
        "FIXED",
        1,
        "1m",
        "SHADOW",
        "AT",
        t
    ]);
    assert_eq!(counters(&mut c, "rl_checkall"), [1, 1, 0, 1]);
    c.ints(&args!["RL.ACQUIRE", "l", 1, "1m", "ID", "a", "AT", t]);
    c.ints(&args![
        "RL.ACQUIRE",
        "l",
        1,
        "1m",
        "ID",
        "b",
        "SHADOW",
        "AT",
        t
    ]);
    assert_eq!(counters(&mut c, "rl_acquire"), [2, 2, 0, 1]);
    // Other commands' counters are untouched by SHADOW.
    assert_eq!(counters(&mut c, "rl_fixed"), [0, 0, 0, 0]);
}

/// The replica ends with the master's values after shadow calls, let through or not.
#[test]
fn replica_agrees_after_shadow_calls() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let t = minute();
    let calls: Vec<Vec<Vec<u8>>> = vec![
        args!["RL.GCRA", "g", 2, 1, "1s", "SHADOW", "AT", t].to_vec(),
        args!["RL.GCRA", "g", 2, 1, "1s", "SHADOW", "COST", 2, "AT", t].to_vec(),
        args![
            "RL.GCRA", "g", 2, 1, "1s", "SHADOW", "BLOCK", "5s", "COST", 2, "AT", t
        ]
        .to_vec(),
        args!["RL.SLIDING", "s", 2, "1s", "SHADOW", "AT", t].to_vec(),
        args!["RL.SLIDING", "s", 2, "1s", "SHADOW", "COST", 2, "AT", t + 1].to_vec(),
        args!["RL.SLIDING", "s", 2, "1s", "SHADOW", "AT", t + 2].to_vec(),
        args![
            "RL.LEAKYBUCKET",
            "lb",
            2,
            1,
            "1s",
            "COST",
            2,
            "SHADOW",
            "AT",
            t
        ]
        .to_vec(),
        args!["RL.LEAKYBUCKET", "lb", 2, 1, "1s", "SHADOW", "AT", t + 100].to_vec(),
        args![
            "RL.ALL", 2, "{r}a", "{r}b", "GCRA", 3, 1, "1s", "FIXED", 1, "1m", "SHADOW", "AT", t
        ]
        .to_vec(),
        args![
            "RL.ALL", 2, "{r}a", "{r}b", "GCRA", 3, 1, "1s", "FIXED", 1, "1m", "SHADOW", "BLOCK",
            "1s", "AT", t
        ]
        .to_vec(),
        args!["RL.ACQUIRE", "c", 1, "1m", "ID", "a", "SHADOW", "AT", t].to_vec(),
        args!["RL.ACQUIRE", "c", 1, "1m", "ID", "b", "SHADOW", "AT", t].to_vec(),
    ];
    for call in &calls {
        let r = m.cmd(call);
        assert!(!r.is_error(), "{call:?}: {r:?}");
        let granted = match &r {
            Reply::Array(a) => a[0].as_int().unwrap(),
            _ => panic!("{r:?}"),
        };
        assert!(granted >= 1, "{call:?}: {r:?}");
    }
    wait_replica_synced(&master, &replica);
    let mut r = replica.conn();
    for k in ["g", "s", "lb", "{r}a", "{r}b", "c"] {
        assert!(m.int(&["EXISTS", k]) == 1, "{k}");
        assert_eq!(digest(&mut m, k), digest(&mut r, k), "{k}");
        assert_eq!(
            m.int(&["PEXPIRETIME", k]),
            r.int(&["PEXPIRETIME", k]),
            "{k}"
        );
    }
    assert_eq!(m.cmd(&["DEBUG", "DIGEST"]), r.cmd(&["DEBUG", "DIGEST"]));
}

/// SHADOW is an option of the limiter commands, RL.ALL, RL.ACQUIRE, RL.CHECK and RL.CHECKALL
/// only; given twice it is a syntax error; COMMAND DOCS lists it.
#[test]
fn shadow_is_refused_where_it_does_not_apply_and_documented_where_it_does() {
    let s = Server::start();
    let mut c = s.conn();
    c.ints(&["RL.GCRA", "k", "1", "1", "1s"]);
    assert_eq!(
        c.err(&["RL.GCRA", "k", "1", "1", "1s", "SHADOW", "shadow"]),
        "ERR syntax error, SHADOW given more than once"
    );
    for call in [
        vec!["RL.REFUND", "k", "1", "SHADOW"],
        vec!["RL.BLOCK", "k", "1s", "SHADOW"],
        vec!["RL.RELEASE", "k", "a", "SHADOW"],
    ] {
        assert_eq!(c.err(&call), "ERR unknown option 'SHADOW'", "{call:?}");
    }
    // CL.THROTTLE keeps redis-cell's arguments: no options.
    assert!(
        c.cmd(&["CL.THROTTLE", "t", "1", "1", "1", "1", "SHADOW"])
            .is_error()
    );
    for command in [
        "rl.gcra",
        "rl.tokenbucket",
        "rl.leakybucket",
        "rl.fixed",
        "rl.sliding",
        "rl.slidingcounter",
        "rl.all",
        "rl.acquire",
        "rl.check",
        "rl.checkall",
    ] {
        let docs = c.cmd(&["COMMAND", "DOCS", command]);
        assert!(holds(&docs, "SHADOW"), "{command}: {docs:?}");
    }
    for command in ["rl.refund", "rl.block", "cl.throttle", "rl.release"] {
        let docs = c.cmd(&["COMMAND", "DOCS", command]);
        assert!(holds(&docs, "key"), "{command}: no docs");
        assert!(!holds(&docs, "SHADOW"), "{command}: {docs:?}");
    }
}

/// Shadow calls replay from the AOF into the master's values (RL.ALL propagates the call
/// itself, SHADOW included, with its resolved AT; the others their new value).
#[test]
fn shadow_calls_replay_from_the_aof() {
    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let t = minute();
    let calls: Vec<Vec<Vec<u8>>> = vec![
        args!["RL.GCRA", "g", 1, 1, "1s", "SHADOW", "AT", t].to_vec(),
        args!["RL.GCRA", "g", 1, 1, "1s", "SHADOW", "BLOCK", "3s", "AT", t].to_vec(),
        args!["RL.SLIDING", "s", 1, "1s", "SHADOW", "AT", t].to_vec(),
        args![
            "RL.ALL", 2, "{r}a", "{r}b", "GCRA", 3, 1, "1s", "FIXED", 1, "1m", "SHADOW", "AT", t
        ]
        .to_vec(),
        args![
            "RL.ALL", 2, "{r}a", "{r}b", "GCRA", 3, 1, "1s", "FIXED", 1, "1m", "SHADOW", "BLOCK",
            "1s", "AT", t
        ]
        .to_vec(),
    ];
    for call in &calls {
        assert!(!c.cmd(call).is_error(), "{call:?}");
    }
    let keys = ["g", "s", "{r}a", "{r}b"];
    let state = |c: &mut Conn| -> Vec<(Reply, i64)> {
        keys.iter()
            .map(|k| (digest(c, k), c.int(&["PEXPIRETIME", k])))
            .collect()
    };
    let before = state(&mut c);
    assert!(before.iter().all(|(d, _)| !d.is_nil()), "{before:?}");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(state(&mut c), before);
}

/// While a client waits for a concurrency key (`RL.ACQUIRE ... WAIT`), a new lease yields to
/// it even where it would fit; with SHADOW that call is let through without taking the lease
/// (RL.ACQUIRE, and RL.ALL naming the concurrency key as the would-be denier), and the waiter
/// is served as if it had not been made.
#[test]
fn shadow_lets_a_call_through_that_yields_to_the_waiters_taking_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    // On the server's clock (WAIT takes no AT): limit 2, a holds 1; w waits for 2.
    c.ints(&["RL.ACQUIRE", "{q}c", "2", "1m", "ID", "a"]);
    let mut waiter = s.conn();
    waiter.send(&[
        "RL.ACQUIRE",
        "{q}c",
        "2",
        "1m",
        "ID",
        "w",
        "COST",
        "2",
        "WAIT",
        "10s",
    ]);
    wait_until("one waiter", std::time::Duration::from_secs(10), || {
        c.info_field("ratelimit", "ratelimit_rl_acquire_wait")
            .is_some_and(|l| l.starts_with("waiting=1,"))
    });
    // One unit is free, but w comes first: x yields (enforced: denied)...
    let enforced = c.ints(&["RL.ACQUIRE", "{q}c", "2", "1m", "ID", "x"]);
    assert_eq!(enforced[0], 0, "{enforced:?}");
    // ...and with SHADOW is let through, taking nothing.
    let r = c.ints(&["RL.ACQUIRE", "{q}c", "2", "1m", "ID", "x", "SHADOW"]);
    assert_eq!((r[0], r[3]), (1, 0), "{r:?}");
    let all = c.cmd(&[
        "RL.ALL",
        "2",
        "{q}c",
        "{q}g",
        "CONCURRENCY",
        "2",
        "1m",
        "GCRA",
        "5",
        "1",
        "1s",
        "DEDUP",
        "y",
        "SHADOW",
        "DETAIL",
    ]);
    let a = all.as_array().unwrap();
    assert_eq!((&a[0], &a[3]), (&int(1), &int(0)), "{all:?}");
    assert_eq!((&a[5], &a[6]), (&bulk("{q}c"), &bulk("shadow")), "{all:?}");
    assert_eq!(c.int(&["EXISTS", "{q}g"]), 0);
    // Releasing a frees 2 units: w gets both, so x and y hold none.
    assert_eq!(c.int(&["RL.RELEASE", "{q}c", "a"]), 1);
    let got = waiter.recv();
    assert_eq!(got.as_array().unwrap()[0], int(2), "{got:?}");
    assert_eq!(c.int(&["RL.RELEASE", "{q}c", "x"]), 0);
    assert_eq!(c.int(&["RL.RELEASE", "{q}c", "y"]), 0);
    assert_eq!(c.int(&["RL.RELEASE", "{q}c", "w"]), 2);
}
