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
    /// The encoding buffer of [`replicate_state`], reused by every call (commands run on the
    /// main thread).
    static PAYLOAD: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Propagate `RL._SET key <state>` when `state` encodes in at most [`STATE_REPLICATION_MAX`]
/// bytes; `false` (nothing propagated) otherwise.
pub fn replicate_state(ctx: &Context, key: Arg<'_>, state: Encodable<'_>) -> bool {
    // The common value is a copy of its fixed-width words.
    if let Some(payload) = state.fixed_payload() {
        ffi::replicate::replicate_key_bytes(ctx, SET_COMMAND, key, &payload);
        return true;
    }
    // A value known too long (a log of many entries) is not encoded to find out.
    if state.surely_longer_than(STATE_REPLICATION_MAX) {
        return false;
    }
    PAYLOAD.with_borrow_mut(|buf| {
        buf.clear();
        state.encode_into(buf);
        if buf.len() > STATE_REPLICATION_MAX {
            return false;
        }
        ffi::replicate::replicate_key_bytes(ctx, SET_COMMAND, key, buf);
        true
    })
}

/// A written value short enough to replicate as itself: its encoding, on the stack.
#[derive(Debug, Clone, Copy)]
pub struct ShortValue {
    bytes: [u8; STATE_REPLICATION_MAX],
    len: usize,
}

impl ShortValue {
    /// `state`'s encoding when it is at most [`STATE_REPLICATION_MAX`] bytes.
    pub fn of(state: Encodable<'_>) -> Option<ShortValue> {
        let mut bytes = [0u8; STATE_REPLICATION_MAX];
        if let Some(payload) = state.fixed_payload() {
            let len = payload.len();
            bytes.get_mut(..len)?.copy_from_slice(&payload);
            return Some(ShortValue { bytes, len });
        }
        if state.surely_longer_than(STATE_REPLICATION_MAX) {
            return None;
        }
        PAYLOAD.with_borrow_mut(|buf| {
            buf.clear();
            state.encode_into(buf);
            let len = buf.len();
            bytes.get_mut(..len)?.copy_from_slice(buf);
            Some(ShortValue { bytes, len })
        })
    }

    /// The encoding.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
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
