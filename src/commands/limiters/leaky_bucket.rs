//! RL.LEAKYBUCKET key capacity rate period [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [DELAY d] [AT t]

use crate::commands::limiters::gcra::parse_schedule;
use crate::commands::{LimiterCommand, Parsed};
use crate::core::gcra::GcraParams;
use crate::core::leaky_bucket::LeakyBucket;
use crate::docs::{ArgType, CommandDoc, DELAY, KEY, arg};
use crate::error::RlError;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm.
const DOC: CommandDoc = CommandDoc {
    arity: -5,
    summary: c"Rate-limit with a leaky bucket (a FIFO queue with constant outflow); a granted call's retry_after_ms is its queue delay",
    complexity: c"O(1)",
    args: &[
        KEY,
        arg(c"capacity", ArgType::Integer),
        arg(c"rate", ArgType::Integer),
        arg(c"period", ArgType::String),
        DELAY,
    ],
    shared_options: true,
};

/// RL.LEAKYBUCKET.
pub struct LeakyBucketCommand;

impl LimiterCommand for LeakyBucketCommand {
    type Algo = LeakyBucket;
    const DOC: CommandDoc = DOC;

    fn parse(items: &[&[u8]]) -> Result<Parsed<GcraParams>, RlError> {
        parse_schedule(items, ["capacity", "rate", "capacity * period / rate"])
    }
}
