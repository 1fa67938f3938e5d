//! Error text is printable ASCII, always (SPEC.md): client bytes quoted in an error are cut to 64
//! and every byte outside 0x20–0x7E (and the backslash) is written `\xNN`. Reproducers for the
//! one-command aborts of issue 9 (characters U+xx00 in a quoted token turned into a NUL by the
//! redis-module crate, which then panicked), each checked against the exact escaped reply.

mod common;
use common::*;

/// `token` written as the module quotes it: `\xNN` for each byte outside 0x20–0x7E and for `\`.
fn escaped(token: &[u8]) -> String {
    token
        .iter()
        .map(|&b| {
            if (0x20..=0x7e).contains(&b) && b != b'\\' {
                char::from(b).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

/// The server is up, answers, and logged no panic.
fn assert_alive(s: &Server, c: &mut Conn) {
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert!(!s.log().contains("panic"), "log:\n{}", s.log());
}

#[test]
fn emoji_in_a_duration_is_quoted_escaped() {
    // Reproducer: `redis-cli RL.GCRA k 1 1 😀` aborted the server.
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        c.err(&["RL.GCRA", "k", "1", "1", "😀"]),
        "ERR invalid duration '\\xf0\\x9f\\x98\\x80' for period"
    );
    assert_alive(&s, &mut c);
    assert_eq!(c.int(&["DBSIZE"]), 0);
}

#[test]
fn cjk_unknown_option_is_quoted_escaped() {
    // Reproducer: `redis-cli RL.GCRA k 1 1 1s 一`.
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        c.err(&["RL.GCRA", "k", "1", "1", "1s", "一"]),
        "ERR unknown option '\\xe4\\xb8\\x80'"
    );
    assert_alive(&s, &mut c);
    assert_eq!(c.int(&["DBSIZE"]), 0);
}

#[test]
fn latin_extended_at_is_quoted_escaped() {
    // Reproducer: `redis-cli RL.GCRA k 1 1 1s AT Ā`.
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        c.err(&["RL.GCRA", "k", "1", "1", "1s", "AT", "Ā"]),
        "ERR invalid time '\\xc4\\x80' for AT, expected unix milliseconds"
    );
    assert_alive(&s, &mut c);
    assert_eq!(c.int(&["DBSIZE"]), 0);
}

#[test]
fn key_name_in_rl_all_wrongtype_is_quoted_escaped() {
    // Reproducer: `redis-cli RL.GCRA Ā 1 1 1s ; redis-cli RL.ALL 1 Ā FIXED 1 1s`.
    let s = Server::start();
    let mut c = s.conn();
    let r = c.ints(&["RL.GCRA", "Ā", "1", "1", "1s"]);
    assert_eq!(r[0], 1);
    let before = c.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(
        c.err(&["RL.ALL", "1", "Ā", "FIXED", "1", "1s"]),
        "WRONGTYPE key '\\xc4\\x80' holds a RL.GCRA limiter, not RL.FIXED"
    );
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), before);
    assert_alive(&s, &mut c);
}

#[test]
fn latin1_text_is_escaped_not_garbled() {
    // `é` came back as the single byte 0xe9, which is not even UTF-8; its two UTF-8 bytes now.
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        c.err(&["RL.GCRA", "k", "1", "1", "1s", "é"]),
        "ERR unknown option '\\xc3\\xa9'"
    );
    assert_eq!(
        c.err(&["RL.FIXED", "k", "10", "é"]),
        "ERR invalid duration '\\xc3\\xa9' for window"
    );
    assert_alive(&s, &mut c);
}

