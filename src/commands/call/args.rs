//! Argument parsing shared by every command: strict integers, durations with units, `AT` times,
//! and the shared options (`COST`, `PEEK`, `SHADOW`, `BESTEFFORT`, `DEDUP`, `BLOCK`, `DELAY`,
//! `AT`).
//!
//! Everything works on byte slices and is pure, so it is unit-tested without a server.

use crate::core::Micros;
use crate::core::dedup::{DedupId, MAX_ID_LEN};
use crate::core::kind::Kind;
use crate::core::limiter::Request;
use crate::core::param::MAX_PARAM;
use crate::core::time::{MAX_TIME, US_PER_MS};
use crate::error::{RlError, is_printable, push_escaped};

/// Longest piece of a user's token quoted back in an error, in bytes.
pub const QUOTE_MAX: usize = 64;

/// A token as it may be quoted in an error (SPEC "Error text is printable ASCII"): its first
/// [`QUOTE_MAX`] bytes, each byte outside 0x20–0x7E and the backslash written `\xNN` (so the
/// quoted text maps back to exactly one byte string), then `...` if it was cut.
pub fn quote(token: &[u8]) -> String {
    let cut = token.get(..QUOTE_MAX).unwrap_or(token);
    let mut s = String::with_capacity(cut.len().saturating_add(3));
    for &b in cut {
        if is_printable(b) && b != b'\\' {
            s.push(char::from(b));
        } else {
            push_escaped(&mut s, b);
        }
    }
    if token.len() > QUOTE_MAX {
        s.push_str("...");
    }
    s
}

/// A cursor over a command's arguments.
#[derive(Debug, Clone)]
pub struct Args<'a> {
    items: &'a [&'a [u8]],
    pos: usize,
}

impl<'a> Args<'a> {
    /// Start at `items[0]`.
    pub fn new(items: &'a [&'a [u8]]) -> Self {
        Args { items, pos: 0 }
    }

    /// The next argument, or the arity error.
    ///
    /// # Errors
    /// [`RlError::Arity`] when there is none.
    pub fn required(&mut self) -> Result<&'a [u8], RlError> {
        // Not `ok_or`: an error built on every call is dropped on every call (drop glue on
        // the path of every argument).
        match self.next() {
            Some(a) => Ok(a),
            None => Err(RlError::Arity),
        }
    }

    /// The value of option `opt`, or `ERR syntax error, <opt> needs a value`.
    ///
    /// # Errors
    /// [`RlError::NeedsValue`] when the arguments end.
    pub fn value_of(&mut self, opt: &'static str) -> Result<&'a [u8], RlError> {
        match self.next() {
            Some(a) => Ok(a),
            None => Err(RlError::NeedsValue(opt)),
        }
    }

    /// The next argument, without consuming it.
    pub fn peek(&self) -> Option<&'a [u8]> {
        self.items.get(self.pos).copied()
    }

    /// Index of the next argument.
    pub fn index(&self) -> usize {
        self.pos
    }

    /// The arguments from index `from` up to `to` (not included), read or not.
    pub fn span(&self, from: usize, to: usize) -> Option<&'a [&'a [u8]]> {
        self.items.get(from..to)
    }
}

impl<'a> Iterator for Args<'a> {
    type Item = &'a [u8];

    /// The next argument, if any.
    fn next(&mut self) -> Option<&'a [u8]> {
        let item = self.items.get(self.pos)?;
        self.pos = self.pos.saturating_add(1);
        Some(item)
    }
}

/// A plain decimal integer in `0..=i64::MAX`: digits only, no sign, no spaces.
pub fn parse_u64(token: &[u8]) -> Option<u64> {
    if token.is_empty() || token.len() > 19 {
        return None;
    }
    // One pass: at most 19 digits stay below 10^19 < 2^64, so nothing wraps.
    let mut v: u64 = 0;
    for &b in token {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
    }
    (v <= MAX_PARAM).then_some(v)
}

/// A count ≥ 1.
///
/// # Errors
/// `ERR <what> must be a positive integer`.
pub fn positive(token: &[u8], what: &'static str) -> Result<u64, RlError> {
    match parse_u64(token) {
        Some(v) if v >= 1 => Ok(v),
        _ => Err(RlError::NotPositive(what)),
    }
}

