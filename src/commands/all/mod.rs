//! RL.ALL numkeys key [key ...] limiter [limiter ...] [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [DELAY d] [AT t]
//!
//! `POLICY name` in place of the limiters applies a named policy's limiters (`commands::policy`),
//! one key per limiter in order.
//!
//! Several limits on one request, atomically and all or nothing. Each `limiter` is an algorithm
//! name and that command's positional arguments and own options (`GCRA 10 5 1s`), for the key in
//! the same position. Parsing reuses each command's own parser (`commands::limiters::registry`), so the
//! arguments and errors are exactly those of the single-limiter commands.
//!
//! A call over one key with nothing only RL.ALL does is that key's own command
//! (`commands::limiters::alone`): its limiter is parsed straight into its algorithm's parameters and
//! run by `commands::run_call`, without building the whole request.

pub mod check;
pub mod checkall;

use redis_module::Context;

use std::sync::Arc;

use crate::commands::acquire::wait;
use crate::commands::call::args::{Args, Options, positive, quote};
use crate::commands::call::detail::{self, Part};
use crate::commands::call::propagate::ShortValues;
use crate::commands::call::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::commands::evaluation_time;
use crate::commands::limiters::alone::NAME;
use crate::commands::limiters::registry::{limiter_words, parse_limiter};
use crate::commands::policy::state as policy_state;
use crate::commands::reply_decision;
use crate::commands::row::{Command, Run};
use crate::config;
use crate::core::Kind;
use crate::core::dedup::DedupId;
use crate::core::limiter::{Decision, Reason, Request};
use crate::core::multi::{
    AnyParams, BESTEFFORT_CHARGES, Few, MultiError, MultiOutcome, Slot, apply_charged,
};
use crate::core::packed::{Packed, StateMut};
use crate::core::policy::Policy;
use crate::docs::{ArgDoc, ArgType, CommandDoc, DELAY, KEY, arg, opt};
use crate::error::RlError;
use crate::ffi::command::Argv;
use crate::ffi::key::LimiterKey;
use crate::stats::Count;

/// RL.ALL's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: -4,
    summary: c"Apply several limiters to one request, all or nothing: granted only if every limiter grants it",
    complexity: c"O(N) where N is the number of limiters",
    args: &[
        arg(c"numkeys", ArgType::Integer),
        ArgDoc {
            multiple: true,
            ..KEY
        },
        ArgDoc {
            multiple: true,
            ..arg(c"limiter", ArgType::String)
        },
        POLICY,
        DELAY,
    ],
    shared_options: true,
};

/// `POLICY name`: a named policy's limiters in place of the `limiter` arguments (RL.ALL and
/// RL.CHECKALL).
pub const POLICY: ArgDoc = opt(c"policy", ArgType::String, c"POLICY");

/// RL.ALL's parsed arguments.
#[derive(Debug, Clone)]
pub struct AllRequest<'a> {
    pub keys: Few<&'a [u8]>,
    pub specs: Few<AnyParams>,
    /// The units asked of each limiter: its `CHARGE`, else the call's `COST`.
    pub charges: Few<u64>,
    /// Each limiter's `NAME`, if given (the detailed reply names it by its key otherwise).
    pub names: Few<Option<&'a [u8]>>,
    pub opts: Options,
    /// `POLICY name`: the named policy whose limiters these are (their names are its).
    pub policy: Option<Arc<Policy>>,
}

/// The shared options RL.ALL takes.
const ALL_OPTIONS: &[&[u8]] = crate::commands::call::args::SHARED;

