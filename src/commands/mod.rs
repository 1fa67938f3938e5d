//! Thin, safe glue: bytes → typed request → core (judge, then settle) → `tail::finish` (write back,
//! expire, replicate, notify, count) → reply.
//!
//! Every limiter command is a [`LimiterCommand`]: it parses its arguments, names its algorithm
//! and documents itself; [`run`] does the rest the same way for all of them. The algorithms'
//! commands are wired once, in `crate::registry`, to the algorithms `core::kind` lists;
//! `registry` turns that list into RL.ALL's table and the docs.
#![forbid(unsafe_code)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

pub mod all;
pub mod args;
pub mod block;
pub mod check;
pub mod concurrency;
pub mod fixed;
pub mod gcra;
pub mod info;
pub mod leaky_bucket;
pub mod refund;
pub mod registry;
pub mod restore;
pub mod sliding;
pub mod sliding_counter;
pub mod stream_count;
pub mod tail;
pub mod throttle;
pub mod token_bucket;

use std::cell::RefCell;
use std::ffi::CStr;
use std::marker::PhantomData;

use redis_module::{Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue};

use crate::commands::args::{AT_BUF, Options, format_at_into};
use crate::commands::restore::SET_COMMAND;
use crate::commands::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::config;
use crate::core::Micros;
use crate::core::decimal::{U64_DIGITS, format_u64_into};
use crate::core::flow;
use crate::core::limiter::{Algorithm, Decision, Verdict};
use crate::core::packed::Encodable;
use crate::core::state::Stored;
use crate::core::time::expiry_ms;
use crate::docs::CommandDoc;
use crate::error::RlError;
use crate::ffi;
use crate::ffi::clock::server_now;
use crate::ffi::command::{Arg, Argv, Handler};
use crate::ffi::key::LimiterKey;
use crate::ffi::reply;
use crate::stats::{self, CommandStats};

/// The handler Redis calls for command `run`: errors are sent by [`reply::error`], which cannot
/// panic whatever their text, never by the crate's reply path (which can).
pub fn entry(
    run: fn(&Context, Vec<RedisString>) -> RedisResult,
) -> impl Fn(&Context, Vec<RedisString>) -> RedisResult {
    move |ctx, args| match run(ctx, args) {
        Err(RedisError::String(text)) => {
            reply::error(ctx, &text);
            Ok(RedisValue::NoReply)
        }
        Err(RedisError::Str(text)) => {
            reply::error(ctx, text);
            Ok(RedisValue::NoReply)
        }
        Err(RedisError::WrongType) => {
            reply::error(ctx, &RlError::WrongType.to_string());
            Ok(RedisValue::NoReply)
        }
        // Arity goes through RedisModule_WrongArity (no text of ours); replies are our own.
        other => other,
    }
}

/// A command's parsed arguments: the algorithm's parameters and the shared options.
#[derive(Debug, Clone)]
pub struct Parsed<P> {
    pub params: P,
    pub opts: Options,
}

/// A limiter command: how it parses, which algorithm it runs, how it replies and replicates.
///
/// The name, event and counters default to the algorithm's own command (`rl.<name>`).
pub trait LimiterCommand {
    /// The algorithm behind the command.
    type Algo: Stored;

    /// What COMMAND DOCS says of it; for an algorithm's command, also RL.ALL's syntax of the
    /// algorithm (the required arguments after the key, then the optional ones, each with a
    /// token and one value).
    const DOC: CommandDoc;

    /// The registered (lower-case) name.
    const NAME: &'static str = <Self::Algo as Stored>::KIND.command();

    /// The name as a C string: the keyspace event a write fires, and the command replicated.
    const EVENT: &'static CStr = <Self::Algo as Stored>::KIND.command_c();

