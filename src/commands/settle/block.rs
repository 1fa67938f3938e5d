//! RL.BLOCK key d [AT t] and RL.UNBLOCK key: the penalty box by hand, on any limiter key
//! (`core::flow::block`, `core::flow::unblock`).

use redis_module::Context;

use crate::commands::call::args::{Args, Options, duration};
use crate::commands::call::tail::{Fate, Propagate, Tail, Touched, finish};
use crate::commands::row::{Command, Run};
use crate::commands::{Evaluation, evaluation_time};
use crate::core::Micros;
use crate::core::flow;
use crate::core::time::ceil_ms;
use crate::docs::{AT, ArgType, CommandDoc, KEY, arg};
use crate::error::RlError;
use crate::ffi::clock::server_now;
use crate::ffi::command::{Arg, Argv};
use crate::ffi::key::LimiterKey;
use crate::ffi::reply;

/// RL.BLOCK's COMMAND DOCS.
pub const BLOCK_DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"Block a limiter key for a duration: every call on it is denied until the block ends",
    complexity: c"O(1)",
    args: &[KEY, arg(c"duration", ArgType::String), AT],
    shared_options: false,
};

/// RL.UNBLOCK's COMMAND DOCS.
pub const UNBLOCK_DOC: CommandDoc = CommandDoc {
    arity: 2,
    summary: c"Remove a limiter key's block",
    complexity: c"O(1)",
    args: &[KEY],
    shared_options: false,
};

/// RL.BLOCK's parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRequest {
    /// How long, in µs.
    pub d: Micros,
    pub opts: Options,
}

impl BlockRequest {
    /// Parse the whole argument vector (`args[0]` is the command name, `args[1]` the key).
    ///
    /// # Errors
    /// Arity, a bad duration, options other than `AT`.
    pub fn parse(items: &[&[u8]]) -> Result<Self, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let d = duration(args.required()?, "duration")?;
        let opts = Options::parse_only(
            &mut args,
            crate::commands::call::options::AT_ONLY,
            |_, _| Ok(false),
        )?;
        Ok(BlockRequest { d, opts })
    }
}

/// RL.BLOCK key d [AT t]
///
/// Blocks the key until `max(current block end, now + d)`; a missing key becomes a key holding
/// only the block. Replies the block's remaining ms.
pub struct Block;

impl Run for Block {
    /// RL.BLOCK on the call's arguments and their bytes; on `Ok` it has replied.
    ///
    /// # Errors
    /// Argument errors, WRONGTYPE.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        let req = BlockRequest::parse(bytes)?;
        let name = argv.get(1).ok_or(RlError::Arity)?;
        let eval = evaluation_time(ctx, req.opts.at)?;
        let now = eval.now;
        let mut key = LimiterKey::open(ctx, name);
        let (fate, until, at) = match key.limiter(this.name_str())? {
            Some(mut state) => {
                let (expires_at, until, at) = flow::block(&mut state, now, req.d);
                (Fate::kept(state, Some(expires_at)), until, at)
            }
            None => {
                let state = flow::new_block(now, req.d);
                let until = state.extras.block_until();
                let fate = Fate::Written {
                    new: Some(state),
                    expires_at: until,
                    sent: None,
                };
                (fate, until, now)
            }
        };
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
            true,
            |ctx| reply::integer(ctx, ceil_ms(until.saturating_sub(at))),
        )
    }
}

/// RL.UNBLOCK key
///
/// Removes the key's block (a key holding only a block is deleted). Replies 1 if a block was
/// in force, else 0.
pub struct Unblock;

impl Run for Unblock {
    /// # Errors
    /// Arity, WRONGTYPE.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() != 2 {
            return Err(RlError::Arity);
        }
        let name = argv.get(1).ok_or(RlError::Arity)?;
        run_unblock(ctx, argv, name, this)
    }
}

/// RL.UNBLOCK on key `name`; on `Ok` it has replied.
fn run_unblock(
    ctx: &Context,
    argv: Argv<'_>,
    name: Arg<'_>,
    this: &'static Command,
) -> Result<(), RlError> {
    let mut key = LimiterKey::open(ctx, name);
    let (fate, in_force) = match key.limiter(this.name_str())? {
        None => (Fate::Unchanged, false),
        Some(mut state) => {
            // The reply says whether a block was in force; the state drops any stored block,
            // so a replica applies the same change whatever its clock.
            let in_force = state.extras.blocked_at(state.clock(server_now())).is_some();
            let (had, only_block) = flow::unblock(&mut state);
            let fate = if !had {
                state.discard();
                Fate::Unchanged
            } else if only_block {
                drop(state);
                Fate::Deleted
            } else {
                // The limiter's own expiry, an absolute time both sides compute alike.
                let expires_at = state.expires_at().max(1);
                Fate::kept(state, Some(expires_at))
            };
            (fate, in_force && had)
        }
    };
    let propagate = Propagate::Plain(argv);
    finish(
        ctx,
        Tail::of(this),
        // Not a clock-dependent write: the key keeps its state's own expiry.
        Evaluation::exact(0),
        &mut [Touched::new(key, name, fate)],
        propagate,
        in_force,
        |ctx| reply::integer(ctx, i64::from(in_force)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<BlockRequest, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        BlockRequest::parse(&bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn block_parses_duration_and_at() {
        let r = parse(&["rl.block", "k", "1h", "at", "1000"]).unwrap();
        assert_eq!(
            (r.d, r.opts.at, r.opts.at_index),
            (3_600_000_000, Some(1_000_000), Some(3))
        );
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.block", "k"],                 "ERR wrong number of arguments"),
            (&["rl.block", "k", "0"],            "ERR invalid duration '0' for duration"),
            (&["rl.block", "k", "1x"],           "ERR invalid duration '1x' for duration"),
            (&["rl.block", "k", "1s", "COST", "1"], "ERR unknown option 'COST'"),
            (&["rl.block", "k", "1s", "AT"],     "ERR syntax error, AT needs a value"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
