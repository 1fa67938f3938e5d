//! RL.INFO key: describe any limiter key without changing it.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::commands::decision_fields;
use crate::error::RlError;
use crate::ffi::clock::server_now;
use crate::ffi::command::Arg;
use crate::ffi::key::{Holding, LimiterKey};
use crate::ffi::reply::{self, Resp2};

/// RL.INFO key
///
/// Replies `algorithm`, the stored parameters, the limiter reply at the current time (as if
/// `PEEK COST 0`), the number of remembered `DEDUP` ids and `ttl_ms`; a flat array under RESP2,
/// a map under RESP3; nil for a missing key.
///
/// # Errors
/// Arity, WRONGTYPE for a key of another type.
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 {
        return Err(RlError::Arity.into());
    }
    let name = args.get(1).ok_or(RlError::Arity)?;
    let mut key = LimiterKey::open_read(ctx, Arg::from(name));
    let ttl_ms = key.ttl_ms();
    let state = match key.holding() {
        Holding::Empty => return Ok(RedisValue::Null),
        Holding::Other => return Err(RlError::WrongType.into()),
        Holding::Limiter(value) => value.state().ok_or(RlError::Payload)?,
    };
    let decision = state.peek(server_now()).map_err(RlError::from)?;
    let mut fields: Vec<(&'static str, RedisValue)> = Vec::with_capacity(12);
    fields.push((
        "algorithm",
        RedisValue::BulkString(state.kind().name().to_string()),
    ));
    for (param, value) in state.describe() {
        fields.push((
            param,
            RedisValue::Integer(i64::try_from(value).unwrap_or(i64::MAX)),
        ));
    }
    let live = state.describe_live(server_now());
    // No name twice (a RESP3 map key must be unique): a parameter named like a reply field
    // (FIXED's `limit`) holds the same value, and is shown once, as the parameter.
    for (name, value) in decision_fields(&decision) {
        if !fields.iter().any(|(n, _)| *n == name) {
            fields.push((name, value));
        }
    }
    for (name, value) in live {
        fields.push((
            name,
            RedisValue::Integer(i64::try_from(value).unwrap_or(i64::MAX)),
        ));
    }
    fields.push((
        "dedup_ids",
        RedisValue::Integer(i64::try_from(state.dedup.len()).unwrap_or(i64::MAX)),
    ));
    fields.push(("ttl_ms", RedisValue::Integer(ttl_ms)));
    Ok(reply::fields(
        ctx,
        Resp2::NamesAndValues,
        fields.into_iter(),
    ))
}
