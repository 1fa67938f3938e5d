//! RL.SLIDING key limit window [PRECISION d] [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [AT t]

use crate::commands::call::args::{Args, Options, duration, once, positive};
use crate::commands::{LimiterCommand, Parsed};
use crate::core::sliding_log::{DEFAULT_PRECISION, SlidingLog, SlidingParams};
use crate::docs::{ArgType, CommandDoc, KEY, arg, opt};
use crate::error::RlError;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm.
const DOC: CommandDoc = CommandDoc {
    arity: -4,
    summary: c"Rate-limit with an exact sliding window log: at most limit units in any window, logged in buckets of PRECISION (default 1ms)",
    complexity: c"O(log N) where N is the number of entries in the key's log (at most 65536); expired entries are dropped in amortized O(1)",
    args: &[
        KEY,
        arg(c"limit", ArgType::Integer),
        arg(c"window", ArgType::String),
        opt(c"precision", ArgType::String, c"PRECISION"),
    ],
    shared_options: true,
};

/// RL.SLIDING.
pub struct SlidingCommand;

impl LimiterCommand for SlidingCommand {
    type Algo = SlidingLog;
    const DOC: CommandDoc = DOC;

    fn parse(items: &[&[u8]]) -> Result<Parsed<SlidingParams>, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let limit = positive(args.required()?, "limit")?;
        let window = duration(args.required()?, "window")?;
        let mut precision = None;
        let opts = Options::parse(&mut args, |token, args| {
            if token != b"PRECISION" {
                return Ok(false);
            }
            let mut seen = precision.is_some();
            once(&mut seen, "PRECISION")?;
            precision = Some(duration(args.value_of("PRECISION")?, "PRECISION")?);
            Ok(true)
        })?;
        let precision = precision.unwrap_or(DEFAULT_PRECISION);
        if precision > window {
            return Err(RlError::Conflict(
                "PRECISION must not be longer than window",
            ));
        }
        let params = SlidingParams::new(limit, window, precision)?;
        Ok(Parsed { params, opts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::STATE_REPLICATION_MAX;
    use crate::core::codec;
    use crate::core::dedup::DedupId;
    use crate::core::limiter::Algorithm;
    use crate::core::packed::Encodable;
    use crate::core::state::LimiterState;
    use crate::core::state::Stored;
    use proptest::prelude::*;

    /// Logs growing one byte per entry cross the limit at every length: the first that does
    /// not fit is the first skipped.
    #[test]
    fn sliding_skips_encoding_from_the_first_log_too_long() {
        for (limit, start) in [
            (10u64, 1_000u64),
            (10_000_000, 1_700_000_000_000_123),
            (300, 5),
        ] {
            let p = SlidingParams::new(limit, 3_600_000_000, 1000).unwrap();
            let mut log = SlidingLog::fresh(&p);
            let mut lengths = Vec::new();
            for i in 0..limit.min(60) {
                let t = start * 1000 + i * 1000;
                log.commit(&p, t, 1).unwrap();
                let state = LimiterState::new(log.clone().into_state(), t);
                let len = codec::encode(&state).len();
                assert_eq!(
                    Encodable::Full(&state).surely_longer_than(STATE_REPLICATION_MAX),
                    len > STATE_REPLICATION_MAX,
                    "{len} bytes"
                );
                lengths.push(len);
            }
            if limit >= 60 {
                assert!(lengths.contains(&STATE_REPLICATION_MAX));
                assert!(lengths.contains(&(STATE_REPLICATION_MAX + 1)));
            }
        }
    }

    proptest! {
        /// A log is sent to `RL.SLIDING` with `AT` unencoded only when its encoding is longer
        /// than `RL._SET` takes; without ids or a block, exactly then.
        #[test]
        fn sliding_skips_encoding_only_logs_too_long_to_replicate(
            limit in prop_oneof![1u64..300, Just(10_000_000u64), Just(1u64 << 40)],
            window_ms in prop_oneof![1u64..2_000, Just(1_000u64), Just(3_600_000u64)],
            gaps in proptest::collection::vec((0u64..300, 1u64..4), 1..40),
            start in 0u64..(1u64 << 52),
            ids in 0usize..3,
            block in proptest::bool::weighted(0.1),
        ) {
            let p = SlidingParams::new(limit, window_ms * 1000, 1000).unwrap();
            let mut log = SlidingLog::fresh(&p);
            let mut t = start;
            for (gap_ms, cost) in gaps {
                t += gap_ms * 1000 + 17;
                let v = log.evaluate(&p, t, cost, true).unwrap();
                if v.granted > 0 {
                    log.commit(&p, t, v.granted).unwrap();
                }
            }
            let mut state = LimiterState::new(log.into_state(), t);
            for id in 0..ids {
                state.extras.remember(DedupId(id as u128), 1, t + 1, 10);
            }
            if block {
                state.extras.block(t + 1);
            }
            let long = codec::encode(&state).len() > STATE_REPLICATION_MAX;
            let skipped = Encodable::Full(&state).surely_longer_than(STATE_REPLICATION_MAX);
            prop_assert!(!skipped || long);
            if ids == 0 && !block {
                prop_assert_eq!(skipped, long);
            }
        }
    }

    fn parse(items: &[&str]) -> Result<Parsed<SlidingParams>, String> {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
        SlidingCommand::parse(&bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn sliding_parses_positionals_and_options() {
        let p = parse(&["rl.sliding", "k", "100", "1m"]).unwrap();
        assert_eq!(
            p.params,
            SlidingParams::new(100, 60_000_000, 1_000).unwrap()
        );
        let p = parse(&[
            "rl.sliding",
            "k",
            "10",
            "10s",
            "cost",
            "3",
            "precision",
            "100ms",
            "AT",
            "5",
        ])
        .unwrap();
        assert_eq!(
            p.params,
            SlidingParams::new(10, 10_000_000, 100_000).unwrap()
        );
        assert_eq!(
            (p.opts.cost, p.opts.at, p.opts.at_index),
            (3, Some(5_000), Some(8))
        );
        let p = parse(&["rl.sliding", "k", "10", "1s", "PRECISION", "1s"]).unwrap();
        assert_eq!(p.params.precision(), 1_000_000);
    }

    #[test]
    fn sliding_parse_errors_name_the_argument() {
        #[rustfmt::skip]
        let cases: &[(&[&str], &str)] = &[
            (&["rl.sliding", "k", "0", "1s"],                    "ERR limit must be a positive integer"),
            (&["rl.sliding", "k", "-1", "1s"],                   "ERR limit must be a positive integer"),
            (&["rl.sliding", "k", "10", "1.5s"],                 "ERR invalid duration '1.5s' for window"),
            (&["rl.sliding", "k", "10", "1s", "PRECISION"],      "ERR syntax error, PRECISION needs a value"),
            (&["rl.sliding", "k", "10", "1s", "PRECISION", "0"], "ERR invalid duration '0' for PRECISION"),
            (&["rl.sliding", "k", "10", "1s", "PRECISION", "2s"], "ERR PRECISION must not be longer than window"),
            (&["rl.sliding", "k", "10", "1s", "PRECISION", "1", "precision", "1"],
                                                                 "ERR syntax error, PRECISION given more than once"),
            (&["rl.sliding", "k", "10", "1s", "WINDOW", "1"],    "ERR unknown option 'WINDOW'"),
            (&["rl.sliding", "k", "10"],                         "ERR wrong number of arguments"),
        ];
        for (items, want) in cases {
            assert_eq!(parse(items).unwrap_err(), *want, "{items:?}");
        }
    }
}
