//! `RL.ACQUIRE key limit lease ID id [COST n] WAIT timeout`: a call whose lease does not fit
//! now waits for its turn, first come first served per key, until it fits or `timeout` passes.
//!
//! - The queue of each key is held here (`core::waiters`), the client blocked without a server
//!   timeout (`ffi::wait`): one module timer, at the earliest moment something is due, ends the
//!   waits on time and wakes a key when its head's lease fits (the head's exact `retry_after`:
//!   a lease's expiry, a block's end). No polling.
//! - A key is served at once when RL.RELEASE frees units on it, and soon (the next timer tick)
//!   after a keyspace event on it (DEL, UNLINK, expiry, eviction, ...) or a flush.
//! - Serving grants heads in order while the head fits, each as the acquire it is, at the
//!   moment it is granted: written, replicated (`tail::finish`, the acquire without `WAIT` and
//!   with its resolved time), notified and counted as that acquire. A head that does not fit
//!   stops the queue: a later waiter never passes it, nor does a later RL.ACQUIRE without
//!   `WAIT` or RL.ALL's `CONCURRENCY` (denied while anybody waits on the key, unless it renews
//!   a lease it holds).
//! - A wait that ends unserved replies the denied limiter reply at that moment; a client that
//!   disconnects is dropped. Inside MULTI or a script `WAIT` is an error (nothing blocks).

use std::cell::{Cell, RefCell};
use std::sync::OnceLock;

use redis_module::{Context, RedisString};

use crate::commands::acquire::args::{Wait, parse_acquire};
use crate::commands::call::detail;
use crate::commands::call::evaluation::Evaluation;
use crate::commands::call::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::commands::{Parsed, Steps, reply_decision, run_call};
use crate::config;
use crate::core::Micros;
use crate::core::concurrency::{Concurrency, ConcurrencyParams, holds};
use crate::core::dedup::DedupId;
use crate::core::flow::{self, Outcome, Write};
use crate::core::limiter::{Algorithm, Decision, Reason, Request, Retry, Verdict};
use crate::core::packed::StateMut;
use crate::core::state::{LimiterState, Stored};
use crate::core::waiters::{Waiter, Waiters};
use crate::error::RlError;
use crate::ffi::clock::server_now;
use crate::ffi::command::{Arg, Argv, with_argv, with_argv_skipping};
use crate::ffi::key::LimiterKey;
use crate::ffi::reply;
use crate::ffi::wait::{self as block, Blocked, BlockedId, WaitHooks};
use crate::stats::{self, CommandStats};

/// RL.ACQUIRE's name, for its errors.
const NAME: &str = <Concurrency as Stored>::KIND.command();

/// A waiting key: its database and name.
type Key = (i32, Vec<u8>);

/// What a waiting call keeps.
struct Call {
    /// The blocked client, unblocked exactly once.
    client: Blocked,
    /// The call's arguments without `WAIT timeout`: what a grant replicates.
    argv: Vec<Vec<u8>>,
    params: ConcurrencyParams,
    cost: u64,
    /// The call asked for the detailed reply (`DETAIL`).
    detail: bool,
    /// When it began to wait (Unix µs), for the time waited (`INFO ratelimit`, RL.METRICS).
    since: Micros,
}

thread_local! {
    /// Every key's waiters. Only the main thread runs commands, timers and callbacks.
    static WAITERS: RefCell<Waiters<Key, BlockedId, Call>> = RefCell::new(Waiters::default());
    /// The armed timer: its id and when it fires (Unix µs).
    static TIMER: Cell<Option<(u64, Micros)>> = const { Cell::new(None) };
}

/// Run `f` on the waiters; `None` if they are in use (never: no code path calls the server
/// while holding them).
/// The count of waiters (`INFO ratelimit`) is kept up to date.
fn with_waiters<R>(f: impl FnOnce(&mut Waiters<Key, BlockedId, Call>) -> R) -> Option<R> {
    WAITERS
        .try_with(|w| {
            w.try_borrow_mut().ok().map(|mut w| {
                let r = f(&mut w);
                stats::set(&stats::WAIT_WAITING, w.len());
                r
            })
        })
        .ok()
        .flatten()
}

/// Is anybody waiting on `key`? Free when nobody waits anywhere.
fn queued(db: i32, key: &[u8]) -> bool {
    with_waiters(|w| !w.is_empty() && w.has(&(db, key.to_vec()))).unwrap_or(false)
}

