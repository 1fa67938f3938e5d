//! Replies whose shape depends on the protocol: a RESP3 map with fields in a fixed order (the
//! crate's map replies come from hash maps, in no useful order) or a RESP2 array.

use std::os::raw::{c_char, c_int, c_long};

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
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(flags) = (unsafe { raw::RedisModule_GetContextFlags }) else {
        return false;
    };
    // SAFETY: `ctx` is the command's context.
    let flags = unsafe { flags(ctx.ctx) };
    ContextFlags::from_bits_truncate(flags).contains(ContextFlags::FLAGS_RESP3)
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

/// Reply with `values` as integers: under RESP3 a map with `names` (when given) as its keys,
/// else an array of the values alone. One module API call per value, nothing allocated.
pub fn integers<const N: usize>(
    ctx: &Context,
    names: Option<&[&'static str; N]>,
    values: [i64; N],
) {
    // SAFETY: copying function pointers out of the API table, filled in at load.
    let long_long = unsafe { raw::RedisModule_ReplyWithLongLong };
    // SAFETY: as above.
    let buffer = unsafe { raw::RedisModule_ReplyWithStringBuffer };
    let Some(long_long) = long_long else {
        return;
    };
    let len = c_long::try_from(N).unwrap_or(0);
    let names = names.filter(|_| is_resp3(ctx));
    if names.is_some() {
        raw::reply_with_map(ctx.ctx, len);
    } else {
        raw::reply_with_array(ctx.ctx, len);
    }
    for (i, value) in values.into_iter().enumerate() {
        if let (Some(name), Some(buffer)) = (names.and_then(|n| n.get(i)), buffer) {
            // SAFETY: `ctx` is the command's context; `name` is `name.len()` readable bytes,
            // which Redis copies.
            unsafe { buffer(ctx.ctx, name.as_ptr().cast::<c_char>(), name.len()) };
        }
        // SAFETY: `ctx` is the command's context.
        unsafe { long_long(ctx.ctx, value) };
    }
}

/// Start an array reply of `len` elements; the caller replies each element next.
pub fn array(ctx: &Context, len: usize) {
    raw::reply_with_array(ctx.ctx, c_long::try_from(len).unwrap_or(0));
}

/// Reply with one integer.
pub fn integer(ctx: &Context, value: i64) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(long_long) = unsafe { raw::RedisModule_ReplyWithLongLong } {
        // SAFETY: `ctx` is the command's context.
        unsafe { long_long(ctx.ctx, value) };
    }
}

/// Reply `+OK`.
pub fn ok(ctx: &Context) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(simple) = unsafe { raw::RedisModule_ReplyWithSimpleString } {
        // SAFETY: `ctx` is the command's context; the text is NUL-terminated, and Redis copies it.
        unsafe { simple(ctx.ctx, c"OK".as_ptr()) };
    }
}

/// Reply with nil (RESP2's null bulk string, RESP3's null).
pub fn null(ctx: &Context) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(null) = unsafe { raw::RedisModule_ReplyWithNull } {
        // SAFETY: `ctx` is the command's context.
        unsafe { null(ctx.ctx) };
    }
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

/// The detailed reply's fields: the limiter reply's five (`commands::DECISION_NAMES`), then
/// `denied_by`, `reason` and `limiters` (SPEC "The detailed reply").
pub const DETAIL_NAMES: [&str; 8] = [
    "granted",
    "limit",
    "remaining",
    "retry_after_ms",
    "reset_after_ms",
    "denied_by",
    "reason",
    "limiters",
];

/// The fields of one limiter's entry in the detailed reply, in order (`policy` last, when the
/// entry has one).
pub const ENTRY_NAMES: [&str; 10] = [
    "name",
    "key",
    "cost",
    "granted",
    "limit",
    "remaining",
    "retry_after_ms",
    "reset_after_ms",
    "window_ms",
    "policy",
];

/// One limiter's entry in the detailed reply.
#[derive(Debug, Clone, Copy)]
pub struct DetailEntry<'a> {
    pub name: &'a [u8],
    pub key: &'a [u8],
    /// `cost`, `granted`, `limit`, `remaining`, `retry_after_ms`, `reset_after_ms`,
    /// `window_ms`.
    pub values: [i64; 7],
    /// The named policy the limiter comes from, if any.
    pub policy: Option<&'a [u8]>,
}

