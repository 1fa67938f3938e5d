//! Blocking a client (`RedisModule_BlockClient`, no server timeout: the module's own timer ends
//! waits on time) and the module timer, for `RL.ACQUIRE ... WAIT`.
//!
//! A blocked client ends exactly once, through [`unblock`]: granted or timed out with a reply
//! (handed to the reply callback as private data, freed by the free callback on every path), or
//! dropped without one when it disconnected (from the disconnect callback, which is what frees
//! Redis's handle for a client blocked without keys).

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;

use redis_module::{Context, raw};

/// What the module does when a blocked client ends or a timer fires.
pub trait WaitHooks {
    /// What a waiting client is sent when it is let go.
    type Reply: 'static;

    /// Send `reply` to the client being unblocked (`ctx` is its context).
    fn reply(ctx: &Context, reply: &Self::Reply);

    /// `client` disconnected while waiting: take it out, then [`unblock`] it without a reply.
    fn disconnected(ctx: &Context, client: Blocked);

    /// The timer made by [`create_timer`] fired.
    fn timer(ctx: &Context);
}

/// A client blocked by [`block`], until [`unblock`] (which consumes it).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Blocked(NonNull<raw::RedisModuleBlockedClient>);

impl Blocked {
    /// The same handle, to find the waiter by (it is still unblocked once, through the one
    /// that was kept).
    pub fn id(&self) -> BlockedId {
        BlockedId(self.0.as_ptr() as usize, PhantomData)
    }
}

/// The identity of a [`Blocked`] client, to compare with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockedId(usize, PhantomData<*const ()>);

/// The calling context's flags.
fn flags(ctx: &Context) -> u32 {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_GetContextFlags }) else {
        return 0;
    };
    // SAFETY: `ctx` is a live context of the current callback.
    let bits = unsafe { f(ctx.ctx) };
    u32::from_ne_bytes(bits.to_ne_bytes())
}

/// May the calling client be blocked? Not inside MULTI, a script, or a call that denies
/// blocking (the master's stream, the AOF, a module's call).
pub fn may_block(ctx: &Context) -> bool {
    let deny = raw::REDISMODULE_CTX_FLAGS_MULTI
        | raw::REDISMODULE_CTX_FLAGS_LUA
        | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING
        | raw::REDISMODULE_CTX_FLAGS_REPLICATED
        | raw::REDISMODULE_CTX_FLAGS_LOADING;
    flags(ctx) & deny == 0
}

/// Is the call replicated from a master or replayed from the AOF?
pub fn replaying(ctx: &Context) -> bool {
    flags(ctx) & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0
}

/// Is this server a master (it writes and replicates grants)?
pub fn is_master(ctx: &Context) -> bool {
    flags(ctx) & raw::REDISMODULE_CTX_FLAGS_MASTER != 0
}

/// The database the context has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_GetSelectedDb }) else {
        return 0;
    };
    // SAFETY: `ctx` is a live context of the current callback.
    unsafe { f(ctx.ctx) }
}

/// Select database `db` on the context (a timer's context has its own client); whether it
/// exists.
pub fn select_db(ctx: &Context, db: i32) -> bool {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_SelectDb }) else {
        return false;
    };
    // SAFETY: `ctx` is a live context of the current callback; Redis checks `db`.
    unsafe { f(ctx.ctx, db) == raw::REDISMODULE_OK as c_int }
}

/// Block the calling client (a command's context that [`may_block`]) with no server timeout;
/// `None` if the server gave no handle.
pub fn block<W: WaitHooks>(ctx: &Context) -> Option<Blocked> {
    // SAFETY: copying function pointers out of the API table, filled in at load.
    let (Some(block), Some(on_disconnect)) = (unsafe { raw::RedisModule_BlockClient }, unsafe {
        raw::RedisModule_SetDisconnectCallback
    }) else {
        return None;
    };
    // SAFETY: `ctx` is the command's context; the callbacks are plain functions for the
    // module's lifetime; no timeout callback and timeout 0: the server never times it out
    // (and CLIENT UNBLOCK leaves it alone).
    let bc = unsafe {
        block(
            ctx.ctx,
            Some(reply_callback::<W>),
            None,
            Some(free_reply::<W>),
            0,
        )
    };
    let bc = NonNull::new(bc)?;
    // SAFETY: `bc` is the live handle just returned; the callback is a plain function.
    unsafe { on_disconnect(bc.as_ptr(), Some(disconnected::<W>)) };
    Some(Blocked(bc))
}

