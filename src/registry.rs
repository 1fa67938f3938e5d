//! The registry: every rate-limiting algorithm of the module, named once.
//!
//! One row per algorithm: its variant and codec tag (the tag is persisted: never renumber), its
//! name (`gcra`: RL.INFO's `algorithm`, RL.ALL's limiter name, and `rl.<name>` is its command
//! unless the row gives the command's own name after `as`),
//! its state type in `core` and its command type in `commands`. Everything that lists the
//! algorithms is generated from these rows: `core::Kind` and its tags, `core::AlgoState` and its
//! dispatch, the codec's tag table, RL.ALL's limiter table, COMMAND DOCS, the INFO counters and
//! the command registration.
//!
//! Adding an algorithm: its core file (a type implementing `core::limiter::Algorithm`), its
//! command file (a type implementing `commands::LimiterCommand`, with its `DOC`), and one row
//! here. A forgotten trait or doc is a compile error; `registry_is_complete` (in
//! `commands::registry`) checks the rest.

/// Call macro `$callback` with `[extra tokens]` then every row:
/// `Variant = tag => "name" [as "command"], core::State, commands::Command;`. The command is
/// `rl.<name>` unless the row names another (`"concurrency" as "acquire"`: RL.ACQUIRE).
macro_rules! algorithms {
    ($($callback:ident)::+ $(, $($extra:tt)*)?) => {
        $($callback)::+! {
            [$($($extra)*)?]
            // variant     tag    name               core state                                       command
            Gcra           = 1 => "gcra",           crate::core::gcra::Gcra,                         crate::commands::gcra::GcraCommand;
            TokenBucket    = 2 => "tokenbucket",    crate::core::token_bucket::TokenBucket,          crate::commands::token_bucket::TokenBucketCommand;
            LeakyBucket    = 3 => "leakybucket",    crate::core::leaky_bucket::LeakyBucket,          crate::commands::leaky_bucket::LeakyBucketCommand;
            Fixed          = 4 => "fixed",          crate::core::fixed_window::Fixed,                crate::commands::fixed::FixedCommand;
            Sliding        = 5 => "sliding",        crate::core::sliding_log::SlidingLog,            crate::commands::sliding::SlidingCommand;
            SlidingCounter = 6 => "slidingcounter", crate::core::sliding_counter::SlidingCounter,    crate::commands::sliding_counter::SlidingCounterCommand;
            Concurrency    = 7 => "concurrency" as "acquire", crate::core::concurrency::Concurrency,   crate::commands::concurrency::AcquireCommand;
        }
    };
}
pub(crate) use algorithms;

/// The command of a row: `rl.<command>` when the row names one, else `rl.<name>`.
macro_rules! command_of {
    ($name:literal) => {
        concat!("rl.", $name)
    };
    ($name:literal $cmd:literal) => {
        concat!("rl.", $cmd)
    };
}
pub(crate) use command_of;

/// The INFO name of a row's command: `rl_<command>` when the row names one, else `rl_<name>`
/// (a valid Prometheus metric name, see `stats`).
macro_rules! stat_of {
    ($name:literal) => {
        concat!("rl_", $name)
    };
    ($name:literal $cmd:literal) => {
        concat!("rl_", $cmd)
    };
}
pub(crate) use stat_of;

/// `bytes` (NUL-terminated, no other NUL) as a C string, checked when the constant is built.
pub const fn c_str(bytes: &'static [u8]) -> &'static std::ffi::CStr {
    match std::ffi::CStr::from_bytes_with_nul(bytes) {
        Ok(s) => s,
        Err(_) => panic!("a command name must end in one NUL"),
    }
}
