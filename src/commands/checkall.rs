//! RL.CHECKALL numkeys key [key ...] limiter [limiter ...] [COST n] \[DETAIL\] [AT t]: the reply
//! the same RL.ALL call with `PEEK` would give ("would this request pass every limit?"),
//! read-only (it runs on replicas): the keys are opened for reading and copied, RL.ALL's own
//! path (`core::multi::apply_charged`) runs on the copies as a `PEEK`, and nothing is written
//! or propagated. Limiters take `CHARGE n` and `NAME name` as in RL.ALL.
//!
//! A concurrency limiter (`CONCURRENCY limit lease`) is checked as a new lease (RL.CHECKALL
//! takes no `DEDUP` id), as RL.CHECK checks it.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::commands::all::{AllRequest, declare_keys, multi_error, reply_detail};
use crate::commands::{evaluation_time, limiter_reply};
use crate::core::dedup::DedupId;
use crate::core::limiter::{Decision, Request};
use crate::core::multi::{Slot, apply_charged};
use crate::error::RlError;
use crate::ffi::key::LimiterKey;
use crate::stats;

/// The shared options RL.CHECKALL takes.
const OPTIONS: &[&[u8]] = &[b"COST", b"DETAIL", b"AT"];

/// The lease id a concurrency limiter is checked under: one no call holds (ids are hashes of
/// the client's bytes), so the check is that of a new lease.
const CHECK_LEASE: DedupId = DedupId(u128::MAX);

/// Parse RL.CHECKALL's arguments: RL.ALL's, with only `COST`, `DETAIL` and `AT`.
///
/// # Errors
/// As RL.ALL's parser; any other shared option is unknown.
pub fn parse<'a>(items: &'a [&'a [u8]]) -> Result<AllRequest<'a>, RlError> {
    let parsed = AllRequest::parse_with(items, OPTIONS)?;
    let specs = parsed
        .specs
        .into_iter()
        .map(|s| s.bind_call(Some(CHECK_LEASE), false))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(AllRequest { specs, ..parsed })
}

/// RL.CHECKALL numkeys key [key ...] limiter [limiter ...] [COST n] \[DETAIL\] [AT t]
///
/// # Errors
/// Argument errors, WRONGTYPE naming the key (a stream key: an error naming RL.STREAMCOUNT).
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let bytes: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    if declare_keys(ctx, &bytes) {
        return Ok(RedisValue::NoReply);
    }
    let parsed = parse(&bytes)?;
    // Bounded like the call it previews: an AT RL.ALL would refuse is refused here.
    let now = evaluation_time(ctx, parsed.opts.at)?.now;
    let req = Request {
        peek: true,
        ..parsed.opts.request(now)
    };
    let mut copies = Vec::with_capacity(parsed.keys.len());
    for name in args.iter().skip(2).take(parsed.keys.len()) {
        let mut key = LimiterKey::open_read(ctx, name);
        copies.push(key.limiter_copy("rl.checkall")?);
    }
    let mut slots: Vec<Slot<'_>> = copies
        .iter_mut()
        .map(|c| match c {
            Some(state) => Slot::Existing(state),
            None => Slot::New(None),
        })
        .collect();
    let outcome = apply_charged(&mut slots, &parsed.specs, &parsed.charges, &req, 0)
        .map_err(|e| multi_error(e, &parsed.keys))?;
    let d = Decision::from(outcome.verdict);
    stats::CHECKALL.record(outcome.denied_by.is_none());
    if parsed.opts.detail {
        reply_detail(ctx, &d, &parsed, &outcome);
        return Ok(RedisValue::NoReply);
    }
    Ok(limiter_reply(ctx, &d))
}