/// Does a call that would take a lease with `id` on `key` (of the call's database, holding
/// `state`) at `now` yield to the clients waiting there? Yes while anybody waits, unless it
/// renews a lease `id` holds.
pub fn yields_turn(
    ctx: &Context,
    key: &[u8],
    state: Option<&LimiterState>,
    id: Option<DedupId>,
    now: Micros,
) -> bool {
    if with_waiters(|w| w.is_empty()).unwrap_or(true) || !queued(block::selected_db(ctx), key) {
        return false;
    }
    !matches!((id, state), (Some(id), Some(state)) if holds(state, id, now))
}

/// The reply of a call that asked for units and yielded its turn to the waiters (judged as a
/// `PEEK`, [`yields_turn`]): denied, with a retry of at least 1 ms. Whether it was so.
pub fn deny_yielded(v: &mut Verdict, yields: bool, cost: u64) -> bool {
    let yielded = yields && cost > 0;
    if yielded {
        *v = denied_in_turn(*v);
    }
    yielded
}

/// `v`, a verdict that may have granted, denied because an earlier waiter holds the turn: no
/// units, and a retry of at least 1 ms (replies round it up) unless it can never be granted.
fn denied_in_turn(v: Verdict) -> Verdict {
    let retry = match v.retry {
        Retry::Never => Retry::Never,
        Retry::Granted => Retry::After(1),
        Retry::After(us) => Retry::After(us.max(1)),
    };
    Verdict {
        granted: 0,
        retry,
        ..v
    }
}

/// What a waiting client is sent.
pub enum WaitReply {
    /// The limiter reply: granted, or denied at the end of the wait.
    Decision(Decision),
    /// The detailed reply, for a call with `DETAIL`: the key's name, the cost, the verdict and
    /// why.
    Detail(Vec<u8>, u64, Verdict, Reason),
    /// An error met when it was served (the key changed type).
    Error(String),
}

impl WaitReply {
    /// The reply of a call of `cost` on `key`: `verdict`, for `reason`, detailed if the call
    /// asked for it.
    fn of(detail: bool, key: &Key, cost: u64, verdict: Verdict, reason: Reason) -> WaitReply {
        if detail {
            WaitReply::Detail(key.1.clone(), cost, verdict, reason)
        } else {
            WaitReply::Decision(Decision::from(verdict))
        }
    }

    /// `call`'s reply on `key` ([`Self::of`]).
    fn to(call: &Call, key: &Key, verdict: Verdict, reason: Reason) -> WaitReply {
        WaitReply::of(call.detail, key, call.cost, verdict, reason)
    }
}

/// The hooks of `ffi::wait`.
struct Hooks;

impl WaitHooks for Hooks {
    type Reply = WaitReply;

    fn reply(ctx: &Context, r: &WaitReply) {
        match r {
            WaitReply::Decision(d) => reply_decision(ctx, d),
            WaitReply::Detail(key, cost, verdict, reason) => {
                // A concurrency limiter applies over no window, and a waiting call is no
                // shadow call (`SHADOW` never waits).
                detail::reply_one(ctx, key, None, None, *cost, *verdict, 0, *reason, false);
            }
            WaitReply::Error(text) => reply::error(ctx, text),
        }
    }

    fn disconnected(ctx: &Context, client: Blocked) {
        if let Some((_, waiter)) = with_waiters(|w| w.remove(client.id())).flatten() {
            block::unblock::<Hooks>(waiter.call.client, None);
            stats::bump(&stats::WAIT_DROPPED);
            arm(ctx);
        }
    }

    fn timer(ctx: &Context) {
        on_timer(ctx);
    }
}

/// RL.ACQUIRE's counters (its row of the command table), kept by its first call: a wait ends
/// (granted, timed out) outside any command.
static ACQUIRE_STATS: OnceLock<&'static CommandStats> = OnceLock::new();

/// Counters nobody reads, for a wait ending before any RL.ACQUIRE ran (which cannot happen).
static UNCOUNTED: CommandStats = CommandStats::new(None);

/// Count a denied RL.ACQUIRE.
fn record_denied() {
    ACQUIRE_STATS
        .get()
        .copied()
        .unwrap_or(&UNCOUNTED)
        .record(false);
}

