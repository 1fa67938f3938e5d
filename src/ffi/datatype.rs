//! The `ratelimit` module data type: one [`Packed`] value per key (32 bytes, boxed).
//!
//! RDB, AOF rewrite and digest all use the one codec in `core::codec`. The RDB's aux data holds
//! the named policies (module state outside the keyspace), through [`AuxHooks`] set at load.

use std::os::raw::{c_char, c_int, c_void};

use redis_module::native_types::RedisType;
use redis_module::raw;

use crate::core::{LimiterState, Packed, codec};

/// The type's name as `TYPE key` shows it (Redis requires exactly 9 characters).
pub const TYPE_NAME: &str = "ratelimit";

/// RDB encoding version of the envelope (one string holding the codec payload). The payload has
/// its own version byte; bump this only if the envelope changes.
pub const TYPE_ENCVER: i32 = 1;

/// The command AOF rewrite emits to recreate a key (Redis adds `PEXPIREAT` after it).
pub const RESTORE_COMMAND: &std::ffi::CStr = c"rl._restore";

/// The data type, registered from `redis_module!`.
pub static RL_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    TYPE_ENCVER,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save2: Some(aux_save2),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as i32,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
    },
);

/// What the RDB's aux data holds: the named policies' wire form (`core::policy`, versioned by
/// its own format byte), given and taken by the commands layer.
pub struct AuxHooks {
    /// The payload to save.
    pub save: fn() -> Vec<u8>,
    /// Whether there is anything to save (servers with `aux_save2`, Redis 7.2+ and Valkey, then
    /// write no aux data at all, so an RDB of a server that never had a policy loads where the
    /// module is absent; Redis 7.0 calls `aux_save`, which always writes).
    pub any: fn() -> bool,
    /// Replace the state with a saved payload; why not if it is invalid (the load fails).
    pub load: fn(&[u8]) -> Result<(), String>,
}

static AUX: std::sync::OnceLock<AuxHooks> = std::sync::OnceLock::new();

/// Set the aux data's hooks, once, at load.
pub fn set_aux_hooks(hooks: AuxHooks) {
    let _ = AUX.set(hooks);
}

unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    let payload = AUX.get().map(|h| (h.save)()).unwrap_or_default();
    raw::save_slice(rdb, &payload);
}

/// `aux_save` where the server has `aux_save2`: nothing written when there is nothing to save.
unsafe extern "C" fn aux_save2(rdb: *mut raw::RedisModuleIO, when: c_int) {
    if AUX.get().is_some_and(|h| (h.any)()) {
        // SAFETY: the same call as the server's own, with its arguments.
        unsafe { aux_save(rdb, when) };
    }
}

unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    let err = raw::REDISMODULE_ERR as c_int;
    if encver != TYPE_ENCVER {
        return err;
    }
    let Ok(buf) = raw::load_string_buffer(rdb) else {
        return err;
    };
    let why = match AUX.get() {
        Some(h) => match (h.load)(buf.as_ref()) {
            Ok(()) => return raw::REDISMODULE_OK as c_int,
            Err(why) => why,
        },
        None => "no hooks".to_string(),
    };
    crate::ffi::log::warning(&format!(
        "ratelimit: the RDB's named policies (aux data) are invalid ({why}): not loaded"
    ));
    err
}

/// The registered type pointer, for type checks and `ModuleTypeSetValue`.
pub fn raw_type() -> *mut raw::RedisModuleType {
    *RL_TYPE.raw_type.borrow()
}

/// Box a state, packed, into a value pointer owned by Redis (freed by `free`).
pub fn into_raw(state: LimiterState) -> *mut c_void {
    into_raw_packed(Packed::pack(state))
}

/// Box a packed value into a value pointer owned by Redis (freed by `free`).
pub fn into_raw_packed(value: Packed) -> *mut c_void {
    Box::into_raw(Box::new(value)).cast::<c_void>()
}

/// Borrow a value pointer as a state.
///
/// # Safety
/// 1. `value` was produced by [`into_raw`] and not freed yet.
/// 2. No other reference to it lives for `'a`.
pub unsafe fn from_raw<'a>(value: *mut c_void) -> &'a mut Packed {
    // SAFETY: guaranteed by the caller (invariants 1 and 2).
    unsafe { &mut *value.cast::<Packed>() }
}

/// The encoding of a value (empty if it does not decode, which a packed value always does).
fn encode(value: &Packed) -> Vec<u8> {
    value.read(codec::encode).unwrap_or_default()
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver != TYPE_ENCVER {
        return std::ptr::null_mut();
    }
    let Ok(buf) = raw::load_string_buffer(rdb) else {
        return std::ptr::null_mut();
    };
    match codec::decode(buf.as_ref()) {
        Some(state) => into_raw(state),
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis passes a live value of this type, not borrowed elsewhere during the save.
    let state = unsafe { from_raw(value) };
    raw::save_slice(rdb, &encode(state));
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: Redis passes a live value of this type.
    let state = unsafe { from_raw(value) };
    let blob = encode(state);
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(emit) = (unsafe { raw::RedisModule_EmitAOF }) else {
        return;
    };
    // SAFETY: the format "sb" takes a RedisModuleString and a (pointer, length) buffer; `key`
    // and `blob` are alive for the call.
    unsafe {
        emit(
            aof,
            RESTORE_COMMAND.as_ptr(),
            c"sb".as_ptr(),
            key,
            blob.as_ptr().cast::<c_char>(),
            blob.len(),
        )
    };
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: Redis passes a live value of this type; read only.
    let state = unsafe { &*value.cast::<Packed>() };
    state.mem_size()
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: Redis passes a live value of this type.
    let state = unsafe { from_raw(value) };
    let blob = encode(state);
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let add = unsafe { raw::RedisModule_DigestAddStringBuffer };
    // SAFETY: as above.
    let end = unsafe { raw::RedisModule_DigestEndSequence };
    if let (Some(add), Some(end)) = (add, end) {
        // SAFETY: `md` is the digest Redis passed; `blob` lives for the call.
        unsafe { add(md, blob.as_ptr().cast::<c_char>(), blob.len()) };
        // SAFETY: as above.
        unsafe { end(md) };
    }
}

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // SAFETY: the value was created by `into_raw` and Redis frees it exactly once.
        drop(unsafe { Box::from_raw(value.cast::<Packed>()) });
    }
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: Redis passes a live value of this type; read only.
    let state = unsafe { &*value.cast::<Packed>() };
    into_raw_packed(state.clone())
}
