//! Thin, safe glue: bytes → typed request → core (judge, then settle) → `tail::finish` (write back,
//! expire, replicate, notify, count) → reply.
//!
//! Every command is one row of [`table`] (name, handler, flags, key spec, ACL categories, docs,
//! counters; [`row`]), which registers it. Each feature has its home here:
//!
//! - [`call`]: the one path every limiter call takes ([`call::run`]: [`LimiterCommand`],
//!   [`run`], [`run_call`]), its arguments and shared options ([`call::args`], the option table
//!   [`call::options`]), the time it is evaluated at ([`call::evaluation`]), the detailed reply
//!   ([`call::detail`]), how a write propagates ([`call::propagate`]) and is received
//!   ([`call::restore`]: RL._RESTORE, RL._SET), and the tail every write ends with
//!   ([`call::tail`]);
//! - [`limiters`]: the algorithms' commands (RL.GCRA … RL.STREAMCOUNT, CL.THROTTLE) and RL.ALL's
//!   table of them ([`limiters::registry`]), wired once in `crate::registry` to the algorithms
//!   `core::kind` lists;
//! - [`all`]: RL.ALL, and its read-only forms RL.CHECK and RL.CHECKALL;
//! - [`policy`]: RL.POLICY, the server's named policies ([`policy::state`]) and RL.LIMIT;
//! - [`acquire`]: RL.ACQUIRE and RL.RELEASE, their arguments, and waiting for a turn (`WAIT`);
//! - [`settle`]: after the call: RL.SETTLE, RL.REFUND, RL.BLOCK and RL.UNBLOCK;
//! - [`inspect`]: RL.INFO and RL.METRICS.
//!
//! A folder named for a command holds that command in its `mod.rs` and the commands built on
//! it beside it; the other folders' `mod.rs` is an index.
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

pub mod acquire;
pub mod all;
pub mod call;
pub mod inspect;
pub mod limiters;
pub mod policy;
pub mod row;
pub mod settle;
pub mod table;

pub use call::evaluation::{Evaluation, Expiry, evaluation_time};
pub use call::propagate::{
    STATE_REPLICATION_MAX, replicate_argv_with_at, replicate_expiry, replicate_state,
};
pub use call::run::{
    Call, DECISION_NAMES, Limiter, LimiterCommand, Parsed, Ran, Steps, decision_fields,
    decision_values, reply_decision, reply_detail, run, run_call, with_bytes,
};
