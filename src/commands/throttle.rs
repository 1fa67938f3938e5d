//! CL.THROTTLE key max_burst count_per_period period_seconds [quantity]
//!
//! A drop-in for redis-cell's command: the same arguments, decisions and reply
//! `[limited, limit, remaining, retry_after_s, reset_after_s]`, where `limit = max_burst + 1`,
//! `retry_after_s` is -1 when allowed, and seconds are rounded as redis-cell rounds them (whole
//! milliseconds, then up to the next second). It runs RL.GCRA with `burst = max_burst + 1` on the
//! same kind of key, so a limiter can be moved between the two commands.

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::commands::args::{Args, Options, format_at, non_negative, positive};
use crate::commands::{LimiterCommand, Parsed};
use crate::core::Micros;
use crate::core::gcra::{Gcra, GcraParams};
use crate::core::limiter::{Decision, Retry, Verdict};
use crate::core::time::{US_PER_MS, US_PER_SEC};
use crate::error::RlError;
use crate::stats::{self, CommandStats};

/// CL.THROTTLE.
pub struct ThrottleCommand;

/// redis-cell's rounding: the duration in whole milliseconds, then seconds rounded up.
fn cell_seconds(us: Micros) -> i64 {
    let ms = us / US_PER_MS;
    i64::try_from(ms.div_ceil(1_000)).unwrap_or(i64::MAX)
}

impl LimiterCommand for ThrottleCommand {
    type Algo = Gcra;
    const NAME: &'static str = "cl.throttle";
    const EVENT: &'static CStr = c"cl.throttle";

    fn stats() -> &'static CommandStats {
        &stats::THROTTLE
    }

    fn parse(items: &[&[u8]]) -> Result<Parsed<GcraParams>, RlError> {
        if !(5..=6).contains(&items.len()) {
            return Err(RlError::Arity);
        }
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let max_burst = non_negative(args.required()?, "max_burst")?;
        let count = positive(args.required()?, "count per period")?;
        let period_s = positive(args.required()?, "period")?;
        let quantity = match args.next() {
            Some(q) => non_negative(q, "quantity")?,
            None => 1,
        };
        let burst = max_burst.checked_add(1).ok_or(RlError::Overflow)?;
        let period = period_s.checked_mul(US_PER_SEC).ok_or(RlError::Overflow)?;
        let params = GcraParams::new(burst, count, period).map_err(|_| RlError::Overflow)?;
        let opts = Options {
            cost: quantity,
            ..Options::default()
        };
        Ok(Parsed { params, opts })
    }

    /// Replicated as the equivalent RL.GCRA call, which carries `AT`.
    fn replicate(ctx: &Context, args: &[RedisString], opts: &Options, now: Micros) {
        let (Some(key), Some(burst), Some(count), Some(period)) =
            (args.get(1), args.get(2), args.get(3), args.get(4))
        else {
            return;
        };
        let (key, count, period) = (key.as_slice(), count.as_slice(), period.as_slice());
        let burst = crate::commands::args::parse_u64(burst.as_slice())
            .and_then(|b| b.checked_add(1))
            .unwrap_or(1)
            .to_string();
        let period = [period, b"s"].concat();
        let cost = opts.cost.to_string();
        let at = format_at(now);
        let out: [&[u8]; 8] = [
            key,
            burst.as_bytes(),
            count,
            &period,
            b"COST",
            cost.as_bytes(),
            b"AT",
            at.as_bytes(),
        ];
        ctx.replicate("rl.gcra", out.as_slice());
    }

    fn reply(_ctx: &Context, d: &Decision, v: &Verdict) -> RedisValue {
        // No BESTEFFORT here: a call is granted in full or not at all.
        let limited = v.retry != Retry::Granted;
        let retry = match v.retry {
            Retry::After(us) if limited => cell_seconds(us),
            _ => -1,
        };
        RedisValue::Array(vec![
            RedisValue::Integer(i64::from(limited)),
            RedisValue::Integer(d.limit),
            RedisValue::Integer(d.remaining),
            RedisValue::Integer(retry),
            RedisValue::Integer(cell_seconds(v.reset_after)),
        ])
    }
}

/// CL.THROTTLE key max_burst count_per_period period_seconds [quantity]
///
/// # Errors
/// As [`crate::commands::run`].
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    crate::commands::run::<ThrottleCommand>(ctx, args)
}

#[cfg(test)]
mod tests {
    use super::*;

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
