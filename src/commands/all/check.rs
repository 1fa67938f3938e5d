//! RL.CHECK key limiter [COST n] \[BESTEFFORT\] \[SHADOW\] \[DETAIL\] [AT t]: the reply the same call with `PEEK` would
//! give, read-only (it runs on replicas): the key is opened for reading, nothing is written or
//! propagated. The limiter is written as in RL.ALL and judged by `core::flow::judge`, the same
//! rules as every other call (a block honoured).
//!
//! A concurrency limiter (`CONCURRENCY limit lease`) is checked without a lease id (RL.CHECK
//! takes none): the reply says whether `COST n` units would fit now as a new lease.

use redis_module::Context;

use crate::commands::call::args::{Args, Options};
use crate::commands::call::detail;
use crate::commands::limiters::registry::parse_limiter;
use crate::commands::row::{Command, Run};
use crate::commands::{evaluation_time, reply_decision};
use crate::core::kind::Kind;
use crate::core::limiter::Decision;
use crate::core::multi::{AnyParams, BESTEFFORT_CHARGES};
use crate::docs::{AT, ArgDoc, ArgType, CommandDoc, DETAIL, KEY, SHADOW, arg, opt};
use crate::error::RlError;
use crate::ffi::command::Argv;
use crate::ffi::key::LimiterKey;
use crate::stats::Count;

/// RL.CHECK's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"The reply a limiter call with PEEK would give, read-only (runs on replicas)",
    complexity: c"O(1), O(log N) for RL.SLIDING",
    args: &[
        KEY,
        ArgDoc {
            multiple: true,
            ..arg(c"limiter", ArgType::String)
        },
        opt(c"cost", ArgType::Integer, c"COST"),
        opt(c"besteffort", ArgType::PureToken, c"BESTEFFORT"),
        SHADOW,
        DETAIL,
        AT,
    ],
    shared_options: false,
};

/// RL.CHECK's parsed arguments.
#[derive(Debug, Clone)]
pub struct CheckRequest<'a> {
    pub spec: AnyParams,
    /// The limiter's `NAME`, if given.
    pub name: Option<&'a [u8]>,
    pub opts: Options,
}

impl<'a> CheckRequest<'a> {
    /// Parse the whole argument vector (`args[0]` is the command name, `args[1]` the key).
    ///
    /// # Errors
    /// Arity, the limiter's own errors, options other than `COST`, `BESTEFFORT`, `SHADOW`,
    /// `DETAIL` and `AT`.
    pub fn parse(items: &'a [&'a [u8]]) -> Result<Self, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        if args.peek().is_none() {
            return Err(RlError::Arity);
        }
        let limiter = parse_limiter(&mut args)?;
        let spec = limiter.params;
        let mut opts =
            Options::parse_only(&mut args, crate::commands::call::options::CHECK, |_, _| {
                Ok(false)
            })?;
        // The limiter's own CHARGE, as in RL.ALL, is the units asked of it.
        if let Some(charge) = limiter.charge {
            if opts.best_effort && charge != opts.cost {
                return Err(RlError::Conflict(BESTEFFORT_CHARGES));
            }
            opts.cost = charge;
        }
        // As RL.ACQUIRE and RL.ALL: a lease holds all it asked for or nothing.
        if opts.best_effort && spec.kind() == Kind::Concurrency {
            return Err(RlError::Conflict(
                crate::core::concurrency::BESTEFFORT_NO_CONCURRENCY,
            ));
        }
        Ok(CheckRequest {
            spec,
            name: limiter.name,
            opts,
        })
    }
}

/// RL.CHECK key limiter [COST n] \[BESTEFFORT\] \[SHADOW\] \[DETAIL\] [AT t]
pub struct Check;

impl Run for Check {
    /// RL.CHECK on the call's arguments and their bytes; on `Ok` it has replied.
    ///
    /// # Errors
    /// Argument errors, WRONGTYPE (a stream key: an error naming RL.STREAMCOUNT).
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        let req = CheckRequest::parse(bytes)?;
        let name = argv.get(1).ok_or(RlError::Arity)?;
        // Bounded like the call it previews (PEEK): an AT the call would refuse is refused here.
        let now = evaluation_time(ctx, req.opts.at)?.now;
        let mut key = LimiterKey::open_read(ctx, name);
        let mut value = key.limiter_copy(this.name_str())?;
        // Reservations ended unsettled are given back on the copy (nothing is written).
        if let Some(copy) = value.as_mut() {
            copy.catch_up(copy.clock(now)).map_err(RlError::from)?;
        }
        let state = value.as_ref();
        let judged = req
            .spec
            .judge(state, now, req.opts.cost, req.opts.best_effort, None)
            .map_err(RlError::from)?;
        let granted =
            judged.verdict.granted > 0 || (req.opts.cost == 0 && judged.blocked.is_none());
        this.stats.record(Count::of(granted, req.opts.shadow));
        if req.opts.detail {
            detail::reply_one(
                ctx,
                name.bytes(),
                req.name,
                None,
                req.opts.cost,
                judged.verdict,
                req.spec.window(judged.now),
                judged.reason(),
                req.opts.shadow,
            );
            return Ok(());
        }
        let reply = req.opts.request(now).reply(judged.verdict, judged.reason());
        let d = Decision::from(reply.0);
        reply_decision(ctx, &d);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fixed_window::{Fixed, FixedParams};
    use crate::core::gcra::{Gcra, GcraParams};

    fn parse(items: &[&'static str]) -> Result<CheckRequest<'static>, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        let bytes: &'static [&'static [u8]] = Box::leak(bytes.into_boxed_slice());
        CheckRequest::parse(bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn check_parses_one_limiter_as_rl_all() {
        let r = parse(&[
            "rl.check",
            "k",
            "gcra",
            "10",
            "5",
            "1s",
            "COST",
            "3",
            "besteffort",
        ])
        .unwrap();
        assert_eq!(
            r.spec,
            AnyParams::of::<Gcra>(&GcraParams::new(10, 5, 1_000_000).unwrap())
        );
        assert_eq!((r.opts.cost, r.opts.best_effort), (3, true));
        let r = parse(&[
            "rl.check", "k", "FIXED", "100", "1m", "OFFSET", "9h", "AT", "5",
        ])
        .unwrap();
        assert_eq!(
            r.spec,
            AnyParams::of::<Fixed>(&FixedParams::new(100, 60_000_000, 9 * 3_600_000_000).unwrap())
        );
        assert_eq!(r.opts.at, Some(5_000));
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.check", "k"],                                 "ERR wrong number of arguments"),
            (&["rl.check", "k", "nope"],                         "ERR unknown limiter 'nope'"),
            (&["rl.check", "k", "gcra", "1", "1"],               "ERR syntax error, GCRA needs its positional arguments"),
            (&["rl.check", "k", "gcra", "1", "1", "1s", "PEEK"], "ERR unknown option 'PEEK'"),
            (&["rl.check", "k", "gcra", "1", "1", "1s", "DEDUP", "x"], "ERR unknown option 'DEDUP'"),
            (&["rl.check", "k", "gcra", "1", "1", "1s", "BLOCK", "1s"], "ERR unknown option 'BLOCK'"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
