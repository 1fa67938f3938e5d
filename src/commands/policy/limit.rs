//! RL.LIMIT key policy [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [BLOCK d] [DELAY d] [AT t] \[DETAIL\]
//!
//! A one-limiter named policy (`commands::policy`) applied to a key, with the options and reply
//! of that limiter's own command: the policy is looked up by name (nothing is parsed but the
//! options) and the call runs the limiter commands' own flow (`commands::run_call`), named
//! `rl.limit` in keyspace events and in what it propagates. A policy of several limiters is an
//! error naming it (use RL.ALL ... POLICY name); its limiter's `CHARGE`, if any, is the call's
//! cost. The key keeps its units used when the policy changes (the parameter-change rule).

use redis_module::Context;

use crate::commands::call::args::{Args, Options};
use crate::commands::policy::state as policy_state;
use crate::commands::row::{Command, Run};
use crate::commands::{Call, reply_decision, run_call};
use crate::core::Kind;
use crate::core::state::{Stored, dispatch};
use crate::docs::{ArgType, CommandDoc, DELAY, KEY, arg};
use crate::error::RlError;
use crate::ffi::command::Argv;

/// RL.LIMIT's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"Rate-limit a key with a named one-limiter policy (RL.POLICY SET), as its limiter's own command would",
    complexity: c"O(1) for most limiters, as the policy's limiter's own command",
    args: &[KEY, arg(c"policy", ArgType::String), DELAY],
    shared_options: true,
};

/// RL.LIMIT
pub struct Limit;

impl Run for Limit {
    /// RL.LIMIT on the call's arguments and their bytes; on `Ok` it has replied.
    ///
    /// # Errors
    /// Arity, an unknown policy or one of several limiters (naming it), the options' errors, and
    /// those of the limiter's own command.
    #[inline(always)]
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        let Some(&name) = bytes.get(2) else {
            return Err(RlError::Arity);
        };
        let mut args = Args::new(bytes);
        args.nth(2);
        let mut opts = Options::parse(&mut args, |_, _| Ok(false))?;
        let found = policy_state::lookup(name)?;
        let [limiter] = found.def.limiters.as_slice() else {
            return Err(RlError::PolicyKeys {
                policy: crate::commands::call::args::quote(name),
                limiters: found.def.limiters.len(),
                keys: 1,
            });
        };
        if let Some(charge) = limiter.charge {
            opts.cost = charge;
        }
        // A policy set with SHADOW: every call under it as with the SHADOW option.
        opts.shadow |= found.def.shadow;
        policy_state::flush_pending(ctx);
        // A concurrency limiter takes its lease id from the call's DEDUP, as in RL.ALL.
        let bound;
        let spec = if limiter.params.kind() == Kind::Concurrency {
            if opts.dedup.is_none() {
                return Err(RlError::Conflict(
                    crate::commands::call::options::POLICY_NEEDS_LEASE_ID,
                ));
            }
            bound = limiter
                .params
                .clone()
                .bind_call(opts.dedup, opts.best_effort)
                .map_err(RlError::from)?;
            &bound
        } else {
            &limiter.params
        };
        let hooks = Hooks {
            opts,
            name: limiter.name.as_deref(),
            policy: &found.name,
        };
        // Never taken over (RL.LIMIT has no steps of its own), so always counted.
        let ran = dispatch!(spec.state(), a => limit_with(ctx, argv, bytes, this, a, hooks))?;
        if let Some(ran) = ran {
            found.stats.record(
                ran.count.granted(),
                ran.count.shadow_denied(),
                ran.count.near_limit(),
            );
        }
        Ok(())
    }
}

/// What RL.LIMIT gives the limiter's flow besides its parameters.
#[derive(Clone, Copy)]
struct Hooks<'h> {
    opts: Options,
    name: Option<&'h [u8]>,
    policy: &'h [u8],
}

/// The limiter flow for the policy's limiter `a` (its type inferred from it).
#[inline(always)]
fn limit_with<A: Stored>(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
    this: &'static Command,
    a: &A,
    hooks: Hooks<'_>,
) -> Result<Option<crate::commands::Ran>, RlError> {
    let call = Call::<A, _> {
        params: a.params(),
        opts: hooks.opts,
        command: "rl.limit",
        event: this.name,
        reply: |ctx, d, _| reply_decision(ctx, d),
        name: hooks.name,
        policy: Some(hooks.policy),
        steps: (),
        key: 1,
    };
    run_call(ctx, argv, bytes, &this.stats, call)
}
