//! RL.INFO key: describe any limiter key without changing it.

use redis_module::{Context, RedisValue};

use crate::commands::decision_fields;
use crate::commands::row::{Command, Run};
use crate::core::LimiterState;
use crate::core::limiter::InfoValue;
use crate::core::time::ceil_ms;
use crate::docs::{CommandDoc, KEY};
use crate::error::RlError;
use crate::ffi::clock::server_now;
use crate::ffi::command::Argv;
use crate::ffi::key::{Holding, LimiterKey};
use crate::ffi::reply::{self, Resp2};
use crate::ffi::stream::StreamKey;

/// RL.INFO's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: 2,
    summary: c"Describe a limiter key: algorithm, parameters, current state and TTL",
    complexity: c"O(1); O(log N) on a concurrency key, where N is the number of leases held",
    args: &[KEY],
    shared_options: false,
};

/// RL.INFO key
///
/// Replies `algorithm`, the stored parameters, the limiter reply at the current time (as if
/// `PEEK COST 0`, a block honoured), `blocked_ms` (0 when not blocked), the number of
/// remembered `DEDUP` ids and `ttl_ms`; a flat array under RESP2, a map under RESP3; nil for a
/// missing key. A key holding only a block (`RL.BLOCK` on a missing key) has `algorithm none`
/// and no parameters or limiter reply. A stream key of RL.STREAMCOUNT is described as
/// `algorithm streamcount`, its `entries` and `ttl_ms` (its total needs a window, which the key
/// does not hold).
pub struct Info;

impl Run for Info {
    /// # Errors
    /// Arity, WRONGTYPE for a key of another type.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() != 2 {
            return Err(RlError::Arity);
        }
        let name = argv.get(1).ok_or(RlError::Arity)?;
        let mut key = LimiterKey::open_read(ctx, name);
        let ttl_ms = key.ttl_ms();
        if matches!(key.holding(), Holding::Stream) {
            drop(key);
            let entries = StreamKey::open(ctx, name, false).len();
            let fields = [
                ("algorithm", RedisValue::BulkString("streamcount".into())),
                (
                    "entries",
                    RedisValue::Integer(i64::try_from(entries).unwrap_or(i64::MAX)),
                ),
                ("ttl_ms", RedisValue::Integer(ttl_ms)),
            ];
            reply::fields(ctx, Resp2::NamesAndValues, fields.into_iter());
            return Ok(());
        }
        let Some(mut state) = key.limiter_copy(this.name_str())? else {
            reply::null(ctx);
            return Ok(());
        };
        // Reservations ended unsettled are given back on the copy (nothing is written).
        let now = state.clock(server_now());
        state.catch_up(now).map_err(RlError::from)?;
        describe(ctx, &state, ttl_ms)
    }
}

/// Reply RL.INFO's description of `state`, whose key expires in `ttl_ms`.
///
/// # Errors
/// Overflow (a state at the bounds).
fn describe(ctx: &Context, state: &LimiterState, ttl_ms: i64) -> Result<(), RlError> {
    let now = state.clock(server_now());
    let decision = state.peek(now).map_err(RlError::from)?;
    let int = |v: u64| RedisValue::Integer(i64::try_from(v).unwrap_or(i64::MAX));
    let mut fields: Vec<(&'static str, RedisValue)> = Vec::with_capacity(16);
    fields.push((
        "algorithm",
        RedisValue::BulkString(state.kind().map_or("none", |k| k.name()).to_string()),
    ));
    for (param, value) in state.describe() {
        fields.push((param, int(value)));
    }
    for (name, value) in state.describe_more(now) {
        fields.push((
            name,
            match value {
                InfoValue::Int(v) => RedisValue::Integer(v),
                InfoValue::Text(t) => RedisValue::BulkString(t),
            },
        ));
    }
    if let Some(decision) = decision {
        // No name twice (a RESP3 map key must be unique): a parameter named like a reply field
        // (FIXED's `limit`) holds the same value, and is shown once, as the parameter.
        for (name, value) in decision_fields(&decision) {
            if !fields.iter().any(|(n, _)| *n == name) {
                fields.push((name, value));
            }
        }
    }
    for (name, value) in state.describe_live(now) {
        fields.push((name, int(value)));
    }
    let blocked = state
        .extras
        .blocked_at(now)
        .map_or(0, |until| ceil_ms(until.saturating_sub(now)));
    fields.push(("blocked_ms", RedisValue::Integer(blocked)));
    fields.push(("dedup_ids", int(state.extras.len() as u64)));
    // Reservations (HOLD) not settled yet, where there are any.
    let held = state.extras.pending();
    if held > 0 {
        fields.push(("reservations", int(held as u64)));
    }
    fields.push(("ttl_ms", RedisValue::Integer(ttl_ms)));
    reply::fields(ctx, Resp2::NamesAndValues, fields.into_iter());
    Ok(())
}
