//! RL.GCRA key burst rate period [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [DELAY d] [AT t]

use crate::commands::call::args::{Args, Options, duration, positive};
use crate::commands::{LimiterCommand, Parsed};
use crate::core::gcra::{Gcra, GcraParams};
use crate::core::{CoreError, MUST_FIT_DURATION};
use crate::docs::{ArgType, CommandDoc, DELAY, KEY, arg};
use crate::error::RlError;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm.
const DOC: CommandDoc = CommandDoc {
    arity: -5,
    summary: c"Rate-limit with the generic cell rate algorithm: burst units at once, rate units per period sustained",
    complexity: c"O(1)",
    args: &[
        KEY,
        arg(c"burst", ArgType::Integer),
        arg(c"rate", ArgType::Integer),
        arg(c"period", ArgType::String),
        DELAY,
    ],
    shared_options: true,
};

/// RL.GCRA.
pub struct GcraCommand;

impl LimiterCommand for GcraCommand {
    type Algo = Gcra;
    const DOC: CommandDoc = DOC;

    fn parse(items: &[&[u8]]) -> Result<Parsed<GcraParams>, RlError> {
        parse_schedule(items, ["burst", "rate", "burst * period / rate"])
    }
}

/// `cmd key <units> <rate> <period> [options]`: the arguments of every command on the GCRA
/// schedule (RL.GCRA, RL.TOKENBUCKET, RL.LEAKYBUCKET), with the names each gives the first two
/// and their span (`units * period / rate`, named when it is too long).
///
/// # Errors
/// Arity, a count that is not a positive integer, a bad duration, the shared options' errors.
pub fn parse_schedule(
    items: &[&[u8]],
    [units, rate, span]: [&'static str; 3],
) -> Result<Parsed<GcraParams>, RlError> {
    let mut args = Args::new(items);
    let _name = args.required()?;
    let _key = args.required()?;
    let units = positive(args.required()?, units)?;
    let rate = positive(args.required()?, rate)?;
    let period = duration(args.required()?, "period")?;
    let params = GcraParams::new(units, rate, period).map_err(|e| spanned(e, span))?;
    let opts = Options::parse(&mut args, |_, _| Ok(false))?;
    Ok(Parsed { params, opts })
}

/// The error for `e`, naming the arguments as `span` when the limiter's span is too long.
pub fn spanned(e: CoreError, span: &'static str) -> RlError {
    match e {
        CoreError::SpanTooLong => RlError::Invalid(span, MUST_FIT_DURATION),
        e => e.into(),
    }
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
