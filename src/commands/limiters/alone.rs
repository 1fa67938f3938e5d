//! RL.ALL over one key run as that key's own limiter command (`commands::run_call`, the key at
//! argument 2), counted and propagated as RL.ALL: RL.ALL over one key replies and writes exactly
//! as that key's own command (the property test in `commands::all`), so a call with nothing
//! only RL.ALL does is that command. Reached from RL.ALL's table of the limiters
//! ([`super::registry::Limiter::alone`]).

use redis_module::Context;

use crate::commands::call::args::{Options, quote};
use crate::commands::row::Command;
use crate::commands::{Call, LimiterCommand, reply_decision, run_call};
use crate::core::Kind;
use crate::core::limiter::Algorithm;
use crate::core::state::Stored;
use crate::error::RlError;
use crate::ffi::command::Argv;

/// RL.ALL's registered name (in errors).
pub const NAME: &str = "rl.all";

/// RL.ALL over one key for the algorithm of command `C`, on its limiter's own arguments
/// `words` (two arguments its parser skips first): `None` when they do not parse, or when the
/// algorithm binds its parameters to the call or waits its turn among the key's waiters (a
/// concurrency key), which only RL.ALL's own path does.
pub fn run_alone_as<C: LimiterCommand>(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
    this: &'static Command,
    words: &[&[u8]],
    opts: Options,
) -> Option<Result<(), RlError>> {
    if <C::Algo as Algorithm>::BINDS_CALL || C::Algo::KIND == Kind::Concurrency {
        return None;
    }
    let params = C::parse_limiter(words).ok()?.params;
    Some(
        run_one_as::<C::Algo>(ctx, argv, bytes, this, &params, opts)
            .map_err(|e| key_error(e, bytes)),
    )
}

/// A WRONGTYPE error of RL.ALL over the key at argument 2, naming the key.
fn key_error(e: RlError, bytes: &[&[u8]]) -> RlError {
    match e {
        RlError::WrongKind { held, wanted } => RlError::WrongKindAt {
            key: quote(bytes.get(2).copied().unwrap_or_default()),
            held,
            wanted,
        },
        e => e,
    }
}

/// RL.ALL over one key for algorithm `A` with parameters `params`.
fn run_one_as<A: Stored>(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
    this: &'static Command,
    params: &A::Params,
    opts: Options,
) -> Result<(), RlError> {
    let call = Call::<A, _> {
        params,
        opts,
        command: NAME,
        event: this.name,
        reply: |ctx, d, _| reply_decision(ctx, d),
        name: None,
        policy: None,
        steps: (),
        key: 2,
    };
    run_call(ctx, argv, bytes, &this.stats, call).map(|_| ())
}
