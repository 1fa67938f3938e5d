//! RL.METRICS: every counter of `INFO ratelimit` as flat name/value pairs, for
//! redis_exporter's `--script` option (`monitoring/redis-ratelimit.lua` returns this reply).
//! The exporter exports each pair as `redis_script_values{key="<name>"} <value>`; each name is
//! written as the series it stands for (`ratelimit_policy_denied_total{policy="free"}`), so a
//! Prometheus relabelling (`monitoring/prometheus/scrape.yml`) turns it into that series.
//!
//! Bounded: one series per counter of each command and of each named policy (at most
//! `ratelimit.max-policies`), never per key.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::commands::policy::state as policy_state;
use crate::commands::row::Command;
use crate::config;
use crate::core::policy;
use crate::docs::CommandDoc;
use crate::stats;

/// RL.METRICS's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: 1,
    summary: c"The module's counters as flat name/value pairs, for a Prometheus exporter",
    complexity: c"O(C + P) where C is the number of commands and P the number of named policies",
    args: &[],
    shared_options: false,
};

/// A counter's value.
fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// The pairs of RL.METRICS, in order: `ratelimit_near_limit_percent`; each counted command
/// of `commands` (`ratelimit_command_<counter>_total{command="rl.gcra"}`, for each of
/// `stats::STAT_NAMES`); `ratelimit_policies`, then each named policy
/// (`ratelimit_policy_<counter>_total{policy="<name>"}`, `core::policy::STAT_NAMES`); then
/// `RL.ACQUIRE ... WAIT`: `ratelimit_wait_waiting` (now), `ratelimit_wait_granted_total`,
/// `ratelimit_wait_timed_out_total`, `ratelimit_wait_dropped_total` and
/// `ratelimit_wait_waited_seconds_total` (time waited by the waits that ended granted or timed
/// out). Every value is a decimal number.
pub fn pairs<'a>(commands: impl IntoIterator<Item = &'a Command>) -> Vec<(String, String)> {
    let mut out = vec![(
        "ratelimit_near_limit_percent".to_string(),
        config::near_limit_percent().to_string(),
    )];
    for c in commands {
        if c.stats.name.is_none() {
            continue;
        }
        let command = c.name_str();
        for (counter, v) in stats::STAT_NAMES.iter().zip(c.stats.values()) {
            out.push((
                format!("ratelimit_command_{counter}_total{{command=\"{command}\"}}"),
                v.to_string(),
            ));
        }
    }
    if let Some(store) = policy_state::try_store() {
        out.push(("ratelimit_policies".to_string(), store.len().to_string()));
        for p in store.iter() {
            // A policy name is `[a-z0-9_]+` (`core::policy::valid_name`): a label value as is.
            let name = String::from_utf8_lossy(&p.name);
            for (counter, v) in policy::STAT_NAMES.iter().zip(p.stats.values()) {
                out.push((
                    format!("ratelimit_policy_{counter}_total{{policy=\"{name}\"}}"),
                    v.to_string(),
                ));
            }
        }
    }
    let waited = load(&stats::WAIT_WAITED_US);
    out.extend(
        [
            (
                "ratelimit_wait_waiting",
                load(&stats::WAIT_WAITING).to_string(),
            ),
            (
                "ratelimit_wait_granted_total",
                load(&stats::WAIT_GRANTED).to_string(),
            ),
            (
                "ratelimit_wait_timed_out_total",
                load(&stats::WAIT_TIMED_OUT).to_string(),
            ),
            (
                "ratelimit_wait_dropped_total",
                load(&stats::WAIT_DROPPED).to_string(),
            ),
            (
                "ratelimit_wait_waited_seconds_total",
                format!("{}.{:06}", waited / 1_000_000, waited % 1_000_000),
            ),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    out
}
