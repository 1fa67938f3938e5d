//! RL._RESTORE key payload [PXAT ms]: recreate a limiter from its encoded state.
//! RL._SET key payload: the same, with the expiry the state implies (how a granted call of a
//! small limiter replicates).
//!
//! AOF rewrite writes one per key (with `aof-use-rdb-preamble no`; Redis appends the key's
//! `PEXPIREAT` itself). Like RESTORE, both are `@admin @dangerous` (and in no category that lets
//! applications rate-limit): replication and AOF loading run them whatever the ACL, clients only
//! as administrators. The payload is validated, a value the module could not have written
//! included (`LimiterState::is_valid`), and a bad one is refused without touching the key.

use redis_module::Context;

use crate::commands::args::{Args, parse_u64};
use crate::commands::row::{Command, Run};
use crate::core::LimiterState;
use crate::core::codec;
use crate::core::time::expiry_ms;
use crate::docs::{ArgType, CommandDoc, KEY, arg, opt};
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
    arity: 3,
    summary: c"Internal: store a limiter's encoded state, expiring when the state says (how a granted call replicates)",
    complexity: c"O(N) where N is the size of the payload",
    args: &[KEY, arg(c"payload", ArgType::String)],
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
            return Err(RlError::UnknownOption(crate::commands::args::quote(other)));
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
    let mut key = LimiterKey::open(ctx, name);
    if let Holding::Other | Holding::Stream = key.holding() {
        return Err(RlError::WrongType);
    }
    key.set(state)?;
    if let Some(ms) = expire_at {
        key.set_expire_at(ms);
    }
    drop(key);
    ctx.replicate_verbatim();
    reply::ok(ctx);
    Ok(())
}

/// The command a limiter's new value replicates as.
pub const SET_COMMAND: &std::ffi::CStr = c"rl._set";

/// RL._SET key payload: store the encoded value, expiring when it says (when the limiter is
/// fresh again and its `DEDUP` ids are forgotten), as the master's call that wrote it did.
pub struct Set;

impl Run for Set {
    /// # Errors
    /// Arity, a bad payload, WRONGTYPE for a key of a non-module type.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        let (3, Some(name), Some(payload)) = (argv.len(), argv.get(1), argv.get(2)) else {
            return Err(RlError::Arity);
        };
        run_set(ctx, name, payload.bytes())
    }
}

/// RL._SET of `payload` at key `name`; on `Ok` it has replied.
fn run_set(ctx: &Context, name: Arg<'_>, payload: &[u8]) -> Result<(), RlError> {
    let state = codec::decode(payload).ok_or(RlError::Payload)?;
    // As the write that made it: never before its last update.
    let expires_at = expiry_ms(state.expiry(state.last_update));
    store(ctx, name, state, Some(expires_at))
}
