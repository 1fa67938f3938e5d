//! The rarely used parts of a key's value: its remembered `DEDUP` ids and its block (the
//! penalty box). Both live behind one pointer that is null when neither is in use, so a plain
//! limiter pays one word for them, whatever is added here.
//!
//! Ids: at most `max` per key; past that the oldest is forgotten first. They are kept in
//! insertion order, which is also expiry order for one key as long as its parameters do not
//! shrink the dedup period.
//!
//! Block: the key is blocked while `now < until`. A block that has ended is dropped by the
//! key's next write.
//!
//! Reservations (`HOLD ttl`): an id remembered with the end of its reservation
//! ([`Entry::hold_end`]). A reservation not settled is *pending*: it is never forgotten nor
//! pushed out by newer ids (a new reservation on a key full of pending ones is refused,
//! [`Extras::can_hold`]) until the key's next write at or after its end gives its units back
//! (`LimiterState::catch_up`). The earliest pending end is kept next to the ids, so a key with
//! ids but no reservation due pays one comparison for them.

use std::collections::VecDeque;

use crate::core::dedup::{DedupId, Entry};
use crate::core::param::MAX_PARAM;
use crate::core::time::{MAX_SPAN, Micros};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Inner {
    ids: VecDeque<Entry>,
    /// Blocked until this time (Unix µs); 0 when not blocked.
    block_until: Micros,
    /// The earliest end of a pending reservation (Unix µs); 0 when none. Derived from `ids`
    /// ([`Inner::refresh`]), never stored.
    next_hold_end: Micros,
    /// The earliest time an id is remembered until (0 when none): no id is forgotten before it
    /// (a write before it does not look at the ids). Derived from `ids`.
    first_until: Micros,
    /// The latest time an id is remembered until or a reservation ends (0 when none): the
    /// key's expiry holds it. Derived from `ids`.
    last_end: Micros,
    /// Every id's [`bit`], or-ed: an id whose bit is clear is not among the ids, found so
    /// without a scan (most calls with `DEDUP` bring a new id). Derived from `ids`.
    id_bits: u64,
}

/// An id's bit in [`Inner::id_bits`]: one of 64, from the hash's low bits.
#[inline(always)]
fn bit(id: DedupId) -> u64 {
    1u64.rotate_left(id.0 as u32)
}

impl Inner {
    /// Recompute what is derived from the ids.
    fn refresh(&mut self) {
        let (mut next_hold_end, mut first_until, mut last_end, mut id_bits) = (0, 0, 0, 0);
        for (i, e) in self.ids.iter().enumerate() {
            id_bits |= bit(e.id);
            if e.pending() && (next_hold_end == 0 || e.hold_end < next_hold_end) {
                next_hold_end = e.hold_end;
            }
            if i == 0 || e.until < first_until {
                first_until = e.until;
            }
            last_end = last_end.max(e.until.max(e.hold_end));
        }
        self.next_hold_end = next_hold_end;
        self.first_until = first_until;
        self.last_end = last_end;
        self.id_bits = id_bits;
    }

    /// Add `entry` after the ids, what is derived from them following it (no scan of the ids).
    fn append(&mut self, entry: Entry) {
        if entry.pending() {
            self.next_hold_end = match self.next_hold_end {
                0 => entry.hold_end,
                next => next.min(entry.hold_end),
            };
        }
        self.first_until = if self.ids.is_empty() {
            entry.until
        } else {
            self.first_until.min(entry.until)
        };
        self.last_end = self.last_end.max(entry.until.max(entry.hold_end));
        self.id_bits |= bit(entry.id);
        self.ids.push_back(entry);
    }
}

/// A key's remembered ids and block. Empty costs one pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extras(Option<Box<Inner>>);

impl Extras {
    /// Rebuild from decoded parts (ids oldest first; `block_until` 0 for none).
    pub fn from_parts(entries: Vec<Entry>, block_until: Micros) -> Self {
        let mut inner = Inner {
            ids: entries.into(),
            block_until,
            next_hold_end: 0,
            first_until: 0,
            last_end: 0,
            id_bits: 0,
        };
        inner.refresh();
        let mut e = Extras(Some(Box::new(inner)));
        e.tidy();
        e
    }

    /// Release the allocation when nothing is left in it.
    fn tidy(&mut self) {
        if self
            .0
            .as_ref()
            .is_some_and(|i| i.ids.is_empty() && i.block_until == 0)
        {
            self.0 = None;
        }
    }

