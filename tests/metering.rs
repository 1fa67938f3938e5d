//! Several dimensions in one call (SPEC RL.ALL "Several dimensions in one call", RL.CHECKALL):
//! `CHARGE n` and `NAME name` per limiter, all or nothing over unequal charges, and RL.CHECKALL,
//! RL.ALL's read-only twin. Expectations are computed from the parameters and `AT` times.

mod common;
use common::*;

/// Requests per minute (GCRA 60 per minute, burst 60) and tokens per minute (a bucket of
/// 90000 refilled 1500 per second), a call of 3000 tokens.
fn gateway(key: &str, tokens: u64, at: u64, extra: &[&str]) -> Vec<Vec<u8>> {
    let mut v = args![
        "RL.ALL",
        2,
        format!("{{{key}}}:rpm"),
        format!("{{{key}}}:tpm"),
        "GCRA",
        60,
        60,
        "1m",
        "NAME",
        "rpm",
        "TOKENBUCKET",
        90000,
        1500,
        "1s",
        "CHARGE",
        tokens,
        "NAME",
        "tpm",
        "AT",
        at
    ]
    .to_vec();
    v.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
    v
}

#[test]
fn charge_asks_each_limiter_its_own_units_all_or_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // rpm: 1 of 60 used, fresh after T = 1 s; tpm: 3000 of 90000 used, refilled in 2 s.
    // The tightest shape: rpm allows 59 more calls, tpm 87000 / 3000 = 29: tpm's limit.
    assert_eq!(
        c.ints(&gateway("u", 3000, t, &[])),
        [1, 90000, 87000, 0, 2000]
    );
    // 29 more calls fit the tokens.
    for i in 1..=29u64 {
        let r = c.ints(&gateway("u", 3000, t, &[]));
        assert_eq!(r[0], 1, "call {i}");
        assert_eq!(r[2], 87000 - 3000 * i as i64, "call {i}");
    }
    // The 31st: tokens are out, 3000 more take 2 s; the rpm limiter is not charged.
    let r = c.cmd(&gateway("u", 3000, t, &["DETAIL"]));
    let a = r.as_array().unwrap();
    let head: Vec<i64> = a[..5].iter().map(|v| v.as_int().unwrap()).collect();
    assert_eq!(head, [0, 90000, 0, 2000, 60_000]);
    assert_eq!(a[5], Reply::Bulk(b"tpm".to_vec()));
    assert_eq!(a[6], Reply::Bulk(b"limit".to_vec()));
    let rows: Vec<Vec<Reply>> = a[7]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_array().unwrap().to_vec())
        .collect();
    let ints =
        |row: &[Reply]| -> Vec<i64> { row[2..9].iter().map(|v| v.as_int().unwrap()).collect() };
    assert_eq!(rows[0][0], Reply::Bulk(b"rpm".to_vec()));
    assert_eq!(rows[0][1], Reply::Bulk(b"{u}:rpm".to_vec()));
    // rpm: 30 used of 60, TAT t + 30 s.
    assert_eq!(ints(&rows[0]), [1, 0, 60, 30, 0, 30_000, 60_000]);
    assert_eq!(rows[1][0], Reply::Bulk(b"tpm".to_vec()));
    // tpm: empty, full after 90000 / 1500 = 60 s; its window is the same 60 s.
    assert_eq!(ints(&rows[1]), [3000, 0, 90000, 0, 2000, 60_000, 60_000]);
    assert_eq!(
        c.ints(&args![
            "RL.GCRA", "{u}:rpm", 60, 60, "1m", "COST", 0, "AT", t
        ])[2],
        30
    );
    // 2 s later the tokens are back for one call.
    assert_eq!(c.ints(&gateway("u", 3000, t + 2000, &[]))[0], 1);
}