/// The detailed reply: under RESP3 a map of the limiter reply's `values`, then
/// `denied_by` (null when granted), `reason` and `limiters` (one map per entry, `policy` only
/// where there is one); under RESP2 an array of the five values, `denied_by` (nil when granted),
/// `reason` and one nested array holding each entry's values in order (`policy` nil when none).
/// The entries are made as they are sent (nothing allocated).
pub fn detail<'a>(
    ctx: &Context,
    values: [i64; 5],
    denied_by: Option<&[u8]>,
    reason: &str,
    entries: impl ExactSizeIterator<Item = DetailEntry<'a>>,
) {
    let Some(r) = Replier::new(ctx) else {
        return;
    };
    let resp3 = is_resp3(ctx);
    let field = |name: &str| {
        if resp3 {
            r.bulk(name.as_bytes());
        }
    };
    if resp3 {
        r.map(8);
    } else {
        r.array(8);
    }
    let [g, l, rem, retry, reset, n_denied, n_reason, n_limiters] = DETAIL_NAMES;
    for (name, value) in [g, l, rem, retry, reset].into_iter().zip(values) {
        field(name);
        r.integer(value);
    }
    field(n_denied);
    match denied_by {
        Some(d) => r.bulk(d),
        None => r.null(),
    }
    field(n_reason);
    r.bulk(reason.as_bytes());
    field(n_limiters);
    r.array(entries.len());
    for e in entries {
        let len = if resp3 && e.policy.is_none() { 9 } else { 10 };
        if resp3 {
            r.map(len);
        } else {
            r.array(len);
        }
        let mut names = ENTRY_NAMES.iter();
        let mut next = || {
            if let Some(n) = names.next() {
                field(n);
            }
        };
        next();
        r.bulk(e.name);
        next();
        r.bulk(e.key);
        for v in e.values {
            next();
            r.integer(v);
        }
        match e.policy {
            Some(p) => {
                next();
                r.bulk(p);
            }
            None if !resp3 => r.null(),
            None => {}
        }
    }
}

/// The reply calls of a reply of many parts, their functions read out of the API table once.
struct Replier {
    ctx: *mut raw::RedisModuleCtx,
    long_long: unsafe extern "C" fn(*mut raw::RedisModuleCtx, std::os::raw::c_longlong) -> c_int,
    buffer: unsafe extern "C" fn(*mut raw::RedisModuleCtx, *const c_char, usize) -> c_int,
    null: unsafe extern "C" fn(*mut raw::RedisModuleCtx) -> c_int,
    array: unsafe extern "C" fn(*mut raw::RedisModuleCtx, c_long) -> c_int,
    map: unsafe extern "C" fn(*mut raw::RedisModuleCtx, c_long) -> c_int,
}

impl Replier {
    /// The reply calls of `ctx` (a command's context); `None` on a server without them all
    /// (never one the module loads on: RESP3 maps exist since Redis 7.0, the oldest it takes).
    fn new(ctx: &Context) -> Option<Replier> {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let long_long = unsafe { raw::RedisModule_ReplyWithLongLong };
        // SAFETY: as above.
        let buffer = unsafe { raw::RedisModule_ReplyWithStringBuffer };
        // SAFETY: as above.
        let null = unsafe { raw::RedisModule_ReplyWithNull };
        // SAFETY: as above.
        let array = unsafe { raw::RedisModule_ReplyWithArray };
        // SAFETY: as above.
        let map = unsafe { raw::RedisModule_ReplyWithMap };
        Some(Replier {
            ctx: ctx.ctx,
            long_long: long_long?,
            buffer: buffer?,
            null: null?,
            array: array?,
            map: map?,
        })
    }

    fn integer(&self, value: i64) {
        // SAFETY: `ctx` is the command's context.
        unsafe { (self.long_long)(self.ctx, value) };
    }

    fn bulk(&self, bytes: &[u8]) {
        // SAFETY: `ctx` is the command's context; `bytes` is `bytes.len()` readable bytes, which
        // Redis copies.
        unsafe { (self.buffer)(self.ctx, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
    }

    fn null(&self) {
        // SAFETY: `ctx` is the command's context.
        unsafe { (self.null)(self.ctx) };
    }

    /// Start an array of `len` elements.
    fn array(&self, len: usize) {
        // SAFETY: `ctx` is the command's context.
        unsafe { (self.array)(self.ctx, c_long::try_from(len).unwrap_or(0)) };
    }

    /// Start a map of `len` pairs.
    fn map(&self, len: usize) {
        // SAFETY: `ctx` is the command's context.
        unsafe { (self.map)(self.ctx, c_long::try_from(len).unwrap_or(0)) };
    }
}

/// Reply with a bulk string of `bytes` (binary-safe: Redis copies the bytes as they are).
pub fn bulk(ctx: &Context, bytes: &[u8]) {
    raw::reply_with_string_buffer(ctx.ctx, bytes.as_ptr().cast::<c_char>(), bytes.len());
}
