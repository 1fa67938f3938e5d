//! Replies whose shape depends on the protocol: a RESP3 map with fields in a fixed order (the
//! crate's map replies come from hash maps, in no useful order) or a RESP2 array.

use std::os::raw::{c_char, c_long};

use redis_module::{Context, ContextFlags, RedisValue, raw};

/// What a RESP2 client gets for a reply that is a map under RESP3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resp2 {
    /// The values alone, in order (the limiter reply).
    Values,
    /// Names and values, alternating (RL.INFO).
    NamesAndValues,
}

/// Does the calling client speak RESP3?
pub fn is_resp3(ctx: &Context) -> bool {
    ctx.get_flags().contains(ContextFlags::FLAGS_RESP3)
}

/// Reply with `fields` as a map under RESP3, else as an array shaped as `resp2` says. Returns
/// `NoReply`, to be returned by the command.
pub fn fields(
    ctx: &Context,
    resp2: Resp2,
    fields: impl ExactSizeIterator<Item = (&'static str, RedisValue)>,
) -> RedisValue {
    let len = c_long::try_from(fields.len()).unwrap_or(0);
    let names = if is_resp3(ctx) {
        raw::reply_with_map(ctx.ctx, len);
        true
    } else if resp2 == Resp2::NamesAndValues {
        raw::reply_with_array(ctx.ctx, len.saturating_mul(2));
        true
    } else {
        raw::reply_with_array(ctx.ctx, len);
        false
    };
    for (name, value) in fields {
        if names {
            raw::reply_with_string_buffer(ctx.ctx, name.as_ptr().cast::<c_char>(), name.len());
        }
        ctx.reply(Ok(value));
    }
    RedisValue::NoReply
}
