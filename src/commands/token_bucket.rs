//! RL.TOKENBUCKET key capacity refill period [COST n] [PEEK] [BESTEFFORT] [DEDUP id] [AT t]

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisString};

use crate::commands::gcra::parse_schedule;
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
        parse_schedule(items, ["capacity", "refill", "capacity * period / refill"])
    }
}

/// RL.TOKENBUCKET key capacity refill period [COST n] [PEEK] [BESTEFFORT] [DEDUP id] [AT t]
///
/// # Errors
/// As [`crate::commands::run`].
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    crate::commands::run::<TokenBucketCommand>(ctx, args)
}