    fn inner_mut(&mut self) -> &mut Inner {
        self.0.get_or_insert_with(Box::default)
    }

    // --- DEDUP ids ---

    /// The remembered grant of `id`, if it is remembered at `now`.
    pub fn lookup(&self, id: DedupId, now: Micros) -> Option<u64> {
        self.entry(id, now).map(|e| e.granted)
    }

    /// The entry of `id`, if it is remembered at `now`.
    pub fn entry(&self, id: DedupId, now: Micros) -> Option<&Entry> {
        // The two halves of the ring one after the other: a plain loop over each, not a
        // flattened iterator (this is on the path of every call with `DEDUP`).
        let inner = self.0.as_deref()?;
        if inner.id_bits & bit(id) == 0 {
            return None;
        }
        let (front, back) = inner.ids.as_slices();
        let is = |e: &&Entry| e.id == id && e.until > now;
        front.iter().find(is).or_else(|| back.iter().find(is))
    }

    /// Mark `id` (remembered at `now`) as settled by a refund or a settle, `charged` units
    /// staying charged for it (a reservation's; an id without `HOLD` keeps 0).
    pub fn settle(&mut self, id: DedupId, now: Micros, charged: u64) {
        if let Some(inner) = self.0.as_mut() {
            if let Some(e) = inner.ids.iter_mut().find(|e| e.id == id && e.until > now) {
                e.settled = true;
                if e.hold_end != 0 {
                    e.charged = charged;
                }
            }
            inner.refresh();
        }
    }

    /// Drop the ids forgotten by `now` (never a pending reservation), and a block that has
    /// ended by then. The ids are looked at only when one may be forgotten; a key without ids
    /// and block pays a null check.
    #[inline(always)]
    pub fn forget_expired(&mut self, now: Micros) {
        // Ids none of which is forgotten yet, and no block: nothing to do (the common key with
        // ids).
        if let Some(i) = self.0.as_deref()
            && !i.ids.is_empty()
            && i.first_until > now
            && i.block_until == 0
        {
            return;
        }
        if self.0.is_some() {
            self.forget_expired_in(now);
        }
    }

    fn forget_expired_in(&mut self, now: Micros) {
        if let Some(inner) = self.0.as_mut() {
            if !inner.ids.is_empty() && inner.first_until <= now {
                let before = inner.ids.len();
                inner.ids.retain(|e| e.until > now || e.pending());
                if inner.ids.len() != before {
                    inner.refresh();
                }
            }
            if inner.block_until <= now {
                inner.block_until = 0;
            }
        }
        self.tidy();
    }

    /// Remember `id`, forgetting the oldest ids past `max` (never a pending reservation: when
    /// only those are left, `id` is not remembered).
    pub fn remember(&mut self, id: DedupId, granted: u64, until: Micros, max: usize) {
        self.push(Entry::plain(id, granted, until, false), max);
    }

    /// Remember `id` as a reservation of `granted` units ending at `hold_end` (and remembered
    /// until `until`), as [`Self::remember`]; whether it is ([`Self::can_hold`]).
    pub fn remember_hold(
        &mut self,
        id: DedupId,
        granted: u64,
        until: Micros,
        hold_end: Micros,
        max: usize,
    ) -> bool {
        let entry = Entry {
            id,
            granted,
            until: until.max(hold_end),
            settled: false,
            hold_end,
            charged: granted,
        };
        self.push(entry, max)
    }

    /// Whether one more id can be remembered under `max` ids per key: there is room, or an id
    /// that is no pending reservation to forget.
    pub fn can_hold(&self, max: usize) -> bool {
        max > 0 && (self.len() < max || self.iter().any(|e| !e.pending()))
    }

    fn push(&mut self, entry: Entry, max: usize) -> bool {
        if !self.can_hold(max) {
            return false;
        }
        let inner = self.inner_mut();
        let mut forgot = false;
        while inner.ids.len() >= max {
            match inner.ids.iter().position(|e| !e.pending()) {
                Some(i) => {
                    inner.ids.remove(i);
                    forgot = true;
                }
                None => break,
            }
        }
        if forgot {
            inner.refresh();
        }
        // What is derived from the ids follows the new entry (no scan of the ids on a plain
        // `DEDUP` call).
        inner.append(entry);
        true
    }

    // --- Reservations ---

    /// Whether a pending reservation has ended by `now` (one comparison; a null check for a
    /// key without ids and block).
    #[inline(always)]
    pub fn hold_due(&self, now: Micros) -> bool {
        self.0
            .as_ref()
            .is_some_and(|i| i.next_hold_end != 0 && i.next_hold_end <= now)
    }

