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

/// Reply with the error `text` through a path that cannot panic, whatever the text: it is made
/// printable ASCII (each other byte written `\xNN`, so no NUL, CR or LF reaches Redis) into our
/// own NUL-terminated buffer for `RedisModule_ReplyWithError`. The crate's error replies go
/// through a conversion that panics on characters U+xx00, so errors never take that path.
pub fn error(ctx: &Context, text: &str) {
    let mut buf = crate::error::printable(text.as_bytes()).into_bytes();
    if buf.is_empty() {
        buf.extend_from_slice(b"ERR");
    }
    buf.push(0);
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(reply_with_error) = unsafe { raw::RedisModule_ReplyWithError } {
        // SAFETY: `ctx` is the command's context; `buf` is NUL-terminated with no NUL before the
        // end, and Redis copies it (it formats it with "-%s", so `%` in it is plain text).
        unsafe { reply_with_error(ctx.ctx, buf.as_ptr().cast::<c_char>()) };
    }
}
