//! Propagation to replicas and the AOF without the crate's per-call allocations (a C string for
//! the command name, a copy of every argument): the call's own argument strings are passed on,
//! and the few new ones are given as bytes for Redis to make.

use std::ffi::CStr;
use std::os::raw::c_char;

use redis_module::{Context, raw};

use crate::ffi::command::{Arg, Argv};

/// Arguments passed on the stack; a longer call (RL.ALL with many keys) uses the heap.
const INLINE_ARGS: usize = 16;

/// Propagate `cmd` with the call's arguments after its name, as they are (one command, no MULTI
/// around it).
pub fn replicate(ctx: &Context, cmd: &CStr, argv: Argv<'_>) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return;
    };
    let argv: Vec<*mut raw::RedisModuleString> = argv.iter().skip(1).map(Arg::raw).collect();
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

/// Propagate `cmd args... kw value` (one command, no MULTI around it): the strings `args`, then
/// the C string `kw` and the bytes `value`, which Redis turns into strings itself.
pub fn replicate_with<'a>(
    ctx: &Context,
    cmd: &CStr,
    args: impl Iterator<Item = Arg<'a>>,
    kw: &CStr,
    value: &[u8],
) {
    let mut inline = [std::ptr::null_mut::<raw::RedisModuleString>(); INLINE_ARGS];
    let mut heap: Vec<*mut raw::RedisModuleString> = Vec::new();
    let mut n = 0usize;
    for a in args {
        match inline.get_mut(n) {
            Some(slot) => *slot = a.raw(),
            None => {
                if heap.is_empty() {
                    heap.extend_from_slice(&inline);
                }
                heap.push(a.raw());
            }
        }
        n = n.saturating_add(1);
    }
    let argv: &[*mut raw::RedisModuleString] = if heap.is_empty() {
        inline.get(..n).unwrap_or_default()
    } else {
        &heap
    };
    replicate_strings_with(ctx, cmd, argv, kw, value);
}

/// Propagate `cmd` with the call's arguments after its name as they are, then the C string `kw`
/// and the bytes `value` (one command, no MULTI around it): [`replicate_with`] without a copy of
/// the arguments, Redis given the call's own vector.
pub fn replicate_argv_with(ctx: &Context, cmd: &CStr, argv: Argv<'_>, kw: &CStr, value: &[u8]) {
    replicate_strings_with(ctx, cmd, argv.raw_from(1), kw, value);
}

/// Propagate `cmd args... kw value` (one command) from the strings `args` of this call.
#[inline(always)]
fn replicate_strings_with(
    ctx: &Context,
    cmd: &CStr,
    args: &[*mut raw::RedisModuleString],
    kw: &CStr,
    value: &[u8],
) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return;
    };
    // SAFETY: format "vcb" takes an array of RedisModuleString pointers and its length, a
    // NUL-terminated C string, and a (pointer, length) buffer; every pointer is a live string of
    // this call, `kw` and `value` live for the call, and Redis copies or retains what it keeps.
    unsafe {
        f(
            ctx.ctx,
            cmd.as_ptr(),
            c"vcb".as_ptr().cast::<c_char>(),
            args.as_ptr(),
            args.len(),
            kw.as_ptr(),
            value.as_ptr().cast::<c_char>(),
            value.len(),
        )
    };
}

/// Propagate `cmd key value` (one command): the call's key string and the bytes `value`, which
/// Redis turns into a string itself.
pub fn replicate_key_bytes(ctx: &Context, cmd: &CStr, key: Arg<'_>, value: &[u8]) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return;
    };
    // SAFETY: format "sb" takes a RedisModuleString and a (pointer, length) buffer; `key` is a
    // live string of this call and `value` lives for the call; Redis retains or copies both.
    unsafe {
        f(
            ctx.ctx,
            cmd.as_ptr(),
            c"sb".as_ptr().cast::<c_char>(),
            key.raw(),
            value.as_ptr().cast::<c_char>(),
            value.len(),
        )
    };
}

/// Most key-value pairs [`replicate_key_byte_pairs`] propagates in one command.
pub const PAIRS_MAX: usize = 4;

