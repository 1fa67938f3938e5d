//! RL.ALL numkeys key [key ...] limiter [limiter ...] [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [AT t]
//!
//! Several limits on one request, atomically and all or nothing. Each `limiter` is an algorithm
//! name and that command's positional arguments and own options (`GCRA 10 5 1s`), for the key in
//! the same position. Parsing reuses each command's own parser, so the arguments and errors are
//! exactly those of the single-limiter commands.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::commands::args::{Args, Options, positive, quote};
use crate::commands::registry;
use crate::commands::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::commands::wait;
use crate::commands::{evaluation_time, reply_decision};
use crate::config;
use crate::core::Kind;
use crate::core::flow::Write;
use crate::core::limiter::{Decision, Request};
use crate::core::multi::{AnyParams, MultiError, Slot, apply_all};
use crate::error::RlError;
use crate::ffi::command::{Arg, with_argv};
use crate::ffi::key::LimiterKey;
use crate::stats;

/// The command's name.
const NAME: &str = "rl.all";

/// RL.ALL's parsed arguments.
#[derive(Debug, Clone)]
pub struct AllRequest<'a> {
    pub keys: Vec<&'a [u8]>,
    pub specs: Vec<AnyParams>,
    pub opts: Options,
}

impl<'a> AllRequest<'a> {
    /// Parse the whole argument vector (`args[0]` is the command name).
    ///
    /// # Errors
    /// Arity, numkeys, unknown limiters, each limiter's own argument errors, shared options.
    pub fn parse(items: &'a [&'a [u8]]) -> Result<Self, RlError> {
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
        let keys: Vec<&[u8]> = (0..numkeys).filter_map(|_| args.next()).collect();
        for (i, k) in keys.iter().enumerate() {
            if keys
                .iter()
                .skip(i.saturating_add(1))
                .any(|other| other == k)
            {
                return Err(RlError::Syntax("RL.ALL keys must be distinct"));
            }
        }
        let mut specs = Vec::with_capacity(numkeys);
        for key in &keys {
            specs.push(parse_limiter(&mut args, key)?);
        }
        let opts = Options::parse(&mut args, |_, _| Ok(false))?;
        let specs = specs
            .into_iter()
            .map(|s| s.bind_call(opts.dedup, opts.best_effort))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AllRequest { keys, specs, opts })
    }
}

/// One `limiter` of RL.ALL or RL.CHECK for `key`: an algorithm name, that command's positional
/// arguments and its own options, parsed by that command's own parser.
///
/// # Errors
/// A missing or unknown limiter, the command's own argument errors.
pub fn parse_limiter(args: &mut Args<'_>, key: &[u8]) -> Result<AnyParams, RlError> {
    let token = args
        .next()
        .ok_or(RlError::Syntax("a limiter is missing for a key"))?;
    let limiter = registry::limiter(token).ok_or_else(|| RlError::UnknownLimiter(quote(token)))?;
    let arity = RlError::LimiterArity(limiter.kind);
    let mut argv: Vec<&[u8]> = vec![limiter.kind.command().as_bytes(), key];
    for _ in 0..limiter.positional() {
        argv.push(args.next().ok_or_else(|| arity.clone())?);
    }
    while let Some(opt) = args.peek() {
        if !limiter.options().any(|o| opt.eq_ignore_ascii_case(o)) {
            break;
        }
        argv.push(opt);
        args.next();
        argv.push(args.next().ok_or_else(|| arity.clone())?);
    }
    (limiter.parse)(&argv)
}

