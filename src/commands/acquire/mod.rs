//! RL.ACQUIRE key limit lease ID id [COST n] \[PEEK\] \[SHADOW\] [BLOCK d] \[DETAIL\] [AT t] [WAIT timeout] / RL.RELEASE key id [AT t]
//!
//! RL.ACQUIRE is the concurrency limiter's command (run by `commands::run_call` like every
//! algorithm's, with its turn among the key's waiters, `commands::acquire::wait`; in RL.ALL as
//! `CONCURRENCY limit lease`, the lease id taken from `DEDUP`).
//! RL.RELEASE frees a lease and replies its units.

pub mod args;
pub mod wait;

use redis_module::Context;

use crate::commands::acquire::args::{lease_id, parse_acquire, parse_with};
use crate::commands::call::args::{Args, at_time, quote};
use crate::commands::call::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::commands::row::{Command, Run};
use crate::commands::{LimiterCommand, Parsed, evaluation_time};
use crate::core::Micros;
use crate::core::concurrency::{
    Concurrency, ConcurrencyParams, Released, release as release_lease,
};
use crate::core::dedup::DedupId;
use crate::docs::{AT, ArgDoc, ArgType, CommandDoc, DETAIL, KEY, SHADOW, arg, opt};
use crate::error::RlError;
use crate::ffi::command::Argv;
use crate::ffi::key::LimiterKey;
use crate::ffi::reply;
use crate::stats::CommandStats;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm (`ID` is a required token: RL.ALL
/// takes the id from `DEDUP`; `COST`, `PEEK`, `BLOCK` and `AT` are RL.ALL's shared options).
const DOC: CommandDoc = CommandDoc {
    arity: -6,
    summary: c"Concurrency limiter: take units under a lease (at most limit units held at once), or renew the lease the id holds",
    complexity: c"O(log N) where N is the number of leases held",
    args: &[
        KEY,
        arg(c"limit", ArgType::Integer),
        arg(c"lease", ArgType::String),
        ArgDoc {
            token: Some(c"ID"),
            ..arg(c"id", ArgType::String)
        },
        opt(c"cost", ArgType::Integer, c"COST"),
        opt(c"peek", ArgType::PureToken, c"PEEK"),
        SHADOW,
        opt(c"duration", ArgType::String, c"BLOCK"),
        AT,
        DETAIL,
        opt(c"timeout", ArgType::String, c"WAIT"),
    ],
    shared_options: false,
};

/// RL.RELEASE's COMMAND DOCS.
pub const RELEASE_DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"Free the lease an id holds on a concurrency limiter; replies its units (0 if none)",
    complexity: c"O(log N) where N is the number of leases held",
    args: &[KEY, arg(c"id", ArgType::String), AT],
    shared_options: false,
};

/// RL.ACQUIRE.
pub struct AcquireCommand;

impl LimiterCommand for AcquireCommand {
    type Algo = Concurrency;
    const DOC: CommandDoc = DOC;

    fn parse(items: &[&[u8]]) -> Result<Parsed<ConcurrencyParams>, RlError> {
        parse_acquire(items).map(|(parsed, _)| parsed)
    }

    /// `limit lease [ID id]` and the shared options; the id is optional here (RL.ALL binds
    /// `DEDUP`), required by [`Self::parse`].
    fn parse_limiter(items: &[&[u8]]) -> Result<Parsed<ConcurrencyParams>, RlError> {
        parse_with(items, false).map(|(parsed, _)| parsed)
    }

    /// RL.ACQUIRE, which may wait for its turn (`WAIT timeout`).
    fn call(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        stats: &'static CommandStats,
    ) -> Result<(), RlError> {
        crate::commands::acquire::wait::acquire(ctx, argv, bytes, stats)
    }
}

/// RL.RELEASE's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub id: DedupId,
    pub at: Option<Micros>,
    pub at_index: Option<usize>,
}

impl Release {
    /// Parse `RL.RELEASE key id [AT t]`.
    ///
    /// # Errors
    /// Arity, a too long id, an unknown option, a bad or repeated `AT`.
    pub fn parse(items: &[&[u8]]) -> Result<Release, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let id = lease_id(args.required()?)?;
        let mut at = None;
        let mut at_index = None;
        while let Some(token) = args.next() {
            if !token.eq_ignore_ascii_case(b"AT") {
                return Err(RlError::UnknownOption(quote(token)));
            }
            if at.is_some() {
                return Err(RlError::Duplicate("AT"));
            }
            at_index = Some(args.index().saturating_sub(1));
            at = Some(at_time(args.value_of("AT")?)?);
        }
        Ok(Release { id, at, at_index })
    }
}

/// RL.RELEASE key id [AT t]: free `id`'s live lease; replies its units (0 when the id holds
/// none, the key is missing or the lease expired). Only a release that frees units writes: it
/// records the update time, sets the key's expiry to its last lease's (deletes it after the
/// last lease) and propagates with the resolved `AT`.
pub struct ReleaseCommand;

