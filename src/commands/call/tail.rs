//! The end of every write command, the same for all of them ([`finish`]): each key's value
//! written back and its expiry set (or the key deleted), the keys closed, then — when a key was
//! written — the call propagated and one keyspace event per written key, the call counted, and
//! the reply sent. A command that changed nothing propagates and notifies nothing.

use std::ffi::CStr;

use redis_module::Context;

use crate::commands::call::evaluation::Evaluation;
use crate::commands::call::propagate::{
    ShortValues, replicate_argv_with_at, replicate_expiry, replicate_state, replicate_values,
};
use crate::commands::row::Command;
use crate::core::few::Few;
use crate::core::flow::Write;
use crate::core::packed::StateMut;
use crate::core::{LimiterState, Micros};
use crate::error::RlError;
use crate::ffi;
use crate::ffi::command::{Arg, Argv};
use crate::ffi::key::{Holding, LimiterKey};
use crate::ffi::notify::notify;
use crate::stats::{CommandStats, Count};

/// What a command did to one of its keys.
#[derive(Debug)]
pub enum Fate {
    /// Nothing changed.
    Unchanged,
    /// Written: `new` is the value of a key that was empty (`None`: the value was changed in
    /// place), `expires_at` the key's new expiry (Unix µs); `sent` whether the value itself was
    /// already propagated ([`Propagate::Value`]; `None`: not tried yet).
    Written {
        new: Option<LimiterState>,
        expires_at: Micros,
        sent: Option<bool>,
    },
    /// Emptied: the key is deleted.
    Deleted,
}