/// A count ≥ 0.
///
/// # Errors
/// `ERR <what> must be a non-negative integer`.
pub fn non_negative(token: &[u8], what: &'static str) -> Result<u64, RlError> {
    parse_u64(token).ok_or(RlError::NotNonNegative(what))
}

/// A duration: a positive integer of milliseconds, or with a unit `ms`, `s`, `m`, `h`, `d`
/// (case-insensitive). Returned in µs.
///
/// # Errors
/// `ERR invalid duration '<token>' for <what>`, also when it overflows.
#[inline(always)]
pub fn duration(token: &[u8], what: &'static str) -> Result<Micros, RlError> {
    parse_duration(token, what, 1)
}

/// A duration that may be zero (`OFFSET 0`, the default spelled out), else as [`duration`].
///
/// # Errors
/// `ERR invalid duration '<token>' for <what>`, also when it overflows.
pub fn duration_or_zero(token: &[u8], what: &'static str) -> Result<Micros, RlError> {
    parse_duration(token, what, 0)
}

#[inline(always)]
fn parse_duration(token: &[u8], what: &'static str, min: u64) -> Result<Micros, RlError> {
    match duration_us(token, min) {
        Some(us) => Ok(us),
        None => Err(invalid_duration(token, what)),
    }
}

/// [`parse_duration`]'s value, `None` for its error (returned in registers, the error built
/// apart).
#[inline(never)]
fn duration_us(token: &[u8], min: u64) -> Option<Micros> {
    // One pass over the leading digits (as `parse_u64` reads them: 1 to 19, so nothing wraps),
    // then the unit.
    let mut n: u64 = 0;
    let mut digits: usize = 0;
    for &b in token {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        n = n.wrapping_mul(10).wrapping_add(u64::from(d));
        digits = digits.wrapping_add(1);
    }
    // Units are at most two letters, in any case: a byte with bit 5 set is one of these
    // lower-case letters exactly when it is that letter in either case.
    let us_per_unit: u64 = match token.get(digits..).unwrap_or_default() {
        [] => US_PER_MS,
        [u] => match u | 0x20 {
            b's' => 1_000 * US_PER_MS,
            b'm' => 60_000 * US_PER_MS,
            b'h' => 3_600_000 * US_PER_MS,
            b'd' => 86_400_000 * US_PER_MS,
            _ => return None,
        },
        [m, s] if m | 0x20 == b'm' && s | 0x20 == b's' => US_PER_MS,
        _ => return None,
    };
    if digits == 0 || digits > 19 || n > MAX_PARAM || n < min {
        return None;
    }
    n.checked_mul(us_per_unit).filter(|&us| us <= MAX_PARAM)
}

/// `ERR invalid duration '<token>' for <what>`.
#[cold]
#[inline(never)]
fn invalid_duration(token: &[u8], what: &'static str) -> RlError {
    RlError::InvalidDuration(quote(token), what)
}

/// An `AT` time: Unix milliseconds with an optional fraction (`1700000000123.456`), in µs.
/// Digits past the microsecond are dropped.
///
/// # Errors
/// `ERR invalid time '<token>' for AT, expected unix milliseconds`.
pub fn at_time(token: &[u8]) -> Result<Micros, RlError> {
    let invalid = || RlError::InvalidTime(quote(token));
    let (whole, frac) = match token.iter().position(|&b| b == b'.') {
        Some(dot) => {
            let (w, f) = token.split_at(dot);
            (w, f.get(1..).unwrap_or_default())
        }
        None => (token, &b""[..]),
    };
    let ms = parse_u64(whole).ok_or_else(invalid)?;
    if token.len() > 64
        || !frac.iter().all(u8::is_ascii_digit)
        || (frac.is_empty() && whole.len() != token.len())
    {
        return Err(invalid());
    }
    let mut us_part: u64 = 0;
    for i in 0..3 {
        let d = frac.get(i).map_or(0, |d| u64::from(d.wrapping_sub(b'0')));
        us_part = us_part.saturating_mul(10).saturating_add(d);
    }
    ms.checked_mul(US_PER_MS)
        .and_then(|us| us.checked_add(us_part))
        .filter(|&us| us <= MAX_TIME)
        .ok_or_else(invalid)
}

pub use crate::commands::call::options::{HOLD_NEEDS_DEDUP, HOLD_NO_CONCURRENCY};