/// RL.ACQUIRE, with or without `WAIT`: the limiter commands' flow (`commands::run_call`) with
/// its own steps (`Turn`): its turn among the key's waiters.
///
/// # Errors
/// Argument errors (nothing written), WRONGTYPE, `WAIT` inside MULTI or a script.
pub fn acquire(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
    stats: &'static CommandStats,
) -> Result<(), RlError> {
    // Kept for the waits' later grants and timeouts, which run outside the command.
    ACQUIRE_STATS.get_or_init(|| stats);
    let (parsed, mut wait) = parse_acquire(bytes)?;
    // Before `WAIT`'s own errors (`run_call` checks it again).
    parsed.opts.check_delay(std::iter::once((
        <Concurrency as Stored>::KIND,
        <Concurrency as Algorithm>::DELAY,
    )))?;
    // Where `WAIT timeout` stands: the call propagates, and waits with, its arguments without it.
    let wait_at = wait.map(|w| w.index);
    if wait.is_some() {
        if block::replaying(ctx) || !block::is_master(ctx) {
            // Never sent by a master (grants replicate without it); a writable replica does
            // not wait.
            wait = None;
        } else if !block::may_block(ctx) {
            return Err(RlError::Conflict(
                "WAIT is not allowed inside MULTI or a script",
            ));
        }
    }
    let run = |argv: Argv<'_>| {
        let call = crate::commands::Call::<Concurrency, _, _> {
            params: &parsed.params,
            opts: parsed.opts,
            command: NAME,
            event: <Concurrency as Stored>::KIND.command_c(),
            reply: |ctx: &Context, d: &Decision, _: &Verdict| reply_decision(ctx, d),
            name: None,
            policy: None,
            steps: Turn {
                parsed: &parsed,
                argv,
                wait,
                yields: false,
            },
            key: 1,
        };
        run_call(ctx, argv, bytes, stats, call).map(|_| ())
    };
    match wait_at {
        Some(i) => with_argv_skipping(argv, i..i.saturating_add(2), run),
        None => run(argv),
    }
}

/// RL.ACQUIRE's steps in the limiter flow: a new lease yields its turn to the key's waiters,
/// and a call with `WAIT` that does not fit waits for its own.
struct Turn<'t> {
    /// The call's parameters and options.
    parsed: &'t Parsed<ConcurrencyParams>,
    /// The call's arguments without `WAIT timeout`.
    argv: Argv<'t>,
    /// `WAIT timeout`, if the call may wait.
    wait: Option<Wait>,
    /// The call yields its turn ([`yields_turn`]).
    yields: bool,
}

impl Steps for Turn<'_> {
    /// How long the call waits, and when its lease may fit.
    type Taken = (Wait, Option<Micros>);

    /// A new lease does not pass the waiters: while anybody waits, it is judged without being
    /// taken, and denied.
    fn before(
        &mut self,
        ctx: &Context,
        key: Arg<'_>,
        state: &Option<StateMut<'_>>,
        req: &mut Request,
    ) {
        let (id, now) = (self.parsed.params.id(), req.now);
        self.yields = yields_turn(ctx, key.bytes(), state.as_deref(), id, now);
        req.peek |= self.yields;
    }

    /// A new lease yielding to the waiters is denied at the limit; a call with `WAIT` denied
    /// waits, unless it can never fit (`SHADOW` never waits: a lease that does not fit is let
    /// through at once, taking nothing).
    fn after(&mut self, req: &Request, outcome: &mut Outcome) -> Option<Self::Taken> {
        // The lease's own retry, whether or not it yielded.
        let retry = outcome.verdict.retry;
        if deny_yielded(&mut outcome.verdict, self.yields, req.cost) {
            outcome.reason = Reason::Limit;
        }
        let denied = outcome.verdict.granted == 0 && req.cost > 0;
        let w = self.wait?;
        (denied && !req.shadow && retry != Retry::Never).then(|| (w, exact_wait(retry, req.now)))
    }

    fn take_over(
        self,
        ctx: &Context,
        (w, wake_at): Self::Taken,
        key: Arg<'_>,
        req: &Request,
        outcome: &Outcome,
    ) -> Result<(), RlError> {
        let key = (block::selected_db(ctx), key.bytes().to_vec());
        let (verdict, reason) = (outcome.verdict, outcome.reason);
        let denied = WaitReply::of(self.parsed.opts.detail, &key, req.cost, verdict, reason);
        enqueue(
            ctx,
            self.argv,
            key,
            self.parsed,
            w,
            req.now,
            wake_at,
            denied,
        )
    }
}

/// When a head denied with `retry` at `now` may fit: never before the next µs.
fn exact_wait(retry: Retry, now: Micros) -> Option<Micros> {
    match retry {
        Retry::Never => None,
        Retry::Granted => Some(now.saturating_add(1)),
        Retry::After(us) => Some(now.saturating_add(us.max(1))),
    }
}

