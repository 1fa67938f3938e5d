//! The pure part of RL.STREAMCOUNT: window arithmetic, the decision and the next entry ID.
//!
//! RL.STREAMCOUNT keeps the layout of the classic Lua stream counter: a real Redis stream whose
//! entries carry one field, `count`. The window's total is the sum of `count` over entries whose
//! ID time is at least `now − window` (in ms, like stream IDs). Reading and writing the stream is
//! I/O, done by the command layer; this file decides.
//!
//! **The running total.** Summing the window on every call costs O(entries). Instead a
//! [`Tally`] remembers, per stream key, the stream's length and last entry ID as last seen, a
//! cut (the window start of the last call) and the sum of `count` over the entries at or after
//! the cut. A call reconciles the tally with what the stream holds now:
//! - same length and last ID: nothing changed (the key's other changes are reported by keyspace
//!   events, which drop the tally; see `tally_cache`);
//! - a later last ID: entries were appended after the old last ID (XADD never adds an ID at or
//!   below the stream's last ID); they are read, and the length tells how many old entries were
//!   trimmed away from the head. Trims remove the oldest entries first, so if no more were
//!   removed than there were entries below the cut, the sum is unchanged; otherwise the tally
//!   is rebuilt;
//! - anything else: rebuilt by reading the window.
//!
//! Reading the last entry ID costs a stream iterator, so it is skipped while the tally is
//! *quiet*: no `xadd` or `xtrim` keyspace event of another writer reached the key since the
//! tally was stored (the call's own events do not count, see [`TallyCache::touched`]). A quiet
//! tally whose length is the stream's is taken as it is.
//!
//! Then the cut slides to the new window start, reading only the entries between the old and
//! the new cut (each entry leaves the window once): amortized O(1) per call.

use std::collections::HashMap;

use crate::core::decimal::{U64_DIGITS, write_u64_before};
use crate::core::time::{Micros, US_PER_MS};

/// What to do with a call, given the window's current total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Over the limit: append nothing, reply -1.
    Deny,
    /// `ADD 0`: a query; write nothing, reply the total.
    Report(u64),
    /// Append an entry of `add` and reply the new total.
    Append(u64),
}

/// The first ID time (ms) inside the window at `now`: entries at or after it count.
pub fn window_start_ms(now: Micros, window: Micros) -> u64 {
    (now / US_PER_MS).saturating_sub(window / US_PER_MS)
}

/// Decide a call adding `add` to a window holding `total`, under an optional `limit`.
/// `None` when the new total would not fit in 64 bits.
pub fn plan(total: u64, add: u64, limit: Option<u64>) -> Option<Plan> {
    let after = total.checked_add(add)?;
    Some(match limit {
        Some(l) if after > l => Plan::Deny,
        _ if add == 0 => Plan::Report(total),
        _ => Plan::Append(after),
    })
}

/// The ID of the entry to append at `now`: the evaluation time in ms, never below the last ID.
/// `None` when the last ID is already the largest possible.
pub fn next_id(now: Micros, last: Option<(u64, u64)>) -> Option<(u64, u64)> {
    let ms = now / US_PER_MS;
    match last {
        Some((last_ms, seq)) if last_ms >= ms => match seq.checked_add(1) {
            Some(seq) => Some((last_ms, seq)),
            None => last_ms.checked_add(1).map(|ms| (ms, 0)),
        },
        _ => Some((ms, 0)),
    }
}

/// A stream entry ID: milliseconds and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// Room for any ID rendered by [`StreamId::format_into`]: two `u64` and the dash.
pub const ID_BUF: usize = 2 * U64_DIGITS + 1;

impl StreamId {
    /// The smallest ID.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };

    /// The ID as Redis writes it, `<ms>-<seq>`, into `buf` without allocating.
    pub fn format_into(self, buf: &mut [u8; ID_BUF]) -> &[u8] {
        let seq_start = write_u64_before(self.seq, buf, ID_BUF);
        let dash = seq_start.saturating_sub(1);
        if let Some(slot) = buf.get_mut(dash) {
            *slot = b'-';
        }
        let start = write_u64_before(self.ms, buf, dash);
        buf.get(start..).unwrap_or_default()
    }

    /// The first ID of millisecond `ms`.
    pub const fn at_ms(ms: u64) -> Self {
        StreamId { ms, seq: 0 }
    }

    /// The next ID, `None` after the largest.
    pub fn next(self) -> Option<Self> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId {
                ms: self.ms.checked_add(1)?,
                seq: 0,
            }),
        }
    }

    /// The previous ID, `None` before the smallest.
    pub fn prev(self) -> Option<Self> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId {
                ms: self.ms.checked_sub(1)?,
                seq: u64::MAX,
            }),
        }
    }
}

