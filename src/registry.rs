//! The registry's wiring: every rate-limiting algorithm's state type and command type.
//!
//! An algorithm's identity (its variant, codec tag and names) is its row in `core::kind`, a
//! leaf of `core`; its row here wires the types to it, at the crate root, which imports `core`
//! and `commands` and is imported by nothing. Everything that lists the algorithms is generated
//! from the identity rows (`core::kind::each!`) and reaches the types through the wiring:
//! `core::AlgoState` and its dispatch, the codec's tag table, RL.ALL's limiter table, and the
//! algorithm's row of the command table (`commands::table`: name `rl.<name>`, flags, key spec,
//! ACL categories, its `DOC`, INFO counters `rl_<name>`), which registers the command and gives
//! COMMAND DOCS, the ACL categories and `INFO ratelimit`.
//!
//! Adding an algorithm:
//! - its core file: a state type implementing `core::limiter::Algorithm` (and `refund`, unless
//!   its `REFUND` names another command), declared in `core/mod.rs`;
//! - its command file: a type implementing `commands::LimiterCommand` with its `DOC`, declared in
//!   `commands/limiters/mod.rs`;
//! - its identity row in `core::kind` (variant, tag, name) and its wiring row below;
//! - in its core file's tests, `core::testkit::Sample` for its state type (its parameters for
//!   the tests that run every algorithm);
//! - outside `src`: its calls in the integration tests that list every command (`tests/acl.rs`
//!   `commands`, `tests/fuzz.rs` `COMMANDS` and its template), which fail until they have them.
//!
//! A forgotten row, trait, doc or sample is a compile error; `registry_is_complete` (in
//! `commands::limiters::registry`) checks the rest, a forgotten `refund` included, and the command
//! table's tests (`commands::table`) its row.

use crate::commands::limiters::registry::WiredCommand;
use crate::core::kind::of;
use crate::core::state::WiredState;
use crate::{commands, core};

/// `Variant => state type, command type;`: the types of the algorithm whose identity row in
/// `core::kind` has that variant.
macro_rules! wire {
    ($($variant:ident => $state:ty, $command:ty;)*) => {
        $(
            impl WiredState for of::$variant {
                type State = $state;
            }

            impl WiredCommand for of::$variant {
                type Command = $command;
            }
        )*
    };
}

wire! {
    // variant     core state                                command
    Gcra           => core::gcra::Gcra,                      commands::limiters::gcra::GcraCommand;
    TokenBucket    => core::token_bucket::TokenBucket,       commands::limiters::token_bucket::TokenBucketCommand;
    LeakyBucket    => core::leaky_bucket::LeakyBucket,       commands::limiters::leaky_bucket::LeakyBucketCommand;
    Fixed          => core::fixed_window::Fixed,             commands::limiters::fixed::FixedCommand;
    Sliding        => core::sliding_log::SlidingLog,         commands::limiters::sliding::SlidingCommand;
    SlidingCounter => core::sliding_counter::SlidingCounter, commands::limiters::sliding_counter::SlidingCounterCommand;
    Concurrency    => core::concurrency::Concurrency,        commands::acquire::AcquireCommand;
}
