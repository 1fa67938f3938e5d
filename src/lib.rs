//! redis-ratelimit: native rate-limiting commands for Redis.
//!
//! This file only wires the module together: its name, allocator, data type, configuration and
//! load-time setup, which registers every command of the command table (`commands::table`). The algorithms live in `core` (pure), the commands in
//! `commands` (safe glue), and every raw module API call in `ffi`.

pub mod commands;
pub mod config;
pub mod core;
pub mod docs;
pub mod error;
pub mod ffi;
pub mod registry;
pub mod stats;
pub mod tally_cache;

use redis_module::configuration::ConfigurationFlags;
use redis_module::{Context, RedisString, Status, redis_module};

use crate::ffi::datatype::RL_TYPE;

// Unit tests run without a server, so they cannot use the server's allocator.
#[cfg(not(test))]
type ModuleAlloc = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type ModuleAlloc = std::alloc::System;

/// Load-time setup: the commands (`commands::table`: each with its docs, key spec and ACL
/// categories), I/O error handling for diskless loads, and a panic hook that leaves a trace in
/// the server log and then runs the hook it replaces. Nothing here adds work to the server's
/// other commands (no command filter: `CONFIG RESETSTAT` leaves `INFO ratelimit` as it is).
fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    let fail = |e: String| {
        ffi::log::warning(&format!("ratelimit: {e}"));
        Status::Err
    };
    ffi::datatype::set_aux_hooks(ffi::datatype::AuxHooks {
        save: commands::policy::state::dump_all,
        any: commands::policy::state::any,
        load: commands::policy::load_all,
    });
    if let Err(e) = commands::table::register(ctx) {
        return fail(e);
    }
    let hooks = ffi::events::Hooks {
        key: commands::acquire::wait::key_event,
        server: commands::acquire::wait::server_event,
        policy: commands::policy::state::server_event,
    };
    if let Err(e) = ffi::events::subscribe(ctx, hooks) {
        return fail(e);
    }
    ctx.set_module_options(redis_module::ModuleOptions::HANDLE_IO_ERRORS);
    // A panic in a command aborts the server: leave the message and a backtrace in the server
    // log, then run the previous hook (the default one prints to stderr, with a backtrace when
    // RUST_BACKTRACE is set).
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        ffi::log::warning(&format!("ratelimit: panic: {info}"));
        ffi::log::warning(&format!(
            "ratelimit: backtrace:\n{}",
            std::backtrace::Backtrace::force_capture()
        ));
        previous(info);
    }));
    Status::Ok
}

/// The module's version as `MODULE LIST` shows it, `major * 10000 + minor * 100 + patch` (the
/// encoding Redis modules use), from Cargo.toml's version; `INFO ratelimit` shows it as text.
const MODULE_VERSION: i32 = {
    const fn number(s: &str) -> i32 {
        let b = s.as_bytes();
        let mut i = 0;
        let mut n = 0;
        while i < b.len() {
            n = n * 10 + (b[i] - b'0') as i32;
            i += 1;
        }
        n
    }
    number(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + number(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + number(env!("CARGO_PKG_VERSION_PATCH"))
};

redis_module! {
    name: "ratelimit",
    version: MODULE_VERSION,
    allocator: (ModuleAlloc, ModuleAlloc {}),
    data_types: [RL_TYPE],
    init: init,
    configurations: [
        i64: [
            ["dedup-max", &config::DEDUP_MAX, config::DEDUP_MAX_DEFAULT, 0, config::DEDUP_MAX_LIMIT, ConfigurationFlags::DEFAULT, None],
            ["at-max-ahead", &config::AT_MAX_AHEAD, config::AT_MAX_AHEAD_DEFAULT, -1, i64::MAX, ConfigurationFlags::DEFAULT, None],
            ["at-max-behind", &config::AT_MAX_BEHIND, config::AT_MAX_BEHIND_DEFAULT, -1, config::AT_MAX_BEHIND_LIMIT, ConfigurationFlags::DEFAULT, None],
            ["max-wait", &config::MAX_WAIT, config::MAX_WAIT_DEFAULT, 1, config::MAX_WAIT_LIMIT, ConfigurationFlags::DEFAULT, None],
            ["max-policies", &config::MAX_POLICIES, config::MAX_POLICIES_DEFAULT, 0, config::MAX_POLICIES_LIMIT, ConfigurationFlags::DEFAULT, None],
            ["near-limit-percent", &config::NEAR_LIMIT_PERCENT, config::NEAR_LIMIT_PERCENT_DEFAULT, 0, 100, ConfigurationFlags::DEFAULT, None],
        ],
        string: [],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}