/// RL.ALL numkeys key [key ...] limiter [limiter ...] [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [AT t]
///
/// # Errors
/// Argument errors, WRONGTYPE naming the key, overflow; nothing is written on error.
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let bytes: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    // Redis 7.0's cluster routing asks the command itself where its keys are (the key specs
    // answer COMMAND GETKEYS, but not the cluster redirection of 7.0).
    if ctx.is_keys_position_request() {
        let numkeys = bytes
            .get(1)
            .and_then(|n| crate::commands::args::parse_u64(n))
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
            .min(bytes.len().saturating_sub(2));
        for pos in 0..numkeys {
            ctx.key_at_pos(i32::try_from(pos.saturating_add(2)).unwrap_or(i32::MAX));
        }
        return Ok(RedisValue::NoReply);
    }
    let parsed = AllRequest::parse(&bytes)?;
    let eval = evaluation_time(ctx, parsed.opts.at)?;
    let now = eval.now;
    let req: Request = parsed.opts.request(now);
    let names: Vec<&RedisString> = args.iter().skip(2).take(parsed.keys.len()).collect();

    let mut keys: Vec<LimiterKey> = names
        .iter()
        .map(|n| LimiterKey::open(ctx, Arg::from(*n)))
        .collect();
    let mut held = Vec::with_capacity(keys.len());
    for key in keys.iter_mut() {
        held.push(key.limiter(NAME)?);
    }
    // A new lease on a concurrency key does not pass the clients waiting there
    // (`RL.ACQUIRE ... WAIT`): while anybody waits, the call is judged without being taken, and
    // denied.
    let yields = parsed
        .specs
        .iter()
        .zip(&parsed.keys)
        .zip(&held)
        .any(|((spec, key), state)| {
            spec.kind() == Kind::Concurrency
                && wait::yields_turn(ctx, key, state.as_deref(), parsed.opts.dedup, now)
        });
    let mut req = req;
    req.peek |= yields;
    let mut slots: Vec<Slot<'_>> = held
        .iter_mut()
        .map(|h| match h {
            Some(state) => Slot::Existing(state),
            None => Slot::New(None),
        })
        .collect();
    let outcome =
        apply_all(&mut slots, &parsed.specs, &req, config::dedup_max()).map_err(|e| match e {
            MultiError::WrongKind {
                index,
                held,
                wanted,
            } => RlError::WrongKindAt {
                key: parsed.keys.get(index).map(|k| quote(k)).unwrap_or_default(),
                held,
                wanted,
            },
            MultiError::Core(e) => RlError::from(e),
        })?;
    let created: Vec<Write> = slots
        .into_iter()
        .map(|s| match s {
            Slot::New(Some(state)) => Write::Created(state),
            Slot::Existing(_) => Write::Updated,
            Slot::New(None) => Write::None,
        })
        .collect();
    let fates: Vec<Fate> = held
        .into_iter()
        .zip(created)
        .zip(&outcome.writes)
        .map(|((state, write), at)| match at {
            Some(at) => Fate::of(ctx, state, write, *at, None),
            None => Fate::of(ctx, state, Write::None, 0, None),
        })
        .collect();
    let mut d = Decision::from(outcome.verdict);
    if yields && req.cost > 0 {
        d.granted = 0;
        d.retry_after_ms = d.retry_after_ms.max(1);
    }
    let tail = Tail {
        event: c"rl.all",
        stats: &stats::ALL_LIMITERS,
    };
    let granted = d.granted > 0 || (req.cost == 0 && !outcome.blocked);
    let mut keys: Vec<Touched<'_>> = keys
        .into_iter()
        .zip(&names)
        .zip(fates)
        .map(|((key, name), fate)| Touched::new(key, *name, fate))
        .collect();
    with_argv(&args, |argv| {
        let propagate = Propagate::WithAt {
            argv,
            at_index: parsed.opts.at_index,
            now,
        };
        finish(ctx, tail, eval, &mut keys, propagate, granted, |ctx| {
            reply_decision(ctx, &d)
        })
    })?;
    Ok(RedisValue::NoReply)
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

    use crate::commands::registry::LIMITERS;
    use crate::core::dedup::DedupId;
    use crate::core::error::CoreError;
    use crate::core::flow::{self, Outcome, Write};
    use crate::core::multi::MultiOutcome;
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
        /// the options (BLOCK, DEDUP, PEEK, BESTEFFORT, COST 0, a time behind the key's last
        /// update), for every algorithm of the registry.
        #[test]
        fn all_over_one_key_is_its_own_command(
            spec in arb_limiter(),
            ops in prop::collection::vec(
                (0u64..900_000, 0u64..400_000, 0u64..6, any::<bool>(), any::<bool>(),
                 prop::option::of(0u8..3), prop::option::of(1u64..2_000_000)),
                1..40,
            ),
        ) {
            let mut a: Option<LimiterState> = None;
            let mut b: Option<LimiterState> = None;
            let mut t = 1_700_000_000_000_000u64;
            for (dt, back, cost, peek, be, dedup, block) in ops {
                t += dt;
                let dedup = dedup.map(|d| DedupId(u128::from(d)));
                let req = Request {
                    peek,
                    best_effort: be,
                    dedup,
                    block,
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