    /// The command's counters.
    fn stats() -> &'static CommandStats {
        stats::of(<Self::Algo as Stored>::KIND)
    }

    /// Parse the whole argument vector (`args[0]` is the command name, `args[1]` the key).
    ///
    /// # Errors
    /// Any argument error, worded for the client.
    fn parse(args: &[&[u8]]) -> Result<Parsed<<Self::Algo as Algorithm>::Params>, RlError>;

    /// Parse the algorithm's limiter inside RL.ALL (the same arguments, without the shared
    /// options, which RL.ALL parses once for all limiters): by default as [`Self::parse`].
    ///
    /// # Errors
    /// As [`Self::parse`].
    fn parse_limiter(args: &[&[u8]]) -> Result<Parsed<<Self::Algo as Algorithm>::Params>, RlError> {
        Self::parse(args)
    }

    /// Reply with `decision` (`verdict` has the exact, unrounded values).
    fn reply(ctx: &Context, decision: &Decision, _verdict: &Verdict) {
        reply_decision(ctx, decision);
    }
}

/// Longest encoded value replicated as itself (`RL._SET`); a longer one (a sliding log with many
/// entries, `DEDUP` ids) replicates as its command.
pub const STATE_REPLICATION_MAX: usize = 48;

thread_local! {
    /// The encoding buffer of [`replicate_state`], reused by every call (commands run on the
    /// main thread).
    static PAYLOAD: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Propagate `RL._SET key <state>` when `state` encodes in at most [`STATE_REPLICATION_MAX`]
/// bytes; `false` (nothing propagated) otherwise.
pub fn replicate_state(ctx: &Context, key: Arg<'_>, state: Encodable<'_>) -> bool {
    // The common value is a copy of its fixed-width words.
    if let Some(payload) = state.fixed_payload() {
        ffi::replicate::replicate_key_bytes(ctx, SET_COMMAND, key, &payload);
        return true;
    }
    // A value known too long (a log of many entries) is not encoded to find out.
    if state.surely_longer_than(STATE_REPLICATION_MAX) {
        return false;
    }
    PAYLOAD.with_borrow_mut(|buf| {
        buf.clear();
        state.encode_into(buf);
        if buf.len() > STATE_REPLICATION_MAX {
            return false;
        }
        ffi::replicate::replicate_key_bytes(ctx, SET_COMMAND, key, buf);
        true
    })
}

/// Propagate command `name` with `argv` (minus `argv[0]` and any `AT t` pair at `at_index`) and
/// `AT <now>`: the deterministic form of a call whose result depended on the clock.
///
/// The call's own argument strings are passed on as they are; only `AT` and the time are new.
pub fn replicate_argv_with_at(
    ctx: &Context,
    name: &CStr,
    argv: Argv<'_>,
    at_index: Option<usize>,
    now: Micros,
) {
    let mut buf = [0u8; AT_BUF];
    let at = format_at_into(now, &mut buf);
    let kept = argv
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, _)| !at_index.is_some_and(|s| *i == s || *i == s.saturating_add(1)))
        .map(|(_, a)| a);
    ffi::replicate::replicate_with(ctx, name, kept, c"AT", at);
}

/// When a call is evaluated, and how long the keys it writes are kept at least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluation {
    /// The evaluation time: the server's clock, or `AT`.
    pub now: Micros,
    /// For a call behind the server's clock: the server's clock plus `ratelimit.at-max-behind`,
    /// before which no key it writes may expire (a key whose expiry was counted from an old
    /// `AT` must not come back fresh for the next old `AT`). `None` for every other call.
    pub keep_until: Option<Micros>,
}

/// A key's expiry as a call writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// Unix ms.
    pub ms: i64,
    /// Kept past the state's own expiry (which is what replicas and the AOF compute).
    pub kept: bool,
}

impl Evaluation {
    /// A call at `now` whose keys expire by the state's own rule.
    pub fn exact(now: Micros) -> Self {
        Evaluation {
            now,
            keep_until: None,
        }
    }

