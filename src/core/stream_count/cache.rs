//! A bounded store of running totals, one [`Tally`] per stream key (the process keeps one in
//! `tally_cache`), and what a keyspace event does to it.

use std::collections::HashMap;

use super::tally::{Cached, Tally};

/// One key's entry in the cache.
#[derive(Debug, Clone, Copy)]
struct Slot {
    tally: Tally,
    /// When it was last used, for the eviction.
    tick: u64,
    quiet: bool,
}

/// The most recently used key, kept out of the map: a hot key's calls find it with one
/// comparison of its name, no hash, and its name is not copied again.
#[derive(Debug, Default)]
struct Recent {
    db: i32,
    key: Vec<u8>,
    slot: Option<Slot>,
}

impl Recent {
    fn is(&self, db: i32, key: &[u8]) -> bool {
        self.db == db && self.key == key
    }
}

/// What a keyspace event does to the tally of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventEffect {
    /// Nothing: the entries did not change (expiry settings, consumer groups).
    Keep,
    /// Entries appended or trimmed from the head (`xadd`, `xtrim`): the tally stays, to be
    /// reconciled with the stream's length and last entry by the next call.
    Check,
    /// Anything else (del, expired, evicted, rename, move, copy, restore, xdel, xsetid, new,
    /// ...): the tally is dropped.
    Forget,
}

/// Tallies of many keys, per database, with bounded memory: past `cap` keys the least
/// recently used half is dropped (a dropped tally is rebuilt by its next call).
///
/// A call takes the key's tally with [`TallyCache::begin`] and gives the result back with
/// [`TallyCache::finish`]; a [`TallyCache::forget`] of that key in between (a keyspace event
/// fired while the call ran) makes `finish` drop the result instead of storing it, and a
/// [`TallyCache::touched`] makes it store the result as not quiet.
#[derive(Debug, Default)]
pub struct TallyCache {
    /// Every key but the most recent one.
    dbs: HashMap<i32, HashMap<Vec<u8>, Slot>>,
    /// Keys in `dbs`.
    entries: usize,
    recent: Recent,
    cap: usize,
    tick: u64,
    /// A call on `recent` runs.
    open: bool,
    /// Its key was not forgotten meanwhile.
    open_valid: bool,
    /// No other writer's append or trim reached its key meanwhile.
    open_quiet: bool,
    /// The next `xadd`/`xtrim` event is the running call's own.
    own_pending: bool,
}

