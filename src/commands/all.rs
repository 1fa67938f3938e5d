//! RL.ALL numkeys key [key ...] limiter [limiter ...] [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [AT t]
//!
//! Several limits on one request, atomically and all or nothing. Each `limiter` is an algorithm
//! name and that command's positional arguments and own options (`GCRA 10 5 1s`), for the key in
//! the same position. Parsing reuses each command's own parser, so the arguments and errors are
//! exactly those of the single-limiter commands.

use redis_module::{Context, RedisResult, RedisString};

use crate::commands::args::{Args, Options, positive, quote};
use crate::commands::registry;
use crate::commands::{evaluation_time, limiter_reply, replicate_expiry, replicate_with_at};
use crate::config;
use crate::core::limiter::{Decision, Request};
use crate::core::multi::{AnyParams, MultiError, Slot, apply_all};
use crate::error::RlError;
use crate::ffi::command::Arg;
use crate::ffi::key::{Holding, LimiterKey};
use crate::ffi::notify::notify;
use crate::stats;

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
        return Ok(redis_module::RedisValue::NoReply);
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
        held.push(match key.holding() {
            Holding::Empty => None,
            Holding::Limiter(value) => Some(value.unpack().ok_or(RlError::Payload)?),
            Holding::Other => return Err(RlError::WrongType.into()),
        });
    }
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
    let created: Vec<_> = slots
        .into_iter()
        .map(|s| match s {
            Slot::New(state) => state,
            Slot::Existing(_) => None,
        })
        .collect();
    // Keep the values written (a changed inline value is encoded again when dropped); the
    // others did not change.
    for (state, write) in held.into_iter().zip(&outcome.writes) {
        match (state, write) {
            (Some(state), None) => state.discard(),
            (state, _) => drop(state),
        }
    }
    let expiries: Vec<_> = outcome
        .writes
        .iter()
        .map(|w| w.map(|at| eval.expiry(at)))
        .collect();
    let mut wrote = false;
    for ((key, state), expiry) in keys.iter_mut().zip(created).zip(&expiries) {
        let Some(expiry) = expiry else { continue };
        if let Some(state) = state {
            key.set(state)?;
        }
        key.set_expire_at(expiry.ms);
        wrote = true;
    }
    drop(keys);
    if wrote {
        replicate_with_at(ctx, c"rl.all", &args, parsed.opts.at_index, now);
        for (name, expiry) in names.iter().zip(&expiries) {
            if let Some(expiry) = expiry {
                replicate_expiry(ctx, Arg::from(*name), *expiry);
            }
        }
        for (name, write) in names.iter().zip(&outcome.writes) {
            if write.is_some() {
                notify(ctx, c"rl.all", Arg::from(*name));
            }
        }
    }
    let d = Decision::from(outcome.verdict);
    stats::ALL_LIMITERS.record(d.granted > 0 || (req.cost == 0 && !outcome.blocked));
    Ok(limiter_reply(ctx, &d))
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