/// An inclusive range of IDs to read, `[from, to]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub from: StreamId,
    pub to: StreamId,
}

/// The running total of one stream key (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Entries in the stream.
    pub len: u64,
    /// Its last entry, `None` when it has none.
    pub last: Option<StreamId>,
    /// Entries at or after the cut are summed.
    pub cut: StreamId,
    /// The sum of `count` over the entries at or after the cut.
    pub sum: u64,
    /// How many entries lie before the cut.
    pub below: u64,
}

/// How to bring a tally up to date with a stream of `len` entries ending at `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconcile {
    /// Unchanged.
    Same,
    /// Only trimmed at the head: apply [`Tally::head_trimmed`].
    HeadTrimmed,
    /// Entries appended after the old last ID: read `below` (count only) and `window` (sum),
    /// either may be `None` when empty, then apply [`Tally::appended`].
    Appended {
        below: Option<IdRange>,
        window: Option<IdRange>,
    },
    /// Read the window from scratch.
    Rebuild,
}

/// How the cut moves to a new window start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slide {
    /// It does not move (or no entry lies between the two cuts).
    Stay,
    /// Forward: the entries in the range leave the window.
    Leave(IdRange),
    /// Backward: the entries in the range enter the window.
    Enter(IdRange),
}

impl Tally {
    /// A tally built by reading the window `[cut, ..]` of a stream of `len` entries ending at
    /// `last`: `n` entries summing to `sum`. `None` if `n > len` (the reads disagree).
    pub fn rebuilt(
        len: u64,
        last: Option<StreamId>,
        cut: StreamId,
        n: u64,
        sum: u64,
    ) -> Option<Self> {
        Some(Tally {
            len,
            last,
            cut,
            sum,
            below: len.checked_sub(n)?,
        })
    }

    /// What to read to bring this tally up to a stream of `len` entries ending at `last`.
    pub fn reconcile(&self, len: u64, last: Option<StreamId>) -> Reconcile {
        if last == self.last {
            return match len.cmp(&self.len) {
                std::cmp::Ordering::Equal => Reconcile::Same,
                // Fewer entries, same last one: only oldest entries went.
                std::cmp::Ordering::Less if last.is_some() => Reconcile::HeadTrimmed,
                _ => Reconcile::Rebuild,
            };
        }
        let Some(new_last) = last else {
            return Reconcile::Rebuild;
        };
        let first_new = match self.last {
            None => Some(StreamId::MIN),
            Some(old) if old < new_last => old.next(),
            Some(_) => None,
        };
        let Some(first_new) = first_new else {
            return Reconcile::Rebuild;
        };
        let below = (first_new < self.cut)
            .then(|| self.cut.prev())
            .flatten()
            .map(|end| IdRange {
                from: first_new,
                to: end.min(new_last),
            });
        let start = first_new.max(self.cut);
        let window = (start <= new_last).then_some(IdRange {
            from: start,
            to: new_last,
        });
        Reconcile::Appended { below, window }
    }

    /// The tally after the head of the stream was trimmed to `len` entries. `None` (rebuild)
    /// when entries at or after the cut may have gone.
    pub fn head_trimmed(self, len: u64) -> Option<Self> {
        let removed = self.len.checked_sub(len)?;
        Some(Tally {
            len,
            below: self.below.checked_sub(removed)?,
            ..self
        })
    }

    /// The tally after entries were appended (`below_n` before the cut, `window_n` summing to
    /// `window_sum` at or after it) and the stream now has `len` entries ending at `last`.
    /// The difference in length is entries trimmed from the head; `None` (rebuild) when more
    /// went than lay before the cut, or when the figures disagree.
    pub fn appended(
        self,
        len: u64,
        last: StreamId,
        below_n: u64,
        window_n: u64,
        window_sum: u64,
    ) -> Option<Self> {
        let old_left = len.checked_sub(below_n.checked_add(window_n)?)?;
        let removed = self.len.checked_sub(old_left)?;
        Some(Tally {
            len,
            last: Some(last),
            cut: self.cut,
            sum: self.sum.checked_add(window_sum)?,
            below: self.below.checked_sub(removed)?.checked_add(below_n)?,
        })
    }

    /// What to read to move the cut to `cut`.
    pub fn slide(&self, cut: StreamId) -> Slide {
        let Some(last) = self.last else {
            return Slide::Stay;
        };
        if cut > self.cut {
            match cut.prev() {
                Some(end) if self.cut <= last => Slide::Leave(IdRange {
                    from: self.cut,
                    to: end.min(last),
                }),
                _ => Slide::Stay,
            }
        } else if cut < self.cut {
            match self.cut.prev() {
                Some(end) if cut <= last => Slide::Enter(IdRange {
                    from: cut,
                    to: end.min(last),
                }),
                _ => Slide::Stay,
            }
        } else {
            Slide::Stay
        }
    }

