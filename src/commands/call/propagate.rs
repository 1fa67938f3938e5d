//! How a write reaches replicas and the AOF: the key's new value itself when it is short
//! ([`replicate_state`]), else the call with the time it was evaluated at
//! ([`replicate_argv_with_at`]), and the key's expiry when a call behind the clock kept it
//! longer than its state implies ([`replicate_expiry`]).

use std::cell::RefCell;
use std::ffi::CStr;

use redis_module::Context;

use crate::commands::call::at::{AT_BUF, format_at_into};
use crate::commands::call::evaluation::Expiry;
use crate::commands::call::restore::SET_COMMAND;
use crate::core::Micros;
use crate::core::decimal::{U64_DIGITS, format_u64_into};
use crate::core::packed::Encodable;
use crate::ffi;
use crate::ffi::command::{Arg, Argv};

/// Longest encoded value replicated as itself (`RL._SET`); a longer one (a sliding log with many
/// entries, `DEDUP` ids) replicates as its command.
pub const STATE_REPLICATION_MAX: usize = 48;

thread_local! {
    /// The encoding buffer of [`with_short`], reused by every call (commands run on the
    /// main thread).
    static PAYLOAD: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Propagate `RL._SET key <state>` when `state` encodes in at most [`STATE_REPLICATION_MAX`]
/// bytes; `false` (nothing propagated) otherwise.
pub fn replicate_state(ctx: &Context, key: Arg<'_>, state: Encodable<'_>) -> bool {
    with_short(state, |bytes| {
        ffi::replicate::replicate_key_bytes(ctx, SET_COMMAND, key, bytes);
    })
    .is_some()
}

/// `f` on the encoding of `state` when it is at most [`STATE_REPLICATION_MAX`] bytes; `None`
/// otherwise. The common value is a copy of its fixed-width words, and a value known too long
/// (a log of many entries, `DEDUP` ids) is not encoded to find out.
#[inline(always)]
fn with_short<R>(state: Encodable<'_>, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    if let Some(payload) = state.fixed_payload() {
        return Some(f(&payload));
    }
    if state.surely_longer_than(STATE_REPLICATION_MAX) {
        return None;
    }
    PAYLOAD.with_borrow_mut(|buf| {
        buf.clear();
        state.encode_into(buf);
        (buf.len() <= STATE_REPLICATION_MAX).then(|| f(buf))
    })
}

/// The new values of a call's written keys, for one `RL._SET key value [key value ...]`
/// ([`replicate_values`]): each encoded once, where it is at hand, into its own place on the
/// stack, in key order; up to [`ffi::replicate::PAIRS_MAX`] values of at most
/// [`STATE_REPLICATION_MAX`] bytes.
#[derive(Debug)]
pub struct ShortValues {
    bytes: [[u8; STATE_REPLICATION_MAX]; ffi::replicate::PAIRS_MAX],
    lens: [usize; ffi::replicate::PAIRS_MAX],
    /// Each value's key, by its index among the call's keys.
    keys: [usize; ffi::replicate::PAIRS_MAX],
    count: usize,
    /// Every value added is short, and there are few enough of them.
    short: bool,
}

impl Default for ShortValues {
    fn default() -> Self {
        ShortValues {
            bytes: [[0; STATE_REPLICATION_MAX]; ffi::replicate::PAIRS_MAX],
            lens: [0; ffi::replicate::PAIRS_MAX],
            keys: [0; ffi::replicate::PAIRS_MAX],
            count: 0,
            short: true,
        }
    }
}

impl ShortValues {
    /// Add the new value `state` of the key at index `key` (keys added in order). Once a value
    /// is long, or there are more than [`ffi::replicate::PAIRS_MAX`], nothing more is encoded.
    pub fn push(&mut self, key: usize, state: Encodable<'_>) {
        if !self.short {
            return;
        }
        let i = self.count;
        let (Some(bytes), Some(len), Some(at)) = (
            self.bytes.get_mut(i),
            self.lens.get_mut(i),
            self.keys.get_mut(i),
        ) else {
            self.short = false;
            return;
        };
        match encode_short(state, bytes) {
            Some(n) => {
                *len = n;
                *at = key;
                self.count = i.saturating_add(1);
            }
            None => self.short = false,
        }
    }

    /// Whether every value added is short and they are few enough for one `RL._SET`.
    pub fn short(&self) -> bool {
        self.short
    }

    /// Each value added: its key's index and its encoding.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &[u8])> {
        self.keys
            .iter()
            .zip(self.lens.iter().zip(&self.bytes))
            .take(self.count)
            .map(|(&key, (&len, bytes))| (key, bytes.get(..len).unwrap_or_default()))
    }
}

/// Encode `state` into `out` when it is at most [`STATE_REPLICATION_MAX`] bytes: its length.
fn encode_short(state: Encodable<'_>, out: &mut [u8; STATE_REPLICATION_MAX]) -> Option<usize> {
    with_short(state, |bytes| {
        out.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(bytes.len())
    })
    .flatten()
}

/// Propagate `RL._SET key value [key value ...]`, each written key with its short value, as one
/// command; `false` (nothing propagated) when there are more than
/// [`ffi::replicate::PAIRS_MAX`] of them.
pub fn replicate_values(ctx: &Context, values: &[(Arg<'_>, &[u8])]) -> bool {
    ffi::replicate::replicate_key_byte_pairs(ctx, SET_COMMAND, values)
}

/// Propagate command `name` with `argv` (minus `argv[0]` and any `AT t` pair at `at_index`) and
/// `AT <now>`: the deterministic form of a call whose result depended on the clock.
///
/// The call's own argument strings are passed on as they are; only `AT` and the time are new.
pub fn replicate_argv_with_at(
    ctx: &Context,
    name: &CStr,
    argv: Argv<'_>,
    at_index: Option<usize>,
    now: Micros,
) {
    let mut buf = [0u8; AT_BUF];
    let at = format_at_into(now, &mut buf);
    let Some(at_index) = at_index else {
        // No `AT` to drop (the common call): the arguments as Redis passed them.
        ffi::replicate::replicate_argv_with(ctx, name, argv, c"AT", at);
        return;
    };
    let kept = argv
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, _)| *i != at_index && *i != at_index.saturating_add(1))
        .map(|(_, a)| a);
    ffi::replicate::replicate_with(ctx, name, kept, c"AT", at);
}

/// Propagate `PEXPIREAT key <ms>` after a write's own propagation when the write kept the key
/// past the expiry its state implies: replicas and the AOF compute that one from the state, so
/// they get the master's resolved expiry too (whatever their own clock).
pub fn replicate_expiry(ctx: &Context, key: Arg<'_>, expiry: Expiry) {
    if expiry.kept {
        replicate_pexpireat(ctx, key, expiry.ms);
    }
}

/// Propagate `PEXPIREAT key <ms>`: a key's absolute expiry, whatever the replica's clock.
pub fn replicate_pexpireat(ctx: &Context, key: Arg<'_>, ms: i64) {
    let mut buf = [0u8; U64_DIGITS];
    // Expiries are from `ceil_ms`/`expiry_ms`: never negative.
    let at = format_u64_into(ms.unsigned_abs(), &mut buf);
    ffi::replicate::replicate_key_bytes(ctx, c"PEXPIREAT", key, at);
}
