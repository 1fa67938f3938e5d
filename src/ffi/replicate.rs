//! Propagation to replicas and the AOF without the crate's per-call allocations (a C string for
//! the command name, a copy of every argument): the call's own argument strings are passed on.

use std::ffi::CStr;
use std::os::raw::c_char;

use redis_module::{Context, RedisString, raw};

/// Arguments passed on the stack; a longer call (RL.ALL with many keys) uses the heap.
const INLINE_ARGS: usize = 16;

/// Propagate `cmd args...` (one command, no MULTI around it).
pub fn replicate(ctx: &Context, cmd: &CStr, args: &[&RedisString]) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return;
    };
    let mut inline = [std::ptr::null_mut::<raw::RedisModuleString>(); INLINE_ARGS];
    let heap: Vec<*mut raw::RedisModuleString>;
    let argv: &[*mut raw::RedisModuleString] = if args.len() <= INLINE_ARGS {
        for (slot, a) in inline.iter_mut().zip(args) {
            *slot = a.inner;
        }
        inline.get(..args.len()).unwrap_or_default()
    } else {
        heap = args.iter().map(|a| a.inner).collect();
        &heap
    };
    // SAFETY: format "v" takes an array of RedisModuleString pointers and its length; every
    // pointer is a live string of this call, and Redis retains what it keeps.
    unsafe {
        f(
            ctx.ctx,
            cmd.as_ptr(),
            c"v".as_ptr().cast::<c_char>(),
            argv.as_ptr(),
            argv.len(),
        )
    };
}

/// Propagate `cmd key args...`, the arguments given as bytes (copied into strings for the call).
pub fn replicate_bytes(ctx: &Context, cmd: &CStr, key: &RedisString, args: &[&[u8]]) {
    let owned: Vec<RedisString> = args
        .iter()
        .map(|a| RedisString::create_from_slice(ctx.ctx, a))
        .collect();
    let mut all: Vec<&RedisString> = Vec::with_capacity(owned.len().saturating_add(1));
    all.push(key);
    all.extend(owned.iter());
    replicate(ctx, cmd, &all);
}