/// Propagate `cmd key value [key value ...]` (one command, no MULTI around it): each pair's key
/// string and bytes, which Redis turns into a string itself. `false` (nothing propagated) for no
/// pair or more than [`PAIRS_MAX`].
pub fn replicate_key_byte_pairs(ctx: &Context, cmd: &CStr, pairs: &[(Arg<'_>, &[u8])]) -> bool {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return false;
    };
    let name = cmd.as_ptr();
    let p = |(k, v): &(Arg<'_>, &[u8])| (k.raw(), v.as_ptr().cast::<c_char>(), v.len());
    match pairs {
        [a] => {
            let (k1, v1, n1) = p(a);
            // SAFETY: format "sb" takes a RedisModuleString and a (pointer, length) buffer per
            // pair; every key is a live string of this call and every value lives for the call;
            // Redis retains or copies them.
            unsafe { f(ctx.ctx, name, c"sb".as_ptr(), k1, v1, n1) };
        }
        [a, b] => {
            let ((k1, v1, n1), (k2, v2, n2)) = (p(a), p(b));
            // SAFETY: as for one pair, "sb" once per pair.
            unsafe { f(ctx.ctx, name, c"sbsb".as_ptr(), k1, v1, n1, k2, v2, n2) };
        }
        [a, b, c] => {
            let ((k1, v1, n1), (k2, v2, n2), (k3, v3, n3)) = (p(a), p(b), p(c));
            // SAFETY: as for one pair, "sb" once per pair.
            unsafe {
                f(
                    ctx.ctx,
                    name,
                    c"sbsbsb".as_ptr(),
                    k1,
                    v1,
                    n1,
                    k2,
                    v2,
                    n2,
                    k3,
                    v3,
                    n3,
                )
            };
        }
        [a, b, c, d] => {
            let ((k1, v1, n1), (k2, v2, n2)) = (p(a), p(b));
            let ((k3, v3, n3), (k4, v4, n4)) = (p(c), p(d));
            // SAFETY: as for one pair, "sb" once per pair.
            unsafe {
                f(
                    ctx.ctx,
                    name,
                    c"sbsbsbsb".as_ptr(),
                    k1,
                    v1,
                    n1,
                    k2,
                    v2,
                    n2,
                    k3,
                    v3,
                    n3,
                    k4,
                    v4,
                    n4,
                )
            };
        }
        _ => return false,
    }
    true
}

/// Propagate `cmd key kw value` (one command): the call's key string, the C string `kw` and the
/// bytes `value`, which Redis turns into strings itself.
pub fn replicate_key_kw_bytes(ctx: &Context, cmd: &CStr, key: Arg<'_>, kw: &CStr, value: &[u8]) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return;
    };
    // SAFETY: format "scb" takes a RedisModuleString, a NUL-terminated C string and a (pointer,
    // length) buffer; `key` is a live string of this call, `kw` and `value` live for the call;
    // Redis retains or copies all three.
    unsafe {
        f(
            ctx.ctx,
            cmd.as_ptr(),
            c"scb".as_ptr().cast::<c_char>(),
            key.raw(),
            kw.as_ptr(),
            value.as_ptr().cast::<c_char>(),
            value.len(),
        )
    };
}

/// Propagate `XADD key <id> count <n>` (one command): the call's key string, the bytes `id`, and
/// the entry's own strings (shared with the append, no new ones).
pub fn replicate_xadd(ctx: &Context, key: Arg<'_>, id: &[u8], n: u64) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return;
    };
    let Some((field, value)) = crate::ffi::stream::entry_strings(n) else {
        return;
    };
    // SAFETY: format "sbss" takes a RedisModuleString, a (pointer, length) buffer and two more
    // RedisModuleStrings; `key` is a live string of this call, `id` lives for the call, `field`
    // and `value` are live strings the module keeps; Redis retains the strings and copies `id`.
    unsafe {
        f(
            ctx.ctx,
            c"XADD".as_ptr(),
            c"sbss".as_ptr().cast::<c_char>(),
            key.raw(),
            id.as_ptr().cast::<c_char>(),
            id.len(),
            field,
            value,
        )
    };
}

/// Propagate `RL.POLICY RESTORE <payload>` (every policy), or with `MERGE` (the policies of
/// the payload only): policies as they are, versions included.
pub fn replicate_policies(ctx: &Context, payload: &[u8], merge: bool) {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return;
    };
    if merge {
        // SAFETY: format "cbc" takes a C string, a (pointer, length) buffer and a C string; all
        // live for the call and Redis copies them.
        unsafe {
            f(
                ctx.ctx,
                c"rl.policy".as_ptr(),
                c"cbc".as_ptr().cast::<c_char>(),
                c"RESTORE".as_ptr(),
                payload.as_ptr().cast::<c_char>(),
                payload.len(),
                c"MERGE".as_ptr(),
            )
        };
    } else {
        // SAFETY: format "cb" takes a C string and a (pointer, length) buffer; both live for the
        // call and Redis copies them.
        unsafe {
            f(
                ctx.ctx,
                c"rl.policy".as_ptr(),
                c"cb".as_ptr().cast::<c_char>(),
                c"RESTORE".as_ptr(),
                payload.as_ptr().cast::<c_char>(),
                payload.len(),
            )
        };
    }
}
