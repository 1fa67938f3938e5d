//! The algorithms' commands, one per algorithm of the registry (`core::kind`), of the type the
//! crate-root registry wires to it ([`WiredCommand`]): RL.ALL's limiter table ([`LIMITERS`]).
//! `commands::table` makes their rows of the command table from the same list.

use smallvec::SmallVec;

use crate::commands::LimiterCommand;
use crate::commands::call::args::{Args, non_negative, quote};
use crate::core::Kind;
use crate::core::kind::of;
use crate::core::multi::AnyParams;
use crate::core::state::WiredState;
use crate::docs::{ArgDoc, ArgType, CommandDoc, DELAY, SHARED_OPTIONS};
use crate::error::RlError;

/// One algorithm as RL.ALL reads it: its kind, its command's docs (which give its syntax) and
/// its command's parser.
pub struct Limiter {
    pub kind: Kind,
    pub doc: &'static CommandDoc,
    pub parse: fn(&[&[u8]]) -> Result<AnyParams, RlError>,
}

impl Limiter {
    /// The arguments after the key that every call gives (not a required token, RL.ACQUIRE's
    /// `ID id`, which RL.ALL takes from its shared options).
    pub fn positional(&self) -> usize {
        self.doc
            .args
            .iter()
            .filter(|a| a.kind != ArgType::Key && !a.optional && a.token.is_none())
            .count()
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

/// One `limiter` of RL.ALL or RL.CHECK for `key`: an algorithm name, that command's positional
/// arguments and its own options, parsed by that command's own parser, then `CHARGE n` and
/// `NAME name` in any order.
///
/// # Errors
/// A missing or unknown limiter, the command's own argument errors, a bad or repeated
/// `CHARGE` or `NAME`.
#[inline]
pub fn parse_limiter<'a>(args: &mut Args<'a>, key: &[u8]) -> Result<LimiterArg<'a>, RlError> {
    let token = args
        .next()
        .ok_or(RlError::Syntax("a limiter is missing for a key"))?;
    let limiter = limiter(token).ok_or_else(|| RlError::UnknownLimiter(quote(token)))?;
    let arity = RlError::LimiterArity(limiter.kind);
    // On the stack: a limiter's own arguments are its name, key, positionals and options.
    let mut argv: SmallVec<[&[u8]; 12]> = SmallVec::new();
    argv.push(limiter.kind.command().as_bytes());
    argv.push(key);
    for _ in 0..limiter.positional() {
        argv.push(args.next().ok_or_else(|| arity.clone())?);
    }
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
        if charge.is_some()
            || name.is_some()
            || !limiter.options().any(|o| opt.eq_ignore_ascii_case(o))
        {
            break;
        }
        argv.push(opt);
        args.next();
        argv.push(args.next().ok_or_else(|| arity.clone())?);
    }
    Ok(LimiterArg {
        params: (limiter.parse)(&argv)?,
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
