//! The path every limiter command takes: bytes → typed request → core (judge, then settle) →
//! `tail::finish` (write back, expire, replicate, notify, count) → reply.
//!
//! Every limiter command is a [`LimiterCommand`]: it parses its arguments, names its algorithm
//! and documents itself; [`run`] does the rest the same way for all of them, through
//! [`run_call`], which RL.LIMIT, RL.ACQUIRE and RL.ALL over one key call with their own [`Call`].

use std::ffi::CStr;
use std::marker::PhantomData;

use redis_module::{Context, RedisValue};

use crate::commands::call::args::Options;
use crate::commands::call::detail;
use crate::commands::call::evaluation::evaluation_time;
use crate::commands::call::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::commands::row::{Command, Run};
use crate::config;
use crate::core::flow::{self, Outcome, Write};
use crate::core::limiter::{self, Algorithm, Decision, Reason, Request, Verdict};
use crate::core::packed::StateMut;
use crate::core::state::Stored;
use crate::core::time::Micros;
use crate::docs::CommandDoc;
use crate::error::RlError;
use crate::ffi::command::{Arg, Argv};
use crate::ffi::key::LimiterKey;
use crate::ffi::reply;
use crate::stats::{CommandStats, Count};

/// A command's parsed arguments: the algorithm's parameters and the shared options.
#[derive(Debug, Clone)]
pub struct Parsed<P> {
    pub params: P,
    pub opts: Options,
}

/// A limiter command: how it parses, which algorithm it runs, how it replies and replicates.
///
/// The name and event default to the algorithm's own command (`rl.<name>`); its counters are its
/// row's in `table`.
pub trait LimiterCommand {
    /// The algorithm behind the command.
    type Algo: Stored;

    /// What COMMAND DOCS says of it; for an algorithm's command, also RL.ALL's syntax of the
    /// algorithm (the required arguments after the key, then the optional ones, each with a
    /// token and one value).
    const DOC: CommandDoc;

    /// The registered (lower-case) name.
    const NAME: &'static str = <Self::Algo as Stored>::KIND.command();

    /// The name as a C string: the keyspace event a write fires, and the command replicated.
    const EVENT: &'static CStr = <Self::Algo as Stored>::KIND.command_c();

    /// Parse the whole argument vector (`args[0]` is the command name, `args[1]` the key).
    ///
    /// # Errors
    /// Any argument error, worded for the client.
    fn parse(args: &[&[u8]]) -> Result<Parsed<<Self::Algo as Algorithm>::Params>, RlError>;

    /// Parse the algorithm's limiter inside RL.ALL (the same arguments, without the shared
    /// options, which RL.ALL parses once for all limiters): by default as [`Self::parse`].
    ///
    /// # Errors
    /// As [`Self::parse`].
    fn parse_limiter(args: &[&[u8]]) -> Result<Parsed<<Self::Algo as Algorithm>::Params>, RlError> {
        Self::parse(args)
    }

    /// Run the command on `argv` (`bytes`: their bytes), counted in `stats` (its row's): by
    /// default [`run`].
    ///
    /// # Errors
    /// As [`run`].
    #[inline(always)]
    fn call(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        stats: &'static CommandStats,
    ) -> Result<(), RlError>
    where
        Self: Sized,
    {
        run::<Self>(ctx, argv, bytes, stats)
    }

    /// Reply with `decision` (`verdict` has the exact, unrounded values).
    fn reply(ctx: &Context, decision: &Decision, _verdict: &Verdict) {
        reply_decision(ctx, decision);
    }
}

/// The limiter reply's field names, in order.
pub const DECISION_NAMES: [&str; 5] = [
    "granted",
    "limit",
    "remaining",
    "retry_after_ms",
    "reset_after_ms",
];

/// The limiter reply's values, in the order of [`DECISION_NAMES`].
pub fn decision_values(d: &Decision) -> [i64; 5] {
    [
        d.granted,
        d.limit,
        d.remaining,
        d.retry_after_ms,
        d.reset_after_ms,
    ]
}

