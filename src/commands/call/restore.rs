//! RL._RESTORE key payload [PXAT ms]: recreate a limiter from its encoded state.
//! RL._SET key payload [key payload ...]: the same, with the expiry the state implies (how a
//! granted call of small limiters replicates: one pair per key it wrote).
//!
//! AOF rewrite writes one per key (with `aof-use-rdb-preamble no`; Redis appends the key's
//! `PEXPIREAT` itself). Like RESTORE, both are `@admin @dangerous` (and in no category that lets
//! applications rate-limit): replication and AOF loading run them whatever the ACL, clients only
//! as administrators. The payload is validated, a value the module could not have written
//! included (`LimiterState::is_valid`), and a bad one is refused without touching the key.

use redis_module::Context;

use crate::commands::call::args::{Args, parse_u64};
use crate::commands::row::{Command, Run};
use crate::core::LimiterState;
use crate::core::codec;
use crate::core::few::Few;
use crate::core::time::expiry_ms;
use crate::docs::{ArgDoc, ArgType, CommandDoc, KEY, arg, opt};
use crate::error::RlError;
use crate::ffi::command::{Arg, Argv};
use crate::ffi::key::{Holding, LimiterKey};
use crate::ffi::reply;

/// RL._RESTORE's COMMAND DOCS.
pub const RESTORE_DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"Internal: recreate a limiter from its encoded state (AOF rewrite)",
    complexity: c"O(N) where N is the size of the payload",
    args: &[
        KEY,
        arg(c"payload", ArgType::String),
        opt(c"unix-time-milliseconds", ArgType::UnixTime, c"PXAT"),
    ],
    shared_options: false,
};

/// RL._SET's COMMAND DOCS.
pub const SET_DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"Internal: store a limiter's encoded state, expiring when the state says (how a granted call replicates)",
    complexity: c"O(N) where N is the size of the payload",
    args: &[
        KEY,
        arg(c"payload", ArgType::String),
        ArgDoc {
            optional: true,
            multiple: true,
            ..arg(c"key-and-payload", ArgType::String)
        },
    ],
    shared_options: false,
};

/// RL._RESTORE key payload [PXAT ms]
pub struct Restore;

impl Run for Restore {
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        let bytes: Vec<&[u8]> = argv.iter().map(Arg::bytes).collect();
        run(ctx, argv, &bytes)
    }
}

/// RL._RESTORE on the call's arguments and their bytes; on `Ok` it has replied.
///
/// # Errors
/// Arity, a bad payload or PXAT, WRONGTYPE for a key of a non-module type.
fn run(ctx: &Context, argv: Argv<'_>, bytes: &[&[u8]]) -> Result<(), RlError> {
    let mut a = Args::new(bytes);
    let _name = a.required()?;
    let _key = a.required()?;
    let payload = a.required()?;
    let expire_at = match a.next() {
        None => None,
        Some(opt) if opt.eq_ignore_ascii_case(b"PXAT") => {
            let ms = a.value_of("PXAT")?;
            Some(parse_u64(ms).ok_or(RlError::NotNonNegative("PXAT"))?)
        }
        Some(other) => {
            return Err(RlError::UnknownOption(crate::commands::call::args::quote(
                other,
            )));
        }
    };
    if a.next().is_some() {
        return Err(RlError::Syntax("too many arguments"));
    }
    let state = codec::decode(payload).ok_or(RlError::Payload)?;
    let name = argv.get(1).ok_or(RlError::Arity)?;
    // `parse_u64` bounds PXAT to i64::MAX, so the conversion never caps.
    let expire_at = expire_at.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
    store(ctx, name, state, expire_at)
}

/// Store `state` under `name` (not over a key of another type), expiring at `expire_at` ms when
/// given, and pass the call on verbatim: the apply step of RL._RESTORE and RL._SET.
fn store(
    ctx: &Context,
    name: Arg<'_>,
    state: LimiterState,
    expire_at: Option<i64>,
) -> Result<(), RlError> {
    put(ctx, name, state, expire_at)?;
    ctx.replicate_verbatim();
    reply::ok(ctx);
    Ok(())
}

/// Store `state` under `name` (not over a key of another type), expiring at `expire_at` ms when
/// given.
fn put(
    ctx: &Context,
    name: Arg<'_>,
    state: LimiterState,
    expire_at: Option<i64>,
) -> Result<(), RlError> {
    let mut key = LimiterKey::open(ctx, name);
    if let Holding::Other | Holding::Stream = key.holding() {
        return Err(RlError::WrongType);
    }
    key.set(state)?;
    if let Some(ms) = expire_at {
        key.set_expire_at(ms);
    }
    Ok(())
}

/// The command a limiter's new value replicates as.
pub const SET_COMMAND: &std::ffi::CStr = c"rl._set";

/// RL._SET key payload [key payload ...]: store each encoded value, expiring when it says (when
/// the limiter is fresh again and its `DEDUP` ids are forgotten), as the master's call that wrote
/// it did. Several pairs are how RL.ALL propagates its keys, in one command: every payload and
/// key is checked before any key is written.
pub struct Set;

impl Run for Set {
    /// # Errors
    /// Arity, a bad payload, WRONGTYPE for a key of a non-module type; nothing is written then.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() < 3 || argv.len().is_multiple_of(2) {
            return Err(RlError::Arity);
        }
        let mut pairs: Few<(Arg<'_>, LimiterState)> = Few::with_capacity(argv.len() / 2);
        let mut args = argv.iter().skip(1);
        while let (Some(name), Some(payload)) = (args.next(), args.next()) {
            let state = codec::decode(payload.bytes()).ok_or(RlError::Payload)?;
            pairs.push((name, state));
        }
        // One pair is checked as it is written; several all before the first is.
        for (name, _) in pairs.iter().filter(|_| argv.len() > 3) {
            let mut key = LimiterKey::open(ctx, *name);
            if let Holding::Other | Holding::Stream = key.holding() {
                return Err(RlError::WrongType);
            }
        }
        for (name, state) in pairs {
            // As the write that made it: never before its last update.
            let expires_at = expiry_ms(state.expiry(state.last_update));
            put(ctx, name, state, Some(expires_at))?;
        }
        ctx.replicate_verbatim();
        reply::ok(ctx);
        Ok(())
    }
}
