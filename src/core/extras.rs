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

use std::collections::VecDeque;

use crate::core::dedup::{DedupId, Entry};
use crate::core::param::MAX_PARAM;
use crate::core::time::{MAX_SPAN, Micros};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Inner {
    ids: VecDeque<Entry>,
    /// Blocked until this time (Unix µs); 0 when not blocked.
    block_until: Micros,
}

/// A key's remembered ids and block. Empty costs one pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extras(Option<Box<Inner>>);

impl Extras {
    /// Rebuild from decoded parts (ids oldest first; `block_until` 0 for none).
    pub fn from_parts(entries: Vec<Entry>, block_until: Micros) -> Self {
        let mut e = Extras(Some(Box::new(Inner {
            ids: entries.into(),
            block_until,
        })));
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
        self.iter().find(|e| e.id == id && e.until > now)
    }

    /// Mark `id` (remembered at `now`) as settled by a refund.
    pub fn settle(&mut self, id: DedupId, now: Micros) {
        if let Some(inner) = self.0.as_mut()
            && let Some(e) = inner.ids.iter_mut().find(|e| e.id == id && e.until > now)
        {
            e.settled = true;
        }
    }

    /// Drop the ids forgotten by `now`, and a block that has ended by then.
    pub fn forget_expired(&mut self, now: Micros) {
        if let Some(inner) = self.0.as_mut() {
            inner.ids.retain(|e| e.until > now);
            if inner.block_until <= now {
                inner.block_until = 0;
            }
        }
        self.tidy();
    }

    /// Remember `id`, forgetting the oldest ids past `max`.
    pub fn remember(&mut self, id: DedupId, granted: u64, until: Micros, max: usize) {
        if max == 0 {
            return;
        }
        let ids = &mut self.inner_mut().ids;
        while ids.len() >= max {
            ids.pop_front();
        }
        ids.push_back(Entry {
            id,
            granted,
            until,
            settled: false,
        });
    }

    /// The latest time an id is remembered until (0 when none).
    pub fn latest_expiry(&self) -> Micros {
        self.iter().map(|e| e.until).max().unwrap_or(0)
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
    /// remembered and the block kept at most [`MAX_SPAN`] after a call, and a grant at most
    /// [`MAX_PARAM`] units.
    pub fn valid_at(&self, last_update: Micros) -> bool {
        let latest = last_update.saturating_add(MAX_SPAN);
        self.block_until() <= latest
            && self
                .iter()
                .all(|e| e.until <= latest && e.granted <= MAX_PARAM)
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
        e.settle(DedupId(1), 10);
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
