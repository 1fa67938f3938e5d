//! RL.FIXED key limit window [OFFSET d] [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [AT t]

use crate::commands::args::{Args, Options, duration, duration_or_zero, positive};
use crate::commands::{LimiterCommand, Parsed};
use crate::core::Micros;
use crate::core::fixed_window::{Fixed, FixedParams};
use crate::docs::{ArgType, CommandDoc, KEY, arg, opt};
use crate::error::RlError;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm.
const DOC: CommandDoc = CommandDoc {
    arity: -4,
    summary: c"Rate-limit with a fixed window counter: at most limit units per window, windows aligned to the Unix epoch shifted by OFFSET",
    complexity: c"O(1)",
    args: &[
        KEY,
        arg(c"limit", ArgType::Integer),
        arg(c"window", ArgType::String),
        opt(c"offset", ArgType::String, c"OFFSET"),
    ],
    shared_options: true,
};

/// RL.FIXED.
pub struct FixedCommand;

impl LimiterCommand for FixedCommand {
    type Algo = Fixed;
    const DOC: CommandDoc = DOC;

    fn parse(items: &[&[u8]]) -> Result<Parsed<FixedParams>, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let limit = positive(args.required()?, "limit")?;
        let window = duration(args.required()?, "window")?;
        let mut offset: Option<Micros> = None;
        let opts = Options::parse(&mut args, |token, args| {
            if token != b"OFFSET" {
                return Ok(false);
            }
            if offset.is_some() {
                return Err(RlError::Duplicate("OFFSET"));
            }
            offset = Some(duration_or_zero(args.value_of("OFFSET")?, "OFFSET")?);
            Ok(true)
        })?;
        let params = FixedParams::new(limit, window, offset.unwrap_or(0))?;
        Ok(Parsed { params, opts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Parsed<FixedParams>, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        FixedCommand::parse(&bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn fixed_parses_positionals_offset_and_options() {
        let p = parse(&["rl.fixed", "k", "10", "1h", "offset", "15m", "COST", "2"]).unwrap();
        assert_eq!(
            p.params,
            FixedParams::new(10, 3_600_000_000, 900_000_000).unwrap()
        );
        assert_eq!(p.opts.cost, 2);
        let p = parse(&["rl.fixed", "k", "10", "1000", "AT", "5", "OFFSET", "0"]).unwrap();
        assert_eq!(p.params, FixedParams::new(10, 1_000_000, 0).unwrap());
        assert_eq!(p.opts.at, Some(5_000));
        // An offset of a window or more is its remainder.
        let p = parse(&["rl.fixed", "k", "10", "1h", "OFFSET", "75m"]).unwrap();
        assert_eq!(p.params.offset(), 900_000_000);
    }

    #[test]
    fn fixed_parse_errors_name_the_argument() {
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            // arguments                                         error
            (&["rl.fixed", "k", "0", "1s"],                       "ERR limit must be a positive integer"),
            (&["rl.fixed", "k", "-1", "1s"],                      "ERR limit must be a positive integer"),
            (&["rl.fixed", "k", "9223372036854775808", "1s"],     "ERR limit must be a positive integer"),
            (&["rl.fixed", "k", "10", "0"],                       "ERR invalid duration '0' for window"),
            (&["rl.fixed", "k", "10", "1w"],                      "ERR invalid duration '1w' for window"),
            (&["rl.fixed", "k", "10", "1s", "OFFSET"],            "ERR syntax error, OFFSET needs a value"),
            (&["rl.fixed", "k", "10", "1s", "OFFSET", "x"],       "ERR invalid duration 'x' for OFFSET"),
            (&["rl.fixed", "k", "10", "1s", "OFFSET", "1", "offset", "2"],
                                                                  "ERR syntax error, OFFSET given more than once"),
            (&["rl.fixed", "k", "10", "1s", "PRECISION", "1"],    "ERR unknown option 'PRECISION'"),
            (&["rl.fixed", "k", "10"],                            "ERR wrong number of arguments"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
