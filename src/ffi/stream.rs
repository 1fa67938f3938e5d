//! Reading a stream through the module API's stream iterator, for RL.STREAMCOUNT: the sum of the
//! `count` field over a range of entries and the last entry's ID, without the cost of XRANGE.

use std::os::raw::{c_int, c_long};

use redis_module::{Context, RedisString, raw};

/// What a scan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// No key.
    Missing,
    /// A stream: the sum of `count` from the start ID on, and the last entry's ID.
    Stream {
        total: u64,
        last: Option<(u64, u64)>,
    },
}

/// Why a scan failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanError {
    /// The key holds another type.
    WrongType,
    /// This entry's `count` is missing or not a non-negative integer.
    BadCount(u64, u64),
    /// The total does not fit in 64 bits.
    Overflow,
}

/// An open key, closed on drop.
struct Key(*mut raw::RedisModuleKey);

impl Drop for Key {
    fn drop(&mut self) {
        if !self.0.is_null() {
            raw::close_key(self.0);
        }
    }
}

fn bytes<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(ptr_len) = (unsafe { raw::RedisModule_StringPtrLen }) else {
        return &[];
    };
    let mut len = 0usize;
    // SAFETY: `s` is a live string handed out by the stream iterator.
    let p = unsafe { ptr_len(s, &mut len) };
    if p.is_null() {
        return &[];
    }
    // SAFETY: Redis returns a pointer to `len` readable bytes that live as long as `s`, which
    // the iterator keeps until its next call; callers use the slice before that.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
}

/// Free a string the stream iterator returned.
fn free_string(ctx: &Context, s: *mut raw::RedisModuleString) {
    if s.is_null() {
        return;
    }
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    if let Some(free) = unsafe { raw::RedisModule_FreeString } {
        // SAFETY: `s` was created for this call by the iterator and is not used after this.
        unsafe { free(ctx.ctx, s) };
    }
}

fn parse_count(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?
            .checked_add(u64::from(d.wrapping_sub(b'0')))
    })
}

/// Sum `count` over the entries of `name` with IDs at or after `from_ms`-0.
///
/// # Errors
/// [`ScanError`]: a key of another type, an entry without an integer count, overflow.
pub fn scan(ctx: &Context, name: &RedisString, from_ms: u64) -> Result<Scan, ScanError> {
    let key = Key(raw::open_key(ctx.ctx, name.inner, raw::KeyMode::READ));
    // SAFETY: copying function pointers out of the API table, filled in at load.
    let key_type = unsafe { raw::RedisModule_KeyType };
    // SAFETY: as above.
    let start = unsafe { raw::RedisModule_StreamIteratorStart };
    // SAFETY: as above.
    let next_id = unsafe { raw::RedisModule_StreamIteratorNextID };
    // SAFETY: as above.
    let next_field = unsafe { raw::RedisModule_StreamIteratorNextField };
    // SAFETY: as above.
    let stop = unsafe { raw::RedisModule_StreamIteratorStop };
    let (Some(key_type), Some(start), Some(next_id), Some(next_field), Some(stop)) =
        (key_type, start, next_id, next_field, stop)
    else {
        return Err(ScanError::WrongType);
    };
    // SAFETY: `key.0` is an open key (or NULL, which KeyType reports as empty).
    let t = unsafe { key_type(key.0) };
    if t == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
        return Ok(Scan::Missing);
    }
    if t != raw::REDISMODULE_KEYTYPE_STREAM as c_int {
        return Err(ScanError::WrongType);
    }

    // The last entry: one step of a reverse iterator.
    let mut last = None;
    // SAFETY: `key.0` is an open stream key; NULL bounds mean the whole stream.
    let rc = unsafe {
        start(
            key.0,
            raw::REDISMODULE_STREAM_ITERATOR_REVERSE as c_int,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if rc == raw::REDISMODULE_OK as c_int {
        let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
        let mut n: c_long = 0;
        // SAFETY: the iterator was started on `key.0`; `id` and `n` are writable.
        if unsafe { next_id(key.0, &mut id, &mut n) } == raw::REDISMODULE_OK as c_int {
            last = Some((id.ms, id.seq));
        }
        // SAFETY: stops the iterator started above.
        unsafe { stop(key.0) };
    }

    let mut total: u64 = 0;
    let mut from = raw::RedisModuleStreamID {
        ms: from_ms,
        seq: 0,
    };
    // SAFETY: `key.0` is an open stream key; `from` is a valid start ID, no end bound.
    let rc = unsafe { start(key.0, 0, &mut from, std::ptr::null_mut()) };
    if rc != raw::REDISMODULE_OK as c_int {
        return Ok(Scan::Stream { total, last });
    }
    let result = (|| {
        let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
        let mut n: c_long = 0;
        // SAFETY: the iterator was started on `key.0`; `id` and `n` are writable.
        while unsafe { next_id(key.0, &mut id, &mut n) } == raw::REDISMODULE_OK as c_int {
            let mut count = None;
            let mut field: *mut raw::RedisModuleString = std::ptr::null_mut();
            let mut value: *mut raw::RedisModuleString = std::ptr::null_mut();
            // SAFETY: iterating the fields of the current entry; both pointers are writable.
            while unsafe { next_field(key.0, &mut field, &mut value) }
                == raw::REDISMODULE_OK as c_int
            {
                let is_count = bytes(field) == b"count";
                if is_count {
                    count = parse_count(bytes(value));
                }
                // The iterator hands out new strings the caller owns (no automatic memory here).
                free_string(ctx, field);
                free_string(ctx, value);
                if is_count && count.is_none() {
                    break;
                }
            }
            let c = count.ok_or(ScanError::BadCount(id.ms, id.seq))?;
            total = total.checked_add(c).ok_or(ScanError::Overflow)?;
        }
        Ok(Scan::Stream { total, last })
    })();
    // SAFETY: stops the iterator started above.
    unsafe { stop(key.0) };
    result
}
