//! RL.TOKENBUCKET key capacity refill period [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [DELAY d] [AT t]

use crate::commands::gcra::parse_schedule;
use crate::commands::{LimiterCommand, Parsed};
use crate::core::gcra::GcraParams;
use crate::core::state::Stored;
use crate::core::token_bucket::TokenBucket;
use crate::docs::{ArgType, CommandDoc, DELAY, KEY, Keys, arg};
use crate::error::RlError;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm.
const DOC: CommandDoc = CommandDoc {
    name: <TokenBucket as Stored>::KIND.command_c(),
    arity: -5,
    summary: c"Rate-limit with a token bucket of capacity tokens refilled continuously at refill per period",
    complexity: c"O(1)",
    keys: Keys::Update,
    args: &[
        KEY,
        arg(c"capacity", ArgType::Integer),
        arg(c"refill", ArgType::Integer),
        arg(c"period", ArgType::String),
        DELAY,
    ],
    shared_options: true,
    acl: c"write fast",
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
