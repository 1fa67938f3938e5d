//! The end of every write command, the same for all of them ([`finish`]): each key's value
//! written back and its expiry set (or the key deleted), the keys closed, then — when a key was
//! written — the call propagated and one keyspace event per written key, the call counted, and
//! the reply sent. A command that changed nothing propagates and notifies nothing.

use std::ffi::CStr;

use redis_module::{Context, RedisString};

use crate::commands::{replicate_argv_with_at, replicate_state};
use crate::core::flow::Write;
use crate::core::packed::StateMut;
use crate::core::time::expiry_ms;
use crate::core::{LimiterState, Micros};
use crate::error::RlError;
use crate::ffi;
use crate::ffi::command::{Arg, Argv};
use crate::ffi::key::{Holding, LimiterKey};
use crate::ffi::notify::notify;
use crate::stats::CommandStats;

/// What a command did to one of its keys.
#[derive(Debug)]
pub enum Fate {
    /// Nothing changed.
    Unchanged,
    /// Written: `new` is the value of a key that was empty (`None`: the value was changed in
    /// place), `expires_at` the key's new expiry (Unix µs).
    Written {
        new: Option<LimiterState>,
        expires_at: Micros,
    },
    /// Emptied: the key is deleted.
    Deleted,
}

impl Fate {
    /// The fate of a key whose value `held` (`None`: the key was empty) the core left as
    /// `write` says, expiring at `expires_at` when written. An unchanged inline value is not
    /// encoded again.
    pub fn of(held: Option<StateMut<'_>>, write: Write, expires_at: Micros) -> Fate {
        match write {
            Write::None => {
                if let Some(value) = held {
                    value.discard();
                }
                Fate::Unchanged
            }
            Write::Updated => {
                drop(held);
                Fate::Written {
                    new: None,
                    expires_at,
                }
            }
            Write::Created(new) => {
                drop(held);
                Fate::Written {
                    new: Some(new),
                    expires_at,
                }
            }
        }
    }

    /// The fate of a key whose value `held` was changed in place when `written` holds its new
    /// expiry, else left as it was.
    pub fn kept(held: StateMut<'_>, written: Option<Micros>) -> Fate {
        match written {
            Some(expires_at) => {
                drop(held);
                Fate::Written {
                    new: None,
                    expires_at,
                }
            }
            None => {
                held.discard();
                Fate::Unchanged
            }
        }
    }

    fn written(&self) -> bool {
        !matches!(self, Fate::Unchanged)
    }
}

/// How a write reaches replicas and the AOF: never verbatim when its result depended on the
/// clock.
#[derive(Debug, Clone, Copy)]
pub enum Propagate<'a> {
    /// The command with the call's arguments (minus any `AT t` at `at_index`) and `AT now`.
    WithAt {
        argv: Argv<'a>,
        at_index: Option<usize>,
        now: Micros,
    },
    /// The key's new value itself when it is short (`RL._SET key payload`), else as
    /// [`Propagate::WithAt`]: a single-limiter command.
    Value {
        argv: Argv<'a>,
        at_index: Option<usize>,
        now: Micros,
    },
    /// The command with these arguments, as they are (a write that does not depend on the
    /// clock).
    Plain(&'a [&'a RedisString]),
}

/// A write command's name and counters.
#[derive(Debug, Clone, Copy)]
pub struct Tail {
    /// The keyspace event a write fires, and the command it propagates as.
    pub event: &'static CStr,
    /// The command's counters.
    pub stats: &'static CommandStats,
}

/// The end of a write command: `keys` (each open key, its name and its [`Fate`]) written back,
/// expired or deleted, and closed; then, if any was written, the call propagated as `propagate`
/// says and the event fired on each written key; the call counted (`granted`: in the granted
/// column), and `reply` sent.
///
/// # Errors
/// [`RlError::WrongType`] if Redis refused a new value (it does not for a key opened for
/// writing that is empty or holds our type).
pub fn finish<'a>(
    ctx: &Context,
    tail: Tail,
    keys: impl IntoIterator<Item = (LimiterKey, Arg<'a>, Fate)>,
    propagate: Propagate<'_>,
    granted: bool,
    reply: impl FnOnce(&Context),
) -> Result<(), RlError> {
    let mut written: [Option<Arg<'a>>; 1] = [None];
    let mut more: Vec<Arg<'a>> = Vec::new();
    for (mut key, name, fate) in keys {
        if !fate.written() {
            continue;
        }
        match fate {
            Fate::Unchanged => {}
            Fate::Written { new, expires_at } => {
                if let Some(state) = new {
                    key.set(state)?;
                }
                if let Propagate::Value {
                    argv,
                    at_index,
                    now,
                } = propagate
                    && !replicate_value(ctx, &mut key, name)
                {
                    replicate_argv_with_at(ctx, tail.event, argv, at_index, now);
                }
                key.set_expire_at(expiry_ms(expires_at));
            }
            Fate::Deleted => key.delete(),
        }
        drop(key);
        match &mut written {
            [slot @ None] => *slot = Some(name),
            _ => more.push(name),
        }
    }
    let [first] = written;
    if let Some(first) = first {
        match propagate {
            Propagate::Value { .. } => {}
            Propagate::WithAt {
                argv,
                at_index,
                now,
            } => replicate_argv_with_at(ctx, tail.event, argv, at_index, now),
            Propagate::Plain(args) => ffi::replicate::replicate(ctx, tail.event, args),
        }
        notify(ctx, tail.event, first);
        for name in more {
            notify(ctx, tail.event, name);
        }
    }
    tail.stats.record(granted);
    reply(ctx);
    Ok(())
}

/// Propagate the key's stored value as `RL._SET` when it is short; whether it was.
fn replicate_value(ctx: &Context, key: &mut LimiterKey, name: Arg<'_>) -> bool {
    match key.holding() {
        Holding::Limiter(value) => replicate_state(ctx, name, value.stored()),
        _ => false,
    }
}