#[test]
fn every_command_quotes_hostile_bytes_escaped() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["SET", "str", "x"]);
    let hostile: [&[u8]; 8] = [
        "😀".as_bytes(),
        "Ā".as_bytes(),
        "؀".as_bytes(),
        b"\x00",
        b"a\r\nb",
        b"\xff\xfe",
        b"back\\slash 'quote' %s%n",
        b"",
    ];
    for h in hostile {
        let q = escaped(h);
        #[rustfmt::skip]
        let cases: Vec<(Vec<Vec<u8>>, String)> = vec![
            (args!["RL.GCRA", "k", 1, 1, h].to_vec(),              format!("ERR invalid duration '{q}' for period")),
            (args!["RL.TOKENBUCKET", "k", 1, 1, "1s", h].to_vec(), format!("ERR unknown option '{q}'")),
            (args!["RL.LEAKYBUCKET", "k", 1, 1, "1s", "AT", h].to_vec(),
                format!("ERR invalid time '{q}' for AT, expected unix milliseconds")),
            (args!["RL.FIXED", "k", 1, h].to_vec(),                format!("ERR invalid duration '{q}' for window")),
            (args!["RL.SLIDING", "k", 1, "1s", h].to_vec(),        format!("ERR unknown option '{q}'")),
            (args!["RL.SLIDINGCOUNTER", "k", 1, h].to_vec(),       format!("ERR invalid duration '{q}' for window")),
            (args!["RL.STREAMCOUNT", "k", "1s", h].to_vec(),       format!("ERR unknown option '{q}'")),
            (args!["RL.ALL", 1, "k", h, 1, 1, "1s"].to_vec(),      format!("ERR unknown limiter '{q}'")),
            (args!["CL.THROTTLE", "k", 1, 1, 1, 1, "AT", h].to_vec(),
                format!("ERR invalid time '{q}' for AT, expected unix milliseconds")),
            (args!["RL._RESTORE", "k", "x", h].to_vec(),           format!("ERR unknown option '{q}'")),
            (args!["RL.REFUND", "k", 1, h].to_vec(),               format!("ERR unknown option '{q}'")),
            (args!["RL.REFUND", "k", 1, "DEDUP", "x", "AT", h].to_vec(),
                format!("ERR invalid time '{q}' for AT, expected unix milliseconds")),
            (args!["RL.BLOCK", "k", h].to_vec(),                   format!("ERR invalid duration '{q}' for duration")),
            (args!["RL.CHECK", "k", h, 1, 1, "1s"].to_vec(),       format!("ERR unknown limiter '{q}'")),
            (args!["RL.CHECK", "k", "GCRA", 1, 1, "1s", h].to_vec(), format!("ERR unknown option '{q}'")),
            (args!["RL.GCRA", "k", 1, 1, "1s", "BLOCK", h].to_vec(), format!("ERR invalid duration '{q}' for BLOCK")),
            (args!["RL.ACQUIRE", "k", 1, h, "ID", h].to_vec(),     format!("ERR invalid duration '{q}' for lease")),
            (args!["RL.ACQUIRE", "k", 1, "1s", "ID", h, h].to_vec(), format!("ERR unknown option '{q}'")),
            (args!["RL.RELEASE", "k", h, h].to_vec(),              format!("ERR unknown option '{q}'")),
            (args!["RL.RELEASE", "k", h, "AT", h].to_vec(),
                format!("ERR invalid time '{q}' for AT, expected unix milliseconds")),
        ];
        for (cmd, want) in cases {
            assert_eq!(c.err(&cmd), want, "{cmd:?}");
        }
        // A key name of those bytes, quoted by RL.ALL's WRONGTYPE.
        c.ints(&args!["RL.GCRA", "g", 1, 1, "1s"]);
        c.ints(&args!["RL.GCRA", h, 1, 1, "1s"]);
        assert_eq!(
            c.err(&args![
                "RL.ALL", 2, "g", h, "GCRA", 1, 1, "1s", "SLIDING", 1, "1s"
            ]),
            format!("WRONGTYPE key '{q}' holds a RL.GCRA limiter, not RL.SLIDING")
        );
        c.ok(&args!["DEL", h, "g"]);
    }
    assert_alive(&s, &mut c);
}

#[test]
fn long_tokens_are_cut_to_64_bytes() {
    let s = Server::start();
    let mut c = s.conn();
    let emoji = "😀".repeat(1000);
    // 64 bytes are 16 emoji.
    assert_eq!(
        c.err(&["RL.GCRA", "k", "1", "1", "1s", &emoji]),
        format!(
            "ERR unknown option '{}...'",
            "\\xf0\\x9f\\x98\\x80".repeat(16)
        )
    );
    let junk = vec![0u8; 1 << 20];
    assert_eq!(
        c.err(&args!["RL.GCRA", "k", 1, 1, junk]),
        format!(
            "ERR invalid duration '{}...' for period",
            "\\x00".repeat(64)
        )
    );
    assert_alive(&s, &mut c);
}

#[test]
fn errors_are_printable_under_resp3() {
    let s = Server::start();
    let mut c = s.conn();
    c.ok(&["HELLO", "3"]);
    assert_eq!(
        c.err(&["RL.GCRA", "k", "1", "1", "😀"]),
        "ERR invalid duration '\\xf0\\x9f\\x98\\x80' for period"
    );
    assert_alive(&s, &mut c);
}
