//! Every command the module registers, one row each ([`Command`]): its name, handler, flags,
//! key spec, ACL categories, docs and `INFO ratelimit` counters. Registration (`lib.rs` calls
//! [`register`]), `COMMAND INFO` / `COMMAND DOCS`, the ACL categories and the INFO counters are
//! all read from [`COMMANDS`]; the tests below check every row (docs, arity, flags against key
//! spec and ACL categories, counters), and the integration tests check what the server lists.
//!
//! Adding a command: in its command file (declared in its feature folder's `mod.rs`), its handler (a type
//! implementing [`Run`], which gets its row: `tail::Tail::of` names and counts the call) and
//! its `CommandDoc`; then one row in the `rows` below. A row without counters fails
//! `every_command_but_rl_info_and_the_internal_ones_is_counted`; docs that do not match the
//! arity fail `every_command_has_docs_that_match_its_arity`; outside `src`, `tests/acl.rs` and
//! `tests/fuzz.rs` fail until they have a call of it.
//!
//! An algorithm's command is not written here: it comes with its registry row
//! (`crate::registry`), as `algorithm` makes it.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::Context;

use crate::commands::all::{self, check, checkall};
use crate::commands::call::restore;
use crate::commands::inspect::{info, metrics};
use crate::commands::limiters::registry::WiredCommand;
use crate::commands::limiters::{stream_count, throttle};
use crate::commands::policy::{self, limit, state as policy_state};
use crate::commands::row::{Command, Run};
use crate::commands::settle::{self, block, refund};
use crate::commands::{Limiter, LimiterCommand, acquire, with_bytes};
use crate::core::kind::of;
use crate::core::state::Stored;
use crate::docs::Keys;
use crate::error::RlError;
use crate::ffi;
use crate::ffi::command::{Argv, Callback, Handler};
use crate::stats::{self, CommandStats};

/// The handler of row `I`, run by `H`.
struct Row<H, const I: usize>(PhantomData<H>);

impl<H: Run, const I: usize> Handler for Row<H, I> {
    #[inline(always)]
    fn call(ctx: &Context, argv: Argv<'_>) -> Result<(), RlError> {
        const { assert!(I < COMMANDS.len()) };
        // In bounds: checked above, when the row is built.
        #[allow(clippy::indexing_slicing)]
        with_bytes(argv, |bytes| H::run(ctx, argv, bytes, &COMMANDS[I]))
    }
}

/// Flags of every algorithm's command.
const ALGORITHM_FLAGS: &CStr = c"write deny-oom fast";
/// ACL categories of every algorithm's command.
const ALGORITHM_ACL: &CStr = c"write fast";

/// The row of algorithm command `C`, at `I`: `rl.<name>` (`core::kind`), run by
/// [`crate::commands::run`], counted as `rl_<name>`.
const fn algorithm<C: LimiterCommand, const I: usize>() -> Command {
    Command {
        name: C::EVENT,
        handler: Callback::of::<Row<Limiter<C>, I>>(),
        flags: ALGORITHM_FLAGS,
        keys: Keys::Update,
        acl: ALGORITHM_ACL,
        doc: &C::DOC,
        stats: CommandStats::new(Some(<C::Algo as Stored>::KIND.stat_name())),
    }
}

/// `rows!([rows] Variant..)`: [`COMMANDS`], the algorithms' commands first (registry order),
/// then the rows, in `INFO ratelimit` order.
macro_rules! rows {
    ([$($at:ident => $name:expr, $handler:ty, $flags:literal, $keys:ident, $acl:literal, $doc:expr, $stats:expr;)*] $($variant:ident)*) => {
        /// Each row's position in [`COMMANDS`].
        #[allow(dead_code)]
        enum At {
            $($variant,)*
            $($at,)*
        }

        /// Every command the module registers.
        pub static COMMANDS: [Command; [$(At::$variant,)* $(At::$at,)*].len()] = [
            $(algorithm::<<of::$variant as WiredCommand>::Command, { At::$variant as usize }>(),)*
            $(Command {
                name: $name,
                handler: Callback::of::<Row<$handler, { At::$at as usize }>>(),
                flags: $flags,
                keys: Keys::$keys,
                acl: $acl,
                doc: $doc,
                stats: CommandStats::new($stats),
            },)*
        ];
    };
}

