//! A stream key through the module API, for RL.STREAMCOUNT: its length and end IDs, counts and
//! `count` sums over ID ranges with the stream iterator, and appends, trims and the absolute
//! expiry without the cost of running XADD, XTRIM and PEXPIREAT as commands.

use std::cell::Cell;
use std::os::raw::{c_char, c_int, c_long};
use std::ptr;

use redis_module::{Context, raw};

use crate::core::decimal::{U64_DIGITS, format_u64_into, parse_u64_digits};
use crate::core::stream_count::{IdRange, StreamId};
use crate::ffi::command::Arg;

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Missing,
    Stream,
    /// Any other type.
    Other,
}

/// Why a sum failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanError {
    /// This entry's `count` is missing or not a non-negative integer.
    BadCount(StreamId),
    /// The sum does not fit in 64 bits.
    Overflow,
}

/// A string the stream iterator handed out, freed on drop; its bytes borrow from it.
struct IterString {
    ctx: *mut raw::RedisModuleCtx,
    s: *mut raw::RedisModuleString,
}

impl IterString {
    fn bytes(&self) -> &[u8] {
        if self.s.is_null() {
            return &[];
        }
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let Some(ptr_len) = (unsafe { raw::RedisModule_StringPtrLen }) else {
            return &[];
        };
        let mut len = 0usize;
        // SAFETY: `self.s` is a live string owned by this value.
        let p = unsafe { ptr_len(self.s, &mut len) };
        if p.is_null() {
            return &[];
        }
        // SAFETY: Redis returns a pointer to `len` readable bytes that live as long as the
        // string, which this value owns until it drops; the slice borrows `self`.
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    }
}

impl Drop for IterString {
    fn drop(&mut self) {
        if self.s.is_null() {
            return;
        }
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        if let Some(free) = unsafe { raw::RedisModule_FreeString } {
            // SAFETY: the iterator created `s` for us (no automatic memory on this context) and
            // nothing uses it after this.
            unsafe { free(self.ctx, self.s) };
        }
    }
}

fn raw_id(id: StreamId) -> raw::RedisModuleStreamID {
    raw::RedisModuleStreamID {
        ms: id.ms,
        seq: id.seq,
    }
}

/// An open stream key, closed on drop.
pub struct StreamKey {
    ctx: *mut raw::RedisModuleCtx,
    key: *mut raw::RedisModuleKey,
}

impl StreamKey {
    /// Open `name` for reading, or for reading and writing. (Closing a key opened for writing
    /// signals it as modified to WATCH, so read-only calls open it for reading.)
    pub fn open(ctx: &Context, name: Arg<'_>, write: bool) -> Self {
        let mode = if write {
            raw::KeyMode::READ | raw::KeyMode::WRITE
        } else {
            raw::KeyMode::READ
        };
        StreamKey {
            ctx: ctx.ctx,
            key: raw::open_key(ctx.ctx, name.raw(), mode),
        }
    }