impl<'a> AllRequest<'a> {
    /// Parse the whole argument vector (`args[0]` is the command name).
    ///
    /// # Errors
    /// Arity, numkeys, unknown limiters, each limiter's own argument errors, shared options.
    #[inline(always)]
    pub fn parse(items: &'a [&'a [u8]]) -> Result<Self, RlError> {
        let mut parsed = Self::parse_with(items, ALL_OPTIONS)?;
        parsed.bind_call(parsed.opts.dedup, parsed.opts.best_effort)?;
        Ok(parsed)
    }

    /// Fit each limiter that binds its parameters to the call to the call's `dedup` and
    /// `best_effort` ([`AnyParams::bind_call`]), in place.
    ///
    /// # Errors
    /// As [`AnyParams::bind_call`].
    pub fn bind_call(&mut self, dedup: Option<DedupId>, best_effort: bool) -> Result<(), RlError> {
        for spec in self.specs.iter_mut() {
            if spec.binds_call() {
                *spec = spec.clone().bind_call(dedup, best_effort)?;
            }
        }
        Ok(())
    }

    /// [`Self::parse`] taking only the shared options in `allowed`, the limiters not bound to
    /// the call's options.
    ///
    /// # Errors
    /// As [`Self::parse`].
    #[inline(always)]
    pub fn parse_with(items: &'a [&'a [u8]], allowed: &[&[u8]]) -> Result<Self, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let numkeys = positive(args.required()?, "numkeys")?;
        let numkeys =
            usize::try_from(numkeys).map_err(|_| RlError::Syntax("numkeys is too large"))?;
        if numkeys > items.len().saturating_sub(2) {
            return Err(RlError::Syntax(
                "numkeys is greater than the number of arguments",
            ));
        }
        // Built in place: each list is pushed where it stays (a struct built from lists at the
        // end is a copy of all of them).
        let mut parsed = AllRequest {
            keys: Few::with_capacity(numkeys),
            specs: Few::with_capacity(numkeys),
            charges: Few::with_capacity(numkeys),
            names: Few::with_capacity(numkeys),
            opts: Options::default(),
            policy: None,
        };
        for key in args.by_ref().take(numkeys) {
            if parsed.keys.contains(&key) {
                return Err(RlError::Syntax("RL.ALL keys must be distinct"));
            }
            parsed.keys.push(key);
        }
        let n = parsed.keys.len();
        if args
            .peek()
            .is_some_and(|t| t.eq_ignore_ascii_case(b"POLICY"))
        {
            args.next();
            let name = args.value_of("POLICY")?;
            let found = policy_state::lookup(name)?;
            let limiters = &found.def.limiters;
            if limiters.len() != n {
                return Err(RlError::PolicyKeys {
                    policy: quote(name),
                    limiters: limiters.len(),
                    keys: n,
                });
            }
            let mut opts = Options::parse_only(&mut args, allowed, |_, _| Ok(false))?;
            // A policy set with SHADOW: every call under it as with the SHADOW option.
            opts.shadow |= found.def.shadow;
            // Named in the detailed reply by the policy's own names.
            for l in limiters {
                parsed.specs.push(l.params.clone());
                parsed.charges.push(l.charge.unwrap_or(opts.cost));
                parsed.names.push(None);
            }
            parsed.opts = opts;
            parsed.policy = Some(found);
            parsed.check()?;
            return Ok(parsed);
        }
        // Each limiter's own `CHARGE`, until the call's `COST` is known.
        let mut own: Few<Option<u64>> = Few::with_capacity(n);
        for _ in 0..n {
            let l = parse_limiter(&mut args)?;
            parsed.specs.push(l.params);
            own.push(l.charge);
            parsed.names.push(l.name);
        }
        let opts = Options::parse_only(&mut args, allowed, |_, _| Ok(false))?;
        for charge in own.iter() {
            parsed.charges.push(charge.unwrap_or(opts.cost));
        }
        parsed.opts = opts;
        parsed.check()?;
        Ok(parsed)
    }

    /// Refuse the request unless every limiter takes the call's `DELAY` and `HOLD`, and
    /// `BESTEFFORT` but with equal charges.
    ///
    /// # Errors
    /// As [`Options::check_delay`] and [`Options::check_hold`]; `BESTEFFORT` with unequal
    /// charges.
    fn check(&self) -> Result<(), RlError> {
        let opts = &self.opts;
        opts.check_delay(self.specs.iter().map(|s| (s.kind(), s.delays())))?;
        opts.check_hold(self.specs.iter().map(|s| (s.kind(), s.settles())))?;
        if opts.best_effort && self.charges.iter().any(|&c| c != opts.cost) {
            return Err(RlError::Conflict(BESTEFFORT_CHARGES));
        }
        Ok(())
    }
}

