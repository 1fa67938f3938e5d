//! RL.FIXED key limit window [OFFSET d] [TZ zone] [ANCHOR a] [COST n] \[PEEK\] \[BESTEFFORT\] [DEDUP id] [AT t]

use crate::commands::call::args::{Args, Options, duration, duration_or_zero, positive, quote};
use crate::commands::{LimiterCommand, Parsed};
use crate::core::Micros;
use crate::core::calendar::{Calendar, DAY_MS, Unit, ZoneId};
use crate::core::fixed_window::{Fixed, FixedParams};
use crate::docs::{ArgType, CommandDoc, KEY, arg, opt};
use crate::error::RlError;

/// COMMAND DOCS, and RL.ALL's syntax of the algorithm.
const DOC: CommandDoc = CommandDoc {
    arity: -4,
    summary: c"Rate-limit with a fixed window counter: at most limit units per window, windows aligned to the Unix epoch shifted by OFFSET, or calendar periods (day, week, month, quarter, year) in time zone TZ from ANCHOR",
    complexity: c"O(1)",
    args: &[
        KEY,
        arg(c"limit", ArgType::Integer),
        arg(c"window", ArgType::String),
        opt(c"offset", ArgType::String, c"OFFSET"),
        opt(c"tz", ArgType::String, c"TZ"),
        opt(c"anchor", ArgType::String, c"ANCHOR"),
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
        let window_token = args.required()?;
        let unit = Unit::parse(window_token);
        let window = match unit {
            Some(_) => 0,
            None => duration(window_token, "window")?,
        };
        let mut offset: Option<Micros> = None;
        let mut zone: Option<&[u8]> = None;
        let mut anchor: Option<&[u8]> = None;
        let opts = Options::parse(&mut args, |token, args| {
            let (slot, name) = if token == b"OFFSET" {
                if offset.is_some() {
                    return Err(RlError::Duplicate("OFFSET"));
                }
                offset = Some(duration_or_zero(args.value_of("OFFSET")?, "OFFSET")?);
                return Ok(true);
            } else if token == b"TZ" {
                (&mut zone, "TZ")
            } else if token == b"ANCHOR" {
                (&mut anchor, "ANCHOR")
            } else {
                return Ok(false);
            };
            if slot.is_some() {
                return Err(RlError::Duplicate(name));
            }
            *slot = Some(args.value_of(name)?);
            Ok(true)
        })?;
        let params = match unit {
            None => {
                if zone.is_some() {
                    return Err(RlError::Conflict(NEEDS_CALENDAR_TZ));
                }
                if anchor.is_some() {
                    return Err(RlError::Conflict(NEEDS_CALENDAR_ANCHOR));
                }
                FixedParams::new(limit, window, offset.unwrap_or(0))?
            }
            Some(unit) => {
                FixedParams::calendar(limit, calendar(unit, zone, anchor, offset.unwrap_or(0))?)?
            }
        };
        Ok(Parsed { params, opts })
    }
}

const NEEDS_CALENDAR_TZ: &str = "TZ needs a calendar window (day, week, month, quarter or year)";
const NEEDS_CALENDAR_ANCHOR: &str =
    "ANCHOR needs a calendar window (day, week, month, quarter or year)";

/// A calendar window of `unit` in `zone` (default UTC) from `anchor`, starting `offset` µs into
/// its first day.
fn calendar(
    unit: Unit,
    zone: Option<&[u8]>,
    anchor: Option<&[u8]>,
    offset: Micros,
) -> Result<Calendar, RlError> {
    let zone = match zone {
        Some(z) => ZoneId::parse(z).ok_or_else(|| RlError::UnknownZone(quote(z)))?,
        None => ZoneId::utc(),
    };
    let tod_ms = u32::try_from(offset / 1000)
        .ok()
        .filter(|ms| *ms < DAY_MS)
        .ok_or(RlError::Conflict(
            "OFFSET must be less than 24h for a calendar window",
        ))?;
    let (month, day) = match anchor {
        None => (1, 1),
        Some(a) => {
            parse_anchor(unit, a).ok_or_else(|| RlError::InvalidAnchor(quote(a), unit.name()))?
        }
    };
    Calendar::new(unit, month, day, tod_ms, zone)
        .ok_or_else(|| RlError::InvalidAnchor(quote(anchor.unwrap_or_default()), unit.name()))
}

/// `ANCHOR` of `unit` as (month, day): a weekday for a week (`mon`..`sun`, or its full name:
/// day 1..7), `dd` for a month, `dd` or `mm-dd` for a quarter or year; none for a day.
fn parse_anchor(unit: Unit, a: &[u8]) -> Option<(u8, u8)> {
    const DAYS: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let number = |b: &[u8]| -> Option<u8> {
        if b.is_empty() || b.len() > 2 || !b.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(b).ok()?.parse().ok()
    };
    match unit {
        Unit::Day => None,
        Unit::Week => {
            let i = DAYS.iter().position(|d| {
                a.eq_ignore_ascii_case(d.as_bytes())
                    || d.get(..3)
                        .is_some_and(|s| a.eq_ignore_ascii_case(s.as_bytes()))
            })?;
            Some((1, u8::try_from(i).ok()?.saturating_add(1)))
        }
        Unit::Month => Some((1, number(a)?)),
        Unit::Quarter | Unit::Year => match a.iter().position(|b| *b == b'-') {
            Some(dash) => Some((
                number(a.get(..dash)?)?,
                number(a.get(dash.saturating_add(1)..)?)?,
            )),
            None => Some((1, number(a)?)),
        },
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

    /// Arguments after the limit; the calendar's unit, month, day, time of day (ms) and zone.
    type Case = (&'static [&'static str], Unit, u8, u8, u32, &'static [u8]);

    #[test]
    fn fixed_parses_calendar_windows() {
        let zone = |z: &[u8]| ZoneId::parse(z).unwrap();
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // arguments                                                  unit           month day tod         zone
            (&["month"],                                                  Unit::Month,   1,    1,  0,          b"UTC"),
            (&["MONTH", "tz", "europe/paris", "anchor", "31"],            Unit::Month,   1,    31, 0,          b"Europe/Paris"),
            (&["week", "ANCHOR", "Sun", "TZ", "America/New_York"],        Unit::Week,    1,    7,  0,          b"America/New_York"),
            (&["week", "ANCHOR", "wednesday"],                            Unit::Week,    1,    3,  0,          b"UTC"),
            (&["day", "OFFSET", "9h", "TZ", "+05:30"],                    Unit::Day,     1,    1,  32_400_000, b"+05:30"),
            (&["quarter", "ANCHOR", "02-10"],                             Unit::Quarter, 2,    10, 0,          b"UTC"),
            (&["year", "ANCHOR", "4-15", "OFFSET", "90m"],                Unit::Year,    4,    15, 5_400_000,  b"UTC"),
            (&["year", "ANCHOR", "15"],                                   Unit::Year,    1,    15, 0,          b"UTC"),
        ];
        for (extra, unit, month, day, tod, z) in cases {
            let mut items = vec!["rl.fixed", "k", "10"];
            items.extend_from_slice(extra);
            let want = Calendar::new(*unit, *month, *day, *tod, zone(z)).unwrap();
            let p = parse(&items).unwrap();
            assert_eq!(p.params.calendar_of(), Some(want), "{extra:?}");
            assert_eq!(p.params, FixedParams::calendar(10, want).unwrap());
        }
        // Epoch windows are unchanged.
        assert_eq!(
            parse(&["rl.fixed", "k", "10", "1d"])
                .unwrap()
                .params
                .calendar_of(),
            None
        );
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