#[test]
fn charge_zero_checks_the_limiter_and_charges_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    // The tokens are not known yet: CHARGE 0 on tpm, a request on rpm.
    assert_eq!(c.ints(&gateway("z", 0, t, &[])), [1, 60, 59, 0, 1000]);
    assert_eq!(c.int(&["EXISTS", "{z}:tpm"]), 0);
    // A blocked limiter denies even CHARGE 0, naming it.
    c.cmd(&args!["RL.BLOCK", "{z}:tpm", "5s", "AT", t]);
    let r = c.cmd(&gateway("z", 0, t, &["DETAIL"]));
    let a = r.as_array().unwrap();
    assert_eq!(a[0], Reply::Int(0));
    assert_eq!(a[5], Reply::Bulk(b"tpm".to_vec()));
    assert_eq!(a[6], Reply::Bulk(b"blocked".to_vec()));
    assert_eq!(
        c.ints(&args![
            "RL.GCRA", "{z}:rpm", 60, 60, "1m", "COST", 0, "AT", t
        ])[2],
        59
    );
}

#[test]
fn charge_and_name_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    c.ints(&gateway("e", 3000, t, &[]));
    let digests = |c: &mut Conn| {
        (
            c.cmd(&["DEBUG", "DIGEST-VALUE", "{e}:rpm"]),
            c.cmd(&["DEBUG", "DIGEST-VALUE", "{e}:tpm"]),
        )
    };
    let before = digests(&mut c);
    let one = |tail: &[&str]| {
        let mut v = args!["RL.ALL", 1, "{e}:tpm", "TOKENBUCKET", 90000, 1500, "1s"].to_vec();
        v.extend(tail.iter().map(|e| e.as_bytes().to_vec()));
        v
    };
    #[rustfmt::skip]
    let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
        (gateway("e", 3000, t, &["BESTEFFORT"]), "ERR BESTEFFORT does not apply to a CHARGE other than COST"),
        (one(&["CHARGE"]),                        "ERR syntax error, CHARGE needs a value"),
        (one(&["CHARGE", "-1"]),                  "ERR CHARGE must be a non-negative integer"),
        (one(&["CHARGE", "1", "charge", "2"]),    "ERR syntax error, CHARGE given more than once"),
        (one(&["NAME", "a", "NAME", "b"]),        "ERR syntax error, NAME given more than once"),
        (one(&["NAME", ""]),                      "ERR NAME must be 1 to 64 letters, digits, '_', '-', '.' or ':'"),
        (one(&["NAME", "a b"]),                   "ERR NAME must be 1 to 64 letters, digits, '_', '-', '.' or ':'"),
        (one(&["NAME", &"n".repeat(65)]),         "ERR NAME must be 1 to 64 letters, digits, '_', '-', '.' or ':'"),
        (one(&["NAME", "\u{e9}"]),                "ERR NAME must be 1 to 64 letters, digits, '_', '-', '.' or ':'"),
        (one(&["NAME"]),                          "ERR syntax error, NAME needs a value"),
    ];
    for (call, want) in cases {
        assert_eq!(c.err(&call), want, "{call:?}");
    }
    assert_eq!(digests(&mut c), before);
    // A name of 64 allowed bytes is taken, and shown as given.
    let name = "a-Z_0.9:".repeat(8);
    let r = c.cmd(&one(&[
        "NAME",
        &name,
        "PEEK",
        "DETAIL",
        "AT",
        &t.to_string(),
    ]));
    let entry = r.as_array().unwrap()[7].as_array().unwrap()[0].clone();
    assert_eq!(entry.as_array().unwrap()[0], Reply::Bulk(name.into_bytes()));
    assert_eq!(digests(&mut c), before);
}

