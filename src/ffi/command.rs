//! Commands registered with `RedisModule_CreateCommand` and our own `extern "C"` handler: the
//! handler sees the call's argument strings as Redis passed them ([`Argv`]), with no argument
//! Vec, no retain and no free per argument (the crate's wrapper does all three on every call).
//!
//! A handler replies itself and returns `Ok`, or returns the error, which `dispatch` sends
//! through [`crate::ffi::reply::error`] (printable whatever its text) or, for
//! [`RlError::Arity`], through `RedisModule_WrongArity` (Redis's own message naming the command).

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::c_int;

use redis_module::{Context, RedisString, Status, raw};

/// The C signature of a command handler.
type CommandFn = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// The `extern "C"` handler Redis calls for a command run by a [`Handler`]: a value a command
/// table can hold ([`Callback::of`]) and [`create`] registers.
#[derive(Clone, Copy)]
pub struct Callback(CommandFn);

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Callback")
    }
}

impl Callback {
    /// The handler that runs `H`.
    pub const fn of<H: Handler>() -> Callback {
        Callback(dispatch::<H>)
    }
}

use crate::error::RlError;

/// One argument of the current call, borrowed for the call.
#[derive(Debug, Clone, Copy)]
pub struct Arg<'a> {
    inner: *mut raw::RedisModuleString,
    _call: PhantomData<&'a ()>,
}

impl<'a> Arg<'a> {
    /// The argument's bytes.
    pub fn bytes(self) -> &'a [u8] {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let Some(ptr_len) = (unsafe { raw::RedisModule_StringPtrLen }) else {
            return &[];
        };
        let mut len = 0usize;
        // SAFETY: `inner` is a live string of the current call (or of a RedisString borrowed
        // for 'a); `len` is writable.
        let p = unsafe { ptr_len(self.inner, &mut len) };
        if p.is_null() {
            return &[];
        }
        // SAFETY: Redis returns a pointer to `len` readable bytes that live as long as the
        // string, which outlives 'a (the call, or the borrowed RedisString).
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    }

    /// The raw string, for the module API calls of `ffi`.
    pub(crate) fn raw(self) -> *mut raw::RedisModuleString {
        self.inner
    }
}

impl<'a> From<&'a RedisString> for Arg<'a> {
    fn from(s: &'a RedisString) -> Self {
        Arg {
            inner: s.inner,
            _call: PhantomData,
        }
    }
}

/// The arguments of the current call (`argv[0]` is the command name).
#[derive(Debug, Clone, Copy)]
pub struct Argv<'a> {
    argv: &'a [*mut raw::RedisModuleString],
}

impl<'a> Argv<'a> {
    /// Number of arguments, the command name included.
    pub fn len(self) -> usize {
        self.argv.len()
    }

    /// No argument at all (never for a command call).
    pub fn is_empty(self) -> bool {
        self.argv.is_empty()
    }

    /// Argument `i`.
    pub fn get(self, i: usize) -> Option<Arg<'a>> {
        self.argv.get(i).map(|&inner| Arg {
            inner,
            _call: PhantomData,
        })
    }

    /// Every argument, in order.
    pub fn iter(self) -> impl ExactSizeIterator<Item = Arg<'a>> {
        self.argv.iter().map(|&inner| Arg {
            inner,
            _call: PhantomData,
        })
    }

    /// The bytes of the first arguments, as many as `out` has room for (the rest of `out` as
    /// it was): as [`Arg::bytes`] each, the API function looked up once for all of them.
    pub fn bytes_into(self, out: &mut [&'a [u8]]) {
        // SAFETY: copying a function pointer out of the API table, filled in at load.
        let Some(ptr_len) = (unsafe { raw::RedisModule_StringPtrLen }) else {
            return;
        };
        for (slot, &inner) in out.iter_mut().zip(self.argv) {
            let mut len = 0usize;
            // SAFETY: `inner` is a live string of the current call; `len` is writable.
            let p = unsafe { ptr_len(inner, &mut len) };
            *slot = if p.is_null() {
                &[]
            } else {
                // SAFETY: Redis returns a pointer to `len` readable bytes that live as long as
                // the string, which outlives the call ('a).
                unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
            };
        }
    }

    /// The arguments from position `from` on, as Redis passed them (for an API call that takes
    /// a vector of strings); empty past the end.
    pub(crate) fn raw_from(self, from: usize) -> &'a [*mut raw::RedisModuleString] {
        self.argv.get(from..).unwrap_or_default()
    }
}

