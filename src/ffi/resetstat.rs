//! `CONFIG RESETSTAT` resets `INFO ratelimit` too.
//!
//! No server tells a module about RESETSTAT (there is no server event for it on Redis 7.0–8.2 or
//! Valkey 8/9), so a command filter watches for the command. Filters run when a command arrives,
//! before the server checks the caller's ACL permissions, so where the server names the caller
//! (`RedisModule_CommandFilterGetClientId`, Redis 7.2+ and Valkey) the filter checks that the
//! caller's user may run `CONFIG RESETSTAT` and resets only then. Redis 7.0 cannot name the
//! caller: there every `CONFIG RESETSTAT` that arrives resets the counters.
//!
//! The filter sees every command of the server; for all but `CONFIG ...` it compares one
//! argument's first bytes and returns.

use std::os::raw::c_int;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use redis_module::{Context, raw};

/// A detached context, owned by the module for its lifetime: the filter has no context of its
/// own, and the calls that name the caller's user need one.
static FILTER_CTX: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(ptr::null_mut());

/// Registers the filter. Call once from `OnLoad`.
///
/// # Errors
/// A message if the server refused the filter.
pub fn register(ctx: &Context) -> Result<(), String> {
    // SAFETY: copying function pointers out of the API table, filled in at load.
    let register = unsafe { raw::RedisModule_RegisterCommandFilter };
    // SAFETY: as above.
    let detached = unsafe { raw::RedisModule_GetDetachedThreadSafeContext };
    let (Some(register), Some(detached)) = (register, detached) else {
        return Err("the server has no command filters".into());
    };
    // SAFETY: called from OnLoad with the module's context.
    let dctx = unsafe { detached(ctx.ctx) };
    FILTER_CTX.store(dctx, Ordering::Relaxed);
    // SAFETY: as above; the callback is a plain function that lives as long as the module.
    let filter = unsafe {
        register(
            ctx.ctx,
            Some(on_command),
            raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
        )
    };
    if filter.is_null() {
        return Err("the server refused the command filter".into());
    }
    Ok(())
}

/// The bytes of argument `pos` of the filtered command, if it exists.
fn arg<'a>(fctx: *mut raw::RedisModuleCommandFilterCtx, pos: c_int) -> Option<&'a [u8]> {
    // SAFETY: copying function pointers out of the API table, filled in at load.
    let get = unsafe { raw::RedisModule_CommandFilterArgGet }?;
    // SAFETY: as above.
    let ptr_len = unsafe { raw::RedisModule_StringPtrLen }?;
    // SAFETY: `fctx` is the live filter context of the running callback; out-of-range positions
    // give NULL.
    let s = unsafe { get(fctx, pos) };
    if s.is_null() {
        return None;
    }
    let mut len = 0usize;
    // SAFETY: `s` is a live argument string of the command being filtered.
    let p = unsafe { ptr_len(s, &mut len) };
    if p.is_null() {
        return None;
    }
    // SAFETY: the server's string holds `len` bytes at `p`, alive while the filter runs (the
    // slice is dropped before the callback returns).
    Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

unsafe extern "C" fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(count) = (unsafe { raw::RedisModule_CommandFilterArgsCount }) else {
        return;
    };
    // SAFETY: `fctx` is the live filter context of this callback.
    if unsafe { count(fctx) } != 2 {
        return;
    }
    let is = |pos, word: &[u8]| arg(fctx, pos).is_some_and(|a| a.eq_ignore_ascii_case(word));
    if is(0, b"config") && is(1, b"resetstat") && caller_may_run_it(fctx) {
        crate::stats::reset();
    }
}

/// Whether the caller's user may run the filtered command. True when the server cannot tell
/// who the caller is (Redis 7.0, or a caller that is not a client, such as another module).
fn caller_may_run_it(fctx: *mut raw::RedisModuleCommandFilterCtx) -> bool {
    // SAFETY: copying function pointers out of the API table, filled in at load (None where
    // the server lacks them).
    let client_id = unsafe { raw::RedisModule_CommandFilterGetClientId };
    // SAFETY: as above.
    let user_name = unsafe { raw::RedisModule_GetClientUserNameById };
    // SAFETY: as above.
    let user_from_name = unsafe { raw::RedisModule_GetModuleUserFromUserName };
    // SAFETY: as above.
    let check = unsafe { raw::RedisModule_ACLCheckCommandPermissions };
    // SAFETY: as above.
    let free_user = unsafe { raw::RedisModule_FreeModuleUser };
    // SAFETY: as above.
    let free_string = unsafe { raw::RedisModule_FreeString };
    // SAFETY: as above.
    let get = unsafe { raw::RedisModule_CommandFilterArgGet };
    let (
        Some(client_id),
        Some(user_name),
        Some(user_from_name),
        Some(check),
        Some(free_user),
        Some(free_string),
        Some(get),
    ) = (
        client_id,
        user_name,
        user_from_name,
        check,
        free_user,
        free_string,
        get,
    )
    else {
        return true;
    };
    let ctx = FILTER_CTX.load(Ordering::Relaxed);
    if ctx.is_null() {
        return true;
    }
    // SAFETY: `fctx` is the live filter context of the running callback.
    let id = unsafe { client_id(fctx) };
    // SAFETY: `ctx` is the module's detached context; an unknown id gives NULL.
    let name = unsafe { user_name(ctx, id) };
    if name.is_null() {
        return true;
    }
    // SAFETY: `name` is the string just returned, owned by us.
    let user = unsafe { user_from_name(name) };
    // SAFETY: `name` is ours and no longer used.
    unsafe { free_string(ctx, name) };
    if user.is_null() {
        return true;
    }
    // SAFETY: `fctx` is live; the callback checked that the command has exactly 2 arguments.
    let name_arg = unsafe { get(fctx, 0) };
    // SAFETY: as above.
    let sub_arg = unsafe { get(fctx, 1) };
    let mut argv = [name_arg, sub_arg];
    // SAFETY: `user` is the live module user just looked up; `argv` holds the command's two
    // live argument strings.
    let rc = unsafe { check(user, argv.as_mut_ptr(), 2) };
    // SAFETY: `user` is ours and no longer used.
    unsafe { free_user(user) };
    rc == raw::REDISMODULE_OK as c_int
}
