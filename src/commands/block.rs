//! RL.BLOCK key d [AT t] and RL.UNBLOCK key: the penalty box by hand, on any limiter key
//! (`core::flow::block`, `core::flow::unblock`).

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::commands::args::{Args, Options, duration};
use crate::commands::{evaluation_time, open_limiter, replicate_expiry, replicate_with_at};
use crate::core::Micros;
use crate::core::flow;
use crate::core::time::{ceil_ms, expiry_ms};
use crate::error::RlError;
use crate::ffi;
use crate::ffi::clock::server_now;
use crate::ffi::command::Arg;
use crate::ffi::notify::notify;
use crate::stats;

/// RL.BLOCK's parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRequest {
    /// How long, in µs.
    pub d: Micros,
    pub opts: Options,
}

impl BlockRequest {
    /// Parse the whole argument vector (`args[0]` is the command name, `args[1]` the key).
    ///
    /// # Errors
    /// Arity, a bad duration, options other than `AT`.
    pub fn parse(items: &[&[u8]]) -> Result<Self, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let d = duration(args.required()?, "duration")?;
        let opts = Options::parse_only(&mut args, &[b"AT"], |_, _| Ok(false))?;
        Ok(BlockRequest { d, opts })
    }
}

/// RL.BLOCK key d [AT t]
///
/// Blocks the key until `max(current block end, now + d)`; a missing key becomes a key holding
/// only the block. Replies the block's remaining ms.
///
/// # Errors
/// Argument errors, WRONGTYPE.
pub fn run_block(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let bytes: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    let req = BlockRequest::parse(&bytes)?;
    let name = args.get(1).ok_or(RlError::Arity)?;
    let eval = evaluation_time(ctx, req.opts.at)?;
    let now = eval.now;
    let mut key = open_limiter(ctx, name, "RL.BLOCK")?;
    let (expires_at, until, at) = if let Some(mut state) = key.limiter()? {
        let (expires_at, until) = flow::block(&mut state, now, req.d);
        (expires_at, until, state.last_update)
    } else {
        let state = flow::new_block(now, req.d);
        let until = state.extras.block_until();
        key.set(state)?;
        (until, until, now)
    };
    let expiry = eval.expiry(expires_at);
    key.set_expire_at(expiry.ms);
    drop(key);
    replicate_with_at(ctx, c"rl.block", &args, req.opts.at_index, now);
    replicate_expiry(ctx, Arg::from(name), expiry);
    notify(ctx, c"rl.block", name);
    stats::BLOCK.record(true);
    Ok(RedisValue::Integer(ceil_ms(until.saturating_sub(at))))
}

/// RL.UNBLOCK key
///
/// Removes the key's block (a key holding only a block is deleted). Replies 1 if a block was
/// in force, else 0.
///
/// # Errors
/// Arity, WRONGTYPE.
pub fn run_unblock(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 {
        return Err(RlError::Arity.into());
    }
    let name = args.get(1).ok_or(RlError::Arity)?;
    let mut key = open_limiter(ctx, name, "RL.UNBLOCK")?;
    let Some(mut state) = key.limiter()? else {
        stats::UNBLOCK.record(false);
        return Ok(RedisValue::Integer(0));
    };
    // The reply says whether a block was in force; the state drops any stored block, so a
    // replica applies the same change whatever its clock.
    let in_force = state
        .extras
        .blocked_at(state.last_update.max(server_now()))
        .is_some();
    let (had, only_block) = flow::unblock(&mut state);
    if !had {
        stats::UNBLOCK.record(false);
        return Ok(RedisValue::Integer(0));
    }
    let expires_at = state.expires_at();
    // Kept (a changed inline value is encoded again) before the key is touched.
    drop(state);
    if only_block {
        key.delete();
    } else {
        // The limiter's own expiry, an absolute time both sides compute alike.
        key.set_expire_at(expiry_ms(expires_at.max(1)));
    }
    drop(key);
    ffi::replicate::replicate(ctx, c"rl.unblock", &[name]);
    notify(ctx, c"rl.unblock", name);
    stats::UNBLOCK.record(in_force);
    Ok(RedisValue::Integer(i64::from(in_force)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<BlockRequest, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        BlockRequest::parse(&bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn block_parses_duration_and_at() {
        let r = parse(&["rl.block", "k", "1h", "at", "1000"]).unwrap();
        assert_eq!(
            (r.d, r.opts.at, r.opts.at_index),
            (3_600_000_000, Some(1_000_000), Some(3))
        );
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.block", "k"],                 "ERR wrong number of arguments"),
            (&["rl.block", "k", "0"],            "ERR invalid duration '0' for duration"),
            (&["rl.block", "k", "1x"],           "ERR invalid duration '1x' for duration"),
            (&["rl.block", "k", "1s", "COST", "1"], "ERR unknown option 'COST'"),
            (&["rl.block", "k", "1s", "AT"],     "ERR syntax error, AT needs a value"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
