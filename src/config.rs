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
