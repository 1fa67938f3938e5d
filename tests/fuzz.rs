//! Seeded fuzzing of every command against a real server: random argument vectors (wrong arity,
//! numbers and durations in odd spellings, options repeated, misspelled or without a value, `AT`
//! far in the past or future, DEDUP and lease ids from 0 bytes to 1 MB, keys of other types and
//! of other limiters, RL.ALL numkeys mismatches, mutated RL._RESTORE and RL._SET payloads taken from an AOF
//! rewrite, and bytes of every class: NUL, CR/LF, U+0100, U+4E00, U+1F600, invalid UTF-8, in
//! every position).
//!
//! After each batch the server must answer PING; every error must start with a Redis error
//! code (an upper-case word) and be printable ASCII; a success must have its command's reply
//! shape; and in the guarded batches (every other one) each call runs in a MULTI between two
//! `DEBUG DIGEST`s, preceded by a full SCAN that expires what is due at the transaction's
//! frozen time, so an erroring call must leave the digest unchanged. A replica is attached:
//! after each batch its `DEBUG DIGEST` must be the master's (so a call that changed the master
//! without replicating the change, an erroring one included, is caught). Every
//! [`ROUND_TRIP_EVERY`] batches, every key must survive an AOF rewrite without the RDB preamble
//! + `DEBUG LOADAOF`, and a `DEBUG RELOAD`, with the same value and expiry (`fuzz/consistency.rs`).
//!
//! Environment: `RL_FUZZ_SEED` (u64, default from the clock; always printed and named in every
//! failure), `RL_FUZZ_CASES` (vectors per command, default 2000; `make fuzz` runs 100000).

mod common;
#[path = "fuzz/consistency.rs"]
mod consistency;
use common::*;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Vectors per command in one run unless `RL_FUZZ_CASES` says otherwise.
const DEFAULT_CASES: usize = 2000;
/// Vectors per batch; the database is flushed and set up again before each batch.
const BATCH: usize = 40;
/// Batches between two persistence round trips ([`consistency::round_trips`]).
const ROUND_TRIP_EVERY: usize = 300;

// ---------------------------------------------------------------------------------------------
// Random numbers
// ---------------------------------------------------------------------------------------------

