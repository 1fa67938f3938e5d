//! RL.GCRA key burst rate period [COST n] [PEEK] [BESTEFFORT] [DEDUP id] [AT t]

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisString};

use crate::commands::args::{Args, Options, duration, positive};
use crate::commands::{LimiterCommand, Parsed};
use crate::core::gcra::{Gcra, GcraParams};
use crate::error::RlError;
use crate::stats::{self, CommandStats};

/// RL.GCRA.
pub struct GcraCommand;

impl LimiterCommand for GcraCommand {
    type Algo = Gcra;
    const NAME: &'static str = "rl.gcra";
    const EVENT: &'static CStr = c"rl.gcra";

    fn stats() -> &'static CommandStats {
        &stats::GCRA
    }

    fn parse(items: &[&[u8]]) -> Result<Parsed<GcraParams>, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let burst = positive(args.required()?, "burst")?;
        let rate = positive(args.required()?, "rate")?;
        let period = duration(args.required()?, "period")?;
        let params = GcraParams::new(burst, rate, period)?;
        let opts = Options::parse(&mut args, |_, _| Ok(false))?;
        Ok(Parsed { params, opts })
    }
}

/// RL.GCRA key burst rate period [COST n] [PEEK] [BESTEFFORT] [DEDUP id] [AT t]
///
/// # Errors
/// As [`crate::commands::run`].
pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    crate::commands::run::<GcraCommand>(ctx, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Parsed<GcraParams>, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        GcraCommand::parse(&bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn gcra_parses_positionals_and_options() {
        let p = parse(&["rl.gcra", "k", "10", "5", "1s", "COST", "2", "AT", "1000"]).unwrap();
        assert_eq!(p.params, GcraParams::new(10, 5, 1_000_000).unwrap());
        assert_eq!(p.opts.cost, 2);
        assert_eq!(p.opts.at, Some(1_000_000));
    }

    #[test]
    fn gcra_parse_errors_name_the_argument() {
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.gcra", "k", "0", "5", "1s"],       "ERR burst must be a positive integer"),
            (&["rl.gcra", "k", "x", "5", "1s"],       "ERR burst must be a positive integer"),
            (&["rl.gcra", "k", "10", "-5", "1s"],     "ERR rate must be a positive integer"),
            (&["rl.gcra", "k", "10", "5", "abc"],     "ERR invalid duration 'abc' for period"),
            (&["rl.gcra", "k", "10", "5", "1s", "X"], "ERR unknown option 'X'"),
            (&["rl.gcra", "k", "10", "5"],            "ERR wrong number of arguments"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
