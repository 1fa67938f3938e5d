//! CL.THROTTLE key max_burst count_per_period period_seconds \[quantity\]
//!
//! A drop-in for redis-cell's command: the same arguments, decisions and reply
//! `[limited, limit, remaining, retry_after_s, reset_after_s]`, where `limit = max_burst + 1`,
//! `retry_after_s` is -1 when allowed, and seconds are rounded as redis-cell rounds them (whole
//! milliseconds, then up to the next second). It runs RL.GCRA with `burst = max_burst + 1` on the
//! same kind of key, so a limiter can be moved between the two commands. An optional trailing
//! `AT t` (not in redis-cell) evaluates at a given time; replication uses it.

use std::ffi::CStr;

use redis_module::Context;

use crate::commands::call::args::{Args, Options, at_time, non_negative, positive};
use crate::commands::limiters::gcra::spanned;
use crate::commands::{LimiterCommand, Parsed};
use crate::core::Micros;
use crate::core::gcra::{Gcra, GcraParams, MAX_PARAM};
use crate::core::limiter::{Decision, Retry, Verdict};
use crate::core::time::{US_PER_MS, US_PER_SEC};
use crate::docs::{ArgDoc, ArgType, CommandDoc, KEY, arg};
use crate::error::RlError;
use crate::ffi::reply;

/// CL.THROTTLE.
pub struct ThrottleCommand;

/// What max_burst must be: one less than GCRA's largest burst.
const MAX_BURST_BOUND: &str = "must be at most 9223372036854775806";
/// What period must be: GCRA's longest period, in whole seconds.
const PERIOD_BOUND: &str = "must be at most 9223372036854 seconds";

/// redis-cell's rounding: the duration in whole milliseconds, then seconds rounded up.
fn cell_seconds(us: Micros) -> i64 {
    let ms = us / US_PER_MS;
    i64::try_from(ms.div_ceil(1_000)).unwrap_or(i64::MAX)
}

/// COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: -5,
    summary: c"redis-cell compatible GCRA rate limiting",
    complexity: c"O(1)",
    args: &[
        KEY,
        arg(c"max_burst", ArgType::Integer),
        arg(c"count_per_period", ArgType::Integer),
        arg(c"period_seconds", ArgType::Integer),
        ArgDoc {
            optional: true,
            ..arg(c"quantity", ArgType::Integer)
        },
    ],
    shared_options: false,
};

impl LimiterCommand for ThrottleCommand {
    type Algo = Gcra;
    const DOC: CommandDoc = DOC;
    const NAME: &'static str = "cl.throttle";
    const EVENT: &'static CStr = c"cl.throttle";

    fn parse(items: &[&[u8]]) -> Result<Parsed<GcraParams>, RlError> {
        // redis-cell's arguments, optionally followed by `AT t` (our extension, which is also how
        // a call replicates: the same command with its evaluation time).
        // `AT` as the last argument has no value (not a quantity called "AT").
        if matches!(items.len(), 6 | 7)
            && items.last().is_some_and(|t| t.eq_ignore_ascii_case(b"AT"))
        {
            return Err(RlError::NeedsValue("AT"));
        }
        let at_index = match items.len() {
            5 | 6 => None,
            7 | 8 => Some(items.len().saturating_sub(2)),
            _ => return Err(RlError::Arity),
        };
        if let Some(i) = at_index
            && !items.get(i).is_some_and(|t| t.eq_ignore_ascii_case(b"AT"))
        {
            return Err(RlError::Arity);
        }
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let max_burst = non_negative(args.required()?, "max_burst")?;
        let count = positive(args.required()?, "count per period")?;
        let period_s = positive(args.required()?, "period")?;
        let quantity = match args.next().filter(|q| !q.eq_ignore_ascii_case(b"AT")) {
            Some(q) => non_negative(q, "quantity")?,
            None => 1,
        };
        let at = match at_index.and_then(|i| items.get(i.saturating_add(1))) {
            Some(t) => Some(at_time(t)?),
            None => None,
        };
        // GCRA's burst is one more than max_burst, its period in µs: both must fit its bounds.
        let burst = max_burst
            .checked_add(1)
            .filter(|&b| b <= MAX_PARAM)
            .ok_or(RlError::Invalid("max_burst", MAX_BURST_BOUND))?;
        let period = period_s
            .checked_mul(US_PER_SEC)
            .filter(|&p| p <= MAX_PARAM)
            .ok_or(RlError::Invalid("period", PERIOD_BOUND))?;
        let params = GcraParams::new(burst, count, period)
            .map_err(|e| spanned(e, "(max_burst + 1) * period / count per period"))?;
        let opts = Options {
            cost: quantity,
            at,
            at_index,
            ..Options::default()
        };
        Ok(Parsed { params, opts })
    }

    fn reply(ctx: &Context, d: &Decision, v: &Verdict) {
        // No BESTEFFORT here: a call is granted in full or not at all.
        let limited = v.retry != Retry::Granted;
        let retry = match v.retry {
            Retry::After(us) if limited => cell_seconds(us),
            _ => -1,
        };
        reply::integers(
            ctx,
            None,
            [
                i64::from(limited),
                d.limit,
                d.remaining,
                retry,
                cell_seconds(v.reset_after),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_in_messages_are_the_constants() {
        assert_eq!(
            MAX_BURST_BOUND,
            format!("must be at most {}", MAX_PARAM - 1)
        );
        assert_eq!(
            PERIOD_BOUND,
            format!("must be at most {} seconds", MAX_PARAM / US_PER_SEC)
        );
    }

    #[test]
    fn throttle_at_needs_a_value() {
        let parse = |items: &[&str]| {
            let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
            ThrottleCommand::parse(&bytes)
                .map(|p| p.opts)
                .map_err(|e| e.to_string())
        };
        for items in [
            &["cl.throttle", "k", "1", "1", "1", "AT"][..],
            &["cl.throttle", "k", "1", "1", "1", "2", "at"],
        ] {
            assert_eq!(
                parse(items).unwrap_err(),
                "ERR syntax error, AT needs a value"
            );
        }
        let o = parse(&["cl.throttle", "k", "1", "1", "1", "AT", "5"]).unwrap();
        assert_eq!((o.cost, o.at), (1, Some(5_000)));
        let o = parse(&["cl.throttle", "k", "1", "1", "1", "2", "AT", "5"]).unwrap();
        assert_eq!((o.cost, o.at), (2, Some(5_000)));
    }

    #[test]
    fn cell_seconds_round_like_redis_cell() {
        assert_eq!(cell_seconds(0), 0);
        assert_eq!(cell_seconds(999), 0);
        assert_eq!(cell_seconds(1_000), 1);
        assert_eq!(cell_seconds(1_000_000), 1);
        assert_eq!(cell_seconds(1_000_999), 1);
        assert_eq!(cell_seconds(1_001_000), 2);
    }
}