    /// The expiry of a key this call leaves fresh again at `fresh_at`: that time, or later when
    /// the call is behind the server's clock.
    pub fn expiry(&self, fresh_at: Micros) -> Expiry {
        let ms = expiry_ms(fresh_at);
        match self.keep_until.map(expiry_ms) {
            Some(kept) if kept > ms => Expiry {
                ms: kept,
                kept: true,
            },
            _ => Expiry { ms, kept: false },
        }
    }
}

/// Propagate `PEXPIREAT key <ms>` after a write's own propagation when the write kept the key
/// past the expiry its state implies: replicas and the AOF compute that one from the state, so
/// they get the master's resolved expiry too (whatever their own clock).
pub fn replicate_expiry(ctx: &Context, key: Arg<'_>, expiry: Expiry) {
    if expiry.kept {
        let mut buf = [0u8; U64_DIGITS];
        // An expiry from `expiry_ms`: never negative.
        let at = format_u64_into(expiry.ms.unsigned_abs(), &mut buf);
        ffi::replicate::replicate_key_bytes(ctx, c"PEXPIREAT", key, at);
    }
}

/// The evaluation of a call: at the server's clock, or at `at` when given. An `at` more than
/// `ratelimit.at-max-ahead` ahead of the server's clock, or more than `ratelimit.at-max-behind`
/// behind it, is refused; an accepted `at` behind it keeps the keys the call writes until the
/// server's clock plus that bound. A call from the master or the AOF is exempt from both (it
/// carries the master's resolved time, which must be applied as is, and the master's resolved
/// expiry follows it).
///
/// A call without `AT` reads the clock and nothing else.
///
/// # Errors
/// [`RlError::AtAhead`], [`RlError::AtBehind`].
pub fn evaluation_time(ctx: &Context, at: Option<Micros>) -> Result<Evaluation, RlError> {
    let Some(at) = at else {
        return Ok(Evaluation::exact(server_now()));
    };
    if ctx
        .get_flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
    {
        return Ok(Evaluation::exact(at));
    }
    let clock = server_now();
    if config::at_max_ahead_us().is_some_and(|ahead| at > clock.saturating_add(ahead)) {
        return Err(RlError::AtAhead);
    }
    let Some(behind) = config::at_max_behind_us() else {
        return Ok(Evaluation::exact(at));
    };
    if at >= clock {
        return Ok(Evaluation::exact(at));
    }
    if clock.saturating_sub(at) > behind {
        return Err(RlError::AtBehind);
    }
    Ok(Evaluation {
        now: at,
        keep_until: Some(clock.saturating_add(behind)),
    })
}

/// The limiter reply's field names, in order.
pub const DECISION_NAMES: [&str; 5] = [
    "granted",
    "limit",
    "remaining",
    "retry_after_ms",
    "reset_after_ms",
];

/// The limiter reply's values, in the order of [`DECISION_NAMES`].
pub fn decision_values(d: &Decision) -> [i64; 5] {
    [
        d.granted,
        d.limit,
        d.remaining,
        d.retry_after_ms,
        d.reset_after_ms,
    ]
}

/// Send the limiter reply of SPEC.md: five integers (RESP2) or the same as a map (RESP3).
pub fn reply_decision(ctx: &Context, d: &Decision) {
    reply::integers(ctx, Some(&DECISION_NAMES), decision_values(d));
}

/// The limiter reply, for a command run through the crate's wrapper: sent, then `NoReply`.
pub fn limiter_reply(ctx: &Context, d: &Decision) -> RedisValue {
    reply_decision(ctx, d);
    RedisValue::NoReply
}