    /// The pending reservations ended by `now`, in order of their end (then of their id's
    /// age): each one's end, units held and position.
    pub fn due(&self, now: Micros) -> Vec<(Micros, u64, usize)> {
        let mut due: Vec<(Micros, u64, usize)> = self
            .iter()
            .enumerate()
            .filter(|(_, e)| e.pending() && e.hold_end <= now)
            .map(|(i, e)| (e.hold_end, e.granted, i))
            .collect();
        due.sort_unstable();
        due
    }

    /// Mark the reservation at position `index` as ended unsettled: settled with 0.
    pub fn end_hold(&mut self, index: usize) {
        if let Some(inner) = self.0.as_mut() {
            if let Some(e) = inner.ids.get_mut(index) {
                e.settled = true;
                e.charged = 0;
            }
            inner.refresh();
        }
    }

    /// Number of pending reservations.
    pub fn pending(&self) -> usize {
        self.iter().filter(|e| e.pending()).count()
    }

    /// The latest time an id is remembered until, or a reservation ends (0 when none).
    pub fn latest_expiry(&self) -> Micros {
        self.0.as_ref().map_or(0, |i| i.last_end)
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.0.iter().flat_map(|i| i.ids.iter())
    }

    /// Number of remembered ids.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |i| i.ids.len())
    }

    /// No id remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // --- Block ---

    /// The stored block's end (Unix µs), 0 when none. It may have ended already.
    pub fn block_until(&self) -> Micros {
        self.0.as_ref().map_or(0, |i| i.block_until)
    }

    /// The end of the block in force at `now`, if any.
    pub fn blocked_at(&self, now: Micros) -> Option<Micros> {
        Some(self.block_until()).filter(|&until| until > now)
    }

    /// Block until `until`, or later if already blocked later.
    pub fn block(&mut self, until: Micros) {
        let inner = self.inner_mut();
        inner.block_until = inner.block_until.max(until);
        self.tidy();
    }

    /// Remove the stored block; whether there was one.
    pub fn unblock(&mut self) -> bool {
        let had = self.block_until() != 0;
        if let Some(inner) = self.0.as_mut() {
            inner.block_until = 0;
        }
        self.tidy();
        had
    }

    /// Whether the ids and the block could have been written by `last_update`: each id
    /// remembered, each reservation held and the block kept at most [`MAX_SPAN`] after a call,
    /// and a grant or a reservation's charge at most [`MAX_PARAM`] units.
    pub fn valid_at(&self, last_update: Micros) -> bool {
        let latest = last_update.saturating_add(MAX_SPAN);
        self.block_until() <= latest
            && self.iter().all(|e| {
                e.until <= latest
                    && e.granted <= MAX_PARAM
                    && e.hold_end <= latest
                    && e.charged <= MAX_PARAM
                    && (e.hold_end != 0 || e.charged == 0)
            })
    }

    /// Heap bytes held.
    pub fn heap_size(&self) -> usize {
        self.0.as_ref().map_or(0, |i| {
            std::mem::size_of::<Inner>().saturating_add(
                i.ids
                    .capacity()
                    .saturating_mul(std::mem::size_of::<Entry>()),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_forgets_oldest_past_max_and_expired() {
        let mut d = Extras::default();
        for i in 0..5u8 {
            d.remember(DedupId::of(&[i]), u64::from(i), 100, 3);
        }
        assert_eq!(d.len(), 3);
        assert_eq!(d.lookup(DedupId::of(&[0]), 0), None);
        assert_eq!(d.lookup(DedupId::of(&[4]), 99), Some(4));
        assert_eq!(d.lookup(DedupId::of(&[4]), 100), None);
        d.forget_expired(100);
        assert!(d.is_empty());
        assert_eq!(d.heap_size(), 0);
    }

    #[test]
    fn reservations_are_due_by_their_end_and_never_pushed_out() {
        let naive = |e: &Extras, t: Micros| e.iter().any(|x| x.pending() && x.hold_end <= t);
        let mut e = Extras::default();
        let mut seed = 7u64;
        for step in 0..400u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let id = DedupId(u128::from(seed >> 60));
            match seed % 5 {
                0 | 1 => e.remember(id, 1, 100 + step, 6),
                2 => {
                    if e.can_hold(6) {
                        assert!(e.remember_hold(id, 2, 50, 10 + (seed >> 32) % 300, 6));
                    } else {
                        assert!(!e.remember_hold(id, 2, 50, 10, 6));
                        assert_eq!(e.pending(), 6);
                    }
                }
                3 => e.settle(id, step, 1),
                _ => e.forget_expired(step),
            }
            if let Some(&(_, _, i)) = e.due(step).first() {
                e.end_hold(i);
            }
            assert!(e.len() <= 6);
            for t in [0, step, step + 100, 1000] {
                assert_eq!(e.hold_due(t), naive(&e, t), "step {step}, t {t}");
            }
        }
    }

    /// What is derived from the ids (the earliest pending end, the first `until`, the latest
    /// end) is what a scan of the ids gives after any sequence of changes, and the ids forgotten
    /// are those a scan at every write would forget.
    /// Forget the oldest id that is no pending reservation when `max` ids are remembered.
    fn make_room(ids: &mut Vec<Entry>, max: usize) {
        if ids.len() >= max
            && let Some(i) = ids.iter().position(|x| !x.pending())
        {
            ids.remove(i);
        }
    }

    #[test]
    fn derived_times_follow_the_ids() {
        let mut e = Extras::default();
        // The ids as a plain list, changed as SPEC says, each write scanning all of them.
        let mut naive: Vec<Entry> = Vec::new();
        let mut seed = 11u64;
        let mut now: Micros = 1_000;
        for step in 0..2_000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let id = DedupId(u128::from(seed >> 59));
            // Time moves on by 0 to 63 µs; ids live 1 to 500 µs, so some expire out of order.
            now += (seed >> 20) % 64;
            let until = now + 1 + (seed >> 30) % 500;
            let max = 8;
            match seed % 7 {
                0..=2 => {
                    e.remember(id, 1, until, max);
                    make_room(&mut naive, max);
                    if naive.len() < max {
                        naive.push(Entry::plain(id, 1, until, false));
                    }
                }
                3 => {
                    let end = now + (seed >> 40) % 700;
                    let held = e.remember_hold(id, 2, until, end, max);
                    assert_eq!(
                        held,
                        naive.len() < max || naive.iter().any(|x| !x.pending())
                    );
                    if held {
                        make_room(&mut naive, max);
                        naive.push(Entry {
                            id,
                            granted: 2,
                            until: until.max(end),
                            settled: false,
                            hold_end: end,
                            charged: 2,
                        });
                    }
                }
                4 => {
                    e.settle(id, now, 1);
                    if let Some(x) = naive.iter_mut().find(|x| x.id == id && x.until > now) {
                        x.settled = true;
                        if x.hold_end != 0 {
                            x.charged = 1;
                        }
                    }
                }
                5 => {
                    if let Some(&(_, _, i)) = e.due(now).first() {
                        e.end_hold(i);
                        let x = &mut naive[i];
                        x.settled = true;
                        x.charged = 0;
                    }
                }
                _ => {
                    e.forget_expired(now);
                    naive.retain(|x| x.until > now || x.pending());
                }
            }
            assert_eq!(e.iter().copied().collect::<Vec<_>>(), naive, "step {step}");
            for probe in 0..40u128 {
                let want = naive.iter().find(|x| x.id.0 == probe && x.until > now);
                assert_eq!(e.entry(DedupId(probe), now), want, "step {step}");
            }
            let latest = naive.iter().map(|x| x.until.max(x.hold_end)).max();
            assert_eq!(e.latest_expiry(), latest.unwrap_or(0), "step {step}");
            if let Some(inner) = &e.0 {
                let mut scanned = (**inner).clone();
                scanned.refresh();
                assert_eq!(**inner, scanned, "step {step}");
            }
        }
    }

    #[test]
    fn block_is_kept_with_or_without_ids_and_dropped_when_over() {
        let mut e = Extras::default();
        assert_eq!(e.blocked_at(0), None);
        e.block(50);
        e.block(40);
        assert_eq!(
            (e.block_until(), e.blocked_at(49), e.blocked_at(50)),
            (50, Some(50), None)
        );
        e.remember(DedupId(1), 2, 100, 10);
        e.settle(DedupId(1), 10, 0);
        assert!(e.entry(DedupId(1), 10).is_some_and(|x| x.settled));
        e.forget_expired(60);
        assert_eq!((e.block_until(), e.len()), (0, 1));
        e.block(200);
        assert!(e.unblock());
        assert!(!e.unblock());
        e.forget_expired(100);
        assert_eq!(e, Extras::default());
        assert_eq!(e.heap_size(), 0);
    }
}