    /// What the key holds.
    pub fn kind(&self) -> Kind {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let Some(key_type) = (unsafe { raw::RedisModule_KeyType }) else {
            return Kind::Other;
        };
        // SAFETY: `self.key` is an open key (or NULL, which KeyType reports as empty).
        let t = unsafe { key_type(self.key) };
        if t == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
            Kind::Missing
        } else if t == raw::REDISMODULE_KEYTYPE_STREAM as c_int {
            Kind::Stream
        } else {
            Kind::Other
        }
    }

    /// Entries in the stream (0 when missing).
    pub fn len(&self) -> u64 {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        match unsafe { raw::RedisModule_ValueLength } {
            // SAFETY: `self.key` is an open key (or NULL, which ValueLength reports as 0).
            Some(f) => u64::try_from(unsafe { f(self.key) }).unwrap_or(u64::MAX),
            None => 0,
        }
    }

    /// Whether the stream has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Run `each` on the entries of `[from, to]` (NULL bounds: the whole stream), newest first
    /// with `reverse`, until it returns `false`. `each` may read some of the entry's fields with
    /// [`StreamKey::field`]; the rest are read here before the next entry.
    fn iterate(
        &self,
        range: Option<IdRange>,
        reverse: bool,
        mut each: impl FnMut(&Self, StreamId) -> bool,
    ) {
        // SAFETY: copying function pointers out of the API table, filled in at load.
        let start = unsafe { raw::RedisModule_StreamIteratorStart };
        // SAFETY: as above.
        let next_id = unsafe { raw::RedisModule_StreamIteratorNextID };
        // SAFETY: as above.
        let stop = unsafe { raw::RedisModule_StreamIteratorStop };
        let (Some(start), Some(next_id), Some(stop)) = (start, next_id, stop) else {
            return;
        };
        let mut from = range.map(|r| raw_id(r.from));
        let mut to = range.map(|r| raw_id(r.to));
        let from_ptr = from
            .as_mut()
            .map_or(std::ptr::null_mut(), std::ptr::from_mut);
        let to_ptr = to.as_mut().map_or(std::ptr::null_mut(), std::ptr::from_mut);
        let flags = if reverse {
            raw::REDISMODULE_STREAM_ITERATOR_REVERSE as c_int
        } else {
            0
        };
        // SAFETY: `self.key` is an open key; the bounds are NULL or valid IDs that outlive the
        // call (Redis copies them). A non-stream key makes it fail, and nothing is iterated.
        if unsafe { start(self.key, flags, from_ptr, to_ptr) } != raw::REDISMODULE_OK as c_int {
            return;
        }
        let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
        let mut n: c_long = 0;
        // SAFETY: the iterator was started on `self.key`; `id` and `n` are writable.
        while unsafe { next_id(self.key, &mut id, &mut n) } == raw::REDISMODULE_OK as c_int {
            if !each(
                self,
                StreamId {
                    ms: id.ms,
                    seq: id.seq,
                },
            ) {
                break;
            }
            // The server's iterator finds the next entry only from the end of this one: every
            // field must be read first (skipping them reads the node at the wrong place, which
            // fails an assertion in the server).
            while self.field().is_some() {}
        }
        // SAFETY: stops the iterator started above.
        unsafe { stop(self.key) };
    }

    /// The next field of the current entry while iterating: (name, value).
    fn field(&self) -> Option<(IterString, IterString)> {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let next_field = (unsafe { raw::RedisModule_StreamIteratorNextField })?;
        let mut field: *mut raw::RedisModuleString = std::ptr::null_mut();
        let mut value: *mut raw::RedisModuleString = std::ptr::null_mut();
        // SAFETY: an iterator runs on `self.key` (only called from `iterate`'s callback);
        // both pointers are writable.
        let rc = unsafe { next_field(self.key, &mut field, &mut value) };
        // Owned from here: freed on drop whatever happens next.
        let pair = (
            IterString {
                ctx: self.ctx,
                s: field,
            },
            IterString {
                ctx: self.ctx,
                s: value,
            },
        );
        (rc == raw::REDISMODULE_OK as c_int).then_some(pair)
    }

    /// The `count` of the current entry while iterating.
    fn entry_count(&self) -> Option<u64> {
        while let Some((name, value)) = self.field() {
            if name.bytes() == b"count" {
                return parse_u64_digits(value.bytes());
            }
        }
        None
    }

    /// The first entry's ID.
    pub fn first(&self) -> Option<StreamId> {
        let mut first = None;
        self.iterate(None, false, |_, id| {
            first = Some(id);
            false
        });
        first
    }

    /// The last entry's ID (the stream's last ID can be higher, after a deletion).
    pub fn last(&self) -> Option<StreamId> {
        let mut last = None;
        self.iterate(None, true, |_, id| {
            last = Some(id);
            false
        });
        last
    }

    /// How many entries lie in `range` (their fields are read, not parsed).
    pub fn count(&self, range: IdRange) -> u64 {
        let mut n: u64 = 0;
        self.iterate(Some(range), false, |_, _| {
            n = n.saturating_add(1);
            true
        });
        n
    }

    /// The entries in `range` (to the end of the stream when `range.to` is the largest ID):
    /// how many, and the sum of their `count`.
    ///
    /// # Errors
    /// [`ScanError`]: an entry without an integer `count`, or a sum over 64 bits.
    pub fn sum(&self, range: IdRange) -> Result<(u64, u64), ScanError> {
        let mut n: u64 = 0;
        let mut total: u64 = 0;
        let mut failed = None;
        self.iterate(Some(range), false, |key, id| {
            let Some(c) = key.entry_count() else {
                failed = Some(ScanError::BadCount(id));
                return false;
            };
            let Some(t) = total.checked_add(c) else {
                failed = Some(ScanError::Overflow);
                return false;
            };
            total = t;
            n = n.saturating_add(1);
            true
        });
        match failed {
            Some(e) => Err(e),
            None => Ok((n, total)),
        }
    }

    /// Append an entry `count <count>` (the key must be open for writing) with the ID `id`, or
    /// the next automatic ID when `id` is `None`: the ID given, or `None` if Redis refused (an
    /// ID not above the stream's last ID, or the last possible ID reached).
    pub fn add(&mut self, id: Option<StreamId>, count: u64) -> Option<StreamId> {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let add = (unsafe { raw::RedisModule_StreamAdd })?;
        let (field, value) = entry_strings(count)?;
        let mut argv = [field, value];
        let mut rid = raw_id(id.unwrap_or_default());
        let flags = if id.is_some() {
            0
        } else {
            raw::REDISMODULE_STREAM_ADD_AUTOID as c_int
        };
        // SAFETY: `self.key` is open for writing; `argv` holds one field/value pair of live
        // strings (the stream copies their bytes and keeps neither); `rid` is writable and
        // receives the ID.
        let rc = unsafe { add(self.key, flags, &mut rid, argv.as_mut_ptr(), 1) };
        (rc == raw::REDISMODULE_OK as c_int).then_some(StreamId {
            ms: rid.ms,
            seq: rid.seq,
        })
    }

    /// Trim entries below `min` whole nodes at a time (`XTRIM MINID ~`): how many went.
    pub fn trim_below(&mut self, min: StreamId) -> u64 {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let Some(trim) = (unsafe { raw::RedisModule_StreamTrimByID }) else {
            return 0;
        };
        let mut id = raw_id(min);
        // SAFETY: `self.key` is an open stream key; `id` is a valid ID Redis only reads.
        let n = unsafe {
            trim(
                self.key,
                raw::REDISMODULE_STREAM_TRIM_APPROX as c_int,
                &mut id,
            )
        };
        u64::try_from(n).unwrap_or(0)
    }

    /// The absolute expiry in Unix ms, -1 without one.
    pub fn expire_at(&self) -> i64 {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        match unsafe { raw::RedisModule_GetAbsExpire } {
            // SAFETY: `self.key` is an open key.
            Some(f) => unsafe { f(self.key) },
            None => -1,
        }
    }

    /// Set the absolute expiry in Unix ms (the key must be open for writing and exist).
    pub fn set_expire_at(&mut self, at_ms: i64) {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        if let Some(f) = unsafe { raw::RedisModule_SetAbsExpire } {
            // SAFETY: `self.key` is open for writing.
            unsafe { f(self.key, at_ms) };
        }
    }
}

