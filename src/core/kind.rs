//! Which algorithm a limiter key holds: [`Kind`], generated from the registry (`crate::registry`),
//! with its codec tag and its names.

use std::ffi::CStr;
use std::fmt;

macro_rules! define_kind {
    ([] $($variant:ident = $tag:literal => $name:literal $(as $cmd:literal)?, $state:ty, $command:ty;)*) => {
        /// The algorithms, in registry order. The discriminant is the codec's tag byte: never
        /// renumber.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Kind {
            $($variant = $tag,)*
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
                    $(Kind::$variant => crate::registry::command_of!($name $($cmd)?),)*
                }
            }

            /// Its command as a C string: the keyspace event of a write, the command replicated.
            pub const fn command_c(self) -> &'static CStr {
                match self {
                    $(Kind::$variant => crate::registry::c_str(concat!(crate::registry::command_of!($name $($cmd)?), "\0").as_bytes()),)*
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

crate::registry::algorithms!(define_kind);

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
        }
        assert_eq!(Kind::from_tag(0), None);
        assert_eq!(Kind::from_tag(8), None);
    }
}