impl Run for ReleaseCommand {
    /// RL.RELEASE on the call's arguments and their bytes; on `Ok` it has replied.
    ///
    /// # Errors
    /// Argument errors; WRONGTYPE for a key of another type or algorithm.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        let parsed = Release::parse(bytes)?;
        let key_name = argv.get(1).ok_or(RlError::Arity)?;
        let eval = evaluation_time(ctx, parsed.at)?;
        let now = eval.now;
        let mut key = LimiterKey::open(ctx, key_name);
        let (fate, units, now) = match key.limiter(this.name_str())? {
            None => (Fate::Unchanged, 0, now),
            Some(mut state) => {
                let now = state.clock(now);
                // Judged before anything changes: a key of another algorithm changes nothing.
                let released = release_lease(&mut state, parsed.id, now);
                let (fate, units) = match released {
                    Err(e) => {
                        state.discard();
                        return Err(RlError::from(e));
                    }
                    Ok(Released::Nothing) => (Fate::kept(state, None), 0),
                    Ok(Released::Emptied { units }) => {
                        drop(state);
                        (Fate::Deleted, units)
                    }
                    Ok(Released::Kept { units, expires_at }) => {
                        (Fate::kept(state, Some(expires_at)), units)
                    }
                };
                (fate, units, now)
            }
        };
        let propagate = Propagate::WithAt {
            argv,
            at_index: parsed.at_index,
            now,
        };
        finish(
            ctx,
            Tail::of(this),
            eval,
            &mut [Touched::new(key, key_name, fate)],
            propagate,
            units > 0,
            |ctx| reply::integer(ctx, i64::try_from(units).unwrap_or(i64::MAX)),
        )?;
        if units > 0 {
            crate::commands::acquire::wait::freed(ctx, key_name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Parsed<ConcurrencyParams>, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        AcquireCommand::parse(&bytes).map_err(|e| e.to_string())
    }

    fn release(items: &[&str]) -> Result<Release, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        Release::parse(&bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn acquire_parses_positionals_id_and_options() {
        let p = parse(&["rl.acquire", "k", "5", "30s", "ID", "w1", "COST", "2"]).unwrap();
        assert_eq!(
            p.params,
            ConcurrencyParams::new(5, 30_000_000, Some(DedupId::of(b"w1"))).unwrap()
        );
        assert_eq!(p.opts.cost, 2);
        let p = parse(&["rl.acquire", "k", "65536", "1", "at", "5", "id", ""]).unwrap();
        assert_eq!(p.params.limit(), 65_536);
        assert_eq!(p.params.id(), Some(DedupId::of(b"")));
        assert_eq!(p.opts.at, Some(5_000));
        assert_eq!(p.opts.at_index, Some(4));
    }

    #[test]
    fn acquire_parse_errors_name_the_argument() {
        let long = "x".repeat(257);
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            // arguments                                                 error
            (&["rl.acquire", "k", "0", "1s", "ID", "a"],                  "ERR limit must be a positive integer"),
            (&["rl.acquire", "k", "65537", "1s", "ID", "a"],              "ERR limit must be at most 65536"),
            (&["rl.acquire", "k", "5", "0", "ID", "a"],                   "ERR invalid duration '0' for lease"),
            (&["rl.acquire", "k", "5", "1s", "COST", "1"],                "ERR syntax error, RL.ACQUIRE needs ID id"),
            (&["rl.acquire", "k", "5", "1s", "ID"],                       "ERR syntax error, ID needs a value"),
            (&["rl.acquire", "k", "5", "1s", "ID", "a", "ID", "b"],       "ERR syntax error, ID given more than once"),
            (&["rl.acquire", "k", "5", "1s", "ID", long.as_str()],        "ERR lease id must be at most 256 bytes"),
            (&["rl.acquire", "k", "5", "1s", "ID", "a", "BESTEFFORT"],    "ERR unknown option 'BESTEFFORT'"),
            (&["rl.acquire", "k", "5", "1s", "ID", "a", "DEDUP", "x"],    "ERR unknown option 'DEDUP'"),
            (&["rl.acquire", "k", "5", "1s", "ID", "a", "NOPE"],          "ERR unknown option 'NOPE'"),
            (&["rl.acquire", "k", "5"],                                   "ERR wrong number of arguments"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }

    #[test]
    fn release_parses_id_and_at() {
        assert_eq!(
            release(&["rl.release", "k", "w1"]).unwrap(),
            Release {
                id: DedupId::of(b"w1"),
                at: None,
                at_index: None
            }
        );
        assert_eq!(
            release(&["rl.release", "k", "w1", "at", "7"]).unwrap().at,
            Some(7_000)
        );
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.release", "k"],                        "ERR wrong number of arguments"),
            (&["rl.release", "k", "a", "AT"],             "ERR syntax error, AT needs a value"),
            (&["rl.release", "k", "a", "AT", "1", "AT", "2"], "ERR syntax error, AT given more than once"),
            (&["rl.release", "k", "a", "COST", "1"],      "ERR unknown option 'COST'"),
            (&["rl.release", "k", "a", "AT", "x"],        "ERR invalid time 'x' for AT, expected unix milliseconds"),
        ];
        for (items, want) in cases {
            assert_eq!(release(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