    /// The tally with its cut at `cut`, after reading the [`Slide`] range: `n` entries summing
    /// to `sum` (both 0 for [`Slide::Stay`]). `None` (rebuild) when the figures disagree.
    pub fn slid(self, cut: StreamId, n: u64, sum: u64) -> Option<Self> {
        let (below, total) = if cut > self.cut {
            (self.below.checked_add(n)?, self.sum.checked_sub(sum)?)
        } else if cut < self.cut {
            (self.below.checked_sub(n)?, self.sum.checked_add(sum)?)
        } else {
            (self.below, self.sum)
        };
        Some(Tally {
            cut,
            below,
            sum: total,
            ..self
        })
    }

    /// The tally after this module appended an entry `id` of `count`.
    pub fn added(self, id: StreamId, count: u64) -> Option<Self> {
        let in_window = id >= self.cut;
        Some(Tally {
            len: self.len.checked_add(1)?,
            last: Some(id),
            sum: if in_window {
                self.sum.checked_add(count)?
            } else {
                self.sum
            },
            below: if in_window {
                self.below
            } else {
                self.below.checked_add(1)?
            },
            cut: self.cut,
        })
    }

    /// The tally after this module trimmed `removed` entries below the cut (`MINID` = cut).
    pub fn trimmed(self, removed: u64) -> Option<Self> {
        Some(Tally {
            len: self.len.checked_sub(removed)?,
            below: self.below.checked_sub(removed)?,
            ..self
        })
    }
}