/// RL.ALL over one key run as that key's own command when it is one: one key, asked the call's
/// `COST`, with none of what RL.ALL alone replies, counts or remembers (`DETAIL`, `SHADOW`,
/// `DEDUP`, `HOLD`, a named policy, a concurrency key's turn among its waiters). RL.ALL over one
/// key replies and writes exactly as that key's own command (the property test below), so such a
/// call is that command, its limiter parsed straight into its algorithm's parameters by its
/// command's parser. `None` for any other call, and for any call with an argument error (the
/// whole parse then replies it, as every other call's).
fn run_alone(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
    this: &'static Command,
) -> Option<Result<(), RlError>> {
    if crate::commands::call::args::parse_u64(bytes.get(1)?) != Some(1) {
        return None;
    }
    let mut args = Args::new(bytes);
    args.nth(2)?;
    let words = limiter_words(&mut args).ok()?;
    let opts = Options::parse_only(&mut args, ALL_OPTIONS, |_, _| Ok(false)).ok()?;
    if words.charge.is_some_and(|c| c != opts.cost)
        || opts.detail
        || opts.shadow
        || opts.dedup.is_some()
        || opts.hold.is_some()
    {
        return None;
    }
    (words.limiter.alone)(ctx, argv, bytes, this, words.argv.as_slice(), opts)
}

/// Answer Redis's request for the keys of a `numkeys key [key ...]` call, if that is what this
/// call is: Redis 7.0's cluster routing asks the command itself where its keys are (the key
/// specs answer COMMAND GETKEYS, but not the cluster redirection of 7.0).
pub fn declare_keys(ctx: &Context, bytes: &[&[u8]]) -> bool {
    if !ctx.is_keys_position_request() {
        return false;
    }
    let numkeys = bytes
        .get(1)
        .and_then(|n| crate::commands::call::args::parse_u64(n))
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0)
        .min(bytes.len().saturating_sub(2));
    for pos in 0..numkeys {
        ctx.key_at_pos(i32::try_from(pos.saturating_add(2)).unwrap_or(i32::MAX));
    }
    true
}

/// The error for a refused RL.ALL or RL.CHECKALL: WRONGTYPE naming the key of `keys`.
pub fn multi_error(e: MultiError, keys: &[&[u8]]) -> RlError {
    match e {
        MultiError::WrongKind {
            index,
            held,
            wanted,
        } => RlError::WrongKindAt {
            key: keys.get(index).map(|k| quote(k)).unwrap_or_default(),
            held,
            wanted,
        },
        MultiError::Core(e) => RlError::from(e),
    }
}

/// RL.ALL numkeys key [key ...] limiter [limiter ...] [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [DELAY d] [AT t]
pub struct All;

