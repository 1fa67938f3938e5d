//! Keyspace and server events that invalidate RL.STREAMCOUNT's running totals
//! (`crate::tally_cache` says which and why), and that wake `RL.ACQUIRE ... WAIT` waiters on
//! a key that may have lost its leases ([`Hooks`], set at load).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

use redis_module::{Context, raw};

use crate::tally_cache;

/// Key events that can change a stream's entries or replace the key: generic (del, rename,
/// move, copy, restore, ...), stream (xadd, xtrim, xdel, xsetid, ...), expired, evicted, and
/// `new` (a key of that name created again, whatever deleted the old one).
const KEY_EVENTS: c_int = raw::REDISMODULE_NOTIFY_GENERIC
    | raw::REDISMODULE_NOTIFY_STREAM
    | raw::REDISMODULE_NOTIFY_EXPIRED
    | raw::REDISMODULE_NOTIFY_EVICTED
    | raw::REDISMODULE_NOTIFY_NEW;

/// Server events after which no tally is trusted.
const SERVER_EVENTS: [u64; 5] = [
    raw::REDISMODULE_EVENT_FLUSHDB,
    raw::REDISMODULE_EVENT_LOADING,
    raw::REDISMODULE_EVENT_SWAPDB,
    raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
    raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
];

/// # Safety
/// Called by Redis with a live context, a NUL-terminated event name and a live key string.
unsafe extern "C" fn on_key_event(
    ctx: *mut raw::RedisModuleCtx,
    _class: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    if event.is_null() || key.is_null() {
        return raw::REDISMODULE_OK as c_int;
    }
    // SAFETY: Redis passes a NUL-terminated event name that lives through this call.
    let event = unsafe { CStr::from_ptr(event) }.to_bytes();
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let db_of = unsafe { raw::RedisModule_GetSelectedDb };
    // SAFETY: as above.
    let ptr_len = unsafe { raw::RedisModule_StringPtrLen };
    let (Some(db_of), Some(ptr_len)) = (db_of, ptr_len) else {
        return raw::REDISMODULE_OK as c_int;
    };
    // SAFETY: `ctx` is the event's context, which Redis selected on the key's database.
    let db = unsafe { db_of(ctx) };
    let mut len = 0usize;
    // SAFETY: `key` is a live string for the duration of this call.
    let p = unsafe { ptr_len(key, &mut len) };
    if p.is_null() {
        return raw::REDISMODULE_OK as c_int;
    }
    // SAFETY: Redis returns `len` readable bytes that live as long as `key`, i.e. this call;
    // the slice is not kept past it.
    let name = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    tally_cache::on_key_event(db, event, name);
    if let Some(hooks) = HOOKS.get() {
        (hooks.key)(&Context::new(ctx), db, name);
    }
    raw::REDISMODULE_OK as c_int
}

/// # Safety
/// Called by Redis for the events subscribed below; nothing it passes is read.
unsafe extern "C" fn on_server_event(
    ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    tally_cache::forget_all();
    if let Some(hooks) = HOOKS.get() {
        (hooks.server)(&Context::new(ctx));
    }
}

/// What else runs on the events above (set once, at load).
pub struct Hooks {
    /// A key event: the context, the key's database and its name.
    pub key: fn(&Context, i32, &[u8]),
    /// A server event.
    pub server: fn(&Context),
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Subscribe to the events above, at load; `hooks` run on them too.
///
/// # Errors
/// The server refused a subscription.
pub fn subscribe(ctx: &Context, hooks: Hooks) -> Result<(), String> {
    let _ = HOOKS.set(hooks);
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let keys = unsafe { raw::RedisModule_SubscribeToKeyspaceEvents };
    // SAFETY: as above.
    let server = unsafe { raw::RedisModule_SubscribeToServerEvent };
    let (Some(keys), Some(server)) = (keys, server) else {
        return Err("event subscriptions are not available".into());
    };
    // SAFETY: `ctx` is the load context; the callback is a plain function for the module's
    // lifetime.
    if unsafe { keys(ctx.ctx, KEY_EVENTS, Some(on_key_event)) } != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to keyspace events".into());
    }
    for id in SERVER_EVENTS {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: as above; `event` is passed by value.
        if unsafe { server(ctx.ctx, event, Some(on_server_event)) } != raw::REDISMODULE_OK as c_int
        {
            return Err(format!("cannot subscribe to server event {id}"));
        }
    }
    Ok(())
}