/// Let `client` go: with `reply` sent by [`WaitHooks::reply`], or (`None`) without one, for a
/// client that disconnected. Redis frees its handle and the reply afterwards.
pub fn unblock<W: WaitHooks>(client: Blocked, reply: Option<W::Reply>) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(unblock) = (unsafe { raw::RedisModule_UnblockClient }) else {
        return;
    };
    let data = reply.map_or(std::ptr::null_mut(), |r| Box::into_raw(Box::new(r)));
    // SAFETY: `client` is a handle never unblocked before (it is consumed here); `data` is null
    // or a box the free callback takes back.
    let rc = unsafe { unblock(client.0.as_ptr(), data.cast::<c_void>()) };
    if rc != raw::REDISMODULE_OK as c_int && !data.is_null() {
        // SAFETY: Redis refused the handle and did not keep `data`: it is still ours.
        drop(unsafe { Box::from_raw(data) });
    }
}

/// # Safety
/// Called by Redis for a client blocked by [`block`], with its context.
unsafe extern "C" fn reply_callback<W: WaitHooks>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let data = unsafe { raw::RedisModule_GetBlockedClientPrivateData }
        // SAFETY: `ctx` is the reply callback's context.
        .map_or(std::ptr::null_mut(), |f| unsafe { f(ctx) });
    let reply = data.cast::<W::Reply>();
    if reply.is_null() {
        crate::ffi::reply::error(&context, "ERR the wait ended without a reply");
    } else {
        // SAFETY: a non-null private data is the box [`unblock`] made; Redis frees it (through
        // [`free_reply`]) only after this callback.
        W::reply(&context, unsafe { &*reply });
    }
    raw::REDISMODULE_OK as c_int
}

/// # Safety
/// Called by Redis once with the private data given to [`unblock`].
unsafe extern "C" fn free_reply<W: WaitHooks>(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: `data` is the box [`unblock`] made for this client, freed only here.
        drop(unsafe { Box::from_raw(data.cast::<W::Reply>()) });
    }
}

/// # Safety
/// Called by Redis when a client blocked by [`block`] disconnects, before its handle is freed.
unsafe extern "C" fn disconnected<W: WaitHooks>(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    if let Some(bc) = NonNull::new(bc) {
        W::disconnected(&Context::new(ctx), Blocked(bc));
    }
}

/// # Safety
/// Called by Redis when the timer of [`create_timer`] fires, with a context of its own.
unsafe extern "C" fn timer_fired<W: WaitHooks>(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    W::timer(&Context::new(ctx));
}

/// A timer firing [`WaitHooks::timer`] in `ms` milliseconds.
pub fn create_timer<W: WaitHooks>(ctx: &Context, ms: i64) -> Option<u64> {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let create = unsafe { raw::RedisModule_CreateTimer }?;
    // SAFETY: `ctx` is a live context of the module; the callback is a plain function and its
    // data is unused.
    Some(unsafe {
        create(
            ctx.ctx,
            ms.max(0),
            Some(timer_fired::<W>),
            std::ptr::null_mut(),
        )
    })
}

/// Stop timer `id` (nothing if it already fired).
pub fn stop_timer(ctx: &Context, id: u64) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(stop) = unsafe { raw::RedisModule_StopTimer } {
        // SAFETY: `ctx` is a live context of the module; an unknown id is an error Redis
        // reports and nothing else; the data pointer is not asked for.
        unsafe { stop(ctx.ctx, id, std::ptr::null_mut()) };
    }
}
