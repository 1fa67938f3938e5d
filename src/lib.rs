//! redis-ratelimit: native rate-limiting commands for Redis.
//!
//! This file only wires the module together: its name, allocator, data type, command table,
//! configuration and load-time setup. The algorithms live in `core` (pure), the commands in
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

/// Load-time setup after the commands are registered: command docs, key specs and ACL
/// categories, I/O error handling for diskless loads, and a panic hook that leaves a trace in
/// the server log and then runs the hook it replaces. Nothing here adds work to the server's
/// other commands (no command filter: `CONFIG RESETSTAT` leaves `INFO ratelimit` as it is).
fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    if register_limiters(ctx) == Status::Err {
        return Status::Err;
    }
    let fail = |e: String| {
        ffi::log::warning(&format!("ratelimit: {e}"));
        Status::Err
    };
    let module_category = match ffi::cmdinfo::add_module_acl_category(ctx) {
        Ok(added) => added,
        Err(e) => return fail(e),
    };
    for doc in commands::registry::docs() {
        if let Err(e) = ffi::cmdinfo::set_command_info(ctx, doc)
            .and_then(|()| ffi::cmdinfo::set_acl_categories(ctx, doc, module_category))
        {
            return fail(e);
        }
    }
    let hooks = ffi::events::Hooks {
        key: commands::wait::key_event,
        server: commands::wait::server_event,
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

/// Register the limiter commands (one per registered algorithm, CL.THROTTLE and RL.STREAMCOUNT)
/// with their own handler (`ffi::command`): they are the hot path, and skip the crate's argument
/// Vec.
macro_rules! limiter_commands {
    ([$ctx:expr] $($variant:ident)*) => {{
        let flags = c"write deny-oom fast";
        let mut status = Status::Ok;
        $(
            if status == Status::Ok {
                status = ffi::command::create::<commands::Limiter<Wired<crate::core::kind::of::$variant>>>(
                    $ctx,
                    <Wired<crate::core::kind::of::$variant> as commands::LimiterCommand>::EVENT,
                    flags,
                    1, 1, 1,
                );
            }
        )*
        if status == Status::Ok {
            status = ffi::command::create::<commands::Limiter<commands::throttle::ThrottleCommand>>(
                $ctx, c"cl.throttle", flags, 1, 1, 1,
            );
        }
        if status == Status::Ok {
            status = ffi::command::create::<commands::stream_count::StreamCount>(
                $ctx, c"rl.streamcount", c"write deny-oom", 1, 1, 1,
            );
        }
        status
    }};
}

/// The command wired to an algorithm (`crate::registry`).
type Wired<A> = <A as commands::registry::WiredCommand>::Command;

fn register_limiters(ctx: &Context) -> Status {
    crate::core::kind::each!(limiter_commands, ctx)
}

/// The module, with one command per registered algorithm (`crate::registry`) and the others.
macro_rules! module {
    ([] $($variant:ident)*) => {
        redis_module! {
            name: "ratelimit",
            version: 1,
            allocator: (ModuleAlloc, ModuleAlloc {}),
            data_types: [RL_TYPE],
            init: init,
            commands: [
                ["rl.all", commands::entry(commands::all::run), "write deny-oom getkeys-api", 0, 0, 0, ""],
                // RL.RELEASE, RL.REFUND and RL.UNBLOCK only free or give back: not deny-oom, so
                // they run under maxmemory too.
                ["rl.release", commands::entry(commands::concurrency::release), "write fast", 1, 1, 1, ""],
                ["rl.info", commands::entry(commands::info::run), "readonly fast", 1, 1, 1, ""],
                ["rl.refund", commands::entry(commands::refund::run), "write", 1, 1, 1, ""],
                ["rl.block", commands::entry(commands::block::run_block), "write deny-oom fast", 1, 1, 1, ""],
                ["rl.unblock", commands::entry(commands::block::run_unblock), "write fast", 1, 1, 1, ""],
                ["rl.check", commands::entry(commands::check::run), "readonly fast", 1, 1, 1, ""],
                ["rl._restore", commands::entry(commands::restore::run), "write deny-oom", 1, 1, 1, ""],
                ["rl._set", commands::entry(commands::restore::run_set), "write deny-oom", 1, 1, 1, ""],
            ],
            configurations: [
                i64: [
                    ["dedup-max", &config::DEDUP_MAX, config::DEDUP_MAX_DEFAULT, 0, config::DEDUP_MAX_LIMIT, ConfigurationFlags::DEFAULT, None],
                    ["at-max-ahead", &config::AT_MAX_AHEAD, config::AT_MAX_AHEAD_DEFAULT, -1, i64::MAX, ConfigurationFlags::DEFAULT, None],
                    ["at-max-behind", &config::AT_MAX_BEHIND, config::AT_MAX_BEHIND_DEFAULT, -1, config::AT_MAX_BEHIND_LIMIT, ConfigurationFlags::DEFAULT, None],
                    ["max-wait", &config::MAX_WAIT, config::MAX_WAIT_DEFAULT, 1, config::MAX_WAIT_LIMIT, ConfigurationFlags::DEFAULT, None],
                ],
                string: [],
                bool: [],
                enum: [],
                module_args_as_configuration: true,
            ]
        }
    };
}

crate::core::kind::each!(module);
