//! Keyspace notifications without an allocation per call.

use std::ffi::CStr;

use redis_module::{Context, raw};

use crate::ffi::command::Arg;

/// Fire the module-class keyspace event `event` for `key` (class `d` in
/// `notify-keyspace-events`); Redis drops it at once when that class is off.
pub fn notify<'a>(ctx: &Context, event: &CStr, key: impl Into<Arg<'a>>) {
    let key: Arg<'a> = key.into();
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(f) = unsafe { raw::RedisModule_NotifyKeyspaceEvent } {
        // SAFETY: `ctx` is the command's context, `event` is NUL-terminated and `key` is a live
        // string; Redis copies what it keeps.
        unsafe {
            f(
                ctx.ctx,
                raw::NotifyEvent::MODULE.bits(),
                event.as_ptr(),
                key.raw(),
            )
        };
    }
}
