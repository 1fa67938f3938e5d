//! Every error a command can reply, worded as Redis words its own (`ERR <lowercase phrase>`).
//!
//! `RlError` deliberately does not implement `std::error::Error`: redis-module converts any such
//! type into `ERR {Display}` through a blanket impl, which would clash with the explicit
//! conversion below.

use std::fmt;
use std::fmt::Write as _;

use redis_module::RedisError;

use crate::core::{CoreError, Kind};

/// A command failure, rendered as one Redis error line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RlError {
    /// Wrong number of arguments: Redis's own message naming the command.
    Arity,
    /// A key of a non-module type: Redis's own WRONGTYPE message.
    WrongType,
    /// A key holding another algorithm.
    WrongKind { held: Kind, wanted: Kind },
    /// A key of RL.ALL holding another algorithm.
    WrongKindAt {
        key: String,
        held: Kind,
        wanted: Kind,
    },
    /// A count that must be ≥ 1 (names the argument).
    NotPositive(&'static str),
    /// A parameter out of its range: its name, and what it must be.
    Invalid(&'static str, &'static str),
    /// A count that must be ≥ 0 (names the argument).
    NotNonNegative(&'static str),
    /// A duration that is not `<n>[ms|s|m|h|d]` with n ≥ 1 (the token, the argument).
    InvalidDuration(String, &'static str),
    /// An `AT` that is not a Unix time in ms.
    InvalidTime(String),
    /// A token that is no option of this command.
    UnknownOption(String),
    /// An option at the end with no value.
    NeedsValue(&'static str),
    /// An option given twice.
    Duplicate(&'static str),
    /// A free-form syntax error (the text after `ERR syntax error, `).
    Syntax(&'static str),
    /// Arguments that are each valid but do not go together (the text after `ERR `).
    Conflict(&'static str),
    /// `DELAY` on an algorithm that does not take it.
    NoDelay(Kind),
    /// An `AT` further ahead of the server's clock than `ratelimit.at-max-ahead`.
    AtAhead,
    /// An `AT` further behind the server's clock than `ratelimit.at-max-behind`.
    AtBehind,
    /// A `DEDUP` id longer than the maximum.
    IdTooLong,
    /// New parameters under which the key's current state would take too long to be fresh.
    StateTooLong,
    /// Parameters too large to compute with.
    Overflow,
    /// RL.REFUND on a limiter whose units come back through another command.
    NoRefund { held: Kind, via: &'static str },
    /// A command for limiter keys (its name, shown in upper case) on a stream key of
    /// RL.STREAMCOUNT.
    StreamKey(&'static str),
    /// An `RL._RESTORE` payload that does not decode.
    Payload,
    /// `TZ` names no zone of the bundled database and no `+HH:MM` offset (quoted, escaped).
    UnknownZone(String),
    /// An `ANCHOR` the calendar unit does not take (quoted, escaped), and the unit.
    InvalidAnchor(String, &'static str),
    /// RL.ALL: a limiter name that is no algorithm.
    UnknownLimiter(String),
    /// RL.ALL: a limiter without all its positional arguments (its name).
    LimiterArity(Kind),
    /// A stream entry (its ID) whose `count` is missing or not an integer.
    BadStreamEntry(String),
    /// An error the server returned for a command run on our behalf, passed on as it is.
    Server(String),
    /// A named policy that does not exist (quoted, escaped).
    UnknownPolicy(String),
    /// A `RL.POLICY RESTORE` payload (or aux data) that does not decode.
    PolicyPayload,
    /// A client's payload whose version counter (so a version) is above 2^52.
    PolicyVersions,
    /// A payload's policy (quoted) whose definition does not parse, and why.
    BadPolicy(String, String),
    /// Two policies (quoted) whose INFO fields would share names (`x` and `x_shadow`).
    PolicyFields(String, String),
    /// A policy (quoted) applied to a number of keys that is not its number of limiters.
    PolicyKeys {
        policy: String,
        limiters: usize,
        keys: usize,
    },
}

impl fmt::Display for RlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RlError::Arity => write!(f, "ERR wrong number of arguments"),
            RlError::WrongType => write!(
                f,
                "WRONGTYPE Operation against a key holding the wrong kind of value"
            ),
            RlError::WrongKind { held, wanted } => {
                write!(f, "WRONGTYPE key holds a {held} limiter, not {wanted}")
            }
            RlError::WrongKindAt { key, held, wanted } => write!(
                f,
                "WRONGTYPE key '{key}' holds a {held} limiter, not {wanted}"
            ),
            RlError::NotPositive(what) => write!(f, "ERR {what} must be a positive integer"),
            RlError::Invalid(what, must) => write!(f, "ERR {what} {must}"),
            RlError::NotNonNegative(what) => {
                write!(f, "ERR {what} must be a non-negative integer")
            }
            RlError::InvalidDuration(token, what) => {
                write!(f, "ERR invalid duration '{token}' for {what}")
            }
            RlError::InvalidTime(token) => write!(
                f,
                "ERR invalid time '{token}' for AT, expected unix milliseconds"
            ),
            RlError::UnknownOption(token) => write!(f, "ERR unknown option '{token}'"),
            RlError::NeedsValue(opt) => write!(f, "ERR syntax error, {opt} needs a value"),
            RlError::Duplicate(opt) => write!(f, "ERR syntax error, {opt} given more than once"),
            RlError::Syntax(text) => write!(f, "ERR syntax error, {text}"),
            RlError::Conflict(text) => write!(f, "ERR {text}"),
            RlError::NoDelay(kind) => write!(
                f,
                "ERR DELAY does not apply to {}, only to GCRA, TOKENBUCKET and LEAKYBUCKET",
                kind.name().to_ascii_uppercase()
            ),
            RlError::AtAhead => write!(f, "ERR AT is ahead of the server clock"),
            RlError::AtBehind => write!(f, "ERR AT is behind the server clock"),
            RlError::IdTooLong => write!(f, "ERR DEDUP id must be at most 256 bytes"),
            RlError::StateTooLong => write!(
                f,
                "ERR parameters too large for the key's current state: it would be fresh again in more than 9223372036854775 ms"
            ),
            RlError::Overflow => write!(f, "ERR parameters too large"),
            RlError::NoRefund { held, via } => write!(
                f,
                "ERR RL.REFUND does not apply to a {} limiter ({held}), use {via}",
                held.name()
            ),
            RlError::StreamKey(cmd) => write!(
                f,
                "WRONGTYPE key holds an RL.STREAMCOUNT stream, not a limiter: {} applies to limiter keys only",
                cmd.to_ascii_uppercase()
            ),
            RlError::Payload => write!(f, "ERR invalid rate limiter payload"),
            RlError::UnknownLimiter(token) => write!(f, "ERR unknown limiter '{token}'"),
            RlError::UnknownZone(token) => write!(f, "ERR unknown time zone '{token}'"),
            RlError::InvalidAnchor(token, unit) => {
                write!(f, "ERR invalid ANCHOR '{token}' for {unit}")
            }
            RlError::LimiterArity(kind) => write!(
                f,
                "ERR syntax error, {} needs its positional arguments",
                kind.name().to_ascii_uppercase()
            ),
            RlError::BadStreamEntry(id) => {
                write!(f, "ERR stream entry {id} has no integer 'count' field")
            }
            RlError::Server(text) => write!(f, "{text}"),
            RlError::UnknownPolicy(name) => write!(f, "ERR unknown policy '{name}'"),
            RlError::PolicyFields(a, b) => write!(
                f,
                "ERR policy '{a}' and policy '{b}' would share INFO field names: choose another name"
            ),
            RlError::PolicyPayload => write!(f, "ERR invalid policy payload"),
            RlError::PolicyVersions => write!(
                f,
                "ERR invalid policy payload: its version counter is above 4503599627370496 (2^52)"
            ),
            RlError::BadPolicy(name, why) => {
                write!(f, "ERR invalid policy payload: policy '{name}': {why}")
            }
            RlError::PolicyKeys {
                policy,
                limiters,
                keys,
            } => write!(
                f,
                "ERR policy '{policy}' has {limiters} limiter(s) and needs one key per limiter, got {keys}"
            ),
        }
    }
}

/// Is `b` printable ASCII (0x20–0x7E), the only bytes an error text may hold?
pub fn is_printable(b: u8) -> bool {
    (0x20..=0x7e).contains(&b)
}

/// Append `b` to `out` as `\xNN` (two lower-case hex digits).
pub fn push_escaped(out: &mut String, b: u8) {
    // Writing to a String cannot fail.
    let _ = write!(out, "\\x{b:02x}");
}

/// `text` as printable ASCII: every byte outside 0x20–0x7E written as `\xNN`; printable text
/// (every error this crate renders) comes back unchanged.
pub fn printable(text: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in text {
        if is_printable(b) {
            out.push(char::from(b));
        } else {
            push_escaped(&mut out, b);
        }
    }
    out
}

impl From<RlError> for RedisError {
    /// The error as the crate's type, its text printable ASCII whatever it quotes (the crate's
    /// own reply path panics on text with characters U+xx00; see `ffi::reply::error`).
    fn from(e: RlError) -> Self {
        match e {
            RlError::Arity => RedisError::WrongArity,
            RlError::WrongType => RedisError::WrongType,
            other => RedisError::String(printable(other.to_string().as_bytes())),
        }
    }
}

impl From<CoreError> for RlError {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::WrongKind { held, wanted } => RlError::WrongKind { held, wanted },
            CoreError::InvalidParam(what, must) => RlError::Invalid(what, must),
            CoreError::SpanTooLong => {
                RlError::Invalid("burst * period / rate", crate::core::MUST_FIT_DURATION)
            }
            CoreError::StateTooLong => RlError::StateTooLong,
            CoreError::Refused(text) => RlError::Conflict(text),
            CoreError::Overflow => RlError::Overflow,
            CoreError::NoRefund { held, via } => RlError::NoRefund { held, via },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_only_what_is_not_printable() {
        assert_eq!(printable(b"ERR it's a \\ b ~"), "ERR it's a \\ b ~");
        assert_eq!(
            printable("\u{e9}\0\r\n".as_bytes()),
            "\\xc3\\xa9\\x00\\x0d\\x0a"
        );
        assert_eq!(printable(b""), "");
    }

    #[test]
    fn every_error_reaches_the_crate_as_printable_ascii() {
        let all = [
            RlError::InvalidDuration("\u{1F600}".into(), "period"),
            RlError::UnknownOption("\u{4E00}".into()),
            RlError::InvalidTime("\u{0100}".into()),
            RlError::Server("ERR \0bad\r\n".into()),
            RlError::WrongKindAt {
                key: "\u{0100}".into(),
                held: Kind::Gcra,
                wanted: Kind::Fixed,
            },
            RlError::NoDelay(Kind::SlidingCounter),
        ];
        for e in all {
            match RedisError::from(e.clone()) {
                RedisError::String(s) => {
                    assert!(s.bytes().all(is_printable), "{e:?} -> {s:?}");
                    assert!(s.starts_with("ERR ") || s.starts_with("WRONGTYPE "), "{s}");
                }
                other => panic!("{e:?} -> {other:?}"),
            }
        }
    }
}
