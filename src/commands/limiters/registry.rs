//! The algorithms' commands, one per algorithm of the registry (`core::kind`), of the type the
//! crate-root registry wires to it ([`WiredCommand`]): RL.ALL's limiter table ([`LIMITERS`]).
//! `commands::table` makes their rows of the command table from the same list.

use std::ffi::CStr;

use redis_module::Context;

use crate::commands::LimiterCommand;
use crate::commands::call::args::{Args, Options, non_negative, quote};
use crate::commands::limiters::alone;
use crate::commands::row::Command;
use crate::core::Kind;
use crate::core::kind::of;
use crate::core::multi::AnyParams;
use crate::core::state::WiredState;
use crate::docs::{ArgDoc, ArgType, CommandDoc, DELAY, SHARED_OPTIONS};
use crate::error::RlError;
use crate::ffi::command::Argv;

/// One algorithm as RL.ALL reads it: its kind, its command's docs (which give its syntax) and
/// its command's parser.
pub struct Limiter {
    pub kind: Kind,
    pub doc: &'static CommandDoc,
    pub parse: fn(&[&[u8]]) -> Result<AnyParams, RlError>,
    /// RL.ALL over this one limiter run as its own command, its arguments parsed by that
    /// command's parser straight into its parameters ([`alone::run_alone_as`]).
    pub alone: Alone,
    /// [`Limiter::positional`].
    positional: usize,
    /// Whether [`Limiter::options`] has any.
    has_options: bool,
}

/// [`Limiter::alone`]: the call's arguments and their bytes, RL.ALL's row, the limiter's own
/// arguments and the call's shared options.
pub type Alone = fn(
    &Context,
    Argv<'_>,
    &[&[u8]],
    &'static Command,
    &[&[u8]],
    Options,
) -> Option<Result<(), RlError>>;

/// The arguments after the key that every call of `doc`'s command gives (not a required token,
/// RL.ACQUIRE's `ID id`, which RL.ALL takes from its shared options): found when the table is
/// built, not on every call.
const fn positional_of(doc: &CommandDoc) -> usize {
    let mut n: usize = 0;
    let mut rest = doc.args;
    while let [a, tail @ ..] = rest {
        if !matches!(a.kind, ArgType::Key) && !a.optional && a.token.is_none() {
            n = n.saturating_add(1);
        }
        rest = tail;
    }
    n
}

/// Whether `a` and `b` are the same bytes.
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a, mut b) = (a, b);
    while let ([x, a_tail @ ..], [y, b_tail @ ..]) = (a, b) {
        if *x != *y {
            return false;
        }
        a = a_tail;
        b = b_tail;
    }
    true
}

/// Whether `token` is a shared option's (or `DELAY`, which RL.ALL takes for the whole call).
const fn is_shared(token: &CStr) -> bool {
    if let Some(delay) = DELAY.token
        && same(delay.to_bytes(), token.to_bytes())
    {
        return true;
    }
    let mut rest = SHARED_OPTIONS;
    while let [s, tail @ ..] = rest {
        if let Some(t) = s.token
            && same(t.to_bytes(), token.to_bytes())
        {
            return true;
        }
        rest = tail;
    }
    false
}

/// Whether `doc`'s command has options of its own ([`Limiter::options`]).
const fn has_options(doc: &CommandDoc) -> bool {
    let mut rest = doc.args;
    while let [a, tail @ ..] = rest {
        if let Some(t) = a.token
            && a.optional
            && !is_shared(t)
        {
            return true;
        }
        rest = tail;
    }
    false
}

impl Limiter {
    /// The arguments after the key that every call gives (not a required token, RL.ACQUIRE's
    /// `ID id`, which RL.ALL takes from its shared options).
    pub fn positional(&self) -> usize {
        self.positional
    }

    /// Whether `token` is one of the command's own options (any case).
    pub fn takes(&self, token: &[u8]) -> bool {
        self.has_options && self.options().any(|o| token.eq_ignore_ascii_case(o))
    }