/// SplitMix64: small, fast, and the same sequence for the same seed everywhere. `odd_in` sets
/// how hostile the current vector is: each generator picks an odd value with probability
/// `1/odd_in`, else a plausible one (so some vectors are valid and change state).
struct Rng {
    state: u64,
    odd_in: usize,
}

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng {
            state: seed,
            odd_in: 1,
        }
    }

    /// Time for an odd value?
    fn odd(&mut self) -> bool {
        self.below(self.odd_in) == 0
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `1/n`.
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn pick_ref<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

/// Bytes of every class a client can send.
const TEXT: &[&[u8]] = &[
    b"\x00",
    b"\r\n",
    b"\r",
    b"\n",
    "\u{0100}".as_bytes(), // Ā: the crate turned U+xx00 into NUL
    "\u{0600}".as_bytes(),
    "\u{4E00}".as_bytes(),
    "\u{1F600}".as_bytes(),
    "\u{e9}".as_bytes(),
    b"\xff",
    b"\xc3",             // a truncated UTF-8 sequence
    b"\xed\xa0\x80",     // a UTF-16 surrogate, invalid in UTF-8
    b"\xf4\x90\x80\x80", // above U+10FFFF
    b"\\",
    b"'",
    b"%s%n%x",
    b" ",
    b"\t",
    b"\x7f",
    b"",
];

/// A token of one of the text classes, alone or around something plausible.
fn text_token(r: &mut Rng) -> Vec<u8> {
    let t = r.pick(TEXT).to_vec();
    match r.below(4) {
        0 => t,
        1 => [b"1".as_slice(), &t].concat(),
        2 => [t.as_slice(), b"1s"].concat(),
        _ => t.repeat(1 + r.below(40)),
    }
}

/// Integers in every odd spelling.
fn odd_number(r: &mut Rng) -> Vec<u8> {
    const ODD: &[&str] = &[
        "0",
        "1",
        "-1",
        "+1",
        " 1",
        "1 ",
        "01",
        "007",
        "00000000000000000000001",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999999999999999",
        "1e3",
        "1.5",
        "0x10",
        "1_000",
        "",
        "-0",
        "4294967296",
        "4294967295",
        "2147483648",
        "1000000000000000",
    ];
    match r.below(4) {
        0 => r.next().to_string().into_bytes(),
        1 => (r.next() >> r.below(64)).to_string().into_bytes(),
        _ => r.pick(ODD).as_bytes().to_vec(),
    }
}

/// A plausible small count.
fn small_number(r: &mut Rng) -> Vec<u8> {
    (1 + r.below(20)).to_string().into_bytes()
}

/// Durations: plausible ones, and every odd spelling of number and unit.
fn duration(r: &mut Rng) -> Vec<u8> {
    const UNITS: &[&str] = &[
        "",
        "ms",
        "MS",
        "Ms",
        "mS",
        "s",
        "S",
        "m",
        "M",
        "h",
        "H",
        "d",
        "D",
        "w",
        "us",
        "ss",
        "sec",
        " s",
        "s ",
        "\u{00b5}s",
    ];
    const ODD: &[&str] = &[
        "0",
        "0s",
        "-1s",
        "+1s",
        "01s",
        "1.5s",
        "s",
        "ms",
        "106751991d",
        "106751992d",
        "9223372036854775ms",
        "9223372036854775807ms",
        "9223372036854775807",
        "2562047788015h",
        "153722867280912m",
        "1 s",
        "1s1",
        "",
    ];
    if !r.odd() {
        let n = [1, 10, 500, 1000, 60, 3600][r.below(6)];
        return format!("{n}{}", ["ms", "s", "m", "", "h"][r.below(5)]).into_bytes();
    }
    match r.below(3) {
        0 => {
            let mut v = odd_number(r);
            v.extend_from_slice(r.pick(UNITS).as_bytes());
            v
        }
        _ => r.pick(ODD).as_bytes().to_vec(),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// `AT` values: now, far past and future, the limits, fractions and odd spellings.
fn at_value(r: &mut Rng) -> Vec<u8> {
    let now = now_ms();
    if !r.odd() {
        return match r.below(3) {
            0 => (now + r.below(10_000) as u64).to_string().into_bytes(),
            1 => format!("{}.{:03}", now + r.below(10_000) as u64, r.below(1000)).into_bytes(),
            _ => (base_ms() + r.below(10_000) as u64)
                .to_string()
                .into_bytes(),
        };
    }
    match r.below(12) {
        0 | 1 => (now + r.below(10_000) as u64).to_string().into_bytes(),
        2 => format!("{}.{}", now, r.below(1_000_000)).into_bytes(),
        3 => (now + 86_400_000 * (1 + r.below(1000)) as u64)
            .to_string()
            .into_bytes(),
        4 => r
            .pick(&["0", "1", "0.001", "1000000000000", "946684800000.5"][..])
            .as_bytes()
            .to_vec(),
        5 => r
            .pick(&["253402300799999", "253402300799999.999", "253402300800000"][..])
            .as_bytes()
            .to_vec(),
        6 => r
            .pick(
                &[
                    ".5", "1.", "1.x", "1..2", "-5", "+5", "1e3", "0x1", " 1", "1 ",
                ][..],
            )
            .as_bytes()
            .to_vec(),
        7 => format!("{now}.{}", "9".repeat(1 + r.below(80))).into_bytes(),
        8 => odd_number(r),
        9 => format!(
            "{}.{}",
            now - 86_400_000 * r.below(10_000) as u64,
            r.below(1000)
        )
        .into_bytes(),
        10 => text_token(r),
        _ => base_ms().to_string().into_bytes(),
    }
}

/// DEDUP ids from empty to a megabyte (the limit is 256 bytes).
fn dedup_id(r: &mut Rng) -> Vec<u8> {
    if !r.odd() {
        return format!("id{}", r.below(8)).into_bytes();
    }
    match r.below(40) {
        0 => vec![b'x'; 1 << 20],
        1..=4 => vec![b'y'; 255 + r.below(3)],
        5..=8 => Vec::new(),
        9..=14 => text_token(r),
        _ => format!("id{}", r.below(8)).into_bytes(),
    }
}

/// An option name as typed: the real one in any case, misspelled, or junk.
fn spell(r: &mut Rng, name: &str) -> Vec<u8> {
    if !r.odd() {
        return name.as_bytes().to_vec();
    }
    match r.below(12) {
        0 => name.to_lowercase().into_bytes(),
        1 => {
            let mut v: Vec<u8> = name.bytes().collect();
            let i = r.below(v.len());
            v[i] ^= 0x20; // case flip of one letter
            v
        }
        2 => format!("{name}S").into_bytes(),
        3 => name.as_bytes()[..name.len() - 1].to_vec(),
        4 => [name.as_bytes(), r.pick(TEXT)].concat(),
        _ => name.as_bytes().to_vec(),
    }
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/// What a successful reply of a command looks like.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    /// The limiter reply: five integers (RESP2) or a map of five (RESP3).
    Limiter,
    /// CL.THROTTLE: five integers under both protocols.
    Five,
    /// RL.STREAMCOUNT: an integer.
    Int,
    /// RL.INFO: nil, or name/value pairs.
    Info,
    /// RL.REFUND: the limiter reply, or nil (a missing key).
    LimiterOrNil,
    /// RL._RESTORE: `+OK`.
    Ok,
    /// COMMAND GETKEYS: an array.
    Keys,
    /// RL.POLICY GET: an array of bulk strings, or nil.
    Args,
    /// RL.POLICY LIST: name, version pairs (a flat array, or a map under RESP3).
    Pairs,
    /// RL.POLICY DUMP: a bulk string.
    Bulk,
    /// The RL.POLICY container alone: never a success.
    Never,
    /// RL.POLICY HELP: lines of text.
    Help,
    /// RL.SETTLE: an array of limiter replies or nils, one per key.
    Settle,
}

struct Command {
    name: &'static str,
    shape: Shape,
}

/// The commands the fuzzer has a template for ([`template`]), with their reply shapes. What it
/// fuzzes is the list the server gives (`COMMAND LIST FILTERBY MODULE ratelimit`: the module's
/// command table), each looked up here ([`registered`]): a registered command without a template
/// fails the run.
const TEMPLATES: &[Command] = &[
    Command {
        name: "RL.GCRA",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.TOKENBUCKET",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.LEAKYBUCKET",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.FIXED",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.SLIDING",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.SLIDINGCOUNTER",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.STREAMCOUNT",
        shape: Shape::Int,
    },
    Command {
        name: "RL.ALL",
        shape: Shape::Limiter,
    },
    Command {
        name: "CL.THROTTLE",
        shape: Shape::Five,
    },
    Command {
        name: "RL.INFO",
        shape: Shape::Info,
    },
    Command {
        name: "RL._RESTORE",
        shape: Shape::Ok,
    },
    Command {
        name: "RL.REFUND",
        shape: Shape::LimiterOrNil,
    },
    Command {
        name: "RL.BLOCK",
        shape: Shape::Int,
    },
    Command {
        name: "RL.UNBLOCK",
        shape: Shape::Int,
    },
    Command {
        name: "RL.CHECK",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.ACQUIRE",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.RELEASE",
        shape: Shape::Int,
    },
    Command {
        name: "RL._SET",
        shape: Shape::Ok,
    },
    Command {
        name: "RL.CHECKALL",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.LIMIT",
        shape: Shape::Limiter,
    },
    Command {
        name: "RL.POLICY",
        shape: Shape::Never,
    },
    Command {
        name: "RL.POLICY|SET",
        shape: Shape::Int,
    },
    Command {
        name: "RL.POLICY|GET",
        shape: Shape::Args,
    },
    Command {
        name: "RL.POLICY|DEL",
        shape: Shape::Int,
    },
    Command {
        name: "RL.POLICY|LIST",
        shape: Shape::Pairs,
    },
    Command {
        name: "RL.POLICY|DUMP",
        shape: Shape::Bulk,
    },
    Command {
        name: "RL.POLICY|RESTORE",
        shape: Shape::Ok,
    },
    Command {
        name: "RL.POLICY|HELP",
        shape: Shape::Help,
    },
    Command {
        name: "RL.SETTLE",
        shape: Shape::Settle,
    },
    Command {
        name: "RL.METRICS",
        shape: Shape::Args,
    },
];

/// The policies every batch starts with ([`setup`] restores them): names RL.LIMIT, RL.ALL and
/// RL.CHECKALL call, with one limiter or several.
const POLICIES: &[&[&str]] = &[
    &["one", "GCRA", "10", "1", "1h"],
    &["fixed", "FIXED", "10", "1h", "NAME", "hourly"],
    &[
        "two",
        "GCRA",
        "10",
        "1",
        "1h",
        "SLIDINGCOUNTER",
        "10",
        "1h",
        "CHARGE",
        "2",
    ],
    &[
        "shadowy",
        "TOKENBUCKET",
        "10",
        "1",
        "1h",
        "SHADOW",
        "DESC",
        "rolling out",
    ],
    &["conc", "CONCURRENCY", "10", "1h"],
];

/// `RL.POLICY DUMP` of [`POLICIES`], made once at the start ([`make_policies`]).
static POLICY_DUMP: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

/// Define [`POLICIES`] on the server and keep their DUMP in [`POLICY_DUMP`].
fn make_policies(c: &mut Conn) {
    for def in POLICIES {
        let mut call = vec!["RL.POLICY", "SET"];
        call.extend(def.iter());
        c.int(&call);
    }
    let dump = c.cmd(&["RL.POLICY", "DUMP"]);
    let _ = POLICY_DUMP.set(dump.as_bytes().expect("DUMP").to_vec());
}

/// A policy name: mostly one of [`POLICIES`] or a new plausible one, else odd bytes or a near
/// miss.
fn policy_name(r: &mut Rng) -> Vec<u8> {
    if !r.odd() {
        if r.one_in(4) {
            return format!("new_{}", r.below(4)).into_bytes();
        }
        return r.pick(POLICIES)[0].as_bytes().to_vec();
    }
    match r.below(4) {
        0 => text_token(r),
        1 => b"ONE".to_vec(),
        2 => "x".repeat(64 + r.below(3)).into_bytes(),
        _ => b"".to_vec(),
    }
}

/// A policy's definition: one to three limiters as RL.ALL writes them, then maybe SHADOW and
/// DESC.
fn policy_definition(r: &mut Rng, v: &mut Vec<Vec<u8>>) {
    for _ in 0..1 + r.below(3) {
        match r.below(7) {
            0 => v.extend([spell(r, "GCRA"), count(r), count(r), duration(r)]),
            1 => v.extend([spell(r, "TOKENBUCKET"), count(r), count(r), duration(r)]),
            2 => v.extend([spell(r, "LEAKYBUCKET"), count(r), count(r), duration(r)]),
            3 => v.extend([spell(r, "FIXED"), count(r), fixed_window(r)]),
            4 => v.extend([spell(r, "SLIDING"), count(r), duration(r)]),
            5 => v.extend([spell(r, "SLIDINGCOUNTER"), count(r), duration(r)]),
            _ => v.extend([spell(r, "CONCURRENCY"), count(r), duration(r)]),
        }
        if r.one_in(4) {
            v.extend([spell(r, "CHARGE"), count(r)]);
        }
        if r.one_in(4) {
            v.extend([spell(r, "NAME"), format!("n{}", r.below(3)).into_bytes()]);
        }
    }
    if r.one_in(3) {
        v.push(spell(r, "SHADOW"));
    }
    if r.one_in(3) {
        let text = if r.odd() {
            "d".repeat(r.below(1100)).into_bytes()
        } else {
            b"a description".to_vec()
        };
        v.extend([spell(r, "DESC"), text]);
    }
}

/// The limiter commands whose keys RL.INFO and RL.ALL use (each of its own keys), in RL.ALL's
/// kind order.
const LIMITER_COMMANDS: &[&str] = &[
    "RL.GCRA",
    "RL.TOKENBUCKET",
    "RL.LEAKYBUCKET",
    "RL.FIXED",
    "RL.SLIDING",
    "RL.SLIDINGCOUNTER",
    "RL.ACQUIRE",
];

/// Keys the vectors use: empty ones, strings, a stream, a hash, a list, limiters of every kind
/// (set up before each batch), and names made of odd bytes.
const KEYS: &[&[u8]] = &[
    b"k",
    b"k2",
    b"str",
    b"stream",
    b"badstream",
    b"hash",
    b"list",
    b"lim:gcra",
    b"lim:tb",
    b"lim:lb",
    b"lim:fixed",
    b"lim:sliding",
    b"lim:sc",
    b"lim:conc",
    b"lim:restored",
    b"",
    b"\x00",
    b"\r\n",
    "\u{0100}".as_bytes(),
    "\u{1F600}".as_bytes(),
    b"\xff\xfe",
];

/// A key: for plausible vectors one of three of `kind`'s own (so calls build on each other
/// instead of meeting another algorithm's key); else one RL._SET and RL._RESTORE write (maybe a
/// value at the bounds, [`edge_payloads`]), any key of [`KEYS`] or odd bytes.
fn key(r: &mut Rng, kind: &str) -> Vec<u8> {
    if !r.odd() {
        format!("{kind}:{}", r.below(3)).into_bytes()
    } else if r.one_in(6) {
        format!("restored:{}", r.below(3)).into_bytes()
    } else if r.one_in(20) {
        text_token(r)
    } else {
        r.pick(KEYS).to_vec()
    }
}

/// A count: mostly plausible, else odd.
fn count(r: &mut Rng) -> Vec<u8> {
    if r.odd() {
        odd_number(r)
    } else {
        small_number(r)
    }
}

/// RL.FIXED's window: a duration, or now and then a calendar unit.
fn fixed_window(r: &mut Rng) -> Vec<u8> {
    if r.one_in(3) {
        let unit = r.pick(&["day", "week", "month", "quarter", "year"][..]);
        spell(r, unit)
    } else {
        duration(r)
    }
}

/// A `TZ` value: zones, fixed offsets, and near misses.
fn zone(r: &mut Rng) -> Vec<u8> {
    if r.odd() {
        return text_token(r);
    }
    let z: &str = r.pick(
        &[
            "UTC",
            "Europe/Paris",
            "europe/PARIS",
            "America/New_York",
            "Asia/Kolkata",
            "Australia/Lord_Howe",
            "Pacific/Apia",
            "+05:30",
            "-09:30",
            "+00:00",
            "+23:59",
            "+24:00",
            "Mars/Olympus",
            "Europe/",
            "",
        ][..],
    );
    z.as_bytes().to_vec()
}

/// An `ANCHOR` value: weekdays, days, month-days, and near misses.
fn anchor(r: &mut Rng) -> Vec<u8> {
    if r.odd() {
        return text_token(r);
    }
    let a: &str = r.pick(
        &[
            "mon", "SUN", "friday", "1", "15", "28", "31", "32", "0", "02-29", "04-15", "12-31",
            "13-01", "00-10", "1-1", "-",
        ][..],
    );
    a.as_bytes().to_vec()
}

/// Options, each name followed by its value (which may be missing at the end).
fn options(r: &mut Rng, out: &mut Vec<Vec<u8>>, own: &[&'static str], shared: bool) {
    const SHARED: &[&str] = &[
        "COST",
        "PEEK",
        "SHADOW",
        "BESTEFFORT",
        "DEDUP",
        "BLOCK",
        "DELAY",
        "HOLD",
        "AT",
        "DETAIL",
    ];
    let mut used: Vec<&str> = Vec::new();
    for _ in 0..r.below(5) {
        let name: &str = if !own.is_empty() && (!shared || r.one_in(3)) {
            r.pick(own)
        } else if r.odd() && r.one_in(10) {
            r.pick(&["PXAT", "OFFSET", "PRECISION", "ADD", "LIMIT", "FOO", "NX"][..])
        } else if shared || r.odd() {
            r.pick(SHARED)
        } else {
            continue;
        };
        // Plausible vectors give each option once; odd ones repeat them.
        if used.contains(&name) && !r.odd() {
            continue;
        }
        used.push(name);
        out.push(spell(r, name));
        let value = match name {
            "PEEK" | "SHADOW" | "BESTEFFORT" | "DETAIL" | "FOO" | "NX" => continue,
            "COST" | "ADD" => {
                if r.odd() {
                    odd_number(r)
                } else {
                    r.below(4).to_string().into_bytes()
                }
            }
            "LIMIT" => count(r),
            "DEDUP" => dedup_id(r),
            "AT" => at_value(r),
            "PXAT" => at_value(r),
            "TZ" => zone(r),
            "ANCHOR" => anchor(r),
            "WAIT" => wait_timeout(r),
            _ => duration(r), // OFFSET, PRECISION
        };
        // A value left off at the end now and then.
        if !(r.odd() && r.one_in(8)) {
            out.push(value);
        }
    }
}

/// A `WAIT` timeout: a few ms (a call waits at most that long, so the batch goes on), or one
/// the module refuses (zero, malformed, or above `ratelimit.max-wait`'s default minute).
fn wait_timeout(r: &mut Rng) -> Vec<u8> {
    if r.odd() {
        let bad: &[&str] = &[
            "0",
            "-1",
            "x",
            "1.5",
            "61s",
            "2m",
            "1h",
            "99999999999999999999d",
        ];
        r.pick(bad).as_bytes().to_vec()
    } else {
        format!("{}ms", 1 + r.below(20)).into_bytes()
    }
}

/// Real payloads from an AOF rewrite, and mutations of them.
fn payload(r: &mut Rng, valid: &[Vec<u8>]) -> Vec<u8> {
    let mut p = r.pick_ref(valid).clone();
    if !r.odd() {
        return p;
    }
    for _ in 0..1 + r.below(4) {
        match r.below(10) {
            0 if !p.is_empty() => {
                let i = r.below(p.len());
                p[i] ^= 1 << r.below(8);
            }
            1 if !p.is_empty() => {
                let i = r.below(p.len());
                p[i] = r.pick(&[0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff]);
            }
            2 => {
                let n = r.below(p.len() + 1);
                p.truncate(n);
            }
            3 => {
                for _ in 0..1 + r.below(16) {
                    p.push(r.next() as u8);
                }
            }
            4 => {
                let i = r.below(p.len() + 1);
                let run = vec![0xff; 1 + r.below(12)];
                p.splice(i..i, run);
            }
            5 if !p.is_empty() => {
                let i = r.below(p.len());
                let j = i + r.below(p.len() - i);
                let seg = p[i..=j].to_vec();
                p.splice(j..j, seg);
            }
            6 if !p.is_empty() => {
                let i = r.below(p.len());
                p.remove(i);
            }
            7 if !p.is_empty() => {
                // The head (version, kind tag, lengths) matters most.
                let i = r.below(p.len().min(4));
                p[i] = r.next() as u8;
            }
            8 => {
                let other = r.pick_ref(valid);
                let n = r.below(other.len() + 1);
                p = [&p[..r.below(p.len() + 1)], &other[..n]].concat();
            }
            _ => {
                let i = r.below(p.len() + 1);
                p.insert(i, r.next() as u8);
            }
        }
    }
    p
}

/// One argument vector for command `name` before mutation.
fn template(r: &mut Rng, name: &'static str, payloads: &[Vec<u8>]) -> Vec<Vec<u8>> {
    // A subcommand is called as its container and its name.
    let mut v: Vec<Vec<u8>> = name.split('|').map(|p| p.as_bytes().to_vec()).collect();
    match name {
        "RL.LIMIT" => {
            // Plausible vectors use keys of the policy's own (so calls build on each other).
            let p = policy_name(r);
            let own = format!("pol_{}", String::from_utf8_lossy(&p));
            v.extend([key(r, &own), p.clone()]);
            options(r, &mut v, &[], true);
            if p == b"conc" && !v.iter().any(|a| a == b"DEDUP") && !r.odd() {
                v.extend([spell(r, "DEDUP"), dedup_id(r)]);
            }
        }
        "RL.POLICY" => {
            if r.below(2) == 0 {
                v.push(text_token(r));
            }
        }
        "RL.POLICY|SET" => {
            v.push(policy_name(r));
            policy_definition(r, &mut v);
        }
        "RL.POLICY|GET" | "RL.POLICY|DEL" => v.push(policy_name(r)),
        "RL.POLICY|LIST" | "RL.POLICY|DUMP" | "RL.POLICY|HELP" | "RL.METRICS" => {}
        "RL.POLICY|RESTORE" => {
            // The DUMP of [`POLICIES`], maybe mutated.
            let dump = POLICY_DUMP.get().cloned().unwrap_or_default();
            v.push(payload(r, std::slice::from_ref(&dump)));
            if r.below(2) == 0 {
                v.push(spell(r, "MERGE"));
            }
        }
        "RL.GCRA" | "RL.TOKENBUCKET" | "RL.LEAKYBUCKET" => {
            v.extend([key(r, name), count(r), count(r), duration(r)]);
            options(r, &mut v, &[], true);
        }
        "RL.FIXED" => {
            v.extend([key(r, name), count(r), fixed_window(r)]);
            options(r, &mut v, &["OFFSET", "TZ", "ANCHOR"], true);
        }
        "RL.SLIDING" => {
            v.extend([key(r, name), count(r), duration(r)]);
            options(r, &mut v, &["PRECISION"], true);
        }
        "RL.SLIDINGCOUNTER" => {
            v.extend([key(r, name), count(r), duration(r)]);
            options(r, &mut v, &[], true);
        }
        "RL.STREAMCOUNT" => {
            v.extend([key(r, name), duration(r)]);
            options(r, &mut v, &["ADD", "LIMIT", "AT"], false);
        }
        "RL.ALL" | "RL.CHECKALL" if r.one_in(5) => {
            // A named policy in place of the limiters.
            let p = policy_name(r);
            let n = POLICIES
                .iter()
                .find(|d| d[0].as_bytes() == p.as_slice())
                .map_or(1, |d| {
                    d.iter()
                        .filter(|a| a.chars().all(|c| c.is_ascii_uppercase()))
                        .count()
                });
            let n = if r.odd() { r.below(4) } else { n };
            v.push(n.to_string().into_bytes());
            for i in 0..n {
                v.push(format!("{{p}}{i}").into_bytes());
            }
            v.extend([spell(r, "POLICY"), p]);
            if name == "RL.CHECKALL" {
                options(r, &mut v, &["COST", "DETAIL", "AT"], false);
            } else {
                options(r, &mut v, &[], true);
            }
        }
        "RL.ALL" | "RL.CHECKALL" => {
            let n = 1 + r.below(4);
            let numkeys = match if r.odd() { r.below(8) } else { 7 } {
                0 => n.saturating_sub(1).to_string().into_bytes(),
                1 => (n + 1 + r.below(3)).to_string().into_bytes(),
                2 => odd_number(r),
                _ => n.to_string().into_bytes(),
            };
            v.push(numkeys);
            // The limiters first, so each key can be one of its limiter's own.
            let kinds: Vec<usize> = (0..n)
                .map(|_| r.below(if r.odd_in == 1 { 8 } else { 7 }))
                .collect();
            for &kind in &kinds {
                let own = LIMITER_COMMANDS.get(kind).copied().unwrap_or("RL.GCRA");
                v.push(key(r, own));
            }
            for &kind in &kinds {
                match kind {
                    0 => v.extend([spell(r, "GCRA"), count(r), count(r), duration(r)]),
                    1 => v.extend([spell(r, "TOKENBUCKET"), count(r), count(r), duration(r)]),
                    2 => v.extend([spell(r, "LEAKYBUCKET"), count(r), count(r), duration(r)]),
                    3 => {
                        v.extend([spell(r, "FIXED"), count(r), fixed_window(r)]);
                        if r.one_in(3) {
                            v.extend([spell(r, "OFFSET"), duration(r)]);
                        }
                        if r.one_in(3) {
                            v.extend([spell(r, "TZ"), zone(r)]);
                        }
                        if r.one_in(4) {
                            v.extend([spell(r, "ANCHOR"), anchor(r)]);
                        }
                    }
                    4 => {
                        v.extend([spell(r, "SLIDING"), count(r), duration(r)]);
                        if r.one_in(3) {
                            v.extend([spell(r, "PRECISION"), duration(r)]);
                        }
                    }
                    5 => v.extend([spell(r, "SLIDINGCOUNTER"), count(r), duration(r)]),
                    6 => v.extend([spell(r, "CONCURRENCY"), count(r), duration(r)]),
                    _ => v.push(text_token(r)),
                }
                // Several dimensions: a limiter's own CHARGE and NAME, in either order.
                let mut dims: Vec<[Vec<u8>; 2]> = Vec::new();
                if r.one_in(3) {
                    let charge = if r.odd() {
                        odd_number(r)
                    } else {
                        r.below(5).to_string().into_bytes()
                    };
                    dims.push([spell(r, "CHARGE"), charge]);
                }
                if r.one_in(4) {
                    let n = if r.odd() {
                        text_token(r)
                    } else {
                        format!("dim{}", r.below(4)).into_bytes()
                    };
                    dims.push([spell(r, "NAME"), n]);
                }
                if r.below(2) == 0 {
                    dims.reverse();
                }
                for d in dims {
                    v.extend(d);
                }
            }
            if name == "RL.CHECKALL" {
                // Its options are COST, SHADOW, DETAIL and AT; odd vectors also get RL.ALL's
                // others.
                let shared = r.odd();
                options(r, &mut v, &["COST", "SHADOW", "DETAIL", "AT"], shared);
            } else {
                options(r, &mut v, &[], true);
                // CONCURRENCY takes its lease id from DEDUP: give one to plausible vectors.
                if kinds.contains(&6) && !v.iter().any(|a| a == b"DEDUP") && !r.odd() {
                    v.extend([spell(r, "DEDUP"), dedup_id(r)]);
                }
            }
        }
        "RL.ACQUIRE" => {
            v.extend([key(r, name), count(r), duration(r)]);
            // `ID id` is required and may come anywhere among the options.
            let id_first = r.below(2) == 0;
            let id = [spell(r, "ID"), dedup_id(r)];
            let give_id = !(r.odd() && r.one_in(4));
            if give_id && id_first {
                v.extend(id.clone());
            }
            // Its own options are the shared COST, PEEK, SHADOW and AT, and WAIT; odd vectors
            // also get the shared options it refuses (BESTEFFORT, DEDUP).
            let shared = r.odd();
            options(
                r,
                &mut v,
                &["COST", "PEEK", "SHADOW", "DETAIL", "AT", "WAIT"],
                shared,
            );
            if give_id && !id_first {
                v.extend(id);
            }
        }
        "RL.RELEASE" => {
            v.extend([key(r, "RL.ACQUIRE"), dedup_id(r)]);
            if r.one_in(3) {
                v.push(spell(r, "AT"));
                if !r.one_in(5) {
                    v.push(at_value(r));
                }
            }
        }
        "CL.THROTTLE" => {
            v.extend([key(r, "RL.GCRA"), count(r), count(r), count(r)]);
            if r.below(2) == 0 {
                v.push(r.below(4).to_string().into_bytes());
            }
            if r.one_in(3) {
                v.push(spell(r, "AT"));
                if !r.one_in(5) {
                    v.push(at_value(r));
                }
            }
        }
        "RL.INFO" => {
            let kind = r.pick(LIMITER_COMMANDS);
            v.push(key(r, kind));
        }
        "RL._RESTORE" => {
            v.extend([key(r, "restored"), payload(r, payloads)]);
            if r.one_in(3) {
                v.push(spell(r, "PXAT"));
                if !r.one_in(5) {
                    v.push(at_value(r));
                }
            }
        }
        "RL._SET" => {
            v.extend([key(r, "restored"), payload(r, payloads)]);
            if r.one_in(8) {
                v.push(r.pick(TEXT).to_vec());
            }
        }
        "RL.REFUND" => {
            let kind = refund_kind(r);
            v.extend([key(r, kind), count(r)]);
            options(r, &mut v, &["DEDUP", "AT"], false);
        }
        "RL.SETTLE" => {
            let n = 1 + r.below(3);
            let numkeys = match r.below(8) {
                0 => odd_number(r),
                1 => (n + 1).to_string().into_bytes(),
                _ => n.to_string().into_bytes(),
            };
            v.push(numkeys);
            for _ in 0..n {
                let kind = if r.one_in(9) {
                    "RL.ACQUIRE"
                } else {
                    refund_kind(r)
                };
                v.push(key(r, kind));
            }
            v.push(dedup_id(r));
            for _ in 0..n {
                v.push(if r.odd() {
                    odd_number(r)
                } else {
                    r.below(40).to_string().into_bytes()
                });
            }
            options(r, &mut v, &["AT"], false);
        }
        "RL.BLOCK" => {
            let kind = refund_kind(r);
            v.extend([key(r, kind), duration(r)]);
            options(r, &mut v, &["AT"], false);
        }
        "RL.UNBLOCK" => {
            let kind = refund_kind(r);
            v.push(key(r, kind));
        }
        "RL.CHECK" => {
            let kind = r.below(6);
            let own = LIMITER_COMMANDS.get(kind).copied().unwrap_or("RL.GCRA");
            v.push(key(r, own));
            match kind {
                0 => v.extend([spell(r, "GCRA"), count(r), count(r), duration(r)]),
                1 => v.extend([spell(r, "TOKENBUCKET"), count(r), count(r), duration(r)]),
                2 => v.extend([spell(r, "LEAKYBUCKET"), count(r), count(r), duration(r)]),
                3 => v.extend([spell(r, "FIXED"), count(r), fixed_window(r)]),
                4 => v.extend([spell(r, "SLIDING"), count(r), duration(r)]),
                _ => v.extend([spell(r, "SLIDINGCOUNTER"), count(r), duration(r)]),
            }
            options(
                r,
                &mut v,
                &["COST", "BESTEFFORT", "SHADOW", "DETAIL", "AT"],
                false,
            );
        }
        _ => unreachable!("{name}"),
    }
    v
}

/// The keys RL.REFUND, RL.BLOCK and RL.UNBLOCK mostly use: a limiter's own, or one RL._SET and
/// RL._RESTORE wrote (maybe a value at the bounds, [`edge_payloads`]).
fn refund_kind(r: &mut Rng) -> &'static str {
    if r.one_in(7) {
        "restored"
    } else {
        r.pick(&LIMITER_COMMANDS[..6])
    }
}

/// A random change of the vector's shape or of one argument (never the command name).
fn mutate(r: &mut Rng, v: &mut Vec<Vec<u8>>) {
    let pos = |r: &mut Rng, len: usize| 1 + r.below(len.max(2) - 1);
    match r.below(8) {
        0 => v.truncate(1 + r.below(v.len())), // wrong arity
        1 if v.len() > 1 => {
            let i = pos(r, v.len());
            v.remove(i);
        }
        2 => {
            let i = pos(r, v.len() + 1).min(v.len());
            let t = text_token(r);
            v.insert(i, t);
        }
        3 if v.len() > 1 => {
            let i = pos(r, v.len()).min(v.len() - 1);
            v[i] = text_token(r);
        }
        4 if v.len() > 1 => {
            let i = pos(r, v.len()).min(v.len() - 1);
            v[i] = odd_number(r);
        }
        5 if v.len() > 1 => {
            // A repeated argument: a second copy of an option and its value, or of any token.
            let i = pos(r, v.len()).min(v.len() - 1);
            let j = (i + 1 + r.below(2)).min(v.len());
            let seg: Vec<Vec<u8>> = v[i..j].to_vec();
            v.extend(seg);
        }
        6 => {
            let opt = r.pick(
                &[
                    "AT",
                    "COST",
                    "DEDUP",
                    "OFFSET",
                    "PRECISION",
                    "ID",
                    "PEEK",
                    "SHADOW",
                    "DETAIL",
                    "CHARGE",
                    "NAME",
                ][..],
            );
            v.push(spell(r, opt));
        }
        _ if v.len() > 1 => {
            // Wrap a token in odd bytes.
            let i = pos(r, v.len()).min(v.len() - 1);
            let t = r.pick(TEXT);
            v[i] = if r.below(2) == 0 {
                [t, v[i].as_slice()].concat()
            } else {
                [v[i].as_slice(), t].concat()
            };
        }
        _ => {}
    }
}

fn vector(r: &mut Rng, name: &'static str, payloads: &[Vec<u8>]) -> Vec<Vec<u8>> {
    r.odd_in = r.pick(&[usize::MAX, 12, 4, 2, 1][..]);
    let mut v = template(r, name, payloads);
    let rounds = match r.below(10) {
        _ if r.odd_in > 4 => 0,
        0..=3 => 0,
        4..=7 => 1,
        _ => 2 + r.below(3),
    };
    for _ in 0..rounds {
        mutate(r, &mut v);
    }
    if matches!(name, "RL.ALL" | "RL.CHECKALL") && r.one_in(8) {
        // The module's own key extraction (the getkeys API) on the same vector.
        v.splice(0..0, [b"COMMAND".to_vec(), b"GETKEYS".to_vec()]);
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// A vector as printable text for failure messages (each argument escaped, long ones cut).
fn show(v: &[Vec<u8>]) -> String {
    v.iter()
        .map(|a| {
            let mut s: String = a
                .iter()
                .take(80)
                .map(|&b| {
                    if (0x21..=0x7e).contains(&b) && b != b'\\' && b != b'"' {
                        char::from(b).to_string()
                    } else {
                        format!("\\x{b:02x}")
                    }
                })
                .collect();
            if a.len() > 80 {
                s.push_str(&format!("...({} bytes)", a.len()));
            }
            format!("\"{s}\"")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An error reply must be `CODE text`, CODE an upper-case word, all printable ASCII (but for
/// the server's own reply to an unknown subcommand of a container, RL.POLICY, which quotes the
/// name as it came, as for an unknown command).
fn check_error(e: &str) -> Result<(), String> {
    let server_own =
        e.starts_with("ERR unknown subcommand '") && e.ends_with("Try RL.POLICY HELP.");
    if !server_own && !e.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(format!("error is not printable ASCII: {e:?}"));
    }
    let code = e.split(' ').next().unwrap_or("");
    let is_code = !code.is_empty()
        && code.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !is_code || !e.contains(' ') {
        return Err(format!(
            "error does not start with a Redis error code: {e:?}"
        ));
    }
    Ok(())
}

fn five_ints(items: &[Reply]) -> bool {
    items.len() == 5 && items.iter().all(|i| matches!(i, Reply::Int(_)))
}

/// The detailed reply (`DETAIL`) under RESP2: the five integers, `denied_by` (bulk or nil),
/// `reason` (bulk), and one array of ten values per limiter.
fn detailed_resp2(items: &[Reply]) -> bool {
    let entry = |e: &Reply| match e {
        Reply::Array(v) => {
            v.len() == 10
                && matches!(v[0], Reply::Bulk(_))
                && matches!(v[1], Reply::Bulk(_))
                && v[2..9].iter().all(|i| matches!(i, Reply::Int(_)))
                && matches!(v[9], Reply::Nil | Reply::Bulk(_))
        }
        _ => false,
    };
    items.len() == 8
        && five_ints(&items[..5])
        && matches!(items[5], Reply::Nil | Reply::Bulk(_))
        && matches!(items[6], Reply::Bulk(_))
        && matches!(&items[7], Reply::Array(es) if !es.is_empty() && es.iter().all(entry))
}

/// The detailed reply under RESP3: a map of the five integers, `denied_by`, `reason` and
/// `limiters` (maps of nine or ten fields).
fn detailed_resp3(pairs: &[(Reply, Reply)]) -> bool {
    let names: Vec<String> = pairs.iter().filter_map(|(k, _)| k.as_str()).collect();
    names
        == [
            "granted",
            "limit",
            "remaining",
            "retry_after_ms",
            "reset_after_ms",
            "denied_by",
            "reason",
            "limiters",
        ]
        && pairs[..5].iter().all(|(_, v)| matches!(v, Reply::Int(_)))
        && matches!(pairs[5].1, Reply::Nil | Reply::Bulk(_))
        && matches!(pairs[6].1, Reply::Bulk(_))
        && matches!(&pairs[7].1, Reply::Array(es) if !es.is_empty()
            && es.iter().all(|e| matches!(e, Reply::Map(f) if f.len() == 9 || f.len() == 10)))
}

/// A successful reply must have the command's shape.
fn check_shape(shape: Shape, reply: &Reply) -> Result<(), String> {
    let ok = match (shape, reply) {
        (Shape::Limiter | Shape::LimiterOrNil, Reply::Array(items)) if items.len() == 8 => {
            detailed_resp2(items)
        }
        (Shape::Limiter | Shape::LimiterOrNil, Reply::Map(pairs)) if pairs.len() == 8 => {
            detailed_resp3(pairs)
        }
        (Shape::Limiter | Shape::LimiterOrNil, Reply::Array(items))
        | (Shape::Five, Reply::Array(items)) => five_ints(items),
        (Shape::LimiterOrNil, Reply::Nil) => true,
        (Shape::Limiter | Shape::LimiterOrNil, Reply::Map(pairs)) => {
            pairs.len() == 5 && pairs.iter().all(|(_, v)| matches!(v, Reply::Int(_)))
        }
        (Shape::Int, Reply::Int(_)) => true,
        (Shape::Info, Reply::Nil) => true,
        (Shape::Info, Reply::Array(items)) => items.len().is_multiple_of(2) && !items.is_empty(),
        (Shape::Info, Reply::Map(pairs)) => !pairs.is_empty(),
        (Shape::Ok, Reply::Simple(s)) => s == "OK",
        (Shape::Keys, Reply::Array(_)) => true,
        (Shape::Args, Reply::Nil) => true,
        (Shape::Args, Reply::Array(items)) => {
            !items.is_empty() && items.iter().all(|i| matches!(i, Reply::Bulk(_)))
        }
        (Shape::Pairs, Reply::Array(items)) => {
            items.len().is_multiple_of(2)
                && items
                    .chunks(2)
                    .all(|p| matches!((&p[0], &p[1]), (Reply::Bulk(_), Reply::Int(_))))
        }
        (Shape::Pairs, Reply::Map(pairs)) => pairs
            .iter()
            .all(|p| matches!(p, (Reply::Bulk(_), Reply::Int(_)))),
        (Shape::Bulk, Reply::Bulk(_)) => true,
        (Shape::Help, Reply::Array(items)) => {
            !items.is_empty() && items.iter().all(|i| matches!(i, Reply::Simple(_)))
        }
        (Shape::Settle, Reply::Array(items)) => {
            !items.is_empty()
                && items.iter().all(|i| match i {
                    Reply::Nil => true,
                    Reply::Array(v) => five_ints(v),
                    Reply::Map(pairs) => {
                        pairs.len() == 5 && pairs.iter().all(|(_, v)| matches!(v, Reply::Int(_)))
                    }
                    _ => false,
                })
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("unexpected reply shape for {shape:?}: {reply:?}"))
    }
}

// ---------------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------------

/// Valid payloads of every algorithm, as an AOF rewrite without the RDB preamble writes them
/// (`RL._RESTORE key payload`), and as granted calls of small limiters propagate them
/// (`RL._SET key payload`).
fn harvest_payloads(s: &Server) -> Vec<Vec<u8>> {
    let mut c = s.conn();
    let t = base_ms();
    for i in 0..6u64 {
        let at = (t + i * 250).to_string();
        let id = format!("d{i}");
        let opts = ["DEDUP", id.as_str(), "AT", at.as_str()];
        c.ints(&[&["RL.GCRA", "p:gcra", "10", "3", "1s"][..], &opts].concat());
        c.ints(&[&["RL.TOKENBUCKET", "p:tb", "10", "3", "1s"][..], &opts].concat());
        c.ints(&[&["RL.LEAKYBUCKET", "p:lb", "10", "3", "1s"][..], &opts].concat());
        c.ints(
            &[
                &["RL.FIXED", "p:fixed", "10", "1h", "OFFSET", "5m"][..],
                &opts,
            ]
            .concat(),
        );
        c.ints(
            &[
                &["RL.SLIDING", "p:sliding", "100", "1m", "PRECISION", "10ms"][..],
                &opts,
            ]
            .concat(),
        );
        c.ints(&[&["RL.SLIDINGCOUNTER", "p:sc", "10", "1m"][..], &opts].concat());
        // Reservations (HOLD), the first settled into debt.
        c.ints(
            &[
                &["RL.SLIDING", "p:held", "10", "1m", "HOLD", "1h"][..],
                &opts,
            ]
            .concat(),
        );
        if i == 1 {
            let settle = ["RL.SETTLE", "1", "p:held", "d0", "25", "AT", at.as_str()];
            assert!(c.cmd(&settle).as_array().is_some());
        }
        c.ints(&[
            "RL.ACQUIRE",
            "p:conc",
            "10",
            "1h",
            "ID",
            id.as_str(),
            "AT",
            at.as_str(),
        ]);
        c.ints(&[
            "CL.THROTTLE",
            "p:cell",
            "5",
            "10",
            "60",
            "1",
            "AT",
            at.as_str(),
        ]);
    }
    c.ok(&["CONFIG", "SET", "aof-use-rdb-preamble", "no"]);
    wait_rewrite_done(&mut c);
    // Turning the AOF on writes a rewrite of the whole dataset.
    c.ok(&["CONFIG", "SET", "appendonly", "yes"]);
    wait_rewrite_done(&mut c);
    wait_until("appendonly yes", Duration::from_secs(10), || {
        c.info_field("persistence", "aof_enabled").as_deref() == Some("1")
    });
    let base = aof_file(&s.dir, ".base.aof");
    let aof = std::fs::read(&base).expect("read the base AOF");
    // Granted calls of small limiters propagate their new value (`RL._SET`): the fixed-width
    // form of the schedules, the codec's of the others. (`always`: each reaches the file
    // before its reply, never postponed behind a background fsync.)
    c.ok(&["CONFIG", "SET", "appendfsync", "always"]);
    let at = (t + 2_000).to_string();
    for call in [
        &["RL.GCRA", "s:gcra", "10", "3", "1s"][..],
        &["RL.TOKENBUCKET", "s:tb", "10", "3", "1s"],
        &["RL.LEAKYBUCKET", "s:lb", "10", "3", "1s"],
        &["CL.THROTTLE", "s:cell", "5", "10", "60", "1"],
        &["RL.FIXED", "s:fixed", "10", "1h"],
        &["RL.SLIDINGCOUNTER", "s:sc", "10", "1m"],
    ] {
        c.ints(&[call, &["AT", at.as_str()]].concat());
    }
    // Every incremental file, in order.
    let incr = aof_files(&s.dir, ".incr.aof");
    let appended: Vec<u8> = incr
        .iter()
        .flat_map(|p| std::fs::read(p).expect("read an incremental AOF"))
        .collect();
    c.ok(&["CONFIG", "SET", "appendonly", "no"]);
    c.ok(&["FLUSHALL"]);
    let payloads_of = |aof: &[u8], cmd_name: &[u8]| -> Vec<Vec<u8>> {
        parse_aof(aof)
            .into_iter()
            .filter(|cmd| cmd.len() >= 3 && cmd[0].eq_ignore_ascii_case(cmd_name))
            .map(|cmd| cmd[2].clone())
            .collect()
    };
    let mut payloads = payloads_of(&aof, b"rl._restore");
    assert_eq!(
        payloads.len(),
        9,
        "one RL._RESTORE per key in {}",
        base.display()
    );
    let set = payloads_of(&appended, b"rl._set");
    assert_eq!(set.len(), 6, "one RL._SET per call in {incr:?}");
    payloads.extend(set);
    payloads.extend(edge_payloads(t));
    payloads
}

/// Values at the bounds a payload can hold: schedules (GCRA, token bucket, leaky bucket, in the
/// fixed-width form) whose TAT is at or near the furthest a stored value may hold, so that a
/// refund, a charge or a reply after them meets the largest numbers a reply can state.
fn edge_payloads(t_ms: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for kind in [1u8, 2, 3] {
        // The furthest TAT a value may hold (its last update plus 2^63 - 1 µs, at rate 1), and
        // one a little before it: anything later is refused as a payload.
        let furthest = (t_ms * 1000).saturating_add(i64::MAX as u64);
        for tat in [furthest, furthest - 1_000_000_000_000] {
            let mut p = vec![3u8, kind];
            p.extend_from_slice(&(t_ms * 1000).to_le_bytes());
            p.extend_from_slice(&tat.to_le_bytes());
            p.extend_from_slice(&(2u64 | (1u64 << 32)).to_le_bytes());
            p.extend_from_slice(&1_000_000u64.to_le_bytes()[..6]);
            out.push(p);
        }
    }
    out
}

/// The commands of an AOF file (RESP arrays of bulk strings).
fn parse_aof(mut b: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line<'a>(b: &mut &'a [u8]) -> &'a [u8] {
        let end = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("CRLF in AOF");
        let l = &b[..end];
        *b = &b[end + 2..];
        l
    }
    let num = |l: &[u8]| -> usize { std::str::from_utf8(l).unwrap().parse().unwrap() };
    let mut cmds = Vec::new();
    while !b.is_empty() {
        let head = line(&mut b);
        assert_eq!(head[0], b'*', "AOF command header");
        let mut cmd = Vec::new();
        for _ in 0..num(&head[1..]) {
            let len = num(&line(&mut b)[1..]);
            cmd.push(b[..len].to_vec());
            b = &b[len + 2..];
        }
        cmds.push(cmd);
    }
    cmds
}

/// Flush and create the keys of [`KEYS`] that hold something (expiring in hours, not during a
/// batch).
fn setup(c: &mut Conn, payloads: &[Vec<u8>], r: &mut Rng) {
    let t = (base_ms() + 3_600_000).to_string();
    let at = t.as_str();
    let cmds: Vec<Vec<Vec<u8>>> = vec![
        args!["FLUSHALL"].to_vec(),
        args!["SET", "str", "x"].to_vec(),
        args!["XADD", "stream", "1-1", "count", "3"].to_vec(),
        args!["XADD", "badstream", "1-1", "count", "x"].to_vec(),
        args!["XADD", "badstream", "2-1", "other", "1"].to_vec(),
        args!["HSET", "hash", "f", "v"].to_vec(),
        args!["RPUSH", "list", "a"].to_vec(),
        args!["RL.GCRA", "lim:gcra", 10, 1, "1h", "AT", at].to_vec(),
        args!["RL.TOKENBUCKET", "lim:tb", 10, 1, "1h", "AT", at].to_vec(),
        args!["RL.LEAKYBUCKET", "lim:lb", 10, 1, "1h", "AT", at].to_vec(),
        args!["RL.FIXED", "lim:fixed", 10, "1h", "AT", at].to_vec(),
        args!["RL.SLIDING", "lim:sliding", 10, "1h", "AT", at].to_vec(),
        args!["RL.SLIDINGCOUNTER", "lim:sc", 10, "1h", "AT", at].to_vec(),
        args!["RL.ACQUIRE", "lim:conc", 10, "1h", "ID", "w", "AT", at].to_vec(),
        args!["RL._RESTORE", "lim:restored", r.pick_ref(payloads).clone()].to_vec(),
        args![
            "RL.POLICY",
            "RESTORE",
            POLICY_DUMP.get().cloned().unwrap_or_default()
        ]
        .to_vec(),
    ];
    for cmd in &cmds {
        c.send(cmd);
    }
    for cmd in &cmds {
        let reply = c.recv();
        assert!(!reply.is_error(), "setup `{}`: {reply:?}", show(cmd));
    }
}

/// Counts per command.
#[derive(Default, Clone, Copy)]
struct Tally {
    vectors: u64,
    errors: u64,
}

struct Fuzz<'a> {
    seed: u64,
    server: &'a Server,
    /// The commands fuzzed ([`registered`]); a vector's `cmd` is a position in it.
    commands: Vec<&'static Command>,
    tally: Vec<Tally>,
}

impl Fuzz<'_> {
    fn fail(&self, what: &str) -> ! {
        panic!(
            "fuzz failure (RL_FUZZ_SEED={} on {}): {what}",
            self.seed,
            server_bin()
        );
    }

    /// Read one reply. A closed connection means the server died on the first of `pending` or
    /// on one after it (the replies to a pipeline may still have been in its output buffer).
    fn recv(&self, c: &mut Conn, pending: &[(usize, Vec<Vec<u8>>)]) -> Reply {
        c.try_recv().unwrap_or_else(|e| {
            let log = self.server.log();
            let panics: Vec<&str> = log.lines().filter(|l| l.contains("panic")).collect();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            let vectors: Vec<String> = pending.iter().map(|(_, v)| show(v)).collect();
            self.fail(&format!(
                "no reply ({e}): the server died on one of these vectors:\n  {}\n\
                 --- panics in the server log ---\n{}\n--- end of the server log ---\n{}",
                vectors.join("\n  "),
                panics.join("\n"),
                tail.join("\n")
            ))
        })
    }

    fn check(&mut self, cmd: usize, v: &[Vec<u8>], reply: &Reply) {
        self.tally[cmd].vectors += 1;
        let shape = if v[0] == b"COMMAND" {
            Shape::Keys
        } else {
            self.commands[cmd].shape
        };
        let result = match reply {
            Reply::Error(e) => {
                self.tally[cmd].errors += 1;
                check_error(e)
            }
            other => check_shape(shape, other),
        };
        if let Err(why) = result {
            self.fail(&format!("{why}\n  vector: {}", show(v)));
        }
    }

    /// Pipeline the batch as it is.
    fn plain(&mut self, c: &mut Conn, batch: &[(usize, Vec<Vec<u8>>)]) {
        for (_, v) in batch {
            c.send(v);
        }
        for (i, (cmd, v)) in batch.iter().enumerate() {
            let reply = self.recv(c, &batch[i..]);
            self.check(*cmd, v, &reply);
        }
    }

    /// Each vector in its own MULTI: SCAN (expires what is due, at the transaction's frozen
    /// time), DEBUG DIGEST and the policies' DUMP, the vector, DEBUG DIGEST and DUMP. An error
    /// must leave the digest and the policies as they were.
    fn guarded(&mut self, c: &mut Conn, batch: &[(usize, Vec<Vec<u8>>)]) {
        let scan = args!["SCAN", 0, "COUNT", 100000];
        let digest = args!["DEBUG", "DIGEST"];
        let dump = args!["RL.POLICY", "DUMP"];
        for (_, v) in batch {
            c.send(&["MULTI"]);
            c.send(&scan);
            c.send(&digest);
            c.send(&dump);
            c.send(v);
            c.send(&digest);
            c.send(&dump);
            c.send(&["EXEC"]);
        }
        for (i, (cmd, v)) in batch.iter().enumerate() {
            let queued: Vec<Reply> = (0..7).map(|_| self.recv(c, &batch[i..])).collect();
            let exec = self.recv(c, &batch[i..]);
            // Redis checks the arity the command info declares when queueing: the vector's
            // error comes then, and EXEC aborts without running anything.
            if let Reply::Error(_) = &queued[4] {
                self.check(*cmd, v, &queued[4]);
                if !matches!(&exec, Reply::Error(e) if e.starts_with("EXECABORT")) {
                    self.fail(&format!("EXEC after a refused command: {exec:?}"));
                }
                continue;
            }
            if let Some(r) = queued.iter().find(|r| r.is_error()) {
                self.fail(&format!(
                    "MULTI/queueing failed: {r:?}\n  vector: {}",
                    show(v)
                ));
            }
            let parts: Vec<Reply> = match &exec {
                Reply::Array(a) if a.len() == 6 => a.clone(),
                _ => self.fail(&format!("EXEC replied {exec:?}\n  vector: {}", show(v))),
            };
            let (scanned, before, reply, after) = (&parts[0], &parts[1], &parts[3], &parts[4]);
            if reply.is_error() && parts[2] != parts[5] {
                self.fail(&format!(
                    "an erroring call changed the policies ({reply:?})\n  vector: {}",
                    show(v)
                ));
            }
            if let Reply::Array(cursor) = scanned
                && cursor.first() != Some(&Reply::Bulk(b"0".to_vec()))
            {
                self.fail(&format!("SCAN did not finish in one call: {scanned:?}"));
            }
            self.check(*cmd, v, reply);
            if reply.is_error() && before != after {
                self.fail(&format!(
                    "an erroring call changed the dataset ({reply:?}): digest {before:?} -> \
                     {after:?}\n  vector: {}",
                    show(v)
                ));
            }
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok().filter(|v| !v.is_empty())?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not an unsigned integer")),
    )
}

/// The commands the module registers (its command table, as the server lists them), each with
/// its template, in [`TEMPLATES`] order (so a seed replays the same vectors).
fn registered(c: &mut Conn) -> Vec<&'static Command> {
    let names: Vec<String> = match c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "ratelimit"]) {
        Reply::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_ascii_uppercase())
            .collect(),
        other => panic!("COMMAND LIST: {other:?}"),
    };
    for name in &names {
        assert!(
            TEMPLATES.iter().any(|t| t.name == name),
            "{name} is registered but the fuzzer has no template for it"
        );
    }
    TEMPLATES
        .iter()
        .filter(|t| names.iter().any(|n| n == t.name))
        .collect()
}

#[test]
fn fuzz_every_command() {
    let seed = env_u64("RL_FUZZ_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos() as u64
    });
    let cases = env_u64("RL_FUZZ_CASES").unwrap_or(DEFAULT_CASES as u64) as usize;
    eprintln!(
        "fuzz: RL_FUZZ_SEED={seed} RL_FUZZ_CASES={cases} on {}",
        server_bin()
    );
    let server = Server::start();
    let payloads = harvest_payloads(&server);
    let mut r = Rng::new(seed);
    let mut c = server.conn();
    make_policies(&mut c);
    // Keys are deleted only by commands (a full SCAN expires what is due), so the master and
    // the replica can be compared at an instant the master chose.
    c.ok(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let replica = Server::replica_of(&server);
    let (mut ctl, mut rc) = (server.conn(), replica.conn());
    let (mut round_trips, mut round_trip_keys) = (0, 0);
    let commands = registered(&mut c);
    let mut fuzz = Fuzz {
        seed,
        server: &server,
        tally: vec![Tally::default(); commands.len()],
        commands: commands.clone(),
    };
    let started = Instant::now();
    let total = cases * commands.len();
    let mut done = 0;
    let mut batch_no = 0usize;
    let mut resp3 = false;
    while done < total {
        setup(&mut c, &payloads, &mut r);
        // Switch the protocol now and then: replies are maps under RESP3.
        if r.one_in(4) {
            resp3 = !resp3;
            c.ok(&["HELLO", if resp3 { "3" } else { "2" }]);
        }
        let n = BATCH.min(total - done);
        let batch: Vec<(usize, Vec<Vec<u8>>)> = (0..n)
            .map(|i| {
                // Every command gets the same number of vectors.
                let cmd = (done + i) % commands.len();
                (cmd, vector(&mut r, commands[cmd].name, &payloads))
            })
            .collect();
        if batch_no.is_multiple_of(2) {
            fuzz.guarded(&mut c, &batch);
        } else {
            fuzz.plain(&mut c, &batch);
        }
        let pong = fuzz.recv_ping(&mut c);
        if pong != Reply::Simple("PONG".into()) {
            fuzz.fail(&format!("PING after batch {batch_no} answered {pong:?}"));
        }
        if let Err(why) = consistency::replica_matches(&mut ctl, &mut rc) {
            let vectors: Vec<String> = batch.iter().map(|(_, v)| show(v)).collect();
            fuzz.fail(&format!(
                "after batch {batch_no}: {why}\n  the batch's vectors:\n  {}",
                vectors.join("\n  ")
            ));
        }
        if batch_no % ROUND_TRIP_EVERY == ROUND_TRIP_EVERY - 1 {
            match consistency::round_trips(&mut ctl, &server.dir) {
                Ok(n) => round_trip_keys += n,
                Err(why) => fuzz.fail(&format!("round trip after batch {batch_no}: {why}")),
            }
            round_trips += 1;
        }
        done += n;
        batch_no += 1;
    }
    let elapsed = started.elapsed();
    let log = server.log();
    if log.contains("panic") {
        fuzz.fail(&format!("the server log reports a panic:\n{log}"));
    }
    eprintln!(
        "fuzz: {total} vectors in {batch_no} batches (replica compared after each, \
         {round_trips} persistence round trips of {round_trip_keys} keys in all), {elapsed:.1?}"
    );
    for (cmd, t) in commands.iter().zip(&fuzz.tally) {
        eprintln!(
            "fuzz:   {:<18} {:>8} vectors {:>8} errors {:>8} replies",
            cmd.name,
            t.vectors,
            t.errors,
            t.vectors - t.errors
        );
    }
}

impl Fuzz<'_> {
    fn recv_ping(&self, c: &mut Conn) -> Reply {
        c.send(&["PING"]);
        self.recv(c, &[(0, vec![b"PING".to_vec()])])
    }
}

/// The vectors cover exactly the commands the module registers: a new command fails here until
/// it has its template.
#[test]
fn fuzz_knows_every_registered_command() {
    let server = Server::start();
    let mut c = server.conn();
    let mut registered: Vec<String> =
        match c.cmd(&["COMMAND", "LIST", "FILTERBY", "MODULE", "ratelimit"]) {
            Reply::Array(items) => items
                .iter()
                .map(|i| i.as_str().unwrap_or_default().to_ascii_uppercase())
                .collect(),
            other => panic!("COMMAND LIST: {other:?}"),
        };
    registered.sort();
    let mut fuzzed: Vec<String> = TEMPLATES.iter().map(|c| c.name.to_string()).collect();
    fuzzed.sort();
    assert_eq!(fuzzed, registered);
}