impl Run for All {
    /// RL.ALL on the call's arguments and their bytes; on `Ok` it has replied.
    ///
    /// # Errors
    /// Argument errors, WRONGTYPE naming the key, overflow; nothing is written on error.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        if declare_keys(ctx, bytes) {
            return Ok(());
        }
        if let Some(done) = run_alone(ctx, argv, bytes, this) {
            return done;
        }
        // Read where it was returned (a `?` would move the whole request once more).
        let parse = AllRequest::parse(bytes);
        let Ok(parsed) = &parse else {
            return parse.map(|_| ());
        };
        if parsed.policy.is_some() {
            policy_state::flush_pending(ctx);
        }
        let eval = evaluation_time(ctx, parsed.opts.at)?;
        let now = eval.now;
        let req: Request = parsed.opts.request(now);
        let n = parsed.keys.len();
        // One entry per key, in place: its key, open, its name, and its fate, decided below.
        // (A `collect` would build each elsewhere and move it.)
        let mut touched: Few<Touched<'_>> = Few::with_capacity(n);
        for name in argv.iter().skip(2).take(n) {
            touched.push(Touched::new(
                LimiterKey::open(ctx, name),
                name,
                Fate::Unchanged,
            ));
        }
        // Each key's decoded value borrows its key until its fate is known: the key's value and
        // its fate, borrowed side by side from the same entry.
        let mut held: Few<Option<StateMut<'_>>> = Few::with_capacity(n);
        let mut fates: Few<&mut Fate> = Few::with_capacity(n);
        for t in touched.iter_mut() {
            let Touched { key, fate, .. } = t;
            held.push(key.limiter(NAME)?);
            fates.push(fate);
        }
        // A new lease on a concurrency key does not pass the clients waiting there
        // (`RL.ACQUIRE ... WAIT`): while anybody waits, the call is judged without being taken, and
        // denied.
        let yielder =
            parsed
                .specs
                .iter()
                .zip(&parsed.keys)
                .zip(&held)
                .position(|((spec, key), state)| {
                    spec.kind() == Kind::Concurrency
                        && wait::yields_turn(ctx, key, state.as_deref(), parsed.opts.dedup, now)
                });
        let yields = yielder.is_some();
        let mut req = req;
        req.peek |= yields;
        let mut slots: Few<Slot<'_>> = Few::with_capacity(n);
        for h in held.iter_mut() {
            slots.push(match h {
                Some(state) => Slot::Existing(state),
                None => Slot::New(None),
            });
        }
        // Read where it was returned, as the request.
        let applied = apply_charged(
            &mut slots,
            &parsed.specs,
            &parsed.charges,
            &req,
            config::dedup_max(),
        );
        let Ok(outcome) = &applied else {
            return applied
                .map(|_| ())
                .map_err(|e| multi_error(e, &parsed.keys));
        };
        // Each key's fate: written (a new key with the value the call created) when the call
        // wrote it, else unchanged.
        for ((slot, fate), at) in slots.iter_mut().zip(fates.iter_mut()).zip(&outcome.writes) {
            **fate = match (slot, *at) {
                (Slot::Existing(_), Some(expires_at)) => Fate::Written {
                    new: None,
                    expires_at,
                    sent: None,
                },
                (Slot::New(new), Some(expires_at)) => match new.take() {
                    Some(state) => Fate::Written {
                        new: Some(state),
                        expires_at,
                        sent: None,
                    },
                    None => Fate::Unchanged,
                },
                (_, None) => Fate::Unchanged,
            };
        }
        drop(slots);
        // A value changed in place is kept (encoded again) when its key is written, else
        // discarded; each written key's new value is encoded for the propagation while at hand.
        let mut values = ShortValues::default();
        for (i, (state, fate)) in held.iter_mut().zip(&fates).enumerate() {
            match (state.take(), &**fate) {
                (Some(state), Fate::Unchanged) => state.discard(),
                (_, Fate::Written { new: Some(new), .. }) => {
                    Packed::stored_of(new, |v| values.push(i, v));
                }
                (Some(mut state), Fate::Written { new: None, .. }) => values.push(i, state.store()),
                (None, _) | (Some(_), Fate::Deleted) => {}
            }
        }
        drop(held);
        drop(fates);
        let (mut reply, reason) = req.reply(outcome.verdict, outcome.reason);
        // A new lease that yields to the waiters on a concurrency key is denied (judged only);
        // under `SHADOW` it is let through, taking nothing.
        let yielded = if req.shadow {
            yields && req.cost > 0
        } else {
            wait::deny_yielded(&mut reply, yields, req.cost)
        };
        let d = Decision::from(reply);
        // Denied when a key denied (SPEC "The detailed reply"), as the detailed reply says.
        let granted = outcome.denied_by.is_none() && !yielded;
        let (reason, denied_by) = match (yielded, req.shadow) {
            (true, true) => (Reason::Shadow, yielder),
            // Denied at the concurrency limit the waiters hold, as RL.ACQUIRE says of it.
            (true, false) => (Reason::Limit, yielder),
            (false, _) => (reason, outcome.denied_by),
        };
        let propagate = Propagate::Values {
            argv,
            at_index: parsed.opts.at_index,
            now,
            values: &values,
        };
        // Near its limit as enforcement judged it (the policy's counters too).
        let enforced = Decision::from(outcome.verdict);
        let count = Count::of(granted, req.shadow).near(
            enforced.remaining,
            enforced.limit,
            config::near_limit_percent(),
        );
        finish(
            ctx,
            Tail::of(this),
            eval,
            &mut touched,
            propagate,
            count,
            |ctx| {
                if parsed.opts.detail {
                    reply_detail(ctx, &d, (reason, denied_by), parsed, outcome);
                } else {
                    reply_decision(ctx, &d);
                }
            },
        )?;
        if let Some(p) = &parsed.policy {
            p.stats
                .record(count.granted(), count.shadow_denied(), count.near_limit());
        }
        Ok(())
    }
}

