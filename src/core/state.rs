//! The value stored in a limiter key: one algorithm's state (none for a key that `RL.BLOCK`
//! created, which holds only its block), the key's last update time, its remembered `DEDUP`
//! ids and its block. [`AlgoState`] has a variant per algorithm of the registry
//! (`core::kind`), holding the state type the crate-root registry wires to it ([`WiredState`]).

use crate::core::error::CoreError;
use crate::core::extras::Extras;
use crate::core::kind::{Kind, of};
use crate::core::limiter::{Algorithm, Decision};
use crate::core::time::{MAX_TIME, Micros};
use crate::core::varint::Reader;

/// An algorithm as stored in a key: its [`Kind`] and its variant of [`AlgoState`]. Implemented
/// here for every registered algorithm's state type.
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

/// The state type of an algorithm (`<of::Gcra as WiredState>::State` is `core::gcra::Gcra`):
/// implemented by the crate-root registry (`crate::registry`), one row per algorithm. A
/// [`Kind`] without its row is a compile error here.
pub trait WiredState {
    /// The algorithm's state in a key.
    type State: Stored;
}

macro_rules! define_state {
    ([] $($variant:ident)*) => {
        /// One algorithm's state.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum AlgoState {
            $($variant(<of::$variant as WiredState>::State),)*
        }

        $(
            impl Stored for <of::$variant as WiredState>::State {
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
                    $(Kind::$variant => Algorithm::decode(input).map(AlgoState::$variant),)*
                }
            }
        }
    };
}

crate::core::kind::each!(define_state);

macro_rules! dispatch_rows {
    ([$state:expr, $a:ident => $body:expr] $($variant:ident)*) => {
        match $state {
            $($crate::core::state::AlgoState::$variant($a) => $body,)*
        }
    };
}
pub(crate) use dispatch_rows;

/// Run `$body` with `$a` bound to the algorithm's state, whatever its type.
macro_rules! dispatch {
    ($state:expr, $a:ident => $body:expr) => {
        $crate::core::kind::each!($crate::core::state::dispatch_rows, $state, $a => $body)
    };
}
pub(crate) use dispatch;

/// The whole value of a limiter key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterState {
    /// Time of the last write (Unix µs). Calls older than this are evaluated at this time.
    pub last_update: Micros,
    /// The algorithm's state; `None` for a key holding only a block (`RL.BLOCK` on a missing
    /// key): the first limiter call on it gives it one.
    pub algo: Option<AlgoState>,
    /// Remembered `DEDUP` ids and the block.
    pub extras: Extras,
}

impl LimiterState {
    /// A state with no dedup ids and no block.
    pub fn new(algo: AlgoState, last_update: Micros) -> Self {
        LimiterState {
            last_update,
            algo: Some(algo),
            extras: Extras::default(),
        }
    }

    /// A key holding only a block until `until`.
    pub fn block_only(until: Micros, last_update: Micros) -> Self {
        let mut extras = Extras::default();
        extras.block(until);
        LimiterState {
            last_update,
            algo: None,
            extras,
        }
    }

    /// The time a call made at `now` is evaluated at on this key: never before its last update
    /// (for one key, time never goes backwards).
    pub fn clock(&self, now: Micros) -> Micros {
        now.max(self.last_update)
    }

    /// Record a write at `now` (a time from [`Self::clock`]): the key's last update, and the
    /// remembered ids and block that have ended by then dropped.
    pub fn touch(&mut self, now: Micros) {
        self.last_update = now;
        self.extras.forget_expired(now);
    }

    /// Give back the units of every reservation that ended unsettled by `now` (a time from
    /// [`Self::clock`]), as if each had been settled with 0 at its end: the algorithm's refund at
    /// that end, in order of the ends (SPEC RL.SETTLE). Whether anything changed. One pointer
    /// check for a key without ids; apply it to the value a write stores (replicas and the AOF
    /// redo it at the same time), or to a copy for a reply that writes nothing.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] from a refund (not on a valid value); nothing is changed then.
    #[inline(always)]
    pub fn catch_up(&mut self, now: Micros) -> Result<bool, CoreError> {
        if !self.extras.hold_due(now) {
            return Ok(false);
        }
        self.catch_up_due(now)?;
        Ok(true)
    }

    #[cold]
    #[inline(never)]
    fn catch_up_due(&mut self, now: Micros) -> Result<(), CoreError> {
        let due = self.extras.due(now);
        if let Some(algo) = &self.algo {
            let mut after = algo.clone();
            for &(end, units, _) in &due {
                dispatch!(&mut after, a => give_back(a, end, units))?;
            }
            self.algo = Some(after);
        }
        for &(_, _, index) in &due {
            self.extras.end_hold(index);
        }
        Ok(())
    }

    /// This value as a read at `now` sees it: a copy with the ended reservations given back
    /// ([`Self::catch_up`]) when there are any, else `None` (read `self` as it is).
    ///
    /// # Errors
    /// As [`Self::catch_up`].
    #[inline(always)]
    pub fn caught_up(&self, now: Micros) -> Result<Option<LimiterState>, CoreError> {
        let now = self.clock(now);
        if !self.extras.hold_due(now) {
            return Ok(None);
        }
        let mut copy = self.clone();
        copy.catch_up_due(now)?;
        Ok(Some(copy))
    }

    /// The key's expiry after a write at `now`: when it may expire ([`Self::expires_at`]), never
    /// before `now`. Every write sets the key's expiry to this.
    pub fn expiry(&self, now: Micros) -> Micros {
        self.expires_at().max(now)
    }