/// The same call as RL.CHECKALL and as RL.ALL with PEEK: the same reply, detailed or not, and
/// nothing changes.
#[test]
fn checkall_replies_as_all_with_peek_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = base_ms();
    for _ in 0..20 {
        c.ints(&gateway("k", 4000, t, &[]));
    }
    let digests = |c: &mut Conn| {
        (
            c.cmd(&["DEBUG", "DIGEST-VALUE", "{k}:rpm"]),
            c.cmd(&["DEBUG", "DIGEST-VALUE", "{k}:tpm"]),
            c.int(&["PEXPIRETIME", "{k}:tpm"]),
        )
    };
    let before = digests(&mut c);
    for (tokens, dt, detail) in [
        (4000, 0, false),
        (4000, 0, true),
        (20000, 0, true),
        (20000, 7000, false),
        (0, 0, true),
    ] {
        let extra: &[&str] = if detail { &["DETAIL"] } else { &[] };
        let mut all = gateway("k", tokens, t + dt, extra);
        all.push(b"PEEK".to_vec());
        let mut check = gateway("k", tokens, t + dt, extra);
        check[0] = b"RL.CHECKALL".to_vec();
        let want = c.cmd(&all);
        assert!(!want.is_error(), "{want:?}");
        assert_eq!(c.cmd(&check), want, "tokens {tokens} at +{dt} ms");
    }
    assert_eq!(digests(&mut c), before);
    // Missing keys are fresh limiters, and stay missing.
    let mut fresh = gateway("none", 3000, t, &[]);
    fresh[0] = b"RL.CHECKALL".to_vec();
    assert_eq!(c.ints(&fresh), [1, 90000, 87000, 0, 2000]);
    assert_eq!(c.int(&["EXISTS", "{none}:rpm", "{none}:tpm"]), 0);
    // RL.ALL's write options are no options of RL.CHECKALL.
    for opt in [
        &["PEEK"][..],
        &["BESTEFFORT"],
        &["DEDUP", "x"],
        &["BLOCK", "1s"],
    ] {
        let mut call = gateway("k", 4000, t, opt);
        call[0] = b"RL.CHECKALL".to_vec();
        assert_eq!(c.err(&call), format!("ERR unknown option '{}'", opt[0]));
    }
    // Another algorithm's key: WRONGTYPE naming it.
    c.cmd(&args!["RL.FIXED", "{k}:f", 1, "1m", "AT", t]);
    assert_eq!(
        c.err(&args![
            "RL.CHECKALL",
            2,
            "{k}:rpm",
            "{k}:f",
            "GCRA",
            60,
            60,
            "1m",
            "GCRA",
            1,
            1,
            "1s",
            "AT",
            t
        ]),
        "WRONGTYPE key '{k}:f' holds a RL.FIXED limiter, not RL.GCRA"
    );
    assert_eq!(digests(&mut c), before);
}

#[test]
fn checkall_runs_on_a_replica_and_writes_nothing() {
    let master = Server::start();
    let replica = Server::replica_of(&master);
    let mut m = master.conn();
    let mut r = replica.conn();
    let t = base_ms();
    for _ in 0..29 {
        m.ints(&gateway("r", 3000, t, &[]));
    }
    wait_replica_synced(&master, &replica);
    let mut check = gateway("r", 3000, t, &[]);
    check[0] = b"RL.CHECKALL".to_vec();
    // One call of 3000 tokens still fits (90000 − 29 · 3000), then none.
    // The bucket would be empty: full again after 60 s.
    assert_eq!(r.ints(&check), [1, 90000, 0, 0, 60_000]);
    assert_eq!(r.ints(&check), [1, 90000, 0, 0, 60_000]);
    m.ints(&gateway("r", 3000, t, &[]));
    wait_replica_synced(&master, &replica);
    assert_eq!(r.ints(&check)[..4], [0, 90000, 0, 2000]);
    // The checks changed nothing: the replica agrees with the master.
    for key in ["{r}:rpm", "{r}:tpm"] {
        assert_eq!(
            r.cmd(&["DEBUG", "DIGEST-VALUE", key]),
            m.cmd(&["DEBUG", "DIGEST-VALUE", key])
        );
    }
    assert!(
        r.info_field("ratelimit", "ratelimit_rl_checkall")
            .unwrap()
            .starts_with("calls=3,granted=2,denied=1")
    );
}
