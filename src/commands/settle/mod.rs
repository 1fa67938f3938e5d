//! RL.SETTLE numkeys key [key ...] id units [units ...] [AT t]: settle the reservation `id`
//! made with `HOLD ttl` on each key with the units the request really used
//! (`core::settle::judge_settle`). Every key is judged before any changes, so a settle that
//! errors on one key changes none.

pub mod block;
pub mod refund;

use redis_module::Context;

use crate::commands::all::declare_keys;
use crate::commands::call::args::{Args, Options, non_negative, positive};
use crate::commands::call::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::commands::row::{Command, Run};
use crate::commands::{evaluation_time, reply_decision};
use crate::core::dedup::{DedupId, MAX_ID_LEN};
use crate::core::limiter::Decision;
use crate::core::settle;
use crate::docs::{AT, ArgDoc, ArgType, CommandDoc, KEY, arg};
use crate::error::RlError;
use crate::ffi::command::{Arg, Argv};
use crate::ffi::key::LimiterKey;
use crate::ffi::reply;

/// RL.SETTLE's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: -5,
    summary: c"Settle a reservation made with HOLD on each key with the units really used: the difference is given back, or charged beyond the limit",
    complexity: c"O(N) where N is the number of keys; O(M) more for a key of RL.SLIDING with M entries when units are given back or charged",
    args: &[
        arg(c"numkeys", ArgType::Integer),
        ArgDoc {
            multiple: true,
            ..KEY
        },
        arg(c"id", ArgType::String),
        ArgDoc {
            multiple: true,
            ..arg(c"units", ArgType::Integer)
        },
        AT,
    ],
    shared_options: false,
};

/// RL.SETTLE's parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettleRequest<'a> {
    pub keys: Vec<&'a [u8]>,
    pub id: DedupId,
    /// One per key.
    pub units: Vec<u64>,
    pub opts: Options,
}

impl<'a> SettleRequest<'a> {
    /// Parse the whole argument vector (`args[0]` is the command name).
    ///
    /// # Errors
    /// Arity, numkeys, an id longer than 256 bytes, units that are not non-negative integers,
    /// a key given twice, options other than `AT`.
    pub fn parse(items: &'a [&'a [u8]]) -> Result<Self, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let numkeys = positive(args.required()?, "numkeys")?;
        let numkeys =
            usize::try_from(numkeys).map_err(|_| RlError::Syntax("numkeys is too large"))?;
        // numkeys keys, the id and numkeys units.
        let needed = numkeys.saturating_mul(2).saturating_add(1);
        if needed > items.len().saturating_sub(2) {
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
                return Err(RlError::Syntax("RL.SETTLE keys must be distinct"));
            }
        }
        let id = args.required()?;
        if id.len() > MAX_ID_LEN {
            return Err(RlError::IdTooLong);
        }
        let units = (0..numkeys)
            .map(|_| non_negative(args.required()?, "units"))
            .collect::<Result<Vec<u64>, RlError>>()?;
        let opts = Options::parse_only(
            &mut args,
            crate::commands::call::options::AT_ONLY,
            |_, _| Ok(false),
        )?;
        Ok(SettleRequest {
            keys,
            id: DedupId::of(id),
            units,
            opts,
        })
    }
}

/// RL.SETTLE numkeys key [key ...] id units [units ...] [AT t]
///
/// Replies an array with one limiter reply per key after the settle (nil for a missing key).
pub struct Settle;

impl Run for Settle {
    /// RL.SETTLE on the call's arguments and their bytes; on `Ok` it has replied.
    ///
    /// # Errors
    /// Argument errors, WRONGTYPE, a concurrency limiter, debt the state cannot hold; nothing is
    /// written then.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        if declare_keys(ctx, bytes) {
            return Ok(());
        }
        let req = SettleRequest::parse(bytes)?;
        let eval = evaluation_time(ctx, req.opts.at)?;
        let now = eval.now;
        let names: Vec<Arg<'_>> = argv.iter().skip(2).take(req.keys.len()).collect();
        let mut keys: Vec<LimiterKey> = names.iter().map(|n| LimiterKey::open(ctx, *n)).collect();
        let mut held = Vec::with_capacity(keys.len());
        for key in keys.iter_mut() {
            held.push(key.limiter(this.name_str())?);
        }
        // Every key judged before any changes: a settle that errors changes nothing.
        let mut judged = Vec::with_capacity(held.len());
        for (state, &units) in held.iter().zip(&req.units) {
            judged.push(match state {
                Some(s) => settle::judge_settle(s, now, req.id, units)?,
                None => None,
            });
        }
        // Counted as granted when the id was a reservation on any key (a settle with 0 included).
        let granted = judged.iter().flatten().any(|j| j.held);
        let mut replies: Vec<Option<Decision>> = Vec::with_capacity(held.len());
        let mut fates: Vec<Fate> = Vec::with_capacity(held.len());
        for (state, judged) in held.into_iter().zip(judged) {
            match (state, judged) {
                (Some(mut state), Some(judged)) => {
                    replies.push(Some(Decision::from(judged.verdict)));
                    let written = settle::settle_settled(&mut state, judged);
                    fates.push(Fate::kept(state, written));
                }
                (state, _) => {
                    if let Some(state) = state {
                        state.discard();
                    }
                    replies.push(None);
                    fates.push(Fate::Unchanged);
                }
            }
        }
        let mut touched: Vec<Touched<'_>> = keys
            .into_iter()
            .zip(names)
            .zip(fates)
            .map(|((key, name), fate)| Touched::new(key, name, fate))
            .collect();
        let propagate = Propagate::WithAt {
            argv,
            at_index: req.opts.at_index,
            now,
        };
        finish(
            ctx,
            Tail::of(this),
            eval,
            &mut touched,
            propagate,
            granted,
            |ctx| reply_all(ctx, &replies),
        )
    }
}

/// The reply: one limiter reply per key (nil for a missing key).
fn reply_all(ctx: &Context, replies: &[Option<Decision>]) {
    reply::array(ctx, replies.len());
    for d in replies {
        match d {
            Some(d) => reply_decision(ctx, d),
            None => reply::null(ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<(usize, Vec<u64>, Option<u64>), String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        SettleRequest::parse(&bytes)
            .map(|r| {
                assert_eq!(r.id, DedupId::of(b"req-1"));
                (r.keys.len(), r.units, r.opts.at)
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn settle_parses_keys_id_units_and_at() {
        assert_eq!(
            parse(&["rl.settle", "1", "k", "req-1", "30"]),
            Ok((1, vec![30], None))
        );
        assert_eq!(
            parse(&[
                "rl.settle",
                "2",
                "a",
                "b",
                "req-1",
                "0",
                "7",
                "at",
                "1000.5"
            ]),
            Ok((2, vec![0, 7], Some(1_000_500)))
        );
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.settle", "0", "k", "req-1", "1"],        "ERR numkeys must be a positive integer"),
            (&["rl.settle", "2", "a", "b", "req-1", "1"],   "ERR syntax error, numkeys is greater than the number of arguments"),
            (&["rl.settle", "2", "a", "a", "req-1", "1", "1"], "ERR syntax error, RL.SETTLE keys must be distinct"),
            (&["rl.settle", "1", "k", "req-1", "-1"],       "ERR units must be a non-negative integer"),
            (&["rl.settle", "1", "k", "req-1", "1", "COST", "2"], "ERR unknown option 'COST'"),
            (&["rl.settle", "1", "k", "req-1", "1", "AT"],  "ERR syntax error, AT needs a value"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