/// Block the caller (its arguments `argv`, without `WAIT timeout`) on `key` until its turn or
/// `w.timeout`; `denied` is its denied reply, sent at once if the server gives no handle.
#[allow(clippy::too_many_arguments)]
fn enqueue(
    ctx: &Context,
    argv: Argv<'_>,
    key: Key,
    parsed: &Parsed<ConcurrencyParams>,
    w: Wait,
    now: Micros,
    wake_at: Option<Micros>,
    denied: WaitReply,
) -> Result<(), RlError> {
    // Deleting, expiring or renaming the key wakes its waiters: the key events must be on.
    crate::ffi::events::subscribe_key_events(ctx).map_err(RlError::Server)?;
    let Some(client) = block::block::<Hooks>(ctx) else {
        record_denied();
        Hooks::reply(ctx, &denied);
        return Ok(());
    };
    let call = Call {
        client,
        argv: argv.iter().map(|a| a.bytes().to_vec()).collect(),
        params: parsed.params,
        cost: parsed.opts.cost,
        detail: parsed.opts.detail,
        since: now,
    };
    let waiter = Waiter {
        handle: call.client.id(),
        deadline: now.saturating_add(w.timeout),
        call,
    };
    let mut slot = Some(waiter);
    with_waiters(|ws| {
        if let Some(waiter) = slot.take() {
            ws.push(key, waiter, wake_at);
        }
    });
    if let Some(waiter) = slot {
        record_denied();
        block::unblock::<Hooks>(waiter.call.client, Some(denied));
    }
    arm(ctx);
    Ok(())
}

/// RL.RELEASE freed units on `key` (the call's database): serve its waiters now.
pub fn freed(ctx: &Context, key: Arg<'_>) {
    let db = block::selected_db(ctx);
    if queued(db, key.bytes()) {
        serve(ctx, &(db, key.bytes().to_vec()));
        arm(ctx);
    }
}

/// A keyspace event on `key` of database `db` (it may be gone or replaced): look at its
/// waiters at the next tick. Nothing when nobody waits.
pub fn key_event(ctx: &Context, db: i32, key: &[u8]) {
    let poked = with_waiters(|w| {
        if w.is_empty() {
            return false;
        }
        let k = (db, key.to_vec());
        let has = w.has(&k);
        if has {
            w.poke(&k);
        }
        has
    })
    .unwrap_or(false);
    if poked {
        arm(ctx);
    }
}

/// A flush, a database swap, a load or a role change: look at every key at the next tick.
pub fn server_event(ctx: &Context) {
    if with_waiters(|w| {
        w.poke_all();
        !w.is_empty()
    })
    .unwrap_or(false)
    {
        arm(ctx);
    }
}

/// Arm the timer for the earliest due moment, unless it fires by then already.
fn arm(ctx: &Context) {
    let Some(next) = with_waiters(|w| w.next_due()).flatten() else {
        return;
    };
    if let Some((id, at)) = TIMER.get() {
        if at <= next {
            return;
        }
        block::stop_timer(ctx, id);
        TIMER.set(None);
    }
    let now = server_now();
    let ms = next.saturating_sub(now).div_ceil(1_000);
    if let Some(id) = block::create_timer::<Hooks>(ctx, i64::try_from(ms).unwrap_or(i64::MAX)) {
        TIMER.set(Some((id, next)));
    }
}

/// The timer: serve the keys due, end the waits whose time is up (then serve the keys whose
/// head went), and arm again. On a replica (after a role change) every wait ends denied.
fn on_timer(ctx: &Context) {
    TIMER.set(None);
    let now = server_now();
    if !block::is_master(ctx) {
        for (key, waiter) in with_waiters(|w| w.take_all()).unwrap_or_default() {
            time_out(ctx, &key, waiter, now);
        }
        return;
    }
    for key in with_waiters(|w| w.due(now)).unwrap_or_default() {
        serve(ctx, &key);
    }
    let expired = with_waiters(|w| w.take_expired(now)).unwrap_or_default();
    if !expired.is_empty() {
        for (key, waiter) in expired {
            time_out(ctx, &key, waiter, now);
        }
        for key in with_waiters(|w| w.due(now)).unwrap_or_default() {
            serve(ctx, &key);
        }
    }
    arm(ctx);
}

/// End `waiter`'s wait unserved: the denied limiter reply at `now`.
fn time_out(ctx: &Context, key: &Key, waiter: Waiter<BlockedId, Call>, now: Micros) {
    let reply = match denied_reply(ctx, key, &waiter.call, now) {
        Ok((verdict, reason)) => WaitReply::to(&waiter.call, key, verdict, reason),
        Err(e) => WaitReply::Error(e.to_string()),
    };
    record_denied();
    stats::bump(&stats::WAIT_TIMED_OUT);
    stats::add(
        &stats::WAIT_WAITED_US,
        now.saturating_sub(waiter.call.since),
    );
    block::unblock::<Hooks>(waiter.call.client, Some(reply));
}

