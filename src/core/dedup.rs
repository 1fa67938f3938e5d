//! `DEDUP id`: idempotency tokens remembered inside the limiter's own value.
//!
//! A retried request carrying an id the key remembers is not charged again; it gets the
//! remembered `granted`. Ids are stored as a 128-bit FNV-1a hash (fixed size whatever the id's
//! length), each with the grant and the time it is forgotten. At most `max` ids are kept per key;
//! past that the oldest is forgotten first. Entries are kept in insertion order, which is also
//! expiry order for one key as long as its parameters do not shrink the dedup period.

use std::collections::VecDeque;

use crate::core::time::Micros;

/// Longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 256;

/// A hashed idempotency token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DedupId(pub u128);

impl DedupId {
    /// Hash a binary-safe id (FNV-1a, 128 bits: stable across builds and platforms, unlike
    /// `std`'s hasher, because the hash is persisted).
    pub fn of(id: &[u8]) -> Self {
        const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
        const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
        let hash = id
            .iter()
            .fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME));
        DedupId(hash)
    }
}

/// One remembered id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub id: DedupId,
    /// Units the first call granted.
    pub granted: u64,
    /// Forgotten at this time (Unix µs).
    pub until: Micros,
}

/// The remembered ids of one key. Empty costs one pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(clippy::box_collection)] // one pointer when empty, the common case, not VecDeque's 32 bytes
pub struct DedupSet(Option<Box<VecDeque<Entry>>>);

impl DedupSet {
    /// The remembered grant of `id`, if it is remembered at `now`.
    pub fn lookup(&self, id: DedupId, now: Micros) -> Option<u64> {
        self.0
            .as_ref()?
            .iter()
            .find(|e| e.id == id && e.until > now)
            .map(|e| e.granted)
    }

    /// Drop the ids forgotten by `now`.
    pub fn forget_expired(&mut self, now: Micros) {
        if let Some(entries) = self.0.as_mut() {
            entries.retain(|e| e.until > now);
            if entries.is_empty() {
                self.0 = None;
            }
        }
    }

    /// Remember `id`, forgetting the oldest ids past `max`.
    pub fn remember(&mut self, id: DedupId, granted: u64, until: Micros, max: usize) {
        if max == 0 {
            return;
        }
        let entries = self.0.get_or_insert_with(Box::default);
        while entries.len() >= max {
            entries.pop_front();
        }
        entries.push_back(Entry { id, granted, until });
    }

    /// The latest time an id is remembered until (0 when none).
    pub fn latest_expiry(&self) -> Micros {
        self.iter().map(|e| e.until).max().unwrap_or(0)
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.0.iter().flat_map(|d| d.iter())
    }

    /// Number of remembered ids.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |d| d.len())
    }

    /// No id remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rebuild from decoded entries (oldest first).
    pub fn from_entries(entries: Vec<Entry>) -> Self {
        if entries.is_empty() {
            DedupSet(None)
        } else {
            DedupSet(Some(Box::new(entries.into())))
        }
    }

    /// Heap bytes held.
    pub fn heap_size(&self) -> usize {
        self.0.as_ref().map_or(0, |d| {
            std::mem::size_of::<VecDeque<Entry>>()
                .saturating_add(d.capacity().saturating_mul(std::mem::size_of::<Entry>()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_hash_is_stable_and_binary_safe() {
        // Fixed values: the hash is persisted, so it must never change.
        assert_eq!(
            DedupId::of(b"").0,
            0x6c62_272e_07bb_0142_62b8_2175_6295_c58d
        );
        assert_eq!(
            DedupId::of(b"a").0,
            0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964
        );
        assert_ne!(DedupId::of(b"a\0"), DedupId::of(b"a"));
    }

    #[test]
    fn dedup_forgets_oldest_past_max_and_expired() {
        let mut d = DedupSet::default();
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
}