    /// Which algorithm the key holds (`None`: only a block).
    pub fn kind(&self) -> Option<Kind> {
        self.algo.as_ref().map(AlgoState::kind)
    }

    /// The stored parameters, by name, for RL.INFO.
    pub fn describe(&self) -> Vec<(&'static str, u64)> {
        match &self.algo {
            Some(algo) => dispatch!(algo, a => describe_of(a)),
            None => Vec::new(),
        }
    }

    /// The live state at `now` by name, for RL.INFO (see [`Algorithm::describe_live`]); none
    /// for a key holding only a block.
    pub fn describe_live(&self, now: Micros) -> Vec<(&'static str, u64)> {
        let now = self.clock(now);
        match &self.algo {
            Some(algo) => dispatch!(algo, a => a.describe_live(now)),
            None => Vec::new(),
        }
    }

    /// More of the state at `now` for RL.INFO ([`Algorithm::describe_more`]).
    pub fn describe_more(
        &self,
        now: Micros,
    ) -> Vec<(&'static str, crate::core::limiter::InfoValue)> {
        let now = self.clock(now);
        match &self.algo {
            Some(algo) => dispatch!(algo, a => a.describe_more(now)),
            None => Vec::new(),
        }
    }

    /// The limiter reply at `now` as if `PEEK COST 0` (for RL.INFO), the block honoured;
    /// `None` for a key holding only a block.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] as the algorithms.
    pub fn peek(&self, now: Micros) -> Result<Option<Decision>, CoreError> {
        if let Some(copy) = self.caught_up(now)? {
            return copy.peek(now);
        }
        let now = self.clock(now);
        let Some(algo) = &self.algo else {
            return Ok(None);
        };
        let verdict = dispatch!(algo, a => a.evaluate(a.params(), now, 0, false))?;
        let verdict = match self.extras.blocked_at(now) {
            Some(until) => crate::core::limiter::blocked(verdict, verdict, 0, until, now),
            None => verdict,
        };
        Ok(Some(Decision::from(verdict)))
    }

    /// Whether the value is one the module could have written: its last update at most
    /// [`MAX_TIME`] (the latest `AT`), and the algorithm's state, ids and block within the
    /// ranges the arithmetic assumes from then on ([`Algorithm::valid_at`]). Every command and
    /// RL.INFO work on such a value; the codec refuses any other (RDB, RL._RESTORE, RL._SET).
    pub fn is_valid(&self) -> bool {
        let t = self.last_update;
        t <= MAX_TIME
            && self.extras.valid_at(t)
            && self
                .algo
                .as_ref()
                .is_none_or(|algo| dispatch!(algo, a => a.valid_at(t)))
    }

    /// When the key may expire (Unix µs): the limiter is fresh again, no id is remembered and
    /// no block is in force.
    pub fn expires_at(&self) -> Micros {
        let fresh = match &self.algo {
            Some(algo) => dispatch!(algo, a => a.fresh_at()),
            None => 0,
        };
        fresh
            .max(self.extras.latest_expiry())
            .max(self.extras.block_until())
    }

    /// Whether the algorithm's state holds heap memory (a sliding log's entries).
    pub fn has_heap(&self) -> bool {
        match &self.algo {
            Some(algo) => dispatch!(algo, a => a.heap_size()) > 0,
            None => false,
        }
    }

    /// Bytes used, the value itself and its heap, for `MEMORY USAGE`.
    pub fn mem_size(&self) -> usize {
        let heap = match &self.algo {
            Some(algo) => dispatch!(algo, a => a.heap_size()),
            None => 0,
        };
        std::mem::size_of::<Self>()
            .saturating_add(heap)
            .saturating_add(self.extras.heap_size())
    }

    /// Fewest bytes the codec writes for the value, known without encoding it: its version,
    /// kind, last update, the algorithm's part when the algorithm knows its length (nothing
    /// counted for it otherwise), the count of `DEDUP` ids and the fewest bytes of each
    /// ([`MIN_ENTRY_LEN`](crate::core::dedup::MIN_ENTRY_LEN)). So a value with a few ids is known
    /// too long to replicate as itself without encoding it.
    pub fn min_encoded_len(&self) -> usize {
        let algo = self
            .algo
            .as_ref()
            .and_then(|algo| dispatch!(algo, a => a.known_encoded_len()))
            .unwrap_or(0);
        algo.saturating_add(crate::core::varint::len_u64(self.last_update))
            .saturating_add(3)
            .saturating_add(
                self.extras
                    .len()
                    .saturating_mul(crate::core::dedup::MIN_ENTRY_LEN),
            )
    }

    /// Append the algorithm's part of the encoding.
    pub(crate) fn encode_algo(&self, out: &mut Vec<u8>) {
        if let Some(algo) = &self.algo {
            dispatch!(algo, a => a.encode(out))
        }
    }
}

/// A reservation of `units` ended unsettled at `end`: the algorithm's refund at `end`
/// (nothing for an algorithm that takes no refund, which takes no `HOLD` either).
fn give_back<A: Algorithm>(a: &mut A, end: Micros, units: u64) -> Result<u64, CoreError> {
    match A::REFUND {
        crate::core::limiter::Refund::Units if units > 0 => a.refund(end, units),
        _ => Ok(0),
    }
}

fn describe_of<A: Algorithm>(a: &A) -> Vec<(&'static str, u64)> {
    A::describe(a.params())
}