/// Send the limiter reply of SPEC.md: five integers (RESP2) or the same as a map (RESP3).
pub fn reply_decision(ctx: &Context, d: &Decision) {
    reply::integers(ctx, Some(&DECISION_NAMES), decision_values(d));
}

/// The limiter reply's names and values, in order.
pub fn decision_fields(d: &Decision) -> [(&'static str, RedisValue); 5] {
    let [g, l, r, retry, reset] = decision_values(d);
    let [ng, nl, nr, nretry, nreset] = DECISION_NAMES;
    [
        (ng, RedisValue::Integer(g)),
        (nl, RedisValue::Integer(l)),
        (nr, RedisValue::Integer(r)),
        (nretry, RedisValue::Integer(retry)),
        (nreset, RedisValue::Integer(reset)),
    ]
}

/// Arguments read on the stack; a longer call uses the heap.
const INLINE_ARGS: usize = 16;

/// Arguments of a longer call read on the stack (RL.ALL over a few limiters with their options);
/// a longer one uses the heap.
const INLINE_ARGS_LONG: usize = 48;

/// Run `f` on the bytes of every argument, without allocating for a call of up to
/// `INLINE_ARGS_LONG` arguments.
pub fn with_bytes<R>(argv: Argv<'_>, f: impl FnOnce(&[&[u8]]) -> R) -> R {
    let mut inline: [&[u8]; INLINE_ARGS] = [&[]; INLINE_ARGS];
    if argv.len() <= INLINE_ARGS {
        argv.bytes_into(&mut inline);
        f(inline.get(..argv.len()).unwrap_or_default())
    } else {
        with_bytes_long(argv, f)
    }
}

/// [`with_bytes`] for a call of more than `INLINE_ARGS` arguments.
#[inline(never)]
fn with_bytes_long<R>(argv: Argv<'_>, f: impl FnOnce(&[&[u8]]) -> R) -> R {
    if argv.len() <= INLINE_ARGS_LONG {
        let mut inline: [&[u8]; INLINE_ARGS_LONG] = [&[]; INLINE_ARGS_LONG];
        argv.bytes_into(&mut inline);
        f(inline.get(..argv.len()).unwrap_or_default())
    } else {
        let heap: Vec<&[u8]> = argv.iter().map(Arg::bytes).collect();
        f(&heap)
    }
}

/// The handler of limiter command `C` (its row in `table`).
pub struct Limiter<C>(PhantomData<C>);

impl<C: LimiterCommand> Run for Limiter<C> {
    #[inline(always)]
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        C::call(ctx, argv, bytes, &this.stats)
    }
}

/// The detailed reply of a single-limiter command (`DETAIL`): its one limiter named by `name`
/// or its key (`bytes[1]`), from `policy` if it comes from a named policy; enforcement's
/// `verdict` for `reason` on the key at `now` (the time the call was evaluated at on it); with
/// `req.shadow` the call let through.
#[cold]
pub fn reply_detail<A: Stored>(
    ctx: &Context,
    bytes: &[&[u8]],
    params: &A::Params,
    req: &Request,
    (verdict, reason, now): (&Verdict, Reason, Micros),
    (name, policy): (Option<&[u8]>, Option<&[u8]>),
) {
    let key = bytes.get(1).copied().unwrap_or_default();
    detail::reply_one(
        ctx,
        key,
        name,
        policy,
        req.cost,
        *verdict,
        A::window(params, now),
        reason,
        req.shadow,
    );
}