impl TallyCache {
    /// An empty cache holding at most `cap` keys (at least 2).
    pub fn new(cap: usize) -> Self {
        TallyCache {
            cap: cap.max(2),
            ..TallyCache::default()
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.entries
            .saturating_add(usize::from(self.recent.slot.is_some()))
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Start a call on `key` of `db`: its tally, if known.
    pub fn begin(&mut self, db: i32, key: &[u8]) -> Option<Cached> {
        self.tick = self.tick.wrapping_add(1);
        if !self.recent.is(db, key) {
            // The previous recent key goes back to the map; this one comes out of it.
            let taken =
                self.dbs
                    .get_mut(&db)
                    .and_then(|m| m.remove_entry(key))
                    .map(|(name, slot)| {
                        self.entries = self.entries.saturating_sub(1);
                        (name, slot)
                    });
            if taken.is_some() && self.dbs.get(&db).is_some_and(HashMap::is_empty) {
                self.dbs.remove(&db);
            }
            let mut old = std::mem::take(&mut self.recent);
            self.recent = match taken {
                Some((name, slot)) => Recent {
                    db,
                    key: name,
                    slot: Some(slot),
                },
                None if old.slot.is_none() => {
                    // Reuse the old name's buffer.
                    let mut name = std::mem::take(&mut old.key);
                    name.clear();
                    name.extend_from_slice(key);
                    Recent {
                        db,
                        key: name,
                        slot: None,
                    }
                }
                None => Recent {
                    db,
                    key: key.to_vec(),
                    slot: None,
                },
            };
            if let Some(slot) = old.slot {
                self.keep(old.db, old.key, slot);
            }
        }
        self.open = true;
        self.open_valid = true;
        self.open_quiet = true;
        let tick = self.tick;
        let slot = self.recent.slot.as_mut()?;
        slot.tick = tick;
        Some(Cached {
            tally: slot.tally,
            quiet: slot.quiet,
        })
    }

    /// End the call started by [`TallyCache::begin`]: store `tally` (or drop the key's tally
    /// with `None`), unless the key was forgotten meanwhile.
    pub fn finish(&mut self, db: i32, key: &[u8], tally: Option<Tally>) {
        let same = self.open && self.recent.is(db, key);
        let valid = same && self.open_valid;
        self.open = false;
        self.own_pending = false;
        match tally {
            Some(tally) if valid => {
                self.recent.slot = Some(Slot {
                    tally,
                    tick: self.tick,
                    quiet: self.open_quiet,
                });
            }
            _ if same => self.recent.slot = None,
            _ => self.remove(db, key),
        }
    }

    /// Put a key that is no longer the most recent into the map.
    fn keep(&mut self, db: i32, key: Vec<u8>, slot: Slot) {
        // The map holds at most `cap - 1` keys, the recent one the last.
        if self.entries.saturating_add(1) >= self.cap {
            self.evict_older_half();
        }
        if self.dbs.entry(db).or_default().insert(key, slot).is_none() {
            self.entries = self.entries.saturating_add(1);
        }
    }

    fn remove(&mut self, db: i32, key: &[u8]) {
        let Some(m) = self.dbs.get_mut(&db) else {
            return;
        };
        if m.remove(key).is_some() {
            self.entries = self.entries.saturating_sub(1);
            if m.is_empty() {
                self.dbs.remove(&db);
            }
        }
    }

    fn evict_older_half(&mut self) {
        let mut ticks: Vec<u64> = self
            .dbs
            .values()
            .flat_map(|m| m.values().map(|s| s.tick))
            .collect();
        if ticks.is_empty() {
            return;
        }
        let mid = ticks.len() / 2;
        let median = *ticks.select_nth_unstable(mid).1;
        for m in self.dbs.values_mut() {
            m.retain(|_, s| s.tick > median);
        }
        self.dbs.retain(|_, m| !m.is_empty());
        self.entries = self.dbs.values().map(HashMap::len).sum();
    }

    /// Drop the tally of `key` in `db` (a keyspace event changed the key).
    pub fn forget(&mut self, db: i32, key: &[u8]) {
        if self.recent.is(db, key) {
            self.recent.slot = None;
            if self.open {
                self.open_valid = false;
            }
        } else {
            self.remove(db, key);
        }
    }

    /// The next `xadd` or `xtrim` event is the running call's own (it is about to fire it):
    /// [`TallyCache::touched`] lets it pass once.
    pub fn expect_own_event(&mut self) {
        self.own_pending = true;
    }

    /// The running call's own event has been fired.
    pub fn own_event_done(&mut self) {
        self.own_pending = false;
    }

    /// Entries of `key` in `db` were appended or trimmed (an `xadd` or `xtrim` event): unless it
    /// is the running call's own event, the key's tally is no longer quiet.
    pub fn touched(&mut self, db: i32, key: &[u8]) {
        if self.recent.is(db, key) {
            if self.open && std::mem::take(&mut self.own_pending) {
                // Another writer's event on this key fired first (from inside ours) is taken
                // for ours, and ours then counts as another writer's: either way the tally is
                // checked next time.
                return;
            }
            if let Some(slot) = self.recent.slot.as_mut() {
                slot.quiet = false;
            }
            if self.open {
                self.open_quiet = false;
            }
        } else if let Some(slot) = self.dbs.get_mut(&db).and_then(|m| m.get_mut(key)) {
            slot.quiet = false;
        }
    }

    /// Drop every tally (flush, swap, load, role change).
    pub fn clear(&mut self) {
        self.open_valid = false;
        self.recent.slot = None;
        self.dbs.clear();
        self.entries = 0;
    }
}

/// What a keyspace event on a stream key does to its tally: appends and head trims are found
/// by [`Tally::current`]; expiry settings and consumer groups do not touch the entries; every
/// other event (del, expired, evicted, rename, move, copy, restore, xdel, xsetid, new, ...)
/// drops the tally.
pub fn event_effect(event: &[u8]) -> EventEffect {
    match event {
        b"xadd" | b"xtrim" => EventEffect::Check,
        b"expire" | b"persist" => EventEffect::Keep,
        _ if event.starts_with(b"xgroup-") => EventEffect::Keep,
        _ => EventEffect::Forget,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cache_is_bounded_and_honours_forget_during_a_call() {
        let t = Tally::empty(0, None);
        let tally = |c: Option<Cached>| c.map(|c| c.tally);
        let mut c = TallyCache::new(4);
        for k in 0..4u8 {
            assert_eq!(c.begin(0, &[k]), None);
            c.finish(0, &[k], Some(t));
        }
        assert_eq!(c.len(), 4);
        // Key 0 is used again, so the eviction keeps it.
        assert_eq!(tally(c.begin(0, &[0])), Some(t));
        c.finish(0, &[0], Some(t));
        assert_eq!(c.begin(0, &[9]), None);
        c.finish(0, &[9], Some(t));
        assert!(c.len() <= 4, "{}", c.len());
        assert_eq!(tally(c.begin(0, &[0])), Some(t));
        c.finish(0, &[0], Some(t));
        // The same name in another database is another key.
        assert_eq!(c.begin(1, &[0]), None);
        c.finish(1, &[0], None);
        // Forgotten while a call runs: the call's result is dropped.
        assert_eq!(tally(c.begin(0, &[0])), Some(t));
        c.forget(0, &[0]);
        c.finish(0, &[0], Some(t));
        assert_eq!(c.begin(0, &[0]), None);
        c.finish(0, &[0], Some(t));
        // Forgetting another key does not.
        c.begin(0, &[0]);
        c.forget(0, &[1]);
        c.finish(0, &[0], Some(t));
        assert_eq!(tally(c.begin(0, &[0])), Some(t));
        c.clear();
        c.finish(0, &[0], Some(t));
        assert!(c.is_empty());
    }

    #[test]
    fn other_writers_appends_make_a_tally_not_quiet() {
        let t = Tally::empty(0, None);
        let quiet = Some(Cached {
            tally: t,
            quiet: true,
        });
        let loud = Some(Cached {
            tally: t,
            quiet: false,
        });
        let mut c = TallyCache::new(8);
        for k in 0..3u8 {
            c.begin(0, &[k]);
            c.finish(0, &[k], Some(t));
        }
        // Between calls, on the recent key (2) and on one in the map (0).
        c.touched(0, &[2]);
        c.touched(0, &[0]);
        assert_eq!(c.begin(0, &[1]), quiet);
        c.finish(0, &[1], Some(t));
        assert_eq!(c.begin(0, &[2]), loud);
        // A call's own event passes once; the next one is another writer's.
        c.expect_own_event();
        c.touched(0, &[2]);
        c.own_event_done();
        c.finish(0, &[2], Some(t));
        assert_eq!(c.begin(0, &[2]), quiet);
        c.expect_own_event();
        c.touched(0, &[2]);
        c.touched(0, &[2]);
        c.own_event_done();
        c.finish(0, &[2], Some(t));
        assert_eq!(c.begin(0, &[2]), loud);
        c.finish(0, &[2], Some(t));
        // Another key's event while the call's own is expected does not use it up, and counts.
        c.begin(0, &[2]);
        c.expect_own_event();
        c.touched(0, &[1]);
        c.touched(0, &[2]);
        c.own_event_done();
        c.finish(0, &[2], Some(t));
        assert_eq!(c.begin(0, &[1]), loud);
        c.finish(0, &[1], Some(t));
        assert_eq!(c.begin(0, &[2]), quiet);
        c.finish(0, &[2], Some(t));
        // Stored again by a call with no event: quiet.
        assert_eq!(c.begin(0, &[0]), loud);
        c.finish(0, &[0], Some(t));
        assert_eq!(c.begin(0, &[0]), quiet);
        c.finish(0, &[0], None);
        assert_eq!(c.begin(0, &[0]), None);
    }

    #[test]
    fn events_and_their_effect() {
        for (e, want) in [
            ("xadd", EventEffect::Check),
            ("xtrim", EventEffect::Check),
            ("expire", EventEffect::Keep),
            ("persist", EventEffect::Keep),
            ("xgroup-create", EventEffect::Keep),
            ("del", EventEffect::Forget),
            ("xdel", EventEffect::Forget),
            ("xsetid", EventEffect::Forget),
            ("new", EventEffect::Forget),
            ("rename_to", EventEffect::Forget),
            ("restore", EventEffect::Forget),
            ("expired", EventEffect::Forget),
            ("evicted", EventEffect::Forget),
        ] {
            assert_eq!(event_effect(e.as_bytes()), want, "{e}");
        }
    }

    /// What happens to the cache.
    #[derive(Debug, Clone)]
    enum CacheOp {
        /// A call on key `k` of database `db` that stores a tally of sum `sum` (or drops it),
        /// with another writer's event on key `other` from inside its own event when given.
        Call {
            db: i32,
            k: u8,
            sum: Option<u64>,
            other: Option<u8>,
        },
        Touched {
            db: i32,
            k: u8,
        },
        Forget {
            db: i32,
            k: u8,
        },
        Clear,
    }

    fn cache_op() -> impl Strategy<Value = CacheOp> {
        prop_oneof![
            6 => (0i32..2, 0u8..6, proptest::option::of(0u64..100), proptest::option::weighted(0.2, 0u8..6))
                .prop_map(|(db, k, sum, other)| CacheOp::Call { db, k, sum, other }),
            2 => (0i32..2, 0u8..6).prop_map(|(db, k)| CacheOp::Touched { db, k }),
            1 => (0i32..2, 0u8..6).prop_map(|(db, k)| CacheOp::Forget { db, k }),
            1 => Just(CacheOp::Clear),
        ]
    }

    proptest! {
        /// Against a map of every key's last stored tally: the cache may have dropped a key
        /// (bounded size), but never hands out another tally, nor a quiet one that is not.
        #[test]
        fn cache_never_hands_out_a_wrong_tally(ops in proptest::collection::vec(cache_op(), 1..200)) {
            let mut c = TallyCache::new(4);
            let mut model: HashMap<(i32, u8), Cached> = HashMap::new();
            let tally = |sum| Tally::empty(sum, None);
            for op in ops {
                match op {
                    CacheOp::Call { db, k, sum, other } => {
                        let got = c.begin(db, &[k]);
                        if let Some(got) = got {
                            let want = model.get(&(db, k)).copied();
                            prop_assert_eq!(Some(got.tally), want.map(|w| w.tally));
                            prop_assert!(!got.quiet || want.is_some_and(|w| w.quiet));
                        }
                        let mut quiet = true;
                        if let Some(o) = other {
                            c.expect_own_event();
                            c.touched(db, &[o]);
                            c.touched(db, &[k]);
                            c.own_event_done();
                            if o == k {
                                quiet = false;
                            } else if let Some(m) = model.get_mut(&(db, o)) {
                                m.quiet = false;
                            }
                        }
                        c.finish(db, &[k], sum.map(tally));
                        match sum {
                            Some(s) => { model.insert((db, k), Cached { tally: tally(s), quiet }); }
                            None => { model.remove(&(db, k)); }
                        }
                    }
                    CacheOp::Touched { db, k } => {
                        c.touched(db, &[k]);
                        if let Some(m) = model.get_mut(&(db, k)) {
                            m.quiet = false;
                        }
                    }
                    CacheOp::Forget { db, k } => {
                        c.forget(db, &[k]);
                        model.remove(&(db, k));
                    }
                    CacheOp::Clear => {
                        c.clear();
                        model.clear();
                    }
                }
                prop_assert!(c.len() <= 4, "{}", c.len());
            }
        }
    }
}
