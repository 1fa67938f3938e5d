//! `LimiterKey`: an open key, RAII-closed, with the typed access the commands need that
//! redis-module 2.0.8 does not wrap (module-type values, absolute expiry).

use std::os::raw::c_int;

use redis_module::{Context, raw};

use crate::core::packed::StateMut;
use crate::core::{LimiterState, Packed};
use crate::error::RlError;
use crate::ffi::command::Arg;
use crate::ffi::datatype::{into_raw, raw_type};

/// What a key holds, as far as the limiter commands care.
pub enum Holding<'a> {
    /// Nothing.
    Empty,
    /// One of our limiters.
    Limiter(&'a mut Packed),
    /// A stream (RL.STREAMCOUNT's keys).
    Stream,
    /// Any other type (Redis's own WRONGTYPE).
    Other,
}

/// An open key; closed on drop.
pub struct LimiterKey {
    key: *mut raw::RedisModuleKey,
}

impl LimiterKey {
    /// Open `name` for reading and writing.
    pub fn open<'a>(ctx: &Context, name: impl Into<Arg<'a>>) -> Self {
        let name: Arg<'a> = name.into();
        LimiterKey {
            key: raw::open_key(
                ctx.ctx,
                name.raw(),
                raw::KeyMode::READ | raw::KeyMode::WRITE,
            ),
        }
    }

    /// Open `name` read-only (does not touch the key's LRU as a write would).
    pub fn open_read<'a>(ctx: &Context, name: impl Into<Arg<'a>>) -> Self {
        let name: Arg<'a> = name.into();
        LimiterKey {
            key: raw::open_key(ctx.ctx, name.raw(), raw::KeyMode::READ),
        }
    }

    fn key_type(&self) -> c_int {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let f = unsafe { raw::RedisModule_KeyType };
        match f {
            // SAFETY: `self.key` is an open key (or NULL, which KeyType treats as empty).
            Some(f) => unsafe { f(self.key) },
            None => raw::REDISMODULE_KEYTYPE_EMPTY as c_int,
        }
    }

    /// What the key holds. The borrow lives as long as this handle.
    pub fn holding(&mut self) -> Holding<'_> {
        let t = self.key_type();
        if t == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
            return Holding::Empty;
        }
        if t != raw::REDISMODULE_KEYTYPE_MODULE as c_int {
            if t == raw::REDISMODULE_KEYTYPE_STREAM as c_int {
                return Holding::Stream;
            }
            return Holding::Other;
        }
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let get_type = unsafe { raw::RedisModule_ModuleTypeGetType };
        // SAFETY: as above.
        let get_value = unsafe { raw::RedisModule_ModuleTypeGetValue };
        let (Some(get_type), Some(get_value)) = (get_type, get_value) else {
            return Holding::Other;
        };
        // SAFETY: `self.key` is an open module key.
        if unsafe { get_type(self.key) } != raw_type() {
            return Holding::Other;
        }
        // SAFETY: as above; the value belongs to our type.
        let value = unsafe { get_value(self.key) };
        if value.is_null() {
            return Holding::Other;
        }
        // SAFETY: the value was made by `into_raw` (it has our type), and the `&mut self`
        // borrow keeps any other access through this handle away while it lives.
        Holding::Limiter(unsafe { crate::ffi::datatype::from_raw(value) })
    }

    /// The limiter the key holds (`None`: empty), for limiter command `cmd` (its name, in any
    /// case): the one way every command reads a limiter key.
    ///
    /// # Errors
    /// [`RlError::StreamKey`] naming `cmd` for a stream (RL.STREAMCOUNT's keys),
    /// [`RlError::WrongType`] for any other type.
    #[inline]
    pub fn limiter(&mut self, cmd: &'static str) -> Result<Option<StateMut<'_>>, RlError> {
        match self.holding() {
            Holding::Empty => Ok(None),
            Holding::Limiter(value) => match value.unpack() {
                Some(state) => Ok(Some(state)),
                None => Err(RlError::Payload),
            },
            Holding::Stream => Err(RlError::StreamKey(cmd)),
            Holding::Other => Err(RlError::WrongType),
        }
    }

    /// A copy of the limiter the key holds (`None`: empty), for a read-only command `cmd`.
    ///
    /// # Errors
    /// As [`Self::limiter`].
    pub fn limiter_copy(&mut self, cmd: &'static str) -> Result<Option<LimiterState>, RlError> {
        match self.holding() {
            Holding::Empty => Ok(None),
            Holding::Limiter(value) => value.state().ok_or(RlError::Payload).map(Some),
            Holding::Stream => Err(RlError::StreamKey(cmd)),
            Holding::Other => Err(RlError::WrongType),
        }
    }

    /// Store `state` as the key's value (the key must be empty or hold our type).
    ///
    /// # Errors
    /// [`RlError::WrongType`] if Redis refused (it does not for a key opened for writing that
    /// is empty or holds our type).
    pub fn set(&mut self, state: LimiterState) -> Result<(), RlError> {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let Some(set) = (unsafe { raw::RedisModule_ModuleTypeSetValue }) else {
            return Err(RlError::WrongType);
        };
        let value = into_raw(state);
        // SAFETY: `self.key` is open for writing; Redis takes ownership of `value`.
        let rc = unsafe { set(self.key, raw_type(), value) };
        if rc == raw::REDISMODULE_OK as c_int {
            Ok(())
        } else {
            // SAFETY: Redis did not take the value; reclaim it.
            drop(unsafe { Box::from_raw(value.cast::<Packed>()) });
            Err(RlError::WrongType)
        }
    }

    /// Delete the key (opened for writing).
    pub fn delete(&mut self) {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        if let Some(f) = unsafe { raw::RedisModule_DeleteKey } {
            // SAFETY: `self.key` is open for writing.
            unsafe { f(self.key) };
        }
    }

    /// Set the absolute expiry, in Unix ms.
    pub fn set_expire_at(&mut self, at_ms: i64) {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        if let Some(f) = unsafe { raw::RedisModule_SetAbsExpire } {
            // SAFETY: `self.key` is open for writing and not empty.
            unsafe { f(self.key, at_ms) };
        }
    }

    /// Time to live in ms, or -1 without expiry (-2 when missing).
    pub fn ttl_ms(&self) -> i64 {
        if self.key_type() == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
            return -2;
        }
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        match unsafe { raw::RedisModule_GetExpire } {
            // SAFETY: `self.key` is an open key.
            Some(f) => unsafe { f(self.key) },
            None => -1,
        }
    }
}

impl LimiterKey {
    /// Close the key now (dropping the handle afterwards does nothing more).
    pub fn close(&mut self) {
        if !self.key.is_null() {
            raw::close_key(self.key);
            self.key = std::ptr::null_mut();
        }
    }
}

impl Drop for LimiterKey {
    fn drop(&mut self) {
        self.close();
    }
}
