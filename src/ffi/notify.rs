//! Keyspace notifications without an allocation per call.

use std::ffi::CStr;

use redis_module::{Context, raw};

use crate::ffi::command::Arg;

/// The class of a keyspace event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `d`: the module's own types.
    Module,
    /// `t`: streams.
    Stream,
    /// `g`: generic commands (expire, del, ...).
    Generic,
}

/// Fire the module-class keyspace event `event` for `key` (class `d` in
/// `notify-keyspace-events`); Redis drops it at once when that class is off.
pub fn notify<'a>(ctx: &Context, event: &CStr, key: impl Into<Arg<'a>>) {
    notify_as(ctx, Class::Module, event, key);
}

/// Fire the keyspace event `event` of `class` for `key`, as the command of that name would.
pub fn notify_as<'a>(ctx: &Context, class: Class, event: &CStr, key: impl Into<Arg<'a>>) {
    let key: Arg<'a> = key.into();
    let class = match class {
        Class::Module => raw::NotifyEvent::MODULE,
        Class::Stream => raw::NotifyEvent::STREAM,
        Class::Generic => raw::NotifyEvent::GENERIC,
    };
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(f) = unsafe { raw::RedisModule_NotifyKeyspaceEvent } {
        // SAFETY: `ctx` is the command's context, `event` is NUL-terminated and `key` is a live
        // string; Redis copies what it keeps.
        unsafe { f(ctx.ctx, class.bits(), event.as_ptr(), key.raw()) };
    }
}