    /// The command's own options (each a token and one value), not the shared ones a command
    /// may list among its own arguments (RL.ACQUIRE's `COST`, `PEEK`, `AT`; `DELAY`, which
    /// RL.ALL takes for the whole call).
    pub fn options(&self) -> impl Iterator<Item = &'static [u8]> {
        self.doc
            .args
            .iter()
            .filter(|a: &&ArgDoc| a.optional)
            .filter_map(|a| a.token.map(|t| t.to_bytes()))
            .filter(|t| {
                !SHARED_OPTIONS
                    .iter()
                    .chain([&DELAY])
                    .any(|s| s.token.map(|s| s.to_bytes()) == Some(*t))
            })
    }
}

/// Parse one limiter with its own command's parser.
fn parse_with<C: LimiterCommand>(argv: &[&[u8]]) -> Result<AnyParams, RlError> {
    C::parse_limiter(argv).map(|p| AnyParams::of::<C::Algo>(&p.params))
}

/// The command type of an algorithm (`<of::Gcra as WiredCommand>::Command` is
/// `commands::limiters::gcra::GcraCommand`), which runs the algorithm's state type: implemented by the
/// crate-root registry (`crate::registry`), one row per algorithm. A [`Kind`] without its row,
/// or a command of another algorithm, is a compile error.
pub trait WiredCommand: WiredState {
    /// The algorithm's command.
    type Command: LimiterCommand<Algo = Self::State>;
}

/// The command wired to algorithm `$variant`.
macro_rules! command_of {
    ($variant:ident) => {
        <of::$variant as WiredCommand>::Command
    };
}

macro_rules! define_limiters {
    ([] $($variant:ident)*) => {
        /// Every algorithm, in registry order.
        pub static LIMITERS: &[Limiter] = &[
            $(Limiter {
                kind: Kind::$variant,
                doc: &<command_of!($variant) as LimiterCommand>::DOC,
                parse: parse_with::<command_of!($variant)>,
                alone: alone::run_alone_as::<command_of!($variant)>,
                positional: positional_of(&<command_of!($variant) as LimiterCommand>::DOC),
                has_options: has_options(&<command_of!($variant) as LimiterCommand>::DOC),
            },)*
        ];
    };
}

crate::core::kind::each!(define_limiters);

