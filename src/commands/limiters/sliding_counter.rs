//! RL.SLIDINGCOUNTER key limit window [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [AT t]

use crate::commands::call::args::{Args, Options, duration, positive};
use crate::commands::{LimiterCommand, Parsed};
use crate::core::sliding_counter::{SlidingCounter, SlidingCounterParams};
use crate::docs::{ArgType, CommandDoc, KEY, arg};
use crate::error::RlError;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm.
const DOC: CommandDoc = CommandDoc {
    arity: -4,
    summary: c"Rate-limit with a sliding window counter: the previous window's count weighted by its overlap plus the current window's, at most limit",
    complexity: c"O(1)",
    args: &[
        KEY,
        arg(c"limit", ArgType::Integer),
        arg(c"window", ArgType::String),
    ],
    shared_options: true,
};

/// RL.SLIDINGCOUNTER.
pub struct SlidingCounterCommand;

impl LimiterCommand for SlidingCounterCommand {
    type Algo = SlidingCounter;
    const DOC: CommandDoc = DOC;

    fn parse(items: &[&[u8]]) -> Result<Parsed<SlidingCounterParams>, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let limit = positive(args.required()?, "limit")?;
        let window = duration(args.required()?, "window")?;
        let params = SlidingCounterParams::new(limit, window)?;
        let opts = Options::parse(&mut args, |_, _| Ok(false))?;
        Ok(Parsed { params, opts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Parsed<SlidingCounterParams>, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        SlidingCounterCommand::parse(&bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn sliding_counter_parses_positionals_and_options() {
        let p = parse(&["rl.slidingcounter", "k", "100", "1m", "PEEK", "DEDUP", "x"]).unwrap();
        assert_eq!(
            p.params,
            SlidingCounterParams::new(100, 60_000_000).unwrap()
        );
        assert!(p.opts.peek && p.opts.dedup.is_some());
    }

    #[test]
    fn sliding_counter_parse_errors_name_the_argument() {
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            // arguments                                      error
            (&["rl.slidingcounter", "k", "0", "1s"],           "ERR limit must be a positive integer"),
            (&["rl.slidingcounter", "k", "1.5", "1s"],         "ERR limit must be a positive integer"),
            (&["rl.slidingcounter", "k", "10", "1.5s"],        "ERR invalid duration '1.5s' for window"),
            (&["rl.slidingcounter", "k", "10", "1s", "OFFSET", "1"],
                                                               "ERR unknown option 'OFFSET'"),
            (&["rl.slidingcounter", "k", "10", "1s", "COST"],  "ERR syntax error, COST needs a value"),
            (&["rl.slidingcounter", "k"],                      "ERR wrong number of arguments"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