impl Fate {
    /// The fate of a key whose value `held` (`None`: the key was empty) the core left as
    /// `write` says, expiring at `expires_at` when written. An unchanged inline value is not
    /// encoded again. With `value` (the key's name), a value changed in place is propagated as
    /// itself while at hand ([`Propagate::Value`]).
    #[inline(always)]
    pub fn of(
        ctx: &Context,
        held: Option<StateMut<'_>>,
        write: Write,
        expires_at: Micros,
        value: Option<Arg<'_>>,
    ) -> Fate {
        match write {
            Write::None => {
                if let Some(value) = held {
                    value.discard();
                }
                Fate::Unchanged
            }
            Write::Updated => {
                let sent = match (held, value) {
                    (Some(mut state), Some(name)) => {
                        Some(replicate_state(ctx, name, state.store()))
                    }
                    _ => None,
                };
                Fate::Written {
                    new: None,
                    expires_at,
                    sent,
                }
            }
            Write::Created(new) => {
                drop(held);
                Fate::Written {
                    new: Some(new),
                    expires_at,
                    sent: None,
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
                    sent: None,
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
    /// Every written key's new value itself, in one command (`RL._SET key payload [key payload
    /// ...]`), when every one is short and they are few, else as [`Propagate::WithAt`]: RL.ALL.
    /// `values` holds them, encoded by the caller while each was at hand.
    Values {
        argv: Argv<'a>,
        at_index: Option<usize>,
        now: Micros,
        values: &'a ShortValues,
    },
    /// The command with the call's arguments, as they are (a write that does not depend on the
    /// clock).
    Plain(Argv<'a>),
}

/// A write command's name and counters.
#[derive(Debug, Clone, Copy)]
pub struct Tail {
    /// The keyspace event a write fires, and the command it propagates as.
    pub event: &'static CStr,
    /// The command's counters.
    pub stats: &'static CommandStats,
}

impl Tail {
    /// Command `c`'s name and counters.
    pub fn of(c: &'static Command) -> Tail {
        Tail {
            event: c.name,
            stats: &c.stats,
        }
    }
}

/// One key of a write command, for [`finish`].
pub struct Touched<'a> {
    /// The key, open for writing; [`finish`] closes it.
    pub key: LimiterKey,
    /// Its name.
    pub name: Arg<'a>,
    /// What the command did to it.
    pub fate: Fate,
}

impl<'a> Touched<'a> {
    /// `key` (named `name`) and its fate.
    pub fn new(key: LimiterKey, name: impl Into<Arg<'a>>, fate: Fate) -> Self {
        Touched {
            key,
            name: name.into(),
            fate,
        }
    }
}

/// The end of a write command evaluated as `eval` says: each of `keys` written back, expired
/// ([`Evaluation::expiry`]: kept longer for a call behind the clock) or deleted, and closed;
/// then, if any was written, the call propagated as `propagate` says (followed by the expiry of
/// each key kept longer than its state implies) and the event fired on each written key; the
/// call counted (`count`: a `bool` for granted or denied, or [`Count::of`] for a `SHADOW`
/// call), and `reply` sent.
///
/// # Errors
/// [`RlError::WrongType`] if Redis refused a new value (it does not for a key opened for
/// writing that is empty or holds our type).
#[inline(always)]
pub fn finish(
    ctx: &Context,
    tail: Tail,
    eval: Evaluation,
    keys: &mut [Touched<'_>],
    propagate: Propagate<'_>,
    count: impl Into<Count>,
    reply: impl FnOnce(&Context),
) -> Result<(), RlError> {
    if let Propagate::Values {
        argv,
        at_index,
        now,
        values,
    } = propagate
    {
        let call = (argv, at_index, now);
        return finish_values(ctx, tail, eval, keys, call, values, count, reply);
    }
    let mut wrote = false;
    for k in keys.iter_mut() {
        wrote |= write_key(ctx, tail, eval, k, propagate)?;
    }
    if wrote {
        match propagate {
            Propagate::Value { .. } | Propagate::Values { .. } => {}
            Propagate::WithAt {
                argv,
                at_index,
                now,
            } => replicate_argv_with_at(ctx, tail.event, argv, at_index, now),
            Propagate::Plain(args) => ffi::replicate::replicate(ctx, tail.event, args),
        }
    }
    after_propagation(ctx, tail, eval, keys, wrote, count, reply);
    Ok(())
}

/// [`finish`] under [`Propagate::Values`]: each key written, expired and closed; then the call
/// propagated as the written keys' new values (`values`, encoded by the caller) when every one
/// is short (`RL._SET`), else as the command with `AT` (`call`: its arguments, the index of any
/// `AT t`, the time), then as [`finish`].
#[allow(clippy::too_many_arguments)]
fn finish_values(
    ctx: &Context,
    tail: Tail,
    eval: Evaluation,
    keys: &mut [Touched<'_>],
    call: (Argv<'_>, Option<usize>, Micros),
    values: &ShortValues,
    count: impl Into<Count>,
    reply: impl FnOnce(&Context),
) -> Result<(), RlError> {
    let mut wrote = false;
    for k in keys.iter_mut() {
        wrote |= write_key(ctx, tail, eval, k, Propagate::Plain(call.0))?;
    }
    if wrote {
        let sent = values.short() && {
            let mut pairs: Few<(Arg<'_>, &[u8])> = Few::with_capacity(keys.len());
            for (i, v) in values.iter() {
                if let Some(k) = keys.get(i) {
                    pairs.push((k.name, v));
                }
            }
            replicate_values(ctx, &pairs)
        };
        if !sent {
            let (argv, at_index, now) = call;
            replicate_argv_with_at(ctx, tail.event, argv, at_index, now);
        }
    }
    after_propagation(ctx, tail, eval, keys, wrote, count, reply);
    Ok(())
}

/// What [`finish`] does after the call is propagated, whatever its form: if any key was
/// written, the expiry of each key kept longer than its state implies, then the event on each
/// written key; the call counted and `reply` sent.
#[inline(always)]
fn after_propagation(
    ctx: &Context,
    tail: Tail,
    eval: Evaluation,
    keys: &[Touched<'_>],
    wrote: bool,
    count: impl Into<Count>,
    reply: impl FnOnce(&Context),
) {
    if wrote {
        if eval.keep_until.is_some() {
            for k in keys {
                if let Fate::Written { expires_at, .. } = k.fate {
                    replicate_expiry(ctx, k.name, eval.expiry(expires_at));
                }
            }
        }
        for k in keys.iter().filter(|k| k.fate.written()) {
            notify(ctx, tail.event, k.name);
        }
    }
    tail.stats.record(count);
    reply(ctx);
}

/// One key's part of [`finish`]: its new value stored, its expiry set as `eval` says (the value propagated
/// itself under [`Propagate::Value`]) or the key deleted, and the key closed. Whether it was
/// written.
#[inline(always)]
fn write_key(
    ctx: &Context,
    tail: Tail,
    eval: Evaluation,
    k: &mut Touched<'_>,
    propagate: Propagate<'_>,
) -> Result<bool, RlError> {
    match &mut k.fate {
        Fate::Unchanged => {}
        Fate::Written {
            new,
            expires_at,
            sent,
        } => {
            if let Some(state) = new.take() {
                k.key.set(state)?;
            }
            if let Propagate::Value {
                argv,
                at_index,
                now,
            } = propagate
                && !sent.unwrap_or_else(|| replicate_value(ctx, &mut k.key, k.name))
            {
                replicate_argv_with_at(ctx, tail.event, argv, at_index, now);
            }
            k.key.set_expire_at(eval.expiry(*expires_at).ms);
        }
        Fate::Deleted => k.key.delete(),
    }
    k.key.close();
    Ok(k.fate.written())
}

/// Propagate the key's stored value as `RL._SET` when it is short; whether it was.
fn replicate_value(ctx: &Context, key: &mut LimiterKey, name: Arg<'_>) -> bool {
    match key.holding() {
        Holding::Limiter(value) => replicate_state(ctx, name, value.stored()),
        _ => false,
    }
}