/// Longest option token (`BESTEFFORT`, `PRECISION`), with room to spare.
const OPTION_MAX: usize = 16;

/// The shared options, as typed (upper case): the option table's (`commands::call::options`).
pub const SHARED: &[&[u8]] = crate::commands::call::options::SHARED;

/// A shared option, known from its token ([`Shared::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shared {
    Cost,
    Peek,
    Shadow,
    BestEffort,
    Dedup,
    Block,
    Delay,
    Hold,
    At,
    Detail,
}

/// `token`'s first `N` bytes (all of it: `None` unless it has exactly `N`), each with bit 5
/// cleared. A shared option's name is upper-case letters only, and the bytes that become an
/// upper-case letter so are exactly that letter in either case: the result is a name exactly
/// when the token is that name in any case.
#[inline(always)]
fn folded<const N: usize>(token: &[u8]) -> Option<[u8; N]> {
    let bytes: [u8; N] = token.try_into().ok()?;
    Some(bytes.map(|b| b & !0x20))
}

impl Shared {
    /// The shared option `token` names, in any case (SPEC: options are case-insensitive);
    /// without copying the token, by its length, then a few word compares.
    #[inline(always)]
    fn of(token: &[u8]) -> Option<Shared> {
        let name = |n: &[u8], opt: Shared| (n == opt.token()).then_some(opt);
        match token.len() {
            2 => name(&folded::<2>(token)?, Shared::At),
            4 => match &folded::<4>(token)? {
                b"COST" => Some(Shared::Cost),
                b"PEEK" => Some(Shared::Peek),
                b"HOLD" => Some(Shared::Hold),
                _ => None,
            },
            5 => match &folded::<5>(token)? {
                b"DEDUP" => Some(Shared::Dedup),
                b"BLOCK" => Some(Shared::Block),
                b"DELAY" => Some(Shared::Delay),
                _ => None,
            },
            6 => match &folded::<6>(token)? {
                b"SHADOW" => Some(Shared::Shadow),
                b"DETAIL" => Some(Shared::Detail),
                _ => None,
            },
            10 => name(&folded::<10>(token)?, Shared::BestEffort),
            _ => None,
        }
    }

    /// Its token, upper case (the option table's).
    fn token(self) -> &'static [u8] {
        use crate::commands::call::options as o;
        match self {
            Shared::Cost => o::COST,
            Shared::Peek => o::PEEK,
            Shared::Shadow => o::SHADOW,
            Shared::BestEffort => o::BESTEFFORT,
            Shared::Dedup => o::DEDUP,
            Shared::Block => o::BLOCK,
            Shared::Delay => o::DELAY,
            Shared::Hold => o::HOLD,
            Shared::At => o::AT,
            Shared::Detail => o::DETAIL,
        }
    }
}

/// The shared options of every limiter command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub cost: u64,
    pub peek: bool,
    /// `SHADOW`: charge as enforced, never deny (the reply grants the cost).
    pub shadow: bool,
    pub best_effort: bool,
    pub dedup: Option<DedupId>,
    pub at: Option<Micros>,
    /// Where the `AT` token stood in the arguments (replication replaces it).
    pub at_index: Option<usize>,
    /// `BLOCK d`: block the key for `d` µs when the call is denied.
    pub block: Option<Micros>,
    /// `DETAIL`: the detailed reply.
    pub detail: bool,
    /// `DELAY d`: grant a call allowed within `d` µs now, as a reservation of that moment (the
    /// command refuses it unless its algorithms take it: [`Options::check_delay`]).
    pub delay: Option<Micros>,
    /// `HOLD ttl`: the units granted are a reservation under the `DEDUP` id (required), given
    /// back unless settled within `ttl` µs (the command refuses it on a concurrency limiter:
    /// [`Options::check_hold`]).
    pub hold: Option<Micros>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cost: 1,
            peek: false,
            shadow: false,
            best_effort: false,
            dedup: None,
            at: None,
            at_index: None,
            block: None,
            detail: false,
            delay: None,
            hold: None,
        }
    }
}

impl Options {
    /// Parse options until the arguments end. `extra` may consume an algorithm's own option
    /// (given the upper-cased token); it returns `Ok(false)` for a token it does not know.
    ///
    /// # Errors
    /// Unknown or duplicated options, missing or invalid values.
    pub fn parse<'a>(
        args: &mut Args<'a>,
        extra: impl FnMut(&[u8], &mut Args<'a>) -> Result<bool, RlError>,
    ) -> Result<Options, RlError> {
        Options::parse_allowed(args, None, extra)
    }