/// The limiter reply's names and values, in order.
pub fn decision_fields(d: &Decision) -> [(&'static str, RedisValue); 5] {
    let [g, l, r, retry, reset] = decision_values(d);
    let [ng, nl, nr, nretry, nreset] = DECISION_NAMES;
    [
        (ng, RedisValue::Integer(g)),
        (nl, RedisValue::Integer(l)),
        (nr, RedisValue::Integer(r)),
        (nretry, RedisValue::Integer(retry)),
        (nreset, RedisValue::Integer(reset)),
    ]
}

/// Arguments read on the stack; a longer call uses the heap.
const INLINE_ARGS: usize = 16;

/// Run `f` on the bytes of every argument, without allocating for a call of up to
/// `INLINE_ARGS` arguments.
pub fn with_bytes<R>(argv: Argv<'_>, f: impl FnOnce(&[&[u8]]) -> R) -> R {
    let mut inline: [&[u8]; INLINE_ARGS] = [&[]; INLINE_ARGS];
    if argv.len() <= INLINE_ARGS {
        for (slot, a) in inline.iter_mut().zip(argv.iter()) {
            *slot = a.bytes();
        }
        f(inline.get(..argv.len()).unwrap_or_default())
    } else {
        let heap: Vec<&[u8]> = argv.iter().map(Arg::bytes).collect();
        f(&heap)
    }
}

/// The handler Redis calls for limiter command `C` (registered in `lib.rs`).
pub struct Limiter<C>(PhantomData<C>);

impl<C: LimiterCommand> Handler for Limiter<C> {
    fn call(ctx: &Context, argv: Argv<'_>) -> Result<(), RlError> {
        with_bytes(argv, |bytes| run::<C>(ctx, argv, bytes))
    }
}

/// The shared flow of every limiter command, on the call's arguments and their bytes.
///
/// # Errors
/// Argument errors, WRONGTYPE, or overflow; on error nothing is written.
pub fn run<C: LimiterCommand>(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
) -> Result<(), RlError> {
    let parsed = C::parse(bytes)?;
    let key_name = argv.get(1).ok_or(RlError::Arity)?;
    // The clock is read once per command; `AT` replaces it.
    let eval = evaluation_time(ctx, parsed.opts.at)?;
    let now = eval.now;
    let req = parsed.opts.request(now);

    let mut key = LimiterKey::open(ctx, key_name);
    let mut existing = key.limiter(C::NAME)?;
    let outcome = flow::apply::<C::Algo>(
        existing.as_deref_mut(),
        &parsed.params,
        &req,
        config::dedup_max(),
    )
    .map_err(RlError::from)?;
    let fate = Fate::of(
        ctx,
        existing,
        outcome.write,
        outcome.expires_at,
        Some(key_name),
    );
    let d = Decision::from(outcome.verdict);
    let tail = Tail {
        event: C::EVENT,
        stats: C::stats(),
    };
    let propagate = Propagate::Value {
        argv,
        at_index: parsed.opts.at_index,
        now,
    };
    let granted = d.granted > 0 || (req.cost == 0 && !outcome.blocked);
    finish(
        ctx,
        tail,
        eval,
        &mut [Touched::new(key, key_name, fate)],
        propagate,
        granted,
        |ctx| C::reply(ctx, &d, &outcome.verdict),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_kept_until_the_bound_only_when_later() {
        let exact = Evaluation::exact(5_000_000);
        assert_eq!(
            exact.expiry(7_000_001),
            Expiry {
                ms: 7_001,
                kept: false
            }
        );
        let behind = Evaluation {
            now: 5_000_000,
            keep_until: Some(9_000_500),
        };
        // Rounded up like every expiry; kept only when that is a later ms than the state's.
        #[rustfmt::skip]
        let cases: &[(Micros, i64, bool)] = &[
            // fresh at   ms      kept
            (7_000_001,   9_001,  true),
            (9_000_001,   9_001,  false),
            (9_000_999,   9_001,  false),
            (9_001_001,   9_002,  false),
        ];
        for &(fresh_at, ms, kept) in cases {
            assert_eq!(behind.expiry(fresh_at), Expiry { ms, kept }, "{fresh_at}");
        }
    }
}
