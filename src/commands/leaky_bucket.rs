//! RL.LEAKYBUCKET key capacity rate period [COST n] [PEEK] [BESTEFFORT] [DEDUP id] [AT t]

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisString};

use crate::commands::gcra::parse_schedule;
use crate::commands::{LimiterCommand, Parsed};
use crate::core::gcra::GcraParams;
use crate::core::leaky_bucket::LeakyBucket;
use crate::error::RlError;
use crate::stats::{self, CommandStats};

/// RL.LEAKYBUCKET.
pub struct LeakyBucketCommand;

impl LimiterCommand for LeakyBucketCommand {
    type Algo = LeakyBucket;
    const NAME: &'static str = "rl.leakybucket";
    const EVENT: &'static CStr = c"rl.leakybucket";

    fn stats() -> &'static CommandStats {
        &stats::LEAKYBUCKET
    }

    fn parse(items: &[&[u8]]) -> Result<Parsed<GcraParams>, RlError> {
        parse_schedule(items, ["capacity", "rate", "capacity * period / rate"])
    }
}

/// RL.LEAKYBUCKET key capacity rate period [COST n] [PEEK] [BESTEFFORT] [DEDUP id] [AT t]
///
/// # Errors
/// As [`crate::commands::run`].
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    crate::commands::run::<LeakyBucketCommand>(ctx, args)
}
