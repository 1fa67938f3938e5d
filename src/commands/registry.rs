//! The algorithms' commands, one per algorithm of the registry (`core::kind`), of the type the
//! crate-root registry wires to it ([`WiredCommand`]): RL.ALL's limiter table ([`LIMITERS`]).
//! `commands::table` makes their rows of the command table from the same list.

use std::ffi::CStr;

use redis_module::Context;

use crate::commands::LimiterCommand;
use crate::commands::all_one;
use crate::commands::args::Options;
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
    /// command's parser straight into its parameters ([`all_one::run_alone_as`]).
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
/// `commands::gcra::GcraCommand`), which runs the algorithm's state type: implemented by the
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
                alone: all_one::run_alone_as::<command_of!($variant)>,
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
