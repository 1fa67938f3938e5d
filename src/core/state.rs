//! The value stored in a limiter key: one algorithm's state, the key's last update time, and its
//! remembered `DEDUP` ids. [`AlgoState`], its dispatch and the [`Stored`] link between an
//! algorithm and its variant are generated from the registry (`crate::registry`).

use crate::core::dedup::DedupSet;
use crate::core::error::CoreError;
use crate::core::kind::Kind;
use crate::core::limiter::{Algorithm, Decision};
use crate::core::time::Micros;
use crate::core::varint::Reader;

/// An algorithm as stored in a key: its [`Kind`] and its variant of [`AlgoState`]. Implemented
/// by the registry for every registered algorithm.
pub trait Stored: Algorithm {
    /// Which algorithm this is (names it in WRONGTYPE errors and the codec).
    const KIND: Kind;

    /// Borrow this algorithm's state out of the enum, if it is this algorithm.
    fn from_state(state: &AlgoState) -> Option<&Self>;

    /// Mutably borrow this algorithm's state out of the enum.
    fn from_state_mut(state: &mut AlgoState) -> Option<&mut Self>;

    /// Wrap into the enum.
    fn into_state(self) -> AlgoState;
}

macro_rules! define_state {
    ([] $($variant:ident = $tag:literal => $name:literal $(as $cmd:literal)?, $state:ty, $command:ty;)*) => {
        /// One algorithm's state.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum AlgoState {
            $($variant($state),)*
        }

        $(
            impl Stored for $state {
                const KIND: Kind = Kind::$variant;

                fn from_state(state: &AlgoState) -> Option<&Self> {
                    match state {
                        AlgoState::$variant(s) => Some(s),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }

                fn from_state_mut(state: &mut AlgoState) -> Option<&mut Self> {
                    match state {
                        AlgoState::$variant(s) => Some(s),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }

                fn into_state(self) -> AlgoState {
                    AlgoState::$variant(self)
                }
            }
        )*

        impl AlgoState {
            /// Which algorithm this is.
            pub fn kind(&self) -> Kind {
                match self {
                    $(AlgoState::$variant(_) => Kind::$variant,)*
                }
            }

            /// Decode the algorithm's part of the codec for `kind`.
            pub(crate) fn decode(kind: Kind, input: &mut Reader<'_>) -> Option<AlgoState> {
                match kind {
                    $(Kind::$variant => <$state as Algorithm>::decode(input).map(AlgoState::$variant),)*
                }
            }
        }
    };
}

crate::registry::algorithms!(define_state);

macro_rules! dispatch_rows {
    ([$state:expr, $a:ident => $body:expr] $($variant:ident = $tag:literal => $name:literal $(as $cmd:literal)?, $ty:ty, $command:ty;)*) => {
        match $state {
            $($crate::core::state::AlgoState::$variant($a) => $body,)*
        }
    };
}
pub(crate) use dispatch_rows;

/// Run `$body` with `$a` bound to the algorithm's state, whatever its type.
macro_rules! dispatch {
    ($state:expr, $a:ident => $body:expr) => {
        crate::registry::algorithms!(crate::core::state::dispatch_rows, $state, $a => $body)
    };
}
pub(crate) use dispatch;

/// The whole value of a limiter key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterState {
    /// Time of the last write (Unix µs). Calls older than this are evaluated at this time.
    pub last_update: Micros,
    pub algo: AlgoState,
    pub dedup: DedupSet,
}

impl LimiterState {
    /// A state with no dedup ids.
    pub fn new(algo: AlgoState, last_update: Micros) -> Self {
        LimiterState {
            last_update,
            algo,
            dedup: DedupSet::default(),
        }
    }

    /// Which algorithm the key holds.
    pub fn kind(&self) -> Kind {
        self.algo.kind()
    }

    /// The stored parameters, by name, for RL.INFO.
    pub fn describe(&self) -> Vec<(&'static str, u64)> {
        dispatch!(&self.algo, a => describe_of(a))
    }

    /// The live state at `now` by name, for RL.INFO (see [`Algorithm::describe_live`]).
    pub fn describe_live(&self, now: Micros) -> Vec<(&'static str, u64)> {
        let now = now.max(self.last_update);
        dispatch!(&self.algo, a => a.describe_live(now))
    }

    /// The limiter reply at `now` as if `PEEK COST 0` (for RL.INFO).
    ///
    /// # Errors
    /// [`CoreError::Overflow`] as the algorithms.
    pub fn peek(&self, now: Micros) -> Result<Decision, CoreError> {
        let now = now.max(self.last_update);
        dispatch!(&self.algo, a => a.evaluate(a.params(), now, 0, false).map(Decision::from))
    }

    /// When the limiter is fresh again (Unix µs), ignoring dedup ids.
    pub fn fresh_at(&self) -> Micros {
        dispatch!(&self.algo, a => a.fresh_at())
    }

    /// When the key expires (Unix µs): when the limiter is fresh again, late enough to remember
    /// its `DEDUP` ids, and never before its last update. A function of the value alone, so a
    /// value replicated as itself gets the master's expiry.
    pub fn expires_at(&self) -> Micros {
        self.fresh_at()
            .max(self.dedup.latest_expiry())
            .max(self.last_update)
    }

    /// Whether the algorithm's state holds heap memory (a sliding log's entries).
    pub fn has_heap(&self) -> bool {
        dispatch!(&self.algo, a => a.heap_size()) > 0
    }

    /// Bytes used, the value itself and its heap, for `MEMORY USAGE`.
    pub fn mem_size(&self) -> usize {
        let heap = dispatch!(&self.algo, a => a.heap_size());
        std::mem::size_of::<Self>()
            .saturating_add(heap)
            .saturating_add(self.dedup.heap_size())
    }

    /// Append the algorithm's part of the encoding.
    pub(crate) fn encode_algo(&self, out: &mut Vec<u8>) {
        dispatch!(&self.algo, a => a.encode(out))
    }
}

fn describe_of<A: Algorithm>(a: &A) -> Vec<(&'static str, u64)> {
    A::describe(a.params())
}