crate::core::kind::each!(
    rows,
    // Each line: position => name, handler, flags, key spec (`docs::Keys`), ACL categories, docs,
    // INFO counters. RL.RELEASE, RL.REFUND, RL.SETTLE and RL.UNBLOCK only free or give back: not deny-oom,
    // so they run under maxmemory too. RL._RESTORE and RL._SET write raw state, for replication
    // and the AOF, never for applications: @admin @dangerous only (SPEC "ACL").
    // position   name                              handler                             flags                          keys       ACL                 docs                             INFO counters
    StreamCount => c"rl.streamcount",                stream_count::StreamCount,          c"write deny-oom",             Update,    c"write",           &stream_count::DOC,              Some("rl_streamcount");
    All =>         c"rl.all",                        all::All,                           c"write deny-oom getkeys-api", Numkeys,   c"write fast",      &all::DOC,                       Some("rl_all");
    Throttle =>    throttle::ThrottleCommand::EVENT, Limiter<throttle::ThrottleCommand>, c"write deny-oom fast",        Update,    c"write fast",      &throttle::ThrottleCommand::DOC, Some("cl_throttle");
    Refund =>      c"rl.refund",                     refund::Refund,                     c"write",                      Update,    c"write",           &refund::DOC,                    Some("rl_refund");
    Block =>       c"rl.block",                      block::Block,                       c"write deny-oom fast",        Update,    c"write fast",      &block::BLOCK_DOC,               Some("rl_block");
    Unblock =>     c"rl.unblock",                    block::Unblock,                     c"write fast",                 Update,    c"write fast",      &block::UNBLOCK_DOC,             Some("rl_unblock");
    Check =>       c"rl.check",                      check::Check,                       c"readonly fast",              Read,      c"read fast",       &check::DOC,                     Some("rl_check");
    CheckAll =>    c"rl.checkall",                   checkall::CheckAll,                 c"readonly getkeys-api",       ReadNumkeys, c"read fast",     &checkall::DOC,                  Some("rl_checkall");
    Release =>     c"rl.release",                    acquire::ReleaseCommand,            c"write fast",                 Update,    c"write fast",      &acquire::RELEASE_DOC,           Some("rl_release");
    Settle =>      c"rl.settle",                     settle::Settle,                     c"write getkeys-api",          Numkeys,   c"write",           &settle::DOC,                    Some("rl_settle");
    Info =>        c"rl.info",                       info::Info,                         c"readonly fast",              Read,      c"read fast",       &info::DOC,                      None;
    Restore =>     c"rl._restore",                   restore::Restore,                   c"write deny-oom",             Overwrite, c"admin dangerous", &restore::RESTORE_DOC,           None;
    Set =>         c"rl._set",                       restore::Set,                       c"write deny-oom",             OverwritePairs, c"admin dangerous", &restore::SET_DOC,          None;
    Limit =>       c"rl.limit",                      limit::Limit,                       c"write deny-oom fast",        Update,    c"write fast",      &limit::DOC,                     Some("rl_limit");
    // RL.POLICY's subcommands (`container|sub`): module state, no key; administration (SET, DEL,
    // DUMP, RESTORE) is @admin only, reading (GET, LIST) @read and in the module's category.
    PolicySet =>   c"rl.policy|set",                 policy::Set,                        c"write deny-oom",             None,      c"admin",           &policy::SET_DOC,                None;
    PolicyGet =>   c"rl.policy|get",                 policy::Get,                        c"readonly fast",              None,      c"read fast",       &policy::GET_DOC,                None;
    PolicyDel =>   c"rl.policy|del",                 policy::Del,                        c"write",                      None,      c"admin",           &policy::DEL_DOC,                None;
    PolicyList =>  c"rl.policy|list",                policy::List,                       c"readonly",                   None,      c"read",            &policy::LIST_DOC,               None;
    PolicyDump =>  c"rl.policy|dump",                policy::Dump,                       c"readonly",                   None,      c"admin",           &policy::DUMP_DOC,               None;
    PolicyRestore => c"rl.policy|restore",           policy::Restore,                    c"write deny-oom",             None,      c"admin",           &policy::RESTORE_DOC,            None;
    PolicyHelp =>  c"rl.policy|help",                policy::Help,                       c"readonly fast",              None,      c"read fast",       &policy::HELP_DOC,               None;
    // RL.METRICS: no key, the counters of INFO ratelimit as name/value pairs; allowed in scripts
    // (redis_exporter's --script calls it).
    Metrics =>     c"rl.metrics",                    Metrics,                            c"readonly fast",              None,      c"read fast",       &metrics::DOC,                   None;
);

