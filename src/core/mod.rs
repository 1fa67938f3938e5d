//! The pure heart of the module: rate-limiting algorithms and their state.
//!
//! Nothing here touches the server, the clock or raw pointers. Every function that depends on time takes
//! `now` (Unix microseconds) as an argument, so the algorithms are tested by value, with no sleep.
#![forbid(unsafe_code)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

pub mod codec;
pub mod decimal;
pub mod dedup;
pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod limiter;
pub mod multi;
pub mod sliding_counter;
pub mod sliding_log;
pub mod state;
pub mod stream_count;
#[cfg(test)]
pub(crate) mod testkit;
pub mod time;
pub mod token_bucket;

pub use limiter::{Algorithm, Decision, Request, Retry, Verdict};
pub use state::{Kind, LimiterState};
pub use time::Micros;

/// Why the core refused a request. The command layer turns these into Redis errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// The key holds a limiter of another algorithm.
    WrongKind { held: Kind, wanted: Kind },
    /// A parameter is out of its valid range; the text names it.
    InvalidParam(&'static str),
    /// Arithmetic on the given parameters would overflow.
    Overflow,
}
