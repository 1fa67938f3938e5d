//! Which algorithm a limiter key holds: [`Kind`], with its codec tag and its names. This is the
//! registry's identity half, a leaf: one row per algorithm in `table!`. The wiring half (the
//! algorithm's state type and command type) is `crate::registry`, at the crate root, which
//! wires them to the algorithm's marker type in [`of`].
//!
//! Every list of the algorithms is generated from the rows with `each!`, which hands a macro
//! the variants alone (`Gcra TokenBucket ...`): the row's shape is read here only, and a name,
//! tag or command comes from [`Kind`]'s methods.

use std::ffi::CStr;
use std::fmt;

/// The identity of every algorithm, in registry order: `Variant = tag => "name" [as "command"];`.
/// The tag is the codec's kind byte (persisted: never renumber). The name is RL.INFO's
/// `algorithm` and RL.ALL's limiter name; `rl.<name>` is its command unless the row names
/// another after `as` (`"concurrency" as "acquire"`: RL.ACQUIRE). Calls `$callback! { [extra
/// tokens] rows }`.
macro_rules! table {
    ($($callback:ident)::+ [$($extra:tt)*]) => {
        $($callback)::+! {
            [$($extra)*]
            // variant     tag    name
            Gcra           = 1 => "gcra";
            TokenBucket    = 2 => "tokenbucket";
            LeakyBucket    = 3 => "leakybucket";
            Fixed          = 4 => "fixed";
            Sliding        = 5 => "sliding";
            SlidingCounter = 6 => "slidingcounter";
            Concurrency    = 7 => "concurrency" as "acquire";
        }
    };
}

/// `each!(callback, extra tokens..)` calls `callback! { [extra tokens..] Gcra TokenBucket .. }`:
/// every algorithm's variant, in registry order.
macro_rules! each {
    ($($callback:ident)::+ $(, $($extra:tt)*)?) => {
        $crate::core::kind::table! { $crate::core::kind::variants [[$($callback)::+] $($($extra)*)?] }
    };
}
pub(crate) use each;

/// `each!`'s step: the rows' variants alone, to the callback.
macro_rules! variants {
    ([[$($callback:ident)::+] $($extra:tt)*] $($variant:ident = $tag:literal => $name:literal $(as $cmd:literal)?;)*) => {
        $($callback)::+! { [$($extra)*] $($variant)* }
    };
}
pub(crate) use {table, variants};

/// `$prefix` then the command of a row: its `as` name when it has one, else its name
/// (`"rl." "gcra"`: `rl.gcra`).
macro_rules! command_of {
    ($prefix:literal $name:literal) => {
        concat!($prefix, $name)
    };
    ($prefix:literal $name:literal $cmd:literal) => {
        concat!($prefix, $cmd)
    };
}

macro_rules! define_kind {
    ([] $($variant:ident = $tag:literal => $name:literal $(as $cmd:literal)?;)*) => {
        /// The algorithms, in registry order. The discriminant is the codec's tag byte: never
        /// renumber.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Kind {
            $($variant = $tag,)*
        }

        /// Each algorithm as a type, named as its [`Kind`] variant: the crate-root registry
        /// wires its state type ([`crate::core::state::WiredState`]) and its command type to it.
        pub mod of {
            $(
                #[doc = concat!("The algorithm `", $name, "`.")]
                #[derive(Debug)]
                pub struct $variant;
            )*
        }

        impl Kind {
            /// Every algorithm, in registry order.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// The algorithm's name in RL.INFO and RL.ALL (`gcra`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Kind::$variant => $name,)*
                }
            }

            /// Its command as registered (`rl.gcra`).
            pub const fn command(self) -> &'static str {
                match self {
                    $(Kind::$variant => command_of!("rl." $name $($cmd)?),)*
                }
            }

            /// Its command as a C string: the keyspace event of a write, the command replicated.
            pub const fn command_c(self) -> &'static CStr {
                match self {
                    $(Kind::$variant => {
                        const C: &CStr = c_str(concat!(command_of!("rl." $name $($cmd)?), "\0").as_bytes());
                        C
                    })*
                }
            }

            /// Its command's name in `INFO ratelimit`, `_` for `.` (`rl_gcra`: a valid
            /// Prometheus metric name).
            pub const fn stat_name(self) -> &'static str {
                match self {
                    $(Kind::$variant => command_of!("rl_" $name $($cmd)?),)*
                }
            }

            /// The kind with codec tag `tag`.
            pub const fn from_tag(tag: u8) -> Option<Kind> {
                match tag {
                    $($tag => Some(Kind::$variant),)*
                    _ => None,
                }
            }

            /// Position in [`Kind::ALL`].
            pub fn index(self) -> usize {
                Kind::ALL.iter().position(|k| *k == self).unwrap_or(0)
            }
        }
    };
}

table!(define_kind []);

/// `bytes` (NUL-terminated, no other NUL) as a C string, checked when the constant is built:
/// only ever evaluated in a constant, so a bad name is a compile error.
#[allow(clippy::panic)]
const fn c_str(bytes: &'static [u8]) -> &'static CStr {
    match CStr::from_bytes_with_nul(bytes) {
        Ok(s) => s,
        Err(_) => panic!("a command name must end in one NUL"),
    }
}

/// The command as users type it (`RL.GCRA`, `RL.ACQUIRE`), as errors name it.
impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.command()
            .chars()
            .try_for_each(|c| fmt::Write::write_char(f, c.to_ascii_uppercase()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_tags_round_trip_and_never_move() {
        #[rustfmt::skip]
        let kinds = [
            // kind                 tag  command               name
            (Kind::Gcra,            1,   "RL.GCRA",            "gcra"),
            (Kind::TokenBucket,     2,   "RL.TOKENBUCKET",     "tokenbucket"),
            (Kind::LeakyBucket,     3,   "RL.LEAKYBUCKET",     "leakybucket"),
            (Kind::Fixed,           4,   "RL.FIXED",           "fixed"),
            (Kind::Sliding,         5,   "RL.SLIDING",         "sliding"),
            (Kind::SlidingCounter,  6,   "RL.SLIDINGCOUNTER",  "slidingcounter"),
            (Kind::Concurrency,     7,   "RL.ACQUIRE",         "concurrency"),
        ];
        assert_eq!(Kind::ALL.len(), kinds.len());
        for (kind, tag, command, name) in kinds {
            assert_eq!(kind as u8, tag);
            assert_eq!(Kind::from_tag(tag), Some(kind));
            assert_eq!((kind.to_string().as_str(), kind.name()), (command, name));
            assert_eq!(kind.command(), command.to_ascii_lowercase());
            assert_eq!(kind.command_c().to_str(), Ok(kind.command()));
            assert_eq!(kind.stat_name(), kind.command().replace('.', "_"));
        }
        assert_eq!(Kind::from_tag(0), None);
        assert_eq!(Kind::from_tag(8), None);
    }
}
