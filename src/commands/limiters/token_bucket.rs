//! RL.TOKENBUCKET key capacity refill period [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [DELAY d] [AT t]

use crate::commands::limiters::gcra::parse_schedule;
use crate::commands::{LimiterCommand, Parsed};
use crate::core::gcra::GcraParams;
use crate::core::token_bucket::TokenBucket;
use crate::docs::{ArgType, CommandDoc, DELAY, KEY, arg};
use crate::error::RlError;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm.
const DOC: CommandDoc = CommandDoc {
    arity: -5,
    summary: c"Rate-limit with a token bucket of capacity tokens refilled continuously at refill per period",
    complexity: c"O(1)",
    args: &[
        KEY,
        arg(c"capacity", ArgType::Integer),
        arg(c"refill", ArgType::Integer),
        arg(c"period", ArgType::String),
        DELAY,
    ],
    shared_options: true,
};

/// RL.TOKENBUCKET.
pub struct TokenBucketCommand;

impl LimiterCommand for TokenBucketCommand {
    type Algo = TokenBucket;
    const DOC: CommandDoc = DOC;

    fn parse(items: &[&[u8]]) -> Result<Parsed<GcraParams>, RlError> {
        parse_schedule(items, ["capacity", "refill", "capacity * period / refill"])
    }
}
