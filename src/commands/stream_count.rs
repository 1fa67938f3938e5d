//! RL.STREAMCOUNT key window [ADD n] [LIMIT l] [AT t]
//!
//! A sliding-window counter on a real Redis stream, in the layout of the classic Lua script (one
//! entry per accepted call, field `count`), so existing keys keep working. The sum is read with
//! the stream iterator; the writes are XADD with an explicit ID, XTRIM MINID ~ and PEXPIREAT,
//! each replicated by Redis as the exact effect (the approximate trim is rewritten by Redis to
//! the entries it really removed), so replicas and the AOF never depend on the master's clock.

use redis_module::{CallOptionsBuilder, CallResult, Context, RedisResult, RedisString, RedisValue};

use crate::commands::args::{Args, at_time, duration, non_negative, once, positive, quote};
use crate::commands::evaluation_time;
use crate::core::Micros;
use crate::core::stream_count::{Plan, next_id, plan, window_start_ms};
use crate::core::time::ceil_ms;
use crate::error::{RlError, printable};
use crate::ffi::stream::{Scan, ScanError, scan};
use crate::stats;

/// Parsed arguments of RL.STREAMCOUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCountRequest {
    pub window: Micros,
    pub add: u64,
    pub limit: Option<u64>,
    pub at: Option<Micros>,
}

impl StreamCountRequest {
    /// Parse the whole argument vector (`args[0]` is the command, `args[1]` the key).
    ///
    /// # Errors
    /// Arity, invalid or repeated options.
    pub fn parse(items: &[&[u8]]) -> Result<Self, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let window = duration(args.required()?, "window")?;
        let mut req = StreamCountRequest {
            window,
            add: 1,
            limit: None,
            at: None,
        };
        let mut seen_add = false;
        while let Some(token) = args.next() {
            match token.to_ascii_uppercase().as_slice() {
                b"ADD" => {
                    once(&mut seen_add, "ADD")?;
                    req.add = non_negative(args.value_of("ADD")?, "ADD")?;
                }
                b"LIMIT" => {
                    if req.limit.is_some() {
                        return Err(RlError::Duplicate("LIMIT"));
                    }
                    req.limit = Some(positive(args.value_of("LIMIT")?, "LIMIT")?);
                }
                b"AT" => {
                    if req.at.is_some() {
                        return Err(RlError::Duplicate("AT"));
                    }
                    req.at = Some(at_time(args.value_of("AT")?)?);
                }
                _ => return Err(RlError::UnknownOption(quote(token))),
            }
        }
        Ok(req)
    }
}

fn scan_error(e: ScanError) -> RlError {
    match e {
        ScanError::WrongType => RlError::WrongType,
        ScanError::BadCount(ms, seq) => RlError::BadStreamEntry(format!("{ms}-{seq}")),
        ScanError::Overflow => RlError::Overflow,
    }
}

/// Run a write through Redis with replication of its effect (`!`), errors as values.
fn call(ctx: &Context, cmd: &str, args: &[&[u8]]) -> Result<(), String> {
    let opts = CallOptionsBuilder::new()
        .replicate()
        .errors_as_replies()
        .build();
    let res: CallResult = ctx.call_ext(cmd, &opts, args);
    // The server's error, as printable ASCII whatever its bytes.
    res.map(|_| ()).map_err(|e| printable(e.as_bytes()))
}

/// RL.STREAMCOUNT key window [ADD n] [LIMIT l] [AT t]
///
/// # Errors
/// Argument errors, WRONGTYPE, an entry whose `count` is not an integer (named by its ID).
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let bytes: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    let req = StreamCountRequest::parse(&bytes)?;
    let key = args.get(1).ok_or(RlError::Arity)?;
    let key_bytes = key.as_slice();
    let now = evaluation_time(ctx, req.at)?;
    let from_ms = window_start_ms(now, req.window);

    let (total, last) = match scan(ctx, key, from_ms).map_err(scan_error)? {
        Scan::Missing => (0, None),
        Scan::Stream { total, last } => (total, last),
    };
    let after = match plan(total, req.add, req.limit).ok_or(RlError::Overflow)? {
        Plan::Deny => {
            stats::STREAMCOUNT.record(false);
            return Ok(RedisValue::Integer(-1));
        }
        Plan::Report(total) => {
            stats::STREAMCOUNT.record(true);
            return Ok(RedisValue::Integer(
                i64::try_from(total).unwrap_or(i64::MAX),
            ));
        }
        Plan::Append(after) => after,
    };

    let add = req.add.to_string();
    let explicit = next_id(now, last).map(|(ms, seq)| format!("{ms}-{seq}"));
    // An explicit ID fails only if a deleted entry left the stream's last ID higher than its
    // last entry's; then `*` picks the next ID after it.
    let appended = explicit.is_some_and(|id| {
        call(
            ctx,
            "XADD",
            &[key_bytes, id.as_bytes(), b"count", add.as_bytes()],
        )
        .is_ok()
    });
    if !appended {
        call(ctx, "XADD", &[key_bytes, b"*", b"count", add.as_bytes()]).map_err(RlError::Server)?;
    }
    let from = from_ms.to_string();
    call(ctx, "XTRIM", &[key_bytes, b"MINID", b"~", from.as_bytes()]).map_err(RlError::Server)?;
    let expire_at = ceil_ms(now.saturating_add(req.window)).to_string();
    call(ctx, "PEXPIREAT", &[key_bytes, expire_at.as_bytes()]).map_err(RlError::Server)?;
    stats::STREAMCOUNT.record(true);
    Ok(RedisValue::Integer(
        i64::try_from(after).unwrap_or(i64::MAX),
    ))
}