/// A cached tally, as [`TallyCache::begin`] hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cached {
    pub tally: Tally,
    /// No other writer appended to or trimmed the stream since the tally was stored (no `xadd`
    /// or `xtrim` event but our own): the stream's length alone confirms it.
    pub quiet: bool,
}

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
/// by [`Tally::reconcile`]; expiry settings and consumer groups do not touch the entries; every
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

    /// A stream as the tests model it: entries (ID, count), sorted.
    type Model = Vec<(StreamId, u64)>;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    fn read(m: &Model, r: IdRange) -> (u64, u64) {
        m.iter()
            .filter(|(i, _)| r.from <= *i && *i <= r.to)
            .fold((0, 0), |(n, s), (_, c)| (n + 1, s + c))
    }

    fn window_sum(m: &Model, cut: StreamId) -> u64 {
        m.iter().filter(|(i, _)| *i >= cut).map(|(_, c)| c).sum()
    }

    /// What the command layer does: reconcile with the stream, then slide to `cut`.
    fn bring_up(t: Option<Tally>, m: &Model, cut: StreamId) -> Tally {
        let len = m.len() as u64;
        let last = m.last().map(|e| e.0);
        let rebuild = || {
            let (n, s) = read(
                m,
                IdRange {
                    from: cut,
                    to: id(u64::MAX, u64::MAX),
                },
            );
            Tally::rebuilt(len, last, cut, n, s).unwrap()
        };
        let Some(t) = t else { return rebuild() };
        let t = match t.reconcile(len, last) {
            Reconcile::Same => Some(t),
            Reconcile::HeadTrimmed => t.head_trimmed(len),
            Reconcile::Appended { below, window } => {
                let (bn, _) = below.map_or((0, 0), |r| read(m, r));
                let (wn, ws) = window.map_or((0, 0), |r| read(m, r));
                t.appended(len, last.unwrap(), bn, wn, ws)
            }
            Reconcile::Rebuild => None,
        };
        let Some(t) = t else { return rebuild() };
        let (n, s) = match t.slide(cut) {
            Slide::Stay => (0, 0),
            Slide::Leave(r) | Slide::Enter(r) => read(m, r),
        };
        t.slid(cut, n, s).unwrap_or_else(rebuild)
    }

    fn check(t: &Tally, m: &Model) {
        assert_eq!(
            t.sum,
            window_sum(m, t.cut),
            "sum at cut {:?} of {m:?}",
            t.cut
        );
        assert_eq!(t.len, m.len() as u64);
        assert_eq!(t.last, m.last().map(|e| e.0));
        assert_eq!(t.below, m.iter().filter(|(i, _)| *i < t.cut).count() as u64);
    }

    #[test]
    fn stream_ids_format_as_redis_writes_them() {
        let mut buf = [0u8; ID_BUF];
        for (ms, seq) in [
            (0, 0),
            (1_700_000_000_123, 7),
            (u64::MAX, u64::MAX),
            (5, 10),
        ] {
            assert_eq!(
                id(ms, seq).format_into(&mut buf),
                format!("{ms}-{seq}").as_bytes()
            );
        }
    }

    #[test]
    fn stream_ids_step_across_milliseconds() {
        assert_eq!(id(5, 7).next(), Some(id(5, 8)));
        assert_eq!(id(5, u64::MAX).next(), Some(id(6, 0)));
        assert_eq!(id(u64::MAX, u64::MAX).next(), None);
        assert_eq!(id(5, 0).prev(), Some(id(4, u64::MAX)));
        assert_eq!(id(5, 3).prev(), Some(id(5, 2)));
        assert_eq!(StreamId::MIN.prev(), None);
        assert!(id(4, u64::MAX) < id(5, 0));
    }

    #[test]
    fn tally_reads_only_what_changed() {
        // Entries at 10, 20, 30 (counts 1, 2, 3); window from 15: sum 5, one entry below.
        let m: Model = vec![(id(10, 0), 1), (id(20, 0), 2), (id(30, 0), 3)];
        let t = Tally::rebuilt(3, Some(id(30, 0)), id(15, 0), 2, 5).unwrap();
        check(&t, &m);
        assert_eq!(t.reconcile(3, Some(id(30, 0))), Reconcile::Same);
        // Another writer appended 40 and 50: only those are read.
        assert_eq!(
            t.reconcile(5, Some(id(50, 0))),
            Reconcile::Appended {
                below: None,
                window: Some(IdRange {
                    from: id(30, 1),
                    to: id(50, 0)
                })
            }
        );
        // The cut moves from 15 to 25: only [15, 25) is read, and it leaves the window.
        assert_eq!(
            t.slide(id(25, 0)),
            Slide::Leave(IdRange {
                from: id(15, 0),
                to: id(24, u64::MAX)
            })
        );
        // Back to 5: [5, 15) enters.
        assert_eq!(
            t.slide(id(5, 0)),
            Slide::Enter(IdRange {
                from: id(5, 0),
                to: id(14, u64::MAX)
            })
        );
        // Past the last entry: only up to the last entry is read.
        assert_eq!(
            t.slide(id(100, 0)),
            Slide::Leave(IdRange {
                from: id(15, 0),
                to: id(30, 0)
            })
        );
        // A head trim of the one entry below the cut keeps the sum; of two, it rebuilds.
        assert_eq!(t.reconcile(2, Some(id(30, 0))), Reconcile::HeadTrimmed);
        assert_eq!(t.head_trimmed(2).map(|t| (t.sum, t.below)), Some((5, 0)));
        assert_eq!(t.head_trimmed(1), None);
        // A stream that grew without a new last entry, or lost its last entry: rebuild.
        assert_eq!(t.reconcile(4, Some(id(30, 0))), Reconcile::Rebuild);
        assert_eq!(t.reconcile(2, Some(id(20, 0))), Reconcile::Rebuild);
        assert_eq!(t.reconcile(0, None), Reconcile::Rebuild);
    }

    #[test]
    fn appended_entries_below_the_cut_are_counted_not_summed() {
        // An empty window at cut 100 over entries at 10; another writer adds 50 and 150.
        let t = Tally::rebuilt(1, Some(id(10, 0)), id(100, 0), 0, 0).unwrap();
        assert_eq!(
            t.reconcile(3, Some(id(150, 0))),
            Reconcile::Appended {
                below: Some(IdRange {
                    from: id(10, 1),
                    to: id(99, u64::MAX)
                }),
                window: Some(IdRange {
                    from: id(100, 0),
                    to: id(150, 0)
                })
            }
        );
        let t = t.appended(3, id(150, 0), 1, 1, 7).unwrap();
        assert_eq!((t.len, t.below, t.sum), (3, 2, 7));
        // Figures that cannot be (more new entries than the stream holds): rebuild.
        assert_eq!(t.appended(3, id(160, 0), 2, 2, 1), None);
    }

    #[test]
    fn own_writes_update_the_tally() {
        let t = Tally::rebuilt(2, Some(id(10, 0)), id(10, 0), 1, 4).unwrap();
        let t = t.added(id(12, 0), 3).unwrap();
        assert_eq!((t.len, t.last, t.sum, t.below), (3, Some(id(12, 0)), 7, 1));
        let t = t.trimmed(1).unwrap();
        assert_eq!((t.len, t.sum, t.below), (2, 7, 0));
        assert_eq!(t.trimmed(1), None);
    }

    #[test]
    fn cache_is_bounded_and_honours_forget_during_a_call() {
        let t = Tally::rebuilt(0, None, StreamId::MIN, 0, 0).unwrap();
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
        let t = Tally::rebuilt(0, None, StreamId::MIN, 0, 0).unwrap();
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
            let tally = |sum| Tally::rebuilt(0, None, StreamId::MIN, 0, sum).unwrap();
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

    /// What happens to the stream between two calls.
    #[derive(Debug, Clone)]
    enum Op {
        /// A call of this module at `now` (ms steps forward, possibly backward) adding `add`.
        Call { dt: i64, window: u64, add: u64 },
        /// Another writer appends entries at the current time plus `dt` ms.
        Append { dt: u64, count: u64, n: usize },
        /// Another writer trims the oldest `n` entries (XTRIM MAXLEN / MINID).
        TrimHead { n: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (-30i64..60, 1u64..200, 0u64..5).prop_map(|(dt, window, add)| Op::Call { dt, window, add }),
            2 => (0u64..20, 0u64..9, 1usize..4).prop_map(|(dt, count, n)| Op::Append { dt, count, n }),
            1 => (1usize..6).prop_map(|n| Op::TrimHead { n }),
        ]
    }

    proptest! {
        /// The running total equals a fresh sum of the window after any sequence of calls,
        /// other writers' appends and head trims.
        #[test]
        fn tally_matches_a_fresh_sum(ops in proptest::collection::vec(op(), 1..80)) {
            let mut m: Model = Vec::new();
            // The stream's last ID: entries only ever get IDs above it, even after trims.
            let mut top: Option<(u64, u64)> = None;
            let mut tally: Option<Tally> = None;
            let mut now: u64 = 1_000;
            for op in ops {
                match op {
                    Op::Call { dt, window, add } => {
                        now = now.saturating_add_signed(dt).max(1);
                        let cut = StreamId::at_ms(now.saturating_sub(window));
                        let t = bring_up(tally, &m, cut);
                        check(&t, &m);
                        let mut t = Some(t);
                        if add > 0 {
                            let (ms, seq) = next_id(now * 1000, top).unwrap();
                            top = Some((ms, seq));
                            let id = id(ms, seq);
                            m.push((id, add));
                            t = t.and_then(|t| t.added(id, add));
                            // MINID ~ cut: remove some of the entries below the cut.
                            let below = m.iter().filter(|(i, _)| *i < cut).count();
                            let removed = below / 2;
                            m.drain(..removed);
                            t = t.and_then(|t| t.trimmed(removed as u64));
                        }
                        if let Some(t) = &t { check(t, &m); }
                        tally = t;
                    }
                    Op::Append { dt, count, n } => {
                        for _ in 0..n {
                            let (ms, seq) = next_id((now + dt) * 1000, top).unwrap();
                            top = Some((ms, seq));
                            m.push((id(ms, seq), count));
                        }
                    }
                    Op::TrimHead { n } => {
                        let n = n.min(m.len());
                        m.drain(..n);
                    }
                }
            }
        }
    }

    #[test]
    fn stream_window_and_plans() {
        assert_eq!(window_start_ms(10_500_999, 1_000_000), 9_500);
        assert_eq!(window_start_ms(500_000, 1_000_000), 0);
        #[rustfmt::skip]
        let cases: &[(u64, u64, Option<u64>, Option<Plan>)] = &[
            // total, add, limit,     plan
            (5,        1, None,       Some(Plan::Append(6))),
            (5,        0, None,       Some(Plan::Report(5))),
            (5,        5, Some(10),   Some(Plan::Append(10))),
            (5,        6, Some(10),   Some(Plan::Deny)),
            (11,       0, Some(10),   Some(Plan::Deny)),
            (u64::MAX, 1, None,       None),
        ];
        for &(total, add, limit, want) in cases {
            assert_eq!(plan(total, add, limit), want, "{total} + {add} / {limit:?}");
        }
    }

    #[test]
    fn stream_ids_never_go_below_the_last() {
        assert_eq!(next_id(5_000_000, None), Some((5_000, 0)));
        assert_eq!(next_id(5_000_000, Some((4_999, 7))), Some((5_000, 0)));
        assert_eq!(next_id(5_000_000, Some((5_000, 7))), Some((5_000, 8)));
        assert_eq!(next_id(5_000_000, Some((6_000, 0))), Some((6_000, 1)));
        assert_eq!(
            next_id(5_000_000, Some((6_000, u64::MAX))),
            Some((6_001, 0))
        );
        assert_eq!(next_id(0, Some((u64::MAX, u64::MAX))), None);
    }
}