/// Run `f` with `args` (strings made by the module) seen as an [`Argv`].
pub fn with_argv<R>(args: &[RedisString], f: impl FnOnce(Argv<'_>) -> R) -> R {
    let raw: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
    f(Argv { argv: &raw })
}

/// Run `f` with `argv` less the arguments at the positions in `skip`.
pub fn with_argv_skipping<R>(
    argv: Argv<'_>,
    skip: std::ops::Range<usize>,
    f: impl FnOnce(Argv<'_>) -> R,
) -> R {
    let raw: Vec<*mut raw::RedisModuleString> = argv
        .argv
        .iter()
        .enumerate()
        .filter(|(i, _)| !skip.contains(i))
        .map(|(_, &p)| p)
        .collect();
    f(Argv { argv: &raw })
}

/// A command run by `dispatch`.
pub trait Handler {
    /// Run the command on `argv`; on `Ok` it has replied.
    ///
    /// # Errors
    /// The error to reply (nothing was replied yet).
    fn call(ctx: &Context, argv: Argv<'_>) -> Result<(), RlError>;
}

/// The `extern "C"` handler Redis calls for a command run by `H` ([`Callback::of`]).
unsafe extern "C" fn dispatch<H: Handler>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let len = usize::try_from(argc).unwrap_or(0);
    let argv: &[*mut raw::RedisModuleString] = if argv.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: Redis passes `argc` live argument strings in `argv`, valid for the call.
        unsafe { std::slice::from_raw_parts(argv, len) }
    };
    match H::call(&context, Argv { argv }) {
        Ok(()) => {}
        Err(RlError::Arity) => {
            // SAFETY: copying a function pointer out of the API table, filled in at load.
            if let Some(wrong_arity) = unsafe { raw::RedisModule_WrongArity } {
                // SAFETY: `ctx` is the command's context.
                unsafe { wrong_arity(ctx) };
            }
        }
        Err(e) => crate::ffi::reply::error(&context, &e.to_string()),
    }
    raw::REDISMODULE_OK as c_int
}

/// Register command `name` (lower case) run by `handler`, with its flags and legacy key range.
pub fn create(
    ctx: &Context,
    name: &CStr,
    handler: Callback,
    flags: &CStr,
    first_key: c_int,
    last_key: c_int,
    key_step: c_int,
) -> Status {
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let Some(create) = (unsafe { raw::RedisModule_CreateCommand }) else {
        return Status::Err;
    };
    // SAFETY: called from OnLoad with its context; `name` and `flags` are NUL-terminated
    // constants, and `handler` has the command handler's signature (`dispatch` of a handler).
    let rc = unsafe {
        create(
            ctx.ctx,
            name.as_ptr(),
            Some(handler.0),
            flags.as_ptr(),
            first_key,
            last_key,
            key_step,
        )
    };
    if rc == raw::REDISMODULE_OK as c_int {
        Status::Ok
    } else {
        Status::Err
    }
}

/// Register `full` (`container|sub`, lower case) as subcommand `sub` of container command
/// `container`, run by `handler`, with its flags and no keys; the container is created (with no
/// handler of its own) by its first subcommand. Subcommands have their own flags and ACL
/// categories (Redis 7.0+, Valkey).
pub fn create_subcommand(ctx: &Context, full: &CStr, handler: Callback, flags: &CStr) -> Status {
    let bytes = full.to_bytes();
    let Some(bar) = bytes.iter().position(|&b| b == b'|') else {
        return Status::Err;
    };
    let (Ok(container), Ok(sub)) = (
        std::ffi::CString::new(bytes.get(..bar).unwrap_or_default()),
        std::ffi::CString::new(bytes.get(bar.saturating_add(1)..).unwrap_or_default()),
    ) else {
        return Status::Err;
    };
    // SAFETY: copying a function pointer out of the API table, filled in at load.
    let create = unsafe { raw::RedisModule_CreateCommand };
    // SAFETY: as above.
    let get = unsafe { raw::RedisModule_GetCommand };
    // SAFETY: as above.
    let create_sub = unsafe { raw::RedisModule_CreateSubcommand };
    let (Some(create), Some(get), Some(create_sub)) = (create, get, create_sub) else {
        return Status::Err;
    };
    // SAFETY: called from OnLoad with its context; the name is NUL-terminated.
    let mut parent = unsafe { get(ctx.ctx, container.as_ptr()) };
    if parent.is_null() {
        // SAFETY: as above; a container has no handler, no flags and no keys.
        let rc = unsafe { create(ctx.ctx, container.as_ptr(), None, c"".as_ptr(), 0, 0, 0) };
        if rc != raw::REDISMODULE_OK as c_int {
            return Status::Err;
        }
        // SAFETY: as above.
        parent = unsafe { get(ctx.ctx, container.as_ptr()) };
        if parent.is_null() {
            return Status::Err;
        }
    }
    // SAFETY: `parent` is our container command; `sub` and `flags` are NUL-terminated, and
    // `handler` has the command handler's signature.
    let rc = unsafe {
        create_sub(
            parent,
            sub.as_ptr(),
            Some(handler.0),
            flags.as_ptr(),
            0,
            0,
            0,
        )
    };
    if rc == raw::REDISMODULE_OK as c_int {
        Status::Ok
    } else {
        Status::Err
    }
}