/// The detailed reply of RL.ALL or RL.CHECKALL: the call's reply `d`, its reason and the index
/// of the key that denied it (under `SHADOW`, [`Request::reply`]: the would-be denier), then
/// one part per key, named by its key, as enforcement replies it.
pub fn reply_detail(
    ctx: &Context,
    d: &Decision,
    (reason, denied_by): (Reason, Option<usize>),
    parsed: &AllRequest<'_>,
    outcome: &MultiOutcome,
) {
    let policy = parsed.policy.as_deref();
    let parts: Vec<Part<'_>> = parsed
        .keys
        .iter()
        .zip(&parsed.names)
        .zip(&outcome.limiters)
        .zip(&parsed.specs)
        .enumerate()
        .map(|(i, (((key, name), l), spec))| {
            let from_policy = policy
                .and_then(|p| p.def.limiters.get(i))
                .and_then(|l| l.name.as_deref());
            Part {
                name: name.or(from_policy).unwrap_or(key),
                key,
                cost: l.cost,
                verdict: l.verdict,
                window: spec.window(l.now),
                policy: policy.map(|p| p.name.as_slice()),
            }
        })
        .collect();
    detail::reply(ctx, d, reason, denied_by, &parts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fixed_window::{Fixed, FixedParams};
    use crate::core::gcra::{Gcra, GcraParams};
    use crate::core::sliding_counter::{SlidingCounter, SlidingCounterParams};
    use crate::core::sliding_log::{SlidingLog, SlidingParams};
    use crate::core::token_bucket::TokenBucket;

    fn parse(items: &[&'static str]) -> Result<AllRequest<'static>, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        let bytes: &'static [&'static [u8]] = Box::leak(bytes.into_boxed_slice());
        AllRequest::parse(bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn name_is_the_registered_one() {
        let row = crate::commands::table::COMMANDS
            .iter()
            .find(|c| c.doc.summary == DOC.summary)
            .unwrap();
        assert_eq!(row.name_str(), NAME);
    }

    #[test]
    fn all_parses_limiters_in_key_order() {
        let p = parse(&[
            "rl.all",
            "2",
            "a",
            "b",
            "gcra",
            "10",
            "1",
            "1s",
            "TokenBucket",
            "5",
            "2",
            "1m",
            "COST",
            "2",
        ])
        .unwrap();
        assert_eq!(p.keys, [&b"a"[..], b"b"]);
        assert_eq!(
            p.specs,
            [
                AnyParams::of::<Gcra>(&GcraParams::new(10, 1, 1_000_000).unwrap()),
                AnyParams::of::<TokenBucket>(&GcraParams::new(5, 2, 60_000_000).unwrap()),
            ]
        );
        assert_eq!(p.opts.cost, 2);
    }

    #[test]
    fn all_parses_fixed_with_its_offset_and_slidingcounter() {
        let p = parse(&[
            "rl.all",
            "2",
            "a",
            "b",
            "FIXED",
            "10",
            "1h",
            "offset",
            "15m",
            "slidingcounter",
            "100",
            "1m",
            "PEEK",
        ])
        .unwrap();
        assert_eq!(
            p.specs,
            [
                AnyParams::of::<Fixed>(&FixedParams::new(10, 3_600_000_000, 900_000_000).unwrap()),
                AnyParams::of::<SlidingCounter>(
                    &SlidingCounterParams::new(100, 60_000_000).unwrap()
                ),
            ]
        );
        assert!(p.opts.peek);
        assert_eq!(
            parse(&["rl.all", "1", "a", "FIXED", "10", "1s", "OFFSET"]).unwrap_err(),
            "ERR syntax error, FIXED needs its positional arguments"
        );
        assert_eq!(
            parse(&["rl.all", "1", "a", "FIXED", "10", "1s", "OFFSET", "x"]).unwrap_err(),
            "ERR invalid duration 'x' for OFFSET"
        );
        assert_eq!(
            parse(&["rl.all", "1", "a", "SLIDINGCOUNTER", "10"]).unwrap_err(),
            "ERR syntax error, SLIDINGCOUNTER needs its positional arguments"
        );
    }

    #[test]
    fn all_takes_sliding_with_its_precision() {
        let p = parse(&[
            "rl.all",
            "2",
            "a",
            "b",
            "sliding",
            "10",
            "1s",
            "PRECISION",
            "100ms",
            "SLIDING",
            "1000",
            "1h",
            "PEEK",
        ])
        .unwrap();
        assert_eq!(
            p.specs,
            [
                AnyParams::of::<SlidingLog>(&SlidingParams::new(10, 1_000_000, 100_000).unwrap()),
                AnyParams::of::<SlidingLog>(
                    &SlidingParams::new(1000, 3_600_000_000, 1_000).unwrap()
                ),
            ]
        );
        assert!(p.opts.peek);
        assert_eq!(
            parse(&["rl.all", "1", "a", "sliding", "10", "1s", "PRECISION", "2s"]).unwrap_err(),
            "ERR PRECISION must not be longer than window"
        );
    }

    use crate::commands::limiters::registry::LIMITERS;
    use crate::core::dedup::DedupId;
    use crate::core::error::CoreError;
    use crate::core::flow::{self, Outcome, Write};
    use crate::core::multi::apply_all;
    use crate::core::state::{LimiterState, Stored};
    use crate::docs::ArgType;
    use proptest::prelude::*;

    /// The call with the key's own command ([`flow::apply`]): its outcome, the created value
    /// stored.
    fn own(
        s: &mut Option<LimiterState>,
        spec: &AnyParams,
        req: &Request,
    ) -> Result<Outcome, CoreError> {
        fn go<A: Stored>(
            s: &mut Option<LimiterState>,
            spec: &A,
            req: &Request,
        ) -> Result<Outcome, CoreError> {
            flow::apply::<A>(s.as_mut(), spec.params(), req, 3)
        }
        let state = spec.clone().into_state();
        let out = crate::core::state::dispatch!(&state, a => go(s, a, req))?;
        if let Write::Created(new) = &out.write {
            *s = Some(new.clone());
        }
        Ok(out)
    }

    /// The same call through RL.ALL over that one key.
    fn all_over_one(
        s: &mut Option<LimiterState>,
        spec: &AnyParams,
        req: &Request,
    ) -> Result<MultiOutcome, CoreError> {
        let mut slots = [match s.as_mut() {
            Some(s) => Slot::Existing(s),
            None => Slot::New(None),
        }];
        let out = apply_all(&mut slots, std::slice::from_ref(spec), req, 3);
        let [slot] = slots;
        if let Slot::New(Some(new)) = slot {
            *s = Some(new);
        }
        out.map_err(|e| match e {
            MultiError::Core(e) => e,
            MultiError::WrongKind { held, wanted, .. } => CoreError::WrongKind { held, wanted },
        })
    }

    /// A limiter of each registered algorithm, its positional arguments drawn at random (counts
    /// 1..8, durations 1..3000 ms) and parsed by its own parser.
    fn arb_limiter() -> impl Strategy<Value = AnyParams> {
        (
            0..LIMITERS.len(),
            prop::collection::vec((1u64..8, 1u64..3000), 8),
        )
            .prop_map(|(i, values)| {
                let limiter = &LIMITERS[i];
                let args: Vec<String> = limiter
                    .doc
                    .args
                    .iter()
                    .skip(1)
                    .take(limiter.positional())
                    .zip(&values)
                    .map(|(arg, (count, ms))| match arg.kind {
                        ArgType::Integer => count.to_string(),
                        _ => ms.to_string(),
                    })
                    .collect();
                let mut argv: Vec<&[u8]> = vec![limiter.kind.command().as_bytes(), b"k"];
                argv.extend(args.iter().map(|a| a.as_bytes()));
                (limiter.parse)(&argv).unwrap()
            })
    }

    proptest! {
        /// RL.ALL over one key replies and writes exactly as that key's own command, whatever
        /// the options (BLOCK, DEDUP, PEEK, BESTEFFORT, DELAY, COST 0, a time behind the key's
        /// last update), for every algorithm of the registry.
        #[test]
        fn all_over_one_key_is_its_own_command(
            spec in arb_limiter(),
            ops in prop::collection::vec(
                (0u64..900_000, 0u64..400_000, 0u64..6, any::<bool>(), any::<bool>(),
                 prop::option::of(0u8..3), prop::option::of(1u64..2_000_000),
                 prop::option::weighted(0.3, 1u64..2_000_000)),
                1..40,
            ),
        ) {
            let mut a: Option<LimiterState> = None;
            let mut b: Option<LimiterState> = None;
            let mut t = 1_700_000_000_000_000u64;
            for (dt, back, cost, peek, be, dedup, block, delay) in ops {
                t += dt;
                let dedup = dedup.map(|d| DedupId(u128::from(d)));
                let req = Request {
                    peek,
                    best_effort: be,
                    dedup,
                    block,
                    delay,
                    ..Request::new(cost, t - back)
                };
                // The limiter as RL.ALL binds it to the call (a lease id from DEDUP); a call
                // RL.ALL refuses is no call.
                let Ok(bound) = spec.clone().bind_call(dedup, be) else { continue };
                let (mine, all) = match (own(&mut a, &bound, &req), all_over_one(&mut b, &bound, &req)) {
                    (Ok(mine), Ok(all)) => (mine, all),
                    (mine, all) => {
                        // Refused alike, changing nothing.
                        prop_assert_eq!(all.err(), mine.err(), "{:?}", req);
                        prop_assert_eq!(&a, &b, "{:?}", req);
                        continue;
                    }
                };
                prop_assert_eq!(all.verdict, mine.verdict, "{:?}", req);
                let wrote = !matches!(mine.write, Write::None);
                prop_assert_eq!(all.writes, vec![wrote.then_some(mine.expires_at)], "{:?}", req);
                prop_assert_eq!(all.blocked, mine.blocked, "{:?}", req);
                prop_assert_eq!(&a, &b, "{:?}", req);
            }
        }
    }

    #[test]
    fn all_takes_delay_for_the_whole_call_on_schedule_limiters_only() {
        let p = parse(&[
            "rl.all",
            "2",
            "a",
            "b",
            "gcra",
            "10",
            "1",
            "1s",
            "leakybucket",
            "5",
            "2",
            "1m",
            "DELAY",
            "2s",
        ])
        .unwrap();
        assert_eq!(p.opts.delay, Some(2_000_000));
        assert_eq!(p.specs.len(), 2);
        assert_eq!(
            parse(&[
                "rl.all", "2", "a", "b", "gcra", "10", "1", "1s", "fixed", "5", "1m", "DELAY",
                "2s",
            ])
            .unwrap_err(),
            "ERR DELAY does not apply to FIXED, only to GCRA, TOKENBUCKET and LEAKYBUCKET"
        );
        assert_eq!(
            parse(&["rl.all", "1", "a", "gcra", "10", "1", "1s", "DELAY", "0"]).unwrap_err(),
            "ERR invalid duration '0' for DELAY"
        );
    }

    #[test]
    fn all_parse_errors() {
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.all", "0", "a"],                              "ERR numkeys must be a positive integer"),
            (&["rl.all", "3", "a", "b"],                         "ERR syntax error, numkeys is greater than the number of arguments"),
            (&["rl.all", "2", "a", "a", "gcra", "1", "1", "1s", "gcra", "1", "1", "1s"], "ERR syntax error, RL.ALL keys must be distinct"),
            (&["rl.all", "1", "a"],                              "ERR syntax error, a limiter is missing for a key"),
            (&["rl.all", "1", "a", "nope", "1"],                 "ERR unknown limiter 'nope'"),
            (&["rl.all", "1", "a", "gcra", "1", "1"],            "ERR syntax error, GCRA needs its positional arguments"),
            (&["rl.all", "1", "a", "gcra", "0", "1", "1s"],      "ERR burst must be a positive integer"),
            (&["rl.all", "1", "a", "gcra", "1", "1", "1s", "X"], "ERR unknown option 'X'"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