    /// [`Options::parse`], taking only the shared options in `allowed` (upper case): any other
    /// is an unknown option of this command.
    ///
    /// # Errors
    /// As [`Options::parse`].
    pub fn parse_only<'a>(
        args: &mut Args<'a>,
        allowed: &[&[u8]],
        extra: impl FnMut(&[u8], &mut Args<'a>) -> Result<bool, RlError>,
    ) -> Result<Options, RlError> {
        Options::parse_allowed(args, Some(allowed), extra)
    }

    /// [`Options::parse_only`] with `allowed` the shared options (every one when `None`, which
    /// is not looked up).
    #[inline(always)]
    fn parse_allowed<'a>(
        args: &mut Args<'a>,
        allowed: Option<&[&[u8]]>,
        mut extra: impl FnMut(&[u8], &mut Args<'a>) -> Result<bool, RlError>,
    ) -> Result<Options, RlError> {
        let mut o = Options::default();
        if args.peek().is_none() {
            // The common call: no options at all.
            return Ok(o);
        }
        let mut seen_cost = false;
        while let Some(token) = args.next() {
            let index = args.index().saturating_sub(1);
            let Some(shared) = Shared::of(token) else {
                // The algorithm's own option, or none: given upper-cased on the stack (options
                // are short; a longer token is no option, and is passed on as it is).
                let mut buf = [0u8; OPTION_MAX];
                let upper: &[u8] = match buf.get_mut(..token.len()) {
                    Some(b) => {
                        b.copy_from_slice(token);
                        b.make_ascii_uppercase();
                        b
                    }
                    None => token,
                };
                if !extra(upper, args)? {
                    return Err(RlError::UnknownOption(quote(token)));
                }
                continue;
            };
            if let Some(allowed) = allowed
                && !allowed.contains(&shared.token())
            {
                return Err(RlError::UnknownOption(quote(token)));
            }
            match shared {
                Shared::Cost => {
                    once(&mut seen_cost, "COST")?;
                    o.cost = non_negative(args.value_of("COST")?, "COST")?;
                }
                Shared::Peek => once(&mut o.peek, "PEEK")?,
                Shared::Shadow => once(&mut o.shadow, "SHADOW")?,
                Shared::BestEffort => once(&mut o.best_effort, "BESTEFFORT")?,
                Shared::Detail => once(&mut o.detail, "DETAIL")?,
                Shared::Dedup => {
                    if o.dedup.is_some() {
                        return Err(RlError::Duplicate("DEDUP"));
                    }
                    let id = args.value_of("DEDUP")?;
                    if id.len() > MAX_ID_LEN {
                        return Err(RlError::IdTooLong);
                    }
                    o.dedup = Some(DedupId::of(id));
                }
                Shared::Block => {
                    if o.block.is_some() {
                        return Err(RlError::Duplicate("BLOCK"));
                    }
                    o.block = Some(duration(args.value_of("BLOCK")?, "BLOCK")?);
                }
                Shared::Delay => {
                    if o.delay.is_some() {
                        return Err(RlError::Duplicate("DELAY"));
                    }
                    o.delay = Some(duration(args.value_of("DELAY")?, "DELAY")?);
                }
                Shared::Hold => {
                    if o.hold.is_some() {
                        return Err(RlError::Duplicate("HOLD"));
                    }
                    o.hold = Some(duration(args.value_of("HOLD")?, "HOLD")?);
                }
                Shared::At => {
                    if o.at.is_some() {
                        return Err(RlError::Duplicate("AT"));
                    }
                    o.at = Some(at_time(args.value_of("AT")?)?);
                    o.at_index = Some(index);
                }
            }
        }
        Ok(o)
    }

    /// The core request at evaluation time `now`.
    pub fn request(&self, now: Micros) -> Request {
        Request {
            cost: self.cost,
            peek: self.peek,
            shadow: self.shadow,
            best_effort: self.best_effort,
            dedup: self.dedup,
            now,
            block: self.block,
            delay: self.delay,
            hold: self.hold,
        }
    }

