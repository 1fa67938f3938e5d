//! The process-wide cache of RL.STREAMCOUNT running totals ([`TallyCache`]), keyed by database
//! and key name, and the events that invalidate it.
//!
//! A tally is trusted only while the stream changed in ways [`Tally::current`] detects
//! (appends, head trims), and it is reconciled (the stream's length and last entry read) only
//! when an `xadd` or `xtrim` event of another writer reached the key since the tally was stored,
//! or the stream's length is not the tally's; otherwise it is taken as it is. Every other change
//! reaches here first:
//! - a keyspace event on the key that is not an append, a trim, an expiry setting or a consumer
//!   group change (del, unlink, expired, evicted, rename_from/rename_to, move_from/move_to,
//!   copy_to, restore, xdel, xsetid, `new` when a key of that name is created, ...) drops that
//!   key's tally;
//! - a flush, SWAPDB, the start and end of a load (RDB, AOF, DEBUG RELOAD, full sync, async
//!   load) and a replication role change drop every tally.
//!
//! Only the main thread runs commands and events; the lock is never held across a call into
//! the server.
//!
//! [`Tally`]: crate::core::stream_count::Tally
//! [`Tally::current`]: crate::core::stream_count::Tally::current

use std::sync::{Mutex, MutexGuard};

use crate::core::stream_count::{Cached, EventEffect, Tally, TallyCache, event_effect};

/// Keys whose tallies are kept; past it the least recently used half is dropped. At about
/// 300 bytes plus the key's name each (room for four windows' cuts), 100k tallies stay under
/// ~40 MB.
pub const MAX_TALLIES: usize = 100_000;

static CACHE: Mutex<Option<TallyCache>> = Mutex::new(None);

fn cache() -> MutexGuard<'static, Option<TallyCache>> {
    CACHE.lock().unwrap_or_else(|poisoned| {
        // A panic while holding the lock may have left it half-updated: start afresh.
        let mut guard = poisoned.into_inner();
        *guard = None;
        CACHE.clear_poison();
        guard
    })
}

/// Start a call on `key` of `db`: its tally, if known. End it with [`finish`].
pub fn begin(db: i32, key: &[u8]) -> Option<Cached> {
    cache()
        .get_or_insert_with(|| TallyCache::new(MAX_TALLIES))
        .begin(db, key)
}

/// End the call started by [`begin`]: keep `tally` (or drop the key's tally with `None`),
/// unless an event dropped the key meanwhile.
pub fn finish(db: i32, key: &[u8], tally: Option<Tally>) {
    if let Some(c) = cache().as_mut() {
        c.finish(db, key, tally);
    }
}

/// A keyspace event `event` on `key` of `db`.
pub fn on_key_event(db: i32, event: &[u8], key: &[u8]) {
    let effect = event_effect(event);
    if effect == EventEffect::Keep {
        return;
    }
    if let Some(c) = cache().as_mut() {
        match effect {
            EventEffect::Check => c.touched(db, key),
            _ => c.forget(db, key),
        }
    }
}

/// Run `fire`, which fires the running call's own `xadd` or `xtrim` event on its key: that
/// event does not count as another writer's.
pub fn own_event(fire: impl FnOnce()) {
    if let Some(c) = cache().as_mut() {
        c.expect_own_event();
    }
    fire();
    if let Some(c) = cache().as_mut() {
        c.own_event_done();
    }
}

/// A flush, swap, load or role change: drop every tally.
pub fn forget_all() {
    if let Some(c) = cache().as_mut() {
        c.clear();
    }
}
