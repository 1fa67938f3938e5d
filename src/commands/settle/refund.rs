//! RL.REFUND key units [DEDUP id] [AT t]: give units back to a limiter, for any algorithm
//! (`core::flow::refund`; an algorithm says through `Algorithm::REFUND` whether it takes one).

use redis_module::Context;

use crate::commands::call::args::{Args, Options, positive};
use crate::commands::call::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::commands::row::{Command, Run};
use crate::commands::{evaluation_time, reply_decision};
use crate::core::flow;
use crate::core::limiter::Decision;
use crate::docs::{AT, ArgType, CommandDoc, KEY, arg, opt};
use crate::error::RlError;
use crate::ffi::command::Argv;
use crate::ffi::key::LimiterKey;
use crate::ffi::reply;

/// RL.REFUND's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"Give units back to a limiter (a request that was charged but did not happen, or cost less than reserved)",
    complexity: c"O(1), O(N) for RL.SLIDING when the newest entry holds fewer than the units given back",
    args: &[
        KEY,
        arg(c"units", ArgType::Integer),
        opt(c"id", ArgType::String, c"DEDUP"),
        AT,
    ],
    shared_options: false,
};

/// RL.REFUND's parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    pub units: u64,
    pub opts: Options,
}

impl RefundRequest {
    /// Parse the whole argument vector (`args[0]` is the command name, `args[1]` the key).
    ///
    /// # Errors
    /// Arity, `units` not a positive integer, options other than `DEDUP` and `AT`.
    pub fn parse(items: &[&[u8]]) -> Result<Self, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let units = positive(args.required()?, "units")?;
        let opts =
            Options::parse_only(&mut args, crate::commands::call::options::REFUND, |_, _| {
                Ok(false)
            })?;
        Ok(RefundRequest { units, opts })
    }
}

/// RL.REFUND key units [DEDUP id] [AT t]
///
/// Replies the limiter reply after the refund, `granted` being the units given back; nil for a
/// missing key (or one holding only a block).
pub struct Refund;

impl Run for Refund {
    /// RL.REFUND on the call's arguments and their bytes; on `Ok` it has replied.
    ///
    /// # Errors
    /// Argument errors, WRONGTYPE, an algorithm that takes no refund; nothing is written then.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        let req = RefundRequest::parse(bytes)?;
        let name = argv.get(1).ok_or(RlError::Arity)?;
        let eval = evaluation_time(ctx, req.opts.at)?;
        let now = eval.now;
        let mut key = LimiterKey::open(ctx, name);
        let held = key.limiter(this.name_str())?;
        // Judged before anything changes: a refund that errors changes nothing.
        let judged = match &held {
            Some(state) => {
                flow::judge_refund(state, now, req.units, req.opts.dedup).map_err(RlError::from)?
            }
            None => None,
        };
        let (fate, reply) = match (held, judged) {
            (Some(mut state), Some(judged)) => {
                let d = Decision::from(judged.verdict);
                let written = flow::settle_refund(&mut state, judged);
                (Fate::kept(state, written), Some(d))
            }
            (held, _) => {
                if let Some(state) = held {
                    state.discard();
                }
                (Fate::Unchanged, None)
            }
        };
        let granted = reply.is_some_and(|d| d.granted > 0);
        let propagate = Propagate::WithAt {
            argv,
            at_index: req.opts.at_index,
            now,
        };
        finish(
            ctx,
            Tail::of(this),
            eval,
            &mut [Touched::new(key, name, fate)],
            propagate,
            granted,
            |ctx| match &reply {
                Some(d) => reply_decision(ctx, d),
                None => reply::null(ctx),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::dedup::DedupId;

    fn parse(items: &[&str]) -> Result<RefundRequest, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        RefundRequest::parse(&bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn refund_parses_units_dedup_and_at() {
        let r = parse(&["rl.refund", "k", "70", "dedup", "req-1", "AT", "1000.5"]).unwrap();
        assert_eq!(r.units, 70);
        assert_eq!(r.opts.dedup, Some(DedupId::of(b"req-1")));
        assert_eq!(r.opts.at, Some(1_000_500));
        assert_eq!(r.opts.at_index, Some(5));
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.refund", "k"],                   "ERR wrong number of arguments"),
            (&["rl.refund", "k", "0"],              "ERR units must be a positive integer"),
            (&["rl.refund", "k", "-1"],             "ERR units must be a positive integer"),
            (&["rl.refund", "k", "1", "COST", "2"], "ERR unknown option 'COST'"),
            (&["rl.refund", "k", "1", "PEEK"],      "ERR unknown option 'PEEK'"),
            (&["rl.refund", "k", "1", "BLOCK", "1s"], "ERR unknown option 'BLOCK'"),
            (&["rl.refund", "k", "1", "DEDUP"],     "ERR syntax error, DEDUP needs a value"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