/// Register every command of [`COMMANDS`] with its docs, key spec and ACL categories (and the
/// module's ACL category, where the server has module categories). Only valid during `OnLoad`.
///
/// # Errors
/// A message naming what the server refused.
pub fn register(ctx: &Context) -> Result<(), String> {
    let module_category = ffi::cmdinfo::add_module_acl_category(ctx)?;
    for c in &COMMANDS {
        let (first, last, step) = c.key_range();
        let created = if c.is_subcommand() {
            ffi::command::create_subcommand(ctx, c.name, c.handler, c.flags)
        } else {
            ffi::command::create(ctx, c.name, c.handler, c.flags, first, last, step)
        };
        if created == redis_module::Status::Err {
            return Err(format!(
                "{}: the server refused the command",
                c.name.to_string_lossy()
            ));
        }
        ffi::cmdinfo::set_command_info(ctx, c.name, c.keys, c.doc)?;
        ffi::cmdinfo::set_acl_categories(
            ctx,
            c.name,
            c.acl,
            module_category && c.in_module_category(),
        )?;
    }
    ffi::cmdinfo::set_command_info(ctx, policy::CONTAINER, Keys::None, &policy::CONTAINER_DOC)?;
    Ok(())
}

/// `INFO ratelimit`: `ratelimit_version:<major.minor.patch>`, then one line per counted command, in table order,
/// `ratelimit_<command>:calls=..,granted=..,denied=..,shadow_denied=..`, the command's name
/// with `_` for `.` (`ratelimit_rl_gcra`); then the named policies
/// (`ratelimit_policies:<count>`, `ratelimit_policies_checksum:<hex>`,
/// `ratelimit_policy_<name>_calls:<n>` and the other counters of `core::policy::STAT_NAMES`);
/// then `ratelimit_rl_acquire_wait:waiting=..,granted=..,timed_out=..,dropped=..,waited_us=..`
/// for `RL.ACQUIRE ... WAIT`.
#[redis_module_macros::info_command_handler]
fn info(ctx: &redis_module::InfoContext, _for_crash_report: bool) -> redis_module::RedisResult<()> {
    let mut section = ctx
        .builder()
        .add_section("stats")
        .field("version", env!("CARGO_PKG_VERSION"))?;
    for s in COMMANDS.iter().map(|c| &c.stats) {
        let Some(name) = s.name else { continue };
        let count = |c: &AtomicU64| i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        section = section
            .add_dictionary(name)
            .field("calls", count(&s.calls))?
            .field("granted", count(&s.granted))?
            .field("denied", count(&s.denied))?
            .field("shadow_denied", count(&s.shadow_denied))?
            .build_dictionary()?;
    }
    let count = |c: &AtomicU64| i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
    for (name, value) in policy_state::info_fields() {
        section = match value {
            policy_state::InfoValue::Int(v) => {
                section.field(&name, i64::try_from(v).unwrap_or(i64::MAX))?
            }
            policy_state::InfoValue::Text(t) => section.field(&name, t)?,
        };
    }
    section = section
        .add_dictionary("rl_acquire_wait")
        .field("waiting", count(&stats::WAIT_WAITING))?
        .field("granted", count(&stats::WAIT_GRANTED))?
        .field("timed_out", count(&stats::WAIT_TIMED_OUT))?
        .field("dropped", count(&stats::WAIT_DROPPED))?
        .field("waited_us", count(&stats::WAIT_WAITED_US))?
        .build_dictionary()?;
    section.build_section()?.build_info()?;
    Ok(())
}