    /// Refuse `HOLD` unless every algorithm the call runs can be settled (`settles`: it takes
    /// refunds; a concurrency limiter's units come back with RL.RELEASE), then without
    /// `DEDUP id` (the reservation's name).
    ///
    /// # Errors
    /// `ERR HOLD does not apply to a concurrency limiter, ...`, `ERR HOLD needs DEDUP id ...`.
    pub fn check_hold(
        &self,
        mut settles: impl Iterator<Item = (Kind, bool)>,
    ) -> Result<(), RlError> {
        if self.hold.is_none() {
            return Ok(());
        }
        if settles.any(|(_, takes)| !takes) {
            Err(RlError::Conflict(HOLD_NO_CONCURRENCY))
        } else if self.dedup.is_none() {
            Err(RlError::Conflict(HOLD_NEEDS_DEDUP))
        } else {
            Ok(())
        }
    }

    /// Refuse `DELAY` unless every algorithm the call runs takes it (`delays`: GCRA, token and
    /// leaky bucket; SPEC: "On other algorithms DELAY is an error"), naming the first that
    /// does not.
    ///
    /// # Errors
    /// `ERR DELAY does not apply to <ALGORITHM>`.
    pub fn check_delay(
        &self,
        mut delays: impl Iterator<Item = (Kind, bool)>,
    ) -> Result<(), RlError> {
        if self.delay.is_none() {
            return Ok(());
        }
        match delays.find(|(_, takes)| !takes) {
            Some((kind, _)) => Err(RlError::NoDelay(kind)),
            None => Ok(()),
        }
    }
}

