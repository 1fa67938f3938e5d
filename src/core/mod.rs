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

/// What a count must be when it is 0.
pub const MUST_BE_POSITIVE: &str = "must be a positive integer";
/// What a count must be when it is above [`gcra::MAX_PARAM`].
pub const MUST_FIT_COUNT: &str = "must be at most 9223372036854775807";
/// What a duration must be when it is 0.
pub const MUST_BE_POSITIVE_DURATION: &str = "must be a positive duration";
/// What a duration must be when it is above [`gcra::MAX_PARAM`] µs.
pub const MUST_FIT_DURATION: &str = "must be at most 9223372036854775 ms";

/// A count in `1..=MAX_PARAM`, else the error naming `name` and the problem.
///
/// # Errors
/// [`CoreError::InvalidParam`].
pub fn check_count(v: u64, name: &'static str) -> Result<u64, CoreError> {
    match v {
        0 => Err(CoreError::InvalidParam(name, MUST_BE_POSITIVE)),
        v if v > gcra::MAX_PARAM => Err(CoreError::InvalidParam(name, MUST_FIT_COUNT)),
        v => Ok(v),
    }
}

/// A duration (µs) in `1..=MAX_PARAM`, else the error naming `name` and the problem.
///
/// # Errors
/// [`CoreError::InvalidParam`].
pub fn check_duration(v: Micros, name: &'static str) -> Result<Micros, CoreError> {
    match v {
        0 => Err(CoreError::InvalidParam(name, MUST_BE_POSITIVE_DURATION)),
        v if v > gcra::MAX_PARAM => Err(CoreError::InvalidParam(name, MUST_FIT_DURATION)),
        v => Ok(v),
    }
}

/// Why the core refused a request. The command layer turns these into Redis errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// The key holds a limiter of another algorithm.
    WrongKind { held: Kind, wanted: Kind },
    /// A parameter is out of its valid range: its name, and what it must be
    /// (`InvalidParam("burst", MUST_BE_POSITIVE)` reads "burst must be a positive integer").
    InvalidParam(&'static str, &'static str),
    /// GCRA-schedule parameters whose full span `burst · period / rate` is above
    /// [`time::MAX_SPAN`] (the command layer names the arguments).
    SpanTooLong,
    /// A key's state converted to new parameters would be fresh again later than
    /// [`time::MAX_SPAN`] from now (a long backlog at a much slower rate).
    StateTooLong,
    /// Arithmetic on the given parameters would overflow.
    Overflow,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_in_messages_are_the_constants() {
        assert_eq!(
            MUST_FIT_COUNT,
            format!("must be at most {}", gcra::MAX_PARAM)
        );
        assert_eq!(
            MUST_FIT_DURATION,
            format!("must be at most {} ms", gcra::MAX_PARAM / time::US_PER_MS)
        );
    }
}
