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

//!
//! Layers, each importing only those above it (no circle):
//! - leaves: `time`, `varint`, `decimal`, `kind` (the registry's identity half: each
//!   algorithm's variant, tag and names), `error`, `param`, `dedup`, `extras` (a key's ids and
//!   block), `limiter` (the [`Algorithm`] trait and the shared grant and retry rules);
//! - `calendar`: calendar windows of `fixed_window` (day .. year in a time zone);
//! - the algorithms: `gcra` (with `token_bucket`, `leaky_bucket`), `fixed_window`,
//!   `sliding_counter`, `sliding_log`, `concurrency`, and `stream_count`;
//! - `state`: the key's value over every registered algorithm (their state types wired by
//!   `crate::registry`, which `core` never imports);
//! - `codec` (its bytes), `packed` (a key's value in memory, the schedules' inline),
//!   `flow` (the per-key rules), `multi` (RL.ALL), `policy` (named policies of RL.ALL's limiters).

pub mod calendar;
#[cfg(test)]
mod caps_tests;
pub mod codec;
pub mod concurrency;
pub mod decimal;
pub mod dedup;
#[cfg(test)]
mod delay_tests;
pub mod error;
pub mod extras;
pub mod few;
#[cfg(test)]
mod fixed_calendar_tests;
pub mod fixed_window;
pub mod flow;
pub mod gcra;
pub mod kind;
pub mod leaky_bucket;
pub mod limiter;
pub mod multi;
pub mod packed;
pub mod param;
pub mod policy;
pub mod settle;
#[cfg(test)]
mod settle_tests;
#[cfg(test)]
mod shadow_tests;
pub mod sliding_counter;
pub mod sliding_log;
pub mod state;
pub mod stream_count;
#[cfg(test)]
pub(crate) mod testkit;
pub mod time;
pub mod token_bucket;
#[cfg(test)]
mod validity_tests;
pub mod varint;
pub mod waiters;

pub use error::CoreError;
pub use kind::Kind;
pub use limiter::{Algorithm, Decision, Refund, Request, Retry, Verdict};
pub use packed::Packed;
pub use param::{
    MUST_BE_POSITIVE, MUST_BE_POSITIVE_DURATION, MUST_FIT_COUNT, MUST_FIT_DURATION, check_count,
    check_duration,
};
pub use state::{LimiterState, Stored};
pub use time::Micros;
