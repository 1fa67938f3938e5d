//! The value stored in a limiter key: one algorithm's state, the key's last update time, and its
//! remembered `DEDUP` ids.
//!
//! Adding an algorithm means one variant in [`Kind`] and [`AlgoState`] and one arm in each
//! dispatch below; the rest of the flow is generic over [`Algorithm`].

use crate::core::dedup::DedupSet;
use crate::core::fixed_window::Fixed;
use crate::core::gcra::Gcra;
use crate::core::leaky_bucket::LeakyBucket;
use crate::core::limiter::{Algorithm, Decision};
use crate::core::sliding_counter::SlidingCounter;
use crate::core::sliding_log::SlidingLog;
use crate::core::time::Micros;
use crate::core::token_bucket::TokenBucket;
use crate::core::{CoreError, codec};

/// The algorithms, as named by their commands. The discriminant is the codec's tag byte: never
/// renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Gcra = 1,
    TokenBucket = 2,
    LeakyBucket = 3,
    Fixed = 4,
    Sliding = 5,
    SlidingCounter = 6,
}

impl Kind {
    /// The command that owns this algorithm, as users type it (`RL.GCRA`).
    pub fn command(self) -> &'static str {
        match self {
            Kind::Gcra => "RL.GCRA",
            Kind::TokenBucket => "RL.TOKENBUCKET",
            Kind::LeakyBucket => "RL.LEAKYBUCKET",
            Kind::Fixed => "RL.FIXED",
            Kind::SlidingCounter => "RL.SLIDINGCOUNTER",
            Kind::Sliding => "RL.SLIDING",
        }
    }

    /// The algorithm's name in RL.INFO and RL.ALL (`gcra`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Gcra => "gcra",
            Kind::TokenBucket => "tokenbucket",
            Kind::LeakyBucket => "leakybucket",
            Kind::Fixed => "fixed",
            Kind::SlidingCounter => "slidingcounter",
            Kind::Sliding => "sliding",
        }
    }

    /// The kind with codec tag `tag`.
    pub fn from_tag(tag: u8) -> Option<Kind> {
        [
            Kind::Gcra,
            Kind::TokenBucket,
            Kind::LeakyBucket,
            Kind::Fixed,
            Kind::SlidingCounter,
            Kind::Sliding,
        ]
        .into_iter()
        .find(|k| *k as u8 == tag)
    }
}

/// One algorithm's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlgoState {
    Gcra(Gcra),
    TokenBucket(TokenBucket),
    LeakyBucket(LeakyBucket),
    Fixed(Fixed),
    SlidingCounter(SlidingCounter),
    Sliding(SlidingLog),
}

/// Run `$body` with `$a` bound to the algorithm's state, whatever its type.
macro_rules! dispatch {
    ($state:expr, $a:ident => $body:expr) => {
        match $state {
            AlgoState::Gcra($a) => $body,
            AlgoState::TokenBucket($a) => $body,
            AlgoState::LeakyBucket($a) => $body,
            AlgoState::Fixed($a) => $body,
            AlgoState::SlidingCounter($a) => $body,
            AlgoState::Sliding($a) => $body,
        }
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
        match &self.algo {
            AlgoState::Gcra(_) => Kind::Gcra,
            AlgoState::TokenBucket(_) => Kind::TokenBucket,
            AlgoState::LeakyBucket(_) => Kind::LeakyBucket,
            AlgoState::Fixed(_) => Kind::Fixed,
            AlgoState::SlidingCounter(_) => Kind::SlidingCounter,
            AlgoState::Sliding(_) => Kind::Sliding,
        }
    }

    /// The stored parameters, by name, for RL.INFO.
    pub fn describe(&self) -> Vec<(&'static str, u64)> {
        dispatch!(&self.algo, a => describe_of(a))
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

    /// Decode the algorithm's part for `kind`.
    pub(crate) fn decode_algo(kind: Kind, input: &mut codec::Reader<'_>) -> Option<AlgoState> {
        match kind {
            Kind::Gcra => Gcra::decode(input).map(AlgoState::Gcra),
            Kind::TokenBucket => TokenBucket::decode(input).map(AlgoState::TokenBucket),
            Kind::LeakyBucket => LeakyBucket::decode(input).map(AlgoState::LeakyBucket),
            Kind::Fixed => Fixed::decode(input).map(AlgoState::Fixed),
            Kind::SlidingCounter => SlidingCounter::decode(input).map(AlgoState::SlidingCounter),
            Kind::Sliding => SlidingLog::decode(input).map(AlgoState::Sliding),
        }
    }
}

fn describe_of<A: Algorithm>(a: &A) -> Vec<(&'static str, u64)> {
    A::describe(a.params())
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
            (Kind::SlidingCounter,  6,   "RL.SLIDINGCOUNTER",  "slidingcounter"),
        ];
        for (kind, tag, command, name) in kinds {
            assert_eq!(kind as u8, tag);
            assert_eq!(Kind::from_tag(tag), Some(kind));
            assert_eq!((kind.command(), kind.name()), (command, name));
        }
        assert_eq!(Kind::from_tag(0), None);
        assert_eq!(Kind::from_tag(7), None);
    }
}