/// What a single-limiter call runs with, besides its key: the hooks by which a command that is
/// not the algorithm's own (RL.LIMIT: parameters from a named policy) or does more than apply
/// it (RL.ACQUIRE: its turn among the key's waiters, `steps`) shares [`run`]'s flow.
#[derive(Debug, Clone, Copy)]
pub struct Call<'c, A: Algorithm, R: FnOnce(&Context, &Decision, &Verdict), S: Steps = ()> {
    /// The limiter's parameters.
    pub params: &'c A::Params,
    /// The call's shared options.
    pub opts: Options,
    /// The command's name (in errors).
    pub command: &'static str,
    /// The keyspace event of a write, and the command propagated with the call's arguments.
    pub event: &'static CStr,
    /// How the call replies without `DETAIL` (a function item or closure: called statically).
    pub reply: R,
    /// The limiter's name in the detailed reply (its key when `None`).
    pub name: Option<&'c [u8]>,
    /// The named policy the limiter comes from, for the detailed reply.
    pub policy: Option<&'c [u8]>,
    /// The command's own steps around the call's apply (`()`: none).
    pub steps: S,
    /// The key's position in the call's arguments: 1, or 2 for RL.ALL over one key
    /// (`numkeys` first).
    pub key: usize,
}

/// A command's own steps in [`run_call`]'s flow, around applying the call to its key; by
/// default none. RL.ACQUIRE's: a new lease yields its turn to the key's waiters, and a call
/// with `WAIT` that does not fit waits for it (`commands::acquire::wait`).
pub trait Steps {
    /// What a call taken over by [`Self::after`] carries to [`Self::take_over`].
    type Taken;

    /// Before the call is applied to the key named `key`, holding `state` (`None`: empty): may
    /// change `req`.
    #[inline(always)]
    fn before(
        &mut self,
        _ctx: &Context,
        _key: Arg<'_>,
        _state: &Option<StateMut<'_>>,
        _req: &mut Request,
    ) {
    }

    /// After `req` was applied (`outcome`): may change what enforcement replies (the outcome's
    /// verdict and reason); `Some` to take the call over instead of finishing it.
    fn after(&mut self, req: &Request, outcome: &mut Outcome) -> Option<Self::Taken>;

    /// End a call taken over (`taken`), its key left as it was and closed; enforcement replies
    /// `outcome`'s verdict for its reason.
    ///
    /// # Errors
    /// Whatever ends the call with an error (nothing was written).
    fn take_over(
        self,
        ctx: &Context,
        taken: Self::Taken,
        key: Arg<'_>,
        req: &Request,
        outcome: &Outcome,
    ) -> Result<(), RlError>;
}

/// No steps of its own: the call applied and finished.
impl Steps for () {
    type Taken = std::convert::Infallible;

    #[inline(always)]
    fn after(&mut self, _: &Request, _: &mut Outcome) -> Option<Self::Taken> {
        None
    }

    fn take_over(
        self,
        _: &Context,
        taken: Self::Taken,
        _: Arg<'_>,
        _: &Request,
        _: &Outcome,
    ) -> Result<(), RlError> {
        match taken {}
    }
}

/// What [`run_call`] did: how the call counted (granted, or let through by `SHADOW`), and
/// enforcement's limiter reply.
#[derive(Debug, Clone, Copy)]
pub struct Ran {
    pub count: Count,
    pub decision: Decision,
}

/// The shared flow of every limiter command, on the call's arguments and their bytes, counted
/// in `stats`.
///
/// # Errors
/// Argument errors, WRONGTYPE, or overflow; on error nothing is written.
#[inline(always)]
pub fn run<C: LimiterCommand>(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
    stats: &'static CommandStats,
) -> Result<(), RlError> {
    let parsed = C::parse(bytes)?;
    let call = Call::<C::Algo, _> {
        params: &parsed.params,
        opts: parsed.opts,
        command: C::NAME,
        event: C::EVENT,
        reply: C::reply,
        name: None,
        policy: None,
        steps: (),
        key: 1,
    };
    run_call(ctx, argv, bytes, stats, call).map(|_| ())
}