/// RL.METRICS: the pairs of `metrics::pairs` over [`COMMANDS`], a flat array of bulk strings
/// under RESP2 and RESP3 alike (what an exporter's script returns as is).
pub struct Metrics;

impl Run for Metrics {
    /// # Errors
    /// Arity.
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        _bytes: &[&[u8]],
        _this: &'static Command,
    ) -> Result<(), RlError> {
        if argv.len() != 1 {
            return Err(RlError::Arity);
        }
        let pairs = metrics::pairs(&COMMANDS);
        ffi::reply::array(ctx, pairs.len().saturating_mul(2));
        for (name, value) in &pairs {
            ffi::reply::bulk(ctx, name.as_bytes());
            ffi::reply::bulk(ctx, value.as_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Kind;
    use crate::docs::{ArgType, SHARED_OPTIONS};

    /// One row per command: names unique and lower case, the algorithms' commands first, in
    /// registry order (so `INFO ratelimit` lists them first).
    #[test]
    fn the_table_holds_every_command_once() {
        let names: Vec<&str> = COMMANDS.iter().map(Command::name_str).collect();
        for (i, name) in names.iter().enumerate() {
            assert!(!name.is_empty());
            assert_eq!(*name, name.to_ascii_lowercase());
            assert!(!names[..i].contains(name), "{name} twice");
        }
        let algorithms: Vec<&str> = Kind::ALL.iter().map(|k| k.command()).collect();
        assert_eq!(names[..algorithms.len()], algorithms[..]);
        // The commands of today, at least: a row lost is seen here.
        for name in [
            "rl.streamcount",
            "rl.all",
            "cl.throttle",
            "rl.refund",
            "rl.block",
            "rl.unblock",
            "rl.check",
            "rl.release",
            "rl.info",
            "rl._restore",
            "rl._set",
            "rl.limit",
            "rl.policy|set",
            "rl.policy|get",
            "rl.policy|del",
            "rl.policy|list",
            "rl.policy|dump",
            "rl.policy|restore",
            "rl.policy|help",
            "rl.metrics",
        ] {
            assert!(names.contains(&name), "{name}");
        }
    }

    /// Each row's docs: a summary and a complexity, and an arity that its arguments give (the
    /// name — and a subcommand's name —, then each required argument, two for one with a token;
    /// negative when any argument is optional or repeats, or the shared options follow).
    #[test]
    fn every_command_has_docs_that_match_its_arity() {
        for c in &COMMANDS {
            let d = c.doc;
            let name = c.name_str();
            assert!(d.summary.to_bytes().len() > 10, "{name}");
            assert!(d.complexity.to_bytes().starts_with(b"O("), "{name}");
            let required: i32 = d
                .args
                .iter()
                .filter(|a| !a.optional)
                .map(|a| if a.token.is_some() { 2 } else { 1 })
                .sum();
            let open = d.shared_options || d.args.iter().any(|a| a.optional || a.multiple);
            let arity = 1 + i32::from(c.is_subcommand()) + required;
            assert_eq!(d.arity, if open { -arity } else { arity }, "{name}");
            // The key: the first argument, or after `numkeys` for a command with many; none
            // for a command without keys.
            let key_at = usize::from(matches!(c.keys, Keys::Numkeys | Keys::ReadNumkeys));
            if c.keys == Keys::None {
                assert!(d.args.iter().all(|a| a.kind != ArgType::Key), "{name}");
            } else {
                assert_eq!(
                    d.args.get(key_at).map(|a| a.kind),
                    Some(ArgType::Key),
                    "{name}"
                );
            }
            // A command's own options are not the shared ones as well.
            if d.shared_options {
                for a in d.args.iter().filter(|a| a.token.is_some()) {
                    assert!(
                        !SHARED_OPTIONS.iter().any(|s| s.token == a.token),
                        "{name}: {a:?}"
                    );
                }
            }
        }
    }

    /// Flags, key spec and ACL categories agree: a command that only reads is `readonly`, in
    /// `@read`, with a read-only key spec; a command that writes is `write`, in `@write` (or
    /// `@admin` for the internal ones); a `fast` one is in `@fast`; a command that finds its
    /// keys itself says `getkeys-api`.
    #[test]
    fn flags_key_specs_and_acl_categories_agree() {
        let has = |list: &CStr, word: &str| list.to_str().unwrap().split(' ').any(|w| w == word);
        for c in &COMMANDS {
            let name = c.name_str();
            let reads = match c.keys {
                Keys::Read | Keys::ReadNumkeys => true,
                Keys::None => has(c.flags, "readonly"),
                _ => false,
            };
            assert_eq!(has(c.flags, "readonly"), reads, "{name}");
            assert_eq!(has(c.flags, "write"), !reads, "{name}");
            assert_eq!(
                has(c.acl, "read"),
                reads && c.in_module_category(),
                "{name}"
            );
            assert_eq!(
                has(c.acl, "write"),
                !reads && c.in_module_category(),
                "{name}"
            );
            // RL.ALL is in @fast (as every limiter command) without the flag.
            assert!(!has(c.flags, "fast") || has(c.acl, "fast"), "{name}");
            assert_eq!(
                has(c.flags, "getkeys-api"),
                matches!(c.keys, Keys::Numkeys | Keys::ReadNumkeys),
                "{name}"
            );
            let range = match c.keys {
                Keys::Numkeys | Keys::ReadNumkeys | Keys::None => (0, 0, 0),
                // RL._SET key payload [key payload ...]
                Keys::OverwritePairs => (1, -1, 2),
                Keys::Update | Keys::Read | Keys::Overwrite => (1, 1, 1),
            };
            assert_eq!(c.key_range(), range, "{name}");
        }
    }

    /// SPEC "ACL": the internal commands that write raw state are `@admin @dangerous` and in no
    /// other category (not the module's); policy administration (RL.POLICY SET, DEL, DUMP,
    /// RESTORE) is `@admin` alone; every other command is in `@write` or `@read` and in the
    /// module's category, and none is `@admin` or `@dangerous`.
    #[test]
    fn only_the_internal_commands_are_admin_and_outside_the_module_category() {
        let mut internal = 0;
        let mut admin = Vec::new();
        for c in &COMMANDS {
            let name = c.name_str();
            let cats: Vec<&str> = c.acl.to_str().unwrap().split(' ').collect();
            if name.starts_with("rl._") {
                internal += 1;
                assert_eq!(cats, ["admin", "dangerous"], "{name}");
                assert!(!c.in_module_category(), "{name}");
            } else if cats.contains(&"admin") {
                assert_eq!(cats, ["admin"], "{name}");
                assert!(!c.in_module_category(), "{name}");
                admin.push(name);
            } else {
                assert!(
                    cats.iter().any(|c| *c == "write" || *c == "read"),
                    "{name}: {cats:?}"
                );
                assert!(
                    !cats.iter().any(|c| *c == "admin" || *c == "dangerous"),
                    "{name}: {cats:?}"
                );
                assert!(c.in_module_category(), "{name}");
            }
        }
        assert_eq!(internal, 2);
        assert_eq!(
            admin,
            [
                "rl.policy|set",
                "rl.policy|del",
                "rl.policy|dump",
                "rl.policy|restore"
            ]
        );
    }

    /// INFO counters: every command applications call to change or judge a limiter is counted,
    /// under its name with `_` for `.` (a valid Prometheus metric name); only RL.INFO,
    /// RL.METRICS, the internal commands and RL.POLICY's subcommands (counted per policy
    /// instead) are not.
    #[test]
    fn every_command_but_rl_info_and_the_internal_ones_is_counted() {
        for c in &COMMANDS {
            let name = c.name_str();
            let uncounted = name == "rl.info"
                || name == "rl.metrics"
                || name.starts_with("rl._")
                || name.starts_with("rl.policy|");
            match c.stats.name {
                None => assert!(uncounted, "{name} has no INFO counters"),
                Some(stat) => {
                    assert!(!uncounted, "{name}");
                    assert_eq!(stat, name.replace('.', "_"));
                    assert!(
                        stat.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'),
                        "{stat}"
                    );
                }
            }
        }
    }
}