/// The reply of `call` judged on `key` at `now`, denied, and why.
fn denied_reply(
    ctx: &Context,
    key: &Key,
    call: &Call,
    now: Micros,
) -> Result<(Verdict, Reason), RlError> {
    if !block::select_db(ctx, key.0) {
        return Err(RlError::Conflict("the database of the key is gone"));
    }
    let name = RedisString::create_from_slice(ctx.ctx, &key.1);
    let mut k = LimiterKey::open_read(ctx, &name);
    let mut state = k.limiter_copy(NAME)?;
    k.close();
    let req = Request {
        peek: true,
        ..Request::new(call.cost, now)
    };
    let outcome =
        flow::apply::<Concurrency>(state.as_mut(), &call.params, &req, 0).map_err(RlError::from)?;
    if outcome.verdict.granted > 0 {
        // It fit alone, but an earlier waiter held the turn.
        return Ok((denied_in_turn(outcome.verdict), Reason::Limit));
    }
    Ok((outcome.verdict, outcome.reason))
}

/// Grant `key`'s waiters in order while the head fits, then set when to look again.
fn serve(ctx: &Context, key: &Key) {
    if !block::select_db(ctx, key.0) {
        return;
    }
    let name = RedisString::create_from_slice(ctx.ctx, &key.1);
    loop {
        let now = server_now();
        let Some((params, cost)) =
            with_waiters(|w| w.head(key).map(|h| (h.call.params, h.call.cost))).flatten()
        else {
            return;
        };
        match grant_head(ctx, key, &name, params, cost, now) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                if let Some(head) = with_waiters(|w| w.pop_head(key)).flatten() {
                    record_denied();
                    block::unblock::<Hooks>(
                        head.call.client,
                        Some(WaitReply::Error(e.to_string())),
                    );
                }
            }
        }
    }
}

/// Grant the head of `key` (named `name`, its database selected) if it fits at `now`;
/// whether it did (if not, when to look again is set).
fn grant_head(
    ctx: &Context,
    key: &Key,
    name: &RedisString,
    params: ConcurrencyParams,
    cost: u64,
    now: Micros,
) -> Result<bool, RlError> {
    let mut k = LimiterKey::open(ctx, name);
    let mut existing = k.limiter(NAME)?;
    let req = Request::new(cost, now);
    let outcome =
        flow::apply::<Concurrency>(existing.as_deref_mut(), &params, &req, config::dedup_max())
            .map_err(RlError::from)?;
    if outcome.verdict.granted == 0 {
        drop(Fate::of(ctx, existing, Write::None, 0, None));
        k.close();
        let wake_at = exact_wait(outcome.verdict.retry, now);
        with_waiters(|w| w.set_wake(key, wake_at));
        return Ok(false);
    }
    let Some(head) = with_waiters(|w| w.pop_head(key)).flatten() else {
        drop(Fate::of(ctx, existing, Write::None, 0, None));
        return Ok(false);
    };
    let fate = Fate::of(
        ctx,
        existing,
        outcome.write,
        outcome.expires_at,
        Some(name.into()),
    );
    let tail = Tail {
        event: <Concurrency as Stored>::KIND.command_c(),
        stats: ACQUIRE_STATS.get().copied().unwrap_or(&UNCOUNTED),
    };
    let strings: Vec<RedisString> = head
        .call
        .argv
        .iter()
        .map(|b| RedisString::create_from_slice(ctx.ctx, b))
        .collect();
    let granted = Decision::from(outcome.verdict);
    let near = stats::Count::from(true).near(
        granted.remaining,
        granted.limit,
        config::near_limit_percent(),
    );
    let done = with_argv(&strings, |argv| {
        finish(
            ctx,
            tail,
            Evaluation::exact(now),
            &mut [Touched::new(k, name, fate)],
            Propagate::Value {
                argv,
                at_index: None,
                now,
            },
            near,
            |_| {},
        )
    });
    let reply = match done {
        Ok(()) => {
            stats::bump(&stats::WAIT_GRANTED);
            stats::add(&stats::WAIT_WAITED_US, now.saturating_sub(head.call.since));
            WaitReply::to(&head.call, key, outcome.verdict, outcome.reason)
        }
        Err(e) => WaitReply::Error(e.to_string()),
    };
    block::unblock::<Hooks>(head.call.client, Some(reply));
    Ok(true)
}