impl Drop for StreamKey {
    fn drop(&mut self) {
        if !self.key.is_null() {
            raw::close_key(self.key);
        }
    }
}

/// The strings of an entry `count <n>`: the field name, made once, and the value of the last
/// `n` appended, made again when `n` changes. Made without a context (nothing frees them at the
/// end of a call) and kept for the process by the main thread, which runs every command.
#[derive(Debug, Clone, Copy)]
struct EntryStrings {
    field: *mut raw::RedisModuleString,
    value: *mut raw::RedisModuleString,
    count: u64,
}

thread_local! {
    static ENTRY: Cell<EntryStrings> = const {
        Cell::new(EntryStrings {
            field: ptr::null_mut(),
            value: ptr::null_mut(),
            count: 0,
        })
    };
}

/// The strings `count` and `n` of an entry `count <n>`, live until the next call of this
/// function with another `n` (a holder that retained one keeps it alive). `None` when Redis
/// could not make them.
pub(crate) fn entry_strings(
    n: u64,
) -> Option<(*mut raw::RedisModuleString, *mut raw::RedisModuleString)> {
    // SAFETY: copying function pointers out of the API table, filled in at load.
    let create = (unsafe { raw::RedisModule_CreateString })?;
    // SAFETY: as above.
    let free = (unsafe { raw::RedisModule_FreeString })?;
    let mut e = ENTRY.get();
    if e.field.is_null() {
        let name = b"count";
        // SAFETY: `name` is readable for its length; Redis copies it into a new string, which
        // no context owns (NULL) and which is kept for the process.
        e.field = unsafe { create(ptr::null_mut(), name.as_ptr().cast::<c_char>(), name.len()) };
        ENTRY.set(e);
        if e.field.is_null() {
            return None;
        }
    }
    if e.value.is_null() || e.count != n {
        let mut buf = [0u8; U64_DIGITS];
        let digits = format_u64_into(n, &mut buf);
        // SAFETY: as above, for the digits of `n`.
        let value = unsafe {
            create(
                ptr::null_mut(),
                digits.as_ptr().cast::<c_char>(),
                digits.len(),
            )
        };
        if value.is_null() {
            return None;
        }
        if !e.value.is_null() {
            // SAFETY: the previous value string was made above without a context and is
            // released once here (Redis frees it when no holder retained it).
            unsafe { free(ptr::null_mut(), e.value) };
        }
        e.value = value;
        e.count = n;
        ENTRY.set(e);
    }
    Some((e.field, e.value))
}

/// The database the calling client has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    match unsafe { raw::RedisModule_GetSelectedDb } {
        // SAFETY: `ctx` is a live context.
        Some(f) => unsafe { f(ctx.ctx) },
        None => 0,
    }
}
