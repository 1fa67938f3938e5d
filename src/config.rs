//! Module configuration (`CONFIG SET ratelimit.<name>`, or arguments after `loadmodule`).

use std::sync::atomic::{AtomicI64, Ordering};

/// `ratelimit.dedup-max`: the most `DEDUP` ids one key remembers (the oldest is forgotten
/// first). Keep it equal on a master and its replicas: a replica applies the same rule.
pub static DEDUP_MAX: AtomicI64 = AtomicI64::new(DEDUP_MAX_DEFAULT);

/// Default of `ratelimit.dedup-max`.
pub const DEDUP_MAX_DEFAULT: i64 = 1000;

/// Largest accepted `ratelimit.dedup-max` (bounds a key's memory: 32 bytes an id).
pub const DEDUP_MAX_LIMIT: i64 = 1_000_000;

/// The current `ratelimit.dedup-max`.
pub fn dedup_max() -> usize {
    usize::try_from(DEDUP_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}

/// `ratelimit.at-max-ahead`: how far (ms) an `AT` may be ahead of the server's clock; `-1` for no
/// bound. A client may not move a key's clock ahead of the server's (one call would refill a
/// limiter and drag the key into the future). Commands replicated from a master or replayed from
/// the AOF are exempt: they carry the master's resolved time.
pub static AT_MAX_AHEAD: AtomicI64 = AtomicI64::new(AT_MAX_AHEAD_DEFAULT);

/// Default of `ratelimit.at-max-ahead`.
pub const AT_MAX_AHEAD_DEFAULT: i64 = 1000;

/// The current `ratelimit.at-max-ahead` in µs, `None` when unbounded (`-1`).
pub fn at_max_ahead_us() -> Option<u64> {
    let ms = u64::try_from(AT_MAX_AHEAD.load(Ordering::Relaxed)).ok()?;
    Some(ms.saturating_mul(1_000))
}

/// `ratelimit.at-max-behind`: how far (ms) an `AT` may be behind the server's clock; `-1` for no
/// bound. Old times never grant extra, even across a key's expiry: a key written by a call behind
/// the server's clock is kept at least until the server's clock plus this bound, so the next old
/// `AT` finds it rather than a fresh limiter. Commands replicated from a master or replayed from
/// the AOF are exempt: they carry the master's resolved time, and its resolved expiry follows.
pub static AT_MAX_BEHIND: AtomicI64 = AtomicI64::new(AT_MAX_BEHIND_DEFAULT);

/// Default of `ratelimit.at-max-behind`.
pub const AT_MAX_BEHIND_DEFAULT: i64 = 60_000;

/// Largest accepted `ratelimit.at-max-behind`: its µs, added to the server's clock for a key's
/// expiry, fit in 64 bits exactly (about 292,000 years).
pub const AT_MAX_BEHIND_LIMIT: i64 = i64::MAX / 1000;

/// The current `ratelimit.at-max-behind` in µs, `None` when unbounded (`-1`).
pub fn at_max_behind_us() -> Option<u64> {
    let ms = u64::try_from(AT_MAX_BEHIND.load(Ordering::Relaxed)).ok()?;
    Some(ms.saturating_mul(1_000))
}

/// `ratelimit.max-wait`: the longest `WAIT timeout` of RL.ACQUIRE, in ms (a longer one is an
/// error).
pub static MAX_WAIT: AtomicI64 = AtomicI64::new(MAX_WAIT_DEFAULT);

/// Default of `ratelimit.max-wait`: one minute.
pub const MAX_WAIT_DEFAULT: i64 = 60_000;

/// Largest accepted `ratelimit.max-wait`: a day.
pub const MAX_WAIT_LIMIT: i64 = 86_400_000;

/// The current `ratelimit.max-wait` in µs.
pub fn max_wait_us() -> u64 {
    u64::try_from(MAX_WAIT.load(Ordering::Relaxed))
        .unwrap_or(0)
        .saturating_mul(1_000)
}

/// `ratelimit.max-policies`: the most named policies (`RL.POLICY SET`) the server holds; a `SET`
/// of a new name beyond it is an error (replacing an existing one is not).
pub static MAX_POLICIES: AtomicI64 = AtomicI64::new(MAX_POLICIES_DEFAULT);

/// Default of `ratelimit.max-policies`.
pub const MAX_POLICIES_DEFAULT: i64 = 10_000;

/// Largest accepted `ratelimit.max-policies`.
pub const MAX_POLICIES_LIMIT: i64 = crate::core::policy::MAX_POLICIES_LIMIT as i64;

/// The current `ratelimit.max-policies`.
pub fn max_policies() -> usize {
    usize::try_from(MAX_POLICIES.load(Ordering::Relaxed)).unwrap_or(0)
}

/// `ratelimit.near-limit-percent`: a granted call counts as near its limit (`near_limit` in
/// `INFO ratelimit` and RL.METRICS) when it leaves `remaining` below this percentage of `limit`.
pub static NEAR_LIMIT_PERCENT: AtomicI64 = AtomicI64::new(NEAR_LIMIT_PERCENT_DEFAULT);

/// Default of `ratelimit.near-limit-percent`: 20, near-limit at 80% used (as Envoy's ratelimit
/// service counts it).
pub const NEAR_LIMIT_PERCENT_DEFAULT: i64 = 20;

/// The current `ratelimit.near-limit-percent` (0 to 100).
#[inline(always)]
pub fn near_limit_percent() -> u64 {
    u64::try_from(NEAR_LIMIT_PERCENT.load(Ordering::Relaxed)).unwrap_or(0)
}
