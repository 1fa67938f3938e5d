//! RL.CHECKALL numkeys key [key ...] limiter [limiter ...] [COST n] \[SHADOW\] \[DETAIL\] [AT t]: the reply
//! the same RL.ALL call with `PEEK` would give ("would this request pass every limit?"),
//! read-only (it runs on replicas): the keys are opened for reading and copied, RL.ALL's own
//! path (`core::multi::apply_charged`) runs on the copies as a `PEEK`, and nothing is written
//! or propagated. Limiters take `CHARGE n` and `NAME name` as in RL.ALL.
//!
//! A concurrency limiter (`CONCURRENCY limit lease`) is checked as a new lease (RL.CHECKALL
//! takes no `DEDUP` id), as RL.CHECK checks it.

use redis_module::Context;

use crate::commands::all::{AllRequest, declare_keys, multi_error, reply_detail};
use crate::commands::row::{Command, Run};
use crate::commands::{evaluation_time, reply_decision};
use crate::core::dedup::DedupId;
use crate::core::limiter::{Decision, Request};
use crate::core::multi::{Slot, apply_charged};
use crate::docs::{AT, ArgDoc, ArgType, CommandDoc, DETAIL, KEY, SHADOW, arg, opt};
use crate::error::RlError;
use crate::ffi::command::Argv;
use crate::ffi::key::LimiterKey;
use crate::stats::Count;

/// RL.CHECKALL's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: -4,
    summary: c"The reply an RL.ALL call with PEEK would give, read-only (runs on replicas): would this request pass every limit?",
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
        crate::commands::all::POLICY,
        opt(c"cost", ArgType::Integer, c"COST"),
        SHADOW,
        DETAIL,
        AT,
    ],
    shared_options: false,
};

/// The shared options RL.CHECKALL takes.
const OPTIONS: &[&[u8]] = crate::commands::call::options::CHECKALL;

/// The lease id a concurrency limiter is checked under: one no call holds (ids are hashes of
/// the client's bytes), so the check is that of a new lease.
const CHECK_LEASE: DedupId = DedupId(u128::MAX);

/// Parse RL.CHECKALL's arguments: RL.ALL's, with only `COST`, `SHADOW`, `DETAIL` and `AT`.
///
/// # Errors
/// As RL.ALL's parser; any other shared option is unknown.
pub fn parse<'a>(items: &'a [&'a [u8]]) -> Result<AllRequest<'a>, RlError> {
    let mut parsed = AllRequest::parse_with(items, OPTIONS)?;
    parsed.bind_call(Some(CHECK_LEASE), false)?;
    Ok(parsed)
}

/// RL.CHECKALL numkeys key [key ...] limiter [limiter ...] [COST n] \[SHADOW\] \[DETAIL\] [AT t]
pub struct CheckAll;

impl Run for CheckAll {
    /// RL.CHECKALL on the call's arguments and their bytes; on `Ok` it has replied.
    ///
    /// # Errors
    /// Argument errors, WRONGTYPE naming the key (a stream key: an error naming RL.STREAMCOUNT).
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        if declare_keys(ctx, bytes) {
            return Ok(());
        }
        let parsed = parse(bytes)?;
        // Bounded like the call it previews: an AT RL.ALL would refuse is refused here.
        let now = evaluation_time(ctx, parsed.opts.at)?.now;
        let req = Request {
            peek: true,
            ..parsed.opts.request(now)
        };
        let mut copies = Vec::with_capacity(parsed.keys.len());
        for name in argv.iter().skip(2).take(parsed.keys.len()) {
            let mut key = LimiterKey::open_read(ctx, name);
            copies.push(key.limiter_copy(this.name_str())?);
        }
        let mut slots: Vec<Slot<'_>> = copies
            .iter_mut()
            .map(|c| match c {
                Some(state) => Slot::Existing(state),
                None => Slot::New(None),
            })
            .collect();
        let outcome = apply_charged(&mut slots, &parsed.specs, &parsed.charges, &req, 0)
            .map_err(|e| multi_error(e, &parsed.keys))?;
        let (reply, reason) = req.reply(outcome.verdict, outcome.reason);
        let d = Decision::from(reply);
        this.stats
            .record(Count::of(outcome.denied_by.is_none(), req.shadow));
        if parsed.opts.detail {
            reply_detail(ctx, &d, (reason, outcome.denied_by), &parsed, &outcome);
        } else {
            reply_decision(ctx, &d);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::gcra::{Gcra, GcraParams};
    use crate::core::multi::AnyParams;

    fn parsed(items: &[&'static str]) -> Result<AllRequest<'static>, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        let bytes: &'static [&'static [u8]] = Box::leak(bytes.into_boxed_slice());
        parse(bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn checkall_parses_as_rl_all_with_its_own_options() {
        let p = parsed(&[
            "rl.checkall",
            "2",
            "a",
            "b",
            "gcra",
            "10",
            "5",
            "1s",
            "NAME",
            "rpm",
            "gcra",
            "9",
            "3",
            "1s",
            "CHARGE",
            "4",
            "COST",
            "2",
            "DETAIL",
            "AT",
            "5",
        ])
        .unwrap();
        assert_eq!(p.keys, [&b"a"[..], b"b"]);
        assert_eq!(
            p.specs[0],
            AnyParams::of::<Gcra>(&GcraParams::new(10, 5, 1_000_000).unwrap())
        );
        assert_eq!(p.charges, [2, 4]);
        assert_eq!(p.names, [Some(&b"rpm"[..]), None]);
        assert!(p.opts.detail);
        assert_eq!(p.opts.at, Some(5_000));
        // A concurrency limiter needs no DEDUP id: it is checked as a new lease.
        assert!(parsed(&["rl.checkall", "1", "c", "CONCURRENCY", "2", "1s"]).is_ok());
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.checkall", "1", "a", "gcra", "1", "1", "1s", "PEEK"],         "ERR unknown option 'PEEK'"),
            (&["rl.checkall", "1", "a", "gcra", "1", "1", "1s", "BESTEFFORT"],   "ERR unknown option 'BESTEFFORT'"),
            (&["rl.checkall", "1", "a", "gcra", "1", "1", "1s", "DEDUP", "x"],   "ERR unknown option 'DEDUP'"),
            (&["rl.checkall", "1", "a", "gcra", "1", "1", "1s", "BLOCK", "1s"],  "ERR unknown option 'BLOCK'"),
            (&["rl.checkall", "1", "a", "gcra", "1", "1", "1s", "CHARGE", "x"],  "ERR CHARGE must be a non-negative integer"),
            (&["rl.checkall", "2", "a", "a", "gcra", "1", "1", "1s", "gcra", "1", "1", "1s"], "ERR syntax error, RL.ALL keys must be distinct"),
        ];
        for (items, want) in cases {
            assert_eq!(parsed(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