/// [`run`] once the call's parameters and options are known (`call`); `argv` is what a write
/// propagates (the key at `call.key`). `None` when the call's steps took it over ([`Steps::after`]).
///
/// # Errors
/// As [`run`].
#[inline(always)]
pub fn run_call<A: Stored, R: FnOnce(&Context, &Decision, &Verdict), S: Steps>(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
    stats: &'static CommandStats,
    call: Call<'_, A, R, S>,
) -> Result<Option<Ran>, RlError> {
    let parsed = Parsed {
        params: call.params,
        opts: call.opts,
    };
    parsed
        .opts
        .check_delay(std::iter::once((A::KIND, A::DELAY)))?;
    parsed.opts.check_hold(std::iter::once((
        A::KIND,
        A::REFUND == crate::core::limiter::Refund::Units,
    )))?;
    let Some(key_name) = argv.get(call.key) else {
        return Err(RlError::Arity);
    };
    // The clock is read once per command; `AT` replaces it.
    let eval = evaluation_time(ctx, parsed.opts.at)?;
    let now = eval.now;
    let mut req = parsed.opts.request(now);

    let mut key = LimiterKey::open(ctx, key_name);
    let mut existing = key.limiter(call.command)?;
    let mut steps = call.steps;
    steps.before(ctx, key_name, &existing, &mut req);
    let mut outcome = flow::apply::<A>(
        existing.as_deref_mut(),
        parsed.params,
        &req,
        config::dedup_max(),
    )
    .map_err(RlError::from)?;
    if let Some(taken) = steps.after(&req, &mut outcome) {
        // Taken over: nothing is written, propagated, notified or counted here.
        drop(Fate::of(ctx, existing, Write::None, 0, None));
        key.close();
        steps.take_over(ctx, taken, key_name, &req, &outcome)?;
        return Ok(None);
    }
    let fate = Fate::of(
        ctx,
        existing,
        outcome.write,
        outcome.expires_at,
        Some(key_name),
    );
    let d = Decision::from(outcome.verdict);
    // Counted by enforcement's decision, a `SHADOW` call as `Count::of` says.
    let granted = d.granted > 0 || (req.cost == 0 && !outcome.blocked);
    let tail = Tail {
        event: call.event,
        stats,
    };
    let propagate = Propagate::Value {
        argv,
        at_index: parsed.opts.at_index,
        now,
    };
    // `DETAIL` replies, and `SHADOW` ones that differ from enforcement's (a call it does not
    // grant in full: `limiter::shadow`), are off the common path.
    let special = parsed.opts.detail
        || (req.shadow && limiter::shadow_changes(&outcome.verdict, outcome.reason, req.cost));
    let reply = call.reply;
    let count =
        Count::of(granted, req.shadow).near(d.remaining, d.limit, config::near_limit_percent());
    finish(
        ctx,
        tail,
        eval,
        &mut [Touched::new(key, key_name, fate)],
        propagate,
        count,
        |ctx| {
            if special {
                reply_special::<A>(
                    ctx,
                    bytes,
                    parsed.params,
                    &req,
                    (&outcome.verdict, outcome.reason, outcome.now),
                    parsed.opts.detail,
                    (call.name, call.policy),
                    reply,
                );
            } else {
                reply(ctx, &d, &outcome.verdict);
            }
        },
    )?;
    Ok(Some(Ran { count, decision: d }))
}

/// The reply of a limiter command called with `DETAIL` or `SHADOW` (`req.shadow`), whose
/// enforced reply is `verdict` for `reason`: the detailed reply, or the call let through
/// ([`Request::reply`]).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn reply_special<A: Stored>(
    ctx: &Context,
    bytes: &[&[u8]],
    params: &A::Params,
    req: &Request,
    (verdict, reason, now): (&Verdict, Reason, Micros),
    detail: bool,
    named: (Option<&[u8]>, Option<&[u8]>),
    plain: impl FnOnce(&Context, &Decision, &Verdict),
) {
    if detail {
        reply_detail::<A>(ctx, bytes, params, req, (verdict, reason, now), named);
    } else {
        let reply = req.reply(*verdict, reason).0;
        plain(ctx, &Decision::from(reply), &reply);
    }
}
