//! Keyspace and server events that invalidate RL.STREAMCOUNT's running totals
//! (`crate::tally_cache` says which and why), that wake `RL.ACQUIRE ... WAIT` waiters on
//! a key that may have lost its leases, and that the named policies follow (a load, the fork
//! of an AOF rewrite) ([`Hooks`], set at load).
//!
//! The server events are subscribed at load (they cost nothing to other commands). The key
//! events are subscribed by the first RL.STREAMCOUNT call or the first `WAIT` that blocks
//! ([`subscribe_key_events`]), before either relies on them: the server calls every key-event
//! subscriber on each event of every command (INCR's `incrby` included, about 40
//! instructions), so a server that runs neither pays nothing for them.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// Server events for the named policies only: a fork (an AOF rewrite's needs the policies in
/// the new incremental file).
const POLICY_EVENTS: [u64; 1] = [raw::REDISMODULE_EVENT_FORK_CHILD];

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

/// A server event, as the named policies see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEvent {
    /// A load that replaces the dataset starts (RDB, AOF, a full sync from a master).
    LoadStart,
    /// A child process was forked (the parent's side; `aof_rewrite_in_progress` says whether
    /// it rewrites the AOF).
    ForkBorn,
    /// Any other event subscribed here.
    Other,
}

/// # Safety
/// Called by Redis for the events subscribed below; only the event's id and subevent are read.
unsafe extern "C" fn on_server_event(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    let context = Context::new(ctx);
    if eid.id == raw::REDISMODULE_EVENT_FORK_CHILD {
        if subevent == raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN
            && let Some(hooks) = HOOKS.get()
        {
            (hooks.policy)(&context, ServerEvent::ForkBorn);
        }
        return;
    }
    tally_cache::forget_all();
    if let Some(hooks) = HOOKS.get() {
        (hooks.server)(&context);
        let load_start = eid.id == raw::REDISMODULE_EVENT_LOADING
            && matches!(
                subevent,
                raw::REDISMODULE_SUBEVENT_LOADING_RDB_START
                    | raw::REDISMODULE_SUBEVENT_LOADING_AOF_START
                    | raw::REDISMODULE_SUBEVENT_LOADING_REPL_START
            );
        let event = if load_start {
            ServerEvent::LoadStart
        } else {
            ServerEvent::Other
        };
        (hooks.policy)(&context, event);
    }
}

/// Whether an AOF rewrite is in progress (`INFO persistence` `aof_rewrite_in_progress`): in
/// the parent right after the fork of a rewrite, the server has recorded its child already.
pub fn aof_rewrite_in_progress(ctx: &Context) -> bool {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let get = unsafe { raw::RedisModule_GetServerInfo };
    // SAFETY: as above.
    let field = unsafe { raw::RedisModule_ServerInfoGetFieldSigned };
    // SAFETY: as above.
    let free = unsafe { raw::RedisModule_FreeServerInfo };
    let (Some(get), Some(field), Some(free)) = (get, field, free) else {
        return false;
    };
    // SAFETY: `ctx` is the event's context; the section name is NUL-terminated.
    let info = unsafe { get(ctx.ctx, c"persistence".as_ptr()) };
    if info.is_null() {
        return false;
    }
    let mut err: c_int = 0;
    // SAFETY: `info` is the live data returned above; the field name is NUL-terminated and
    // `err` writable.
    let v = unsafe { field(info, c"aof_rewrite_in_progress".as_ptr(), &mut err) };
    // SAFETY: `info` was returned by GetServerInfo for this context and is freed once.
    unsafe { free(ctx.ctx, info) };
    err == 0 && v == 1
}

/// Whether clients are paused (`CLIENT PAUSE`, a failover): nothing may be propagated then.
pub fn avoid_replica_traffic() -> bool {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(avoid) = (unsafe { raw::RedisModule_AvoidReplicaTraffic }) else {
        return false;
    };
    // SAFETY: takes no argument; reads the server's pause state on the main thread.
    unsafe { avoid() != 0 }
}

/// Whether the key events are subscribed ([`subscribe_key_events`]).
static KEY_EVENTS_ON: AtomicBool = AtomicBool::new(false);

/// Subscribe to the key events above, once: called by every RL.STREAMCOUNT call before it reads
/// or keeps a running total, and by every `WAIT` before it blocks, so neither goes without them.
/// Later calls only read a flag.
///
/// # Errors
/// The server refused the subscription (no total may be kept then).
#[inline]
pub fn subscribe_key_events(ctx: &Context) -> Result<(), String> {
    if KEY_EVENTS_ON.load(Ordering::Relaxed) {
        return Ok(());
    }
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let keys = unsafe { raw::RedisModule_SubscribeToKeyspaceEvents };
    let Some(keys) = keys else {
        return Err("ERR keyspace event subscriptions are not available".into());
    };
    // SAFETY: `ctx` is a live command context of this module (the server records the module
    // from it); the callback is a plain function for the module's lifetime. The server appends
    // the subscriber to its list, which is safe also while it walks that list.
    if unsafe { keys(ctx.ctx, KEY_EVENTS, Some(on_key_event)) } != raw::REDISMODULE_OK as c_int {
        return Err("ERR cannot subscribe to keyspace events".into());
    }
    KEY_EVENTS_ON.store(true, Ordering::Relaxed);
    Ok(())
}

/// What else runs on the events above (set once, at load).
pub struct Hooks {
    /// A key event: the context, the key's database and its name.
    pub key: fn(&Context, i32, &[u8]),
    /// A server event.
    pub server: fn(&Context),
    /// A server event, for the named policies (forks included).
    pub policy: fn(&Context, ServerEvent),
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Subscribe to the server events above, at load; `hooks` run on them and on the key events.
///
/// # Errors
/// The server refused a subscription.
pub fn subscribe(ctx: &Context, hooks: Hooks) -> Result<(), String> {
    let _ = HOOKS.set(hooks);
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let server = unsafe { raw::RedisModule_SubscribeToServerEvent };
    let Some(server) = server else {
        return Err("event subscriptions are not available".into());
    };
    for id in SERVER_EVENTS.into_iter().chain(POLICY_EVENTS) {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: `ctx` is the load context; the callback is a plain function for the module's
        // lifetime; `event` is passed by value.
        if unsafe { server(ctx.ctx, event, Some(on_server_event)) } != raw::REDISMODULE_OK as c_int
        {
            return Err(format!("cannot subscribe to server event {id}"));
        }
    }
    Ok(())
}