/// Mark a flag option as seen, refusing a second time.
///
/// # Errors
/// [`RlError::Duplicate`].
pub fn once(seen: &mut bool, opt: &'static str) -> Result<(), RlError> {
    if *seen {
        return Err(RlError::Duplicate(opt));
    }
    *seen = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::call::at::format_at;

    #[test]
    fn quoted_tokens_are_printable_ascii() {
        #[rustfmt::skip]
        let cases: &[(&[u8], &str)] = &[
            // token                    quoted
            (b"abc",                    "abc"),
            (b"",                       ""),
            (b"it's",                   "it's"),
            (b"a\\b",                   "a\\x5cb"),
            (b"\\x00",                  "\\x5cx00"),
            ("\u{1F600}".as_bytes(),     "\\xf0\\x9f\\x98\\x80"),
            ("\u{0100}".as_bytes(),      "\\xc4\\x80"),
            ("\u{4E00}".as_bytes(),      "\\xe4\\xb8\\x80"),
            ("\u{e9}".as_bytes(),        "\\xc3\\xa9"),
            (b"\x00\r\n\t\x7f\xff",       "\\x00\\x0d\\x0a\\x09\\x7f\\xff"),
            (b" ~",                     " ~"),
        ];
        for (token, want) in cases {
            assert_eq!(quote(token), *want, "{token:?}");
        }
        // Cut to 64 bytes of the token, whatever they become.
        assert_eq!(quote(&[b'a'; 64]), "a".repeat(64));
        assert_eq!(quote(&[b'a'; 65]), format!("{}...", "a".repeat(64)));
        assert_eq!(quote(&[0u8; 1000]), format!("{}...", "\\x00".repeat(64)));
        // A character cut in the middle is escaped byte by byte, never a broken char.
        let mut t = vec![b'a'; 63];
        t.extend_from_slice("\u{1F600}".as_bytes());
        assert_eq!(quote(&t), format!("{}\\xf0...", "a".repeat(63)));
    }

    /// A token is a shared option exactly when, upper-cased, it is one of [`SHARED`]: in any
    /// case, and never for bytes that are no letter (whose bit 5 cleared gives a letter only
    /// for the letters themselves).
    #[test]
    fn shared_options_are_known_in_any_case_and_only_them() {
        let all = [
            Shared::Cost,
            Shared::Peek,
            Shared::Shadow,
            Shared::BestEffort,
            Shared::Dedup,
            Shared::Block,
            Shared::Delay,
            Shared::Hold,
            Shared::At,
            Shared::Detail,
        ];
        let mut tokens: Vec<&[u8]> = all.iter().map(|s| s.token()).collect();
        tokens.sort();
        let mut shared = SHARED.to_vec();
        shared.sort();
        assert_eq!(tokens, shared);
        let want = |t: &[u8]| {
            let upper = t.to_ascii_uppercase();
            all.iter().copied().find(|s| s.token() == upper.as_slice())
        };
        for s in all {
            let name = s.token();
            // Every mix of cases of the name.
            for mask in 0u32..(1 << name.len()) {
                let t: Vec<u8> = name
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| {
                        if mask >> i & 1 == 1 {
                            b.to_ascii_lowercase()
                        } else {
                            b
                        }
                    })
                    .collect();
                assert_eq!(Shared::of(&t), Some(s), "{t:?}");
            }
            // One byte changed to any other byte: a shared option only if that is one too.
            for i in 0..name.len() {
                for b in 0..=255u8 {
                    let mut t = name.to_vec();
                    t[i] = b;
                    assert_eq!(Shared::of(&t), want(&t), "{t:?}");
                }
            }
            // A byte more or less.
            assert_eq!(Shared::of(&name[1..]), want(&name[1..]));
            let mut longer = name.to_vec();
            longer.push(b'S');
            assert_eq!(Shared::of(&longer), want(&longer));
        }
        for t in [
            &b""[..],
            b"A",
            b"WAIT",
            b"OFFSET",
            b"TZ",
            b"ANCHOR",
            b"NAME",
            b"\xc1T",
        ] {
            assert_eq!(Shared::of(t), want(t), "{t:?}");
        }
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"9223372036854775807"), Some(i64::MAX as u64));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b" 1",
            b"1 ",
            b"1.0",
            b"9223372036854775808",
            b"99999999999999999999",
            b"abc",
        ] {
            assert_eq!(parse_u64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn durations_take_units() {
        #[rustfmt::skip]
        let cases: &[(&[u8], Option<u64>)] = &[
            // token        µs
            (b"1500",       Some(1_500_000)),
            (b"1500ms",     Some(1_500_000)),
            (b"30s",        Some(30_000_000)),
            (b"30S",        Some(30_000_000)),
            (b"1m",         Some(60_000_000)),
            (b"24h",        Some(86_400_000_000)),
            (b"1d",         Some(86_400_000_000)),
            (b"0",          None),
            (b"0s",         None),
            (b"s",          None),
            (b"1.5s",       None),
            (b"-1s",        None),
            (b"1w",         None),
            (b"1ss",        None),
            (b"abc",        None),
            (b"9223372036854775807d", None),
        ];
        for (token, want) in cases {
            let got = duration(token, "window").ok();
            assert_eq!(got, *want, "{}", String::from_utf8_lossy(token));
        }
        assert_eq!(
            duration(b"abc", "window").unwrap_err().to_string(),
            "ERR invalid duration 'abc' for window"
        );
        assert_eq!(duration_or_zero(b"0", "OFFSET"), Ok(0));
        assert_eq!(duration_or_zero(b"0s", "OFFSET"), Ok(0));
        assert_eq!(duration_or_zero(b"15m", "OFFSET"), Ok(900_000_000));
        assert_eq!(
            duration_or_zero(b"-1", "OFFSET").unwrap_err().to_string(),
            "ERR invalid duration '-1' for OFFSET"
        );
    }

    #[test]
    fn at_accepts_microsecond_fractions() {
        assert_eq!(at_time(b"1700000000123").unwrap(), 1_700_000_000_123_000);
        assert_eq!(
            at_time(b"1700000000123.456").unwrap(),
            1_700_000_000_123_456
        );
        assert_eq!(at_time(b"1700000000123.4").unwrap(), 1_700_000_000_123_400);
        assert_eq!(
            at_time(b"1700000000123.4569").unwrap(),
            1_700_000_000_123_456
        );
        for bad in [
            &b"1."[..],
            b".5",
            b"x",
            b"1.x",
            b"-5",
            b"1e3",
            b"253402300800000",
        ] {
            assert!(at_time(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(
            at_time(format_at(1_700_000_000_123_045).as_bytes()).unwrap(),
            1_700_000_000_123_045
        );
    }

    #[test]
    fn options_parse_in_any_order_and_case() {
        let items: Vec<&[u8]> = vec![
            b"peek",
            b"Cost",
            b"5",
            b"AT",
            b"1000",
            b"besteffort",
            b"dedup",
            b"x",
            b"block",
            b"1h",
            b"Delay",
            b"250ms",
            b"shadow",
        ];
        let o = Options::parse(&mut Args::new(&items), |_, _| Ok(false)).unwrap();
        assert!(o.shadow && o.request(7).shadow);
        assert!(!Options::default().shadow);
        assert_eq!(o.block, Some(3_600_000_000));
        assert_eq!(o.delay, Some(250_000));
        assert_eq!(o.request(7).delay, Some(250_000));
        assert_eq!(o.cost, 5);
        assert!(o.peek && o.best_effort);
        assert_eq!(o.at, Some(1_000_000));
        assert_eq!(o.at_index, Some(3));
        assert_eq!(o.dedup, Some(DedupId::of(b"x")));
    }

    #[test]
    fn delay_is_refused_on_algorithms_that_do_not_take_it() {
        let with =
            |items: &[&[u8]]| Options::parse(&mut Args::new(items), |_, _| Ok(false)).unwrap();
        let o = with(&[b"DELAY", b"1s"]);
        assert_eq!(o.check_delay([(Kind::Gcra, true)].into_iter()), Ok(()));
        assert_eq!(
            o.check_delay([(Kind::Gcra, true), (Kind::Sliding, false)].into_iter())
                .unwrap_err()
                .to_string(),
            "ERR DELAY does not apply to SLIDING, only to GCRA, TOKENBUCKET and LEAKYBUCKET"
        );
        // Without DELAY nothing is refused.
        assert_eq!(
            with(&[]).check_delay([(Kind::Fixed, false)].into_iter()),
            Ok(())
        );
    }

    #[test]
    fn options_errors_are_redis_style() {
        let err = |items: &[&[u8]]| {
            Options::parse(&mut Args::new(items), |_, _| Ok(false))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(err(&[b"COST"]), "ERR syntax error, COST needs a value");
        assert_eq!(err(&[b"FOO"]), "ERR unknown option 'FOO'");
        assert_eq!(
            err(&[b"PEEK", b"peek"]),
            "ERR syntax error, PEEK given more than once"
        );
        assert_eq!(
            err(&[b"COST", b"-1"]),
            "ERR COST must be a non-negative integer"
        );
        assert_eq!(
            err(&[b"DEDUP", &[b'x'; 257]]),
            "ERR DEDUP id must be at most 256 bytes"
        );
        assert_eq!(
            err(&[b"SHADOW", b"shadow"]),
            "ERR syntax error, SHADOW given more than once"
        );
        // A command that does not take it calls it unknown.
        assert_eq!(
            Options::parse_only(&mut Args::new(&[b"SHADOW"]), &[b"AT"], |_, _| Ok(false))
                .unwrap_err()
                .to_string(),
            "ERR unknown option 'SHADOW'"
        );
        assert_eq!(err(&[b"DELAY"]), "ERR syntax error, DELAY needs a value");
        assert_eq!(err(&[b"DELAY", b"0"]), "ERR invalid duration '0' for DELAY");
        assert_eq!(
            err(&[b"delay", b"1s", b"DELAY", b"2s"]),
            "ERR syntax error, DELAY given more than once"
        );
        assert_eq!(err(&[b"BLOCK"]), "ERR syntax error, BLOCK needs a value");
        assert_eq!(err(&[b"BLOCK", b"0"]), "ERR invalid duration '0' for BLOCK");
        assert_eq!(
            err(&[b"BLOCK", b"1s", b"block", b"2s"]),
            "ERR syntax error, BLOCK given more than once"
        );
        assert_eq!(
            err(&[b"AT", b"soon"]),
            "ERR invalid time 'soon' for AT, expected unix milliseconds"
        );
    }

    /// The shared options the parser knows ([`SHARED`]) are those COMMAND DOCS lists for every
    /// limiter command (`docs::SHARED_OPTIONS`), and `DELAY`, documented on the commands whose
    /// algorithm takes it.
    #[test]
    fn parsed_shared_options_are_the_documented_ones() {
        let mut documented: Vec<&[u8]> = crate::docs::SHARED_OPTIONS
            .iter()
            .chain([&crate::docs::DELAY])
            .map(|a| a.token.unwrap().to_bytes())
            .collect();
        documented.sort();
        let mut parsed = SHARED.to_vec();
        parsed.sort();
        assert_eq!(parsed, documented);
    }
}
