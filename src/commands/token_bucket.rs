//! RL.TOKENBUCKET key capacity refill period [COST n] [PEEK] [BESTEFFORT] [DEDUP id] [AT t]

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisString};

use crate::commands::args::{Args, Options, duration, positive};
use crate::commands::{LimiterCommand, Parsed};
use crate::core::gcra::GcraParams;
use crate::core::token_bucket::TokenBucket;
use crate::error::RlError;
use crate::stats::{self, CommandStats};

/// RL.TOKENBUCKET.
pub struct TokenBucketCommand;

impl LimiterCommand for TokenBucketCommand {
    type Algo = TokenBucket;
    const NAME: &'static str = "rl.tokenbucket";
    const EVENT: &'static CStr = c"rl.tokenbucket";

    fn stats() -> &'static CommandStats {
        &stats::TOKENBUCKET
    }

    fn parse(items: &[&[u8]]) -> Result<Parsed<GcraParams>, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let capacity = positive(args.required()?, "capacity")?;
        let refill = positive(args.required()?, "refill")?;
        let period = duration(args.required()?, "period")?;
        let params = GcraParams::new(capacity, refill, period)?;
        let opts = Options::parse(&mut args, |_, _| Ok(false))?;
        Ok(Parsed { params, opts })
    }
}

/// RL.TOKENBUCKET key capacity refill period [COST n] [PEEK] [BESTEFFORT] [DEDUP id] [AT t]
///
/// # Errors
/// As [`crate::commands::run`].
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    crate::commands::run::<TokenBucketCommand>(ctx, args)
}
