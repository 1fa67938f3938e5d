//! Per-command counters shown by `INFO ratelimit`: monotonic from the module's load, as
//! Prometheus counters are (servers do not tell modules about `CONFIG RESETSTAT`, and the module
//! watches no other command to find out).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::core::Kind;

/// Counters of one command. Only the main thread writes them.
#[derive(Debug)]
pub struct CommandStats {
    /// The command as `INFO` names it: a valid Prometheus metric name (letters, digits,
    /// underscores), as exporters take module INFO fields as they are.
    pub name: &'static str,
    /// Calls that were evaluated (errors excluded): granted + denied.
    pub calls: AtomicU64,
    /// Calls that got what they asked for, in full or in part.
    pub granted: AtomicU64,
    /// Calls that asked for units and got none.
    pub denied: AtomicU64,
}

impl CommandStats {
    /// Zeroed counters for `name`.
    pub const fn new(name: &'static str) -> Self {
        CommandStats {
            name,
            calls: AtomicU64::new(0),
            granted: AtomicU64::new(0),
            denied: AtomicU64::new(0),
        }
    }

    /// Count one evaluated call.
    pub fn record(&self, granted: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if granted {
            self.granted.fetch_add(1, Ordering::Relaxed);
        } else {
            self.denied.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub static THROTTLE: CommandStats = CommandStats::new("cl_throttle");
pub static STREAMCOUNT: CommandStats = CommandStats::new("rl_streamcount");
pub static ALL_LIMITERS: CommandStats = CommandStats::new("rl_all");
/// RL.REFUND: granted = refunds that gave units back, denied = those that gave nothing.
pub static REFUND: CommandStats = CommandStats::new("rl_refund");
/// RL.BLOCK: every call is granted (a block is placed or kept).
pub static BLOCK: CommandStats = CommandStats::new("rl_block");
/// RL.UNBLOCK: granted = a block in force was removed, denied = none was.
pub static UNBLOCK: CommandStats = CommandStats::new("rl_unblock");
/// RL.CHECK: granted or denied as the checked call would be.
pub static CHECK: CommandStats = CommandStats::new("rl_check");
/// RL.RELEASE: granted = a lease was freed, denied = the id held nothing.
pub static RELEASE: CommandStats = CommandStats::new("rl_release");

macro_rules! define_stats {
    ([] $($variant:ident)*) => {
        /// The counters of each algorithm's command.
        #[allow(non_upper_case_globals)]
        mod per_algorithm {
            use super::{CommandStats, Kind};
            $(pub static $variant: CommandStats = CommandStats::new(Kind::$variant.stat_name());)*
        }

        /// The counters of algorithm `kind`'s command.
        pub fn of(kind: Kind) -> &'static CommandStats {
            match kind {
                $(Kind::$variant => &per_algorithm::$variant,)*
            }
        }

        /// Every command's counters, in INFO order: the algorithms' in registry order, then the
        /// others.
        pub static ALL: &[&CommandStats] = &[
            $(&per_algorithm::$variant,)*
            &STREAMCOUNT,
            &ALL_LIMITERS,
            &THROTTLE,
            &REFUND,
            &BLOCK,
            &UNBLOCK,
            &CHECK,
            &RELEASE,
        ];
    };
}

crate::core::kind::each!(define_stats);

/// `RL.ACQUIRE ... WAIT` calls waiting now.
pub static WAIT_WAITING: AtomicU64 = AtomicU64::new(0);
/// `RL.ACQUIRE ... WAIT` calls that waited and were then granted.
pub static WAIT_GRANTED: AtomicU64 = AtomicU64::new(0);
/// `RL.ACQUIRE ... WAIT` calls that waited until their timeout (denied).
pub static WAIT_TIMED_OUT: AtomicU64 = AtomicU64::new(0);
/// `RL.ACQUIRE ... WAIT` calls whose client disconnected while waiting.
pub static WAIT_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Set gauge `g` to `n`.
pub fn set(g: &AtomicU64, n: usize) {
    g.store(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// Count one more of `counter`.
pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// `INFO ratelimit`: one line per command, `ratelimit_<command>:calls=..,granted=..,denied=..`,
/// the command's name with `_` for `.` (`ratelimit_rl_gcra`); and `ratelimit_rl_acquire_wait:waiting=..,
/// granted=..,timed_out=..,dropped=..` for `RL.ACQUIRE ... WAIT`.
#[redis_module_macros::info_command_handler]
fn info(ctx: &redis_module::InfoContext, _for_crash_report: bool) -> redis_module::RedisResult<()> {
    let mut section = ctx.builder().add_section("stats");
    for s in ALL {
        let count = |c: &AtomicU64| i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        section = section
            .add_dictionary(s.name)
            .field("calls", count(&s.calls))?
            .field("granted", count(&s.granted))?
            .field("denied", count(&s.denied))?
            .build_dictionary()?;
    }
    let count = |c: &AtomicU64| i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
    section = section
        .add_dictionary("rl_acquire_wait")
        .field("waiting", count(&WAIT_WAITING))?
        .field("granted", count(&WAIT_GRANTED))?
        .field("timed_out", count(&WAIT_TIMED_OUT))?
        .field("dropped", count(&WAIT_DROPPED))?
        .build_dictionary()?;
    section.build_section()?.build_info()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prometheus_metric_names() {
        for s in ALL {
            let mut chars = s.name.chars();
            let first = chars.next().expect("a name");
            assert!(first.is_ascii_alphabetic() || first == '_', "{}", s.name);
            assert!(
                chars.all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn record_counts_calls_grants_and_denials() {
        let s = CommandStats::new("t");
        s.record(true);
        s.record(false);
        s.record(false);
        let got = [&s.calls, &s.granted, &s.denied].map(|c| c.load(Ordering::Relaxed));
        assert_eq!(got, [3, 1, 2]);
    }
}