/// RL.ALL's limiter named `token` (any case).
pub fn limiter(token: &[u8]) -> Option<&'static Limiter> {
    LIMITERS
        .iter()
        .find(|l| token.eq_ignore_ascii_case(l.kind.name().as_bytes()))
}

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
#[inline]
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
    pub limiter: &'static Limiter,
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
    let limiter = limiter(token).ok_or_else(|| RlError::UnknownLimiter(quote(token)))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::row::Command;
    use crate::commands::table::COMMANDS;
    use crate::core::dedup::DedupId;
    use crate::core::flow::{self, Write};
    use crate::core::limiter::{Refund, Request};
    use crate::core::state::{Stored, dispatch};
    use crate::core::{LimiterState, codec};

    const T: u64 = 1_700_000_000_000_000;

    /// The smallest call of `limiter` as RL.ALL parses it, from its docs: the key, then 1 for
    /// each required count and `1s` for each required duration.
    fn smallest_call(limiter: &Limiter) -> Vec<Vec<u8>> {
        let mut argv = vec![limiter.kind.command().as_bytes().to_vec(), b"k".to_vec()];
        argv.extend(
            limiter
                .doc
                .args
                .iter()
                .filter(|a| a.kind != ArgType::Key && !a.optional && a.token.is_none())
                .map(|a| match a.kind {
                    ArgType::Integer => b"1".to_vec(),
                    _ => b"1s".to_vec(),
                }),
        );
        argv
    }

    /// What RL.REFUND does with the keys of `fresh`'s algorithm.
    fn refund_of<A: Stored>(_fresh: &A) -> Refund {
        A::REFUND
    }

    /// Every registered algorithm: its tag round-trips through the codec, its docs, INFO
    /// counters and RL.ALL entry exist and name it, and RL.REFUND gives its units back (or
    /// names the registered command that does).
    #[test]
    fn registry_is_complete() {
        assert_eq!(LIMITERS.len(), Kind::ALL.len());
        for (kind, limiter) in Kind::ALL.iter().zip(LIMITERS) {
            assert_eq!(limiter.kind, *kind);
            assert_eq!(Kind::from_tag(*kind as u8), Some(*kind));
            // RL.ALL: found by name, parsing its smallest call makes a limiter of its kind.
            assert!(std::ptr::eq(
                super::limiter(kind.name().as_bytes()).unwrap(),
                limiter
            ));
            let upper = kind.name().to_ascii_uppercase();
            assert!(std::ptr::eq(
                super::limiter(upper.as_bytes()).unwrap(),
                limiter
            ));
            assert!(limiter.positional() >= 1, "{kind:?}");
            // Its row in the command table: its command's name, its docs (the key first) and
            // INFO counters named after the command with `_` for `.`.
            let rows: Vec<&Command> = COMMANDS
                .iter()
                .filter(|c| c.name.to_str() == Ok(kind.command()))
                .collect();
            assert_eq!(rows.len(), 1, "{kind:?}");
            assert_eq!(rows[0].doc.summary, limiter.doc.summary, "{kind:?}");
            assert_eq!(limiter.doc.args.first().map(|a| a.kind), Some(ArgType::Key));
            assert_eq!(
                rows[0].stats.name,
                Some(kind.command().replace('.', "_").as_str())
            );

            // A parsed limiter is stored with its tag and decodes back.
            let argv = smallest_call(limiter);
            let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            let spec = (limiter.parse)(&argv).unwrap();
            assert_eq!(spec.kind(), limiter.kind);
            let state = LimiterState::new(spec.clone().into_state(), T);
            let bytes = codec::encode(&state);
            assert_eq!(bytes.get(1), Some(&(limiter.kind as u8)));
            assert_eq!(codec::decode(&bytes), Some(state));

            // RL.REFUND: one unit charged (the call's shared options bound as RL.ALL binds
            // them: a lease id from DEDUP), then given back (its limit of 1 is whole again), or
            // refused naming a registered command.
            let fresh = spec
                .bind_call(Some(DedupId(1)), false)
                .unwrap()
                .into_state();
            let mut charged = dispatch!(&fresh, a => charge(a));
            match dispatch!(&fresh, a => refund_of(a)) {
                Refund::Units => {
                    let back = flow::refund(&mut charged, T, 1, None).unwrap().unwrap();
                    assert_eq!(
                        (back.verdict.granted, back.verdict.remaining),
                        (1, 1),
                        "{kind:?}: RL.REFUND gave nothing back: is `Algorithm::refund` written?"
                    );
                }
                Refund::Via(via) => {
                    assert!(
                        COMMANDS
                            .iter()
                            .any(|c| c.name_str().eq_ignore_ascii_case(via)),
                        "{kind:?}: {via}"
                    );
                    let before = charged.clone();
                    assert!(flow::refund(&mut charged, T, 1, None).is_err(), "{kind:?}");
                    assert_eq!(charged, before);
                }
            }
        }
    }

    /// The counts found when the table is built are those of the docs.
    #[test]
    fn positional_and_options_are_the_docs() {
        for limiter in LIMITERS {
            let positional = limiter
                .doc
                .args
                .iter()
                .filter(|a| a.kind != ArgType::Key && !a.optional && a.token.is_none())
                .count();
            assert_eq!(limiter.positional(), positional, "{:?}", limiter.kind);
            let own: Vec<&[u8]> = limiter.options().collect();
            assert_eq!(limiter.has_options, !own.is_empty(), "{:?}", limiter.kind);
            for o in own {
                assert!(limiter.takes(o), "{:?}", limiter.kind);
                assert!(limiter.takes(&o.to_ascii_lowercase()), "{:?}", limiter.kind);
            }
            for s in SHARED_OPTIONS.iter().chain([&DELAY]) {
                let t = s.token.unwrap().to_bytes();
                assert!(!limiter.takes(t), "{:?}", limiter.kind);
            }
        }
    }

    /// A missing key charged one unit with `fresh`'s parameters.
    fn charge<A: Stored>(fresh: &A) -> LimiterState {
        let out = flow::apply::<A>(None, fresh.params(), &Request::new(1, T), 10).unwrap();
        assert_eq!(out.verdict.granted, 1, "{:?}", A::KIND);
        match out.write {
            Write::Created(s) => s,
            w => panic!("{:?}: {w:?}", A::KIND),
        }
    }
}
