//! One `limiter` as RL.ALL, RL.CHECKALL, RL.CHECK and RL.POLICY SET write it: an algorithm
//! name, that command's positional arguments and own options, parsed by that command's own
//! parser (so the arguments and errors are exactly the single-limiter command's), then
//! `CHARGE n` and `NAME name`.

use crate::commands::args::{Args, non_negative, quote};
use crate::commands::registry;
use crate::core::multi::AnyParams;
use crate::error::RlError;

/// One `limiter` of RL.ALL, RL.CHECKALL or RL.CHECK, as written: its parameters, and its
/// `CHARGE n` and `NAME name` when given.
#[derive(Debug, Clone)]
pub struct LimiterArg<'a> {
    pub params: AnyParams,
    pub charge: Option<u64>,
    pub name: Option<&'a [u8]>,
}

/// Longest limiter `NAME`, in bytes.
pub const NAME_MAX: usize = 64;

/// A limiter's `NAME`: 1 to [`NAME_MAX`] bytes of letters, digits, `_`, `-`, `.`, `:`.
///
/// # Errors
/// [`RlError::Conflict`] naming the rule.
pub fn limiter_name(token: &[u8]) -> Result<&[u8], RlError> {
    let ok = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':');
    if token.is_empty() || token.len() > NAME_MAX || !token.iter().all(ok) {
        return Err(RlError::Conflict(
            "NAME must be 1 to 64 letters, digits, '_', '-', '.' or ':'",
        ));
    }
    Ok(token)
}

/// One `limiter` of RL.ALL, RL.CHECK or RL.POLICY SET: an algorithm name, that command's
/// positional arguments and its own options, parsed by that command's own parser, then
/// `CHARGE n` and `NAME name` in any order.
///
/// # Errors
/// A missing or unknown limiter, the command's own argument errors, a bad or repeated
/// `CHARGE` or `NAME`.
pub fn parse_limiter<'a>(args: &mut Args<'a>) -> Result<LimiterArg<'a>, RlError> {
    let written = limiter_words(args)?;
    Ok(LimiterArg {
        params: (written.limiter.parse)(written.argv.as_slice())?,
        charge: written.charge,
        name: written.name,
    })
}

/// One `limiter` as written, not yet parsed by its command's parser: the algorithm, the
/// arguments its own command's parser reads, and its `CHARGE` and `NAME`.
pub(crate) struct LimiterWords<'a> {
    pub limiter: &'static registry::Limiter,
    /// The limiter's positionals and own options, after two arguments its command's parser
    /// skips (in its own command, its name and key).
    pub argv: Words<'a>,
    pub charge: Option<u64>,
    pub name: Option<&'a [u8]>,
}

/// The arguments a limiter's own parser reads ([`LimiterWords::argv`]).
pub(crate) enum Words<'a> {
    /// A slice of the call's arguments, not a copy: the two skipped are the two before the
    /// positionals (the limiter's name and the argument before it).
    Span(&'a [&'a [u8]]),
    /// Its command's name and an empty key, then the positionals and options: a limiter at the
    /// start of the arguments (a policy's definition).
    Built(Vec<&'a [u8]>),
}

impl Words<'_> {
    pub fn as_slice(&self) -> &[&[u8]] {
        match self {
            Words::Span(s) => s,
            Words::Built(v) => v,
        }
    }
}

/// The words of one `limiter` ([`parse_limiter`] before the command's own parser).
///
/// # Errors
/// As [`parse_limiter`], but the command's own argument errors.
#[inline(always)]
pub(crate) fn limiter_words<'a>(args: &mut Args<'a>) -> Result<LimiterWords<'a>, RlError> {
    // Not `ok_or`: an error built on every call is dropped on every call.
    let Some(token) = args.next() else {
        return Err(RlError::Syntax("a limiter is missing for a key"));
    };
    let limiter = registry::limiter(token).ok_or_else(|| RlError::UnknownLimiter(quote(token)))?;
    let arity = || RlError::LimiterArity(limiter.kind);
    let positionals = args.index();
    for _ in 0..limiter.positional() {
        args.next().ok_or_else(arity)?;
    }
    let mut to = args.index();
    let mut charge = None;
    let mut name = None;
    while let Some(opt) = args.peek() {
        if opt.eq_ignore_ascii_case(b"CHARGE") {
            args.next();
            if charge.is_some() {
                return Err(RlError::Duplicate("CHARGE"));
            }
            charge = Some(non_negative(args.value_of("CHARGE")?, "CHARGE")?);
            continue;
        }
        if opt.eq_ignore_ascii_case(b"NAME") {
            args.next();
            if name.is_some() {
                return Err(RlError::Duplicate("NAME"));
            }
            name = Some(limiter_name(args.value_of("NAME")?)?);
            continue;
        }
        // The command's own options come first, together (none after CHARGE or NAME).
        if charge.is_some() || name.is_some() || !limiter.takes(opt) {
            break;
        }
        args.next();
        args.next().ok_or_else(arity)?;
        to = args.index();
    }
    let argv = match positionals
        .checked_sub(2)
        .and_then(|from| args.span(from, to))
    {
        Some(span) => Words::Span(span),
        None => {
            let mut built: Vec<&[u8]> = vec![limiter.kind.command().as_bytes(), b""];
            built.extend_from_slice(args.span(positionals, to).ok_or(RlError::Arity)?);
            Words::Built(built)
        }
    };
    Ok(LimiterWords {
        limiter,
        argv,
        charge,
        name,
    })
}
