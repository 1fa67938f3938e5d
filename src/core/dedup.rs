//! `DEDUP id`: idempotency tokens remembered inside the limiter's own value.
//!
//! A retried request carrying an id the key remembers is not charged again; it gets the
//! remembered `granted`. Ids are stored as a 128-bit FNV-1a hash (fixed size whatever the id's
//! length), each with the grant and the time it is forgotten; the key keeps them in its
//! `core::extras::Extras`.

use crate::core::time::Micros;

/// Longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 256;

/// Fewest bytes the codec writes for one remembered id: 16 bytes of hash and two one-byte
/// varints (its grant and the time it is forgotten).
pub const MIN_ENTRY_LEN: usize = 18;

/// A hashed idempotency token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DedupId(pub u128);

impl DedupId {
    /// Hash a binary-safe id (FNV-1a, 128 bits: stable across builds and platforms, unlike
    /// `std`'s hasher, because the hash is persisted).
    pub fn of(id: &[u8]) -> Self {
        const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
        // The FNV prime 2^88 + 0x13b: a product by it is one by the small part plus a shift,
        // cheaper than a full 128-bit product and the same modulo 2^128.
        const PRIME_LOW: u128 = 0x13b;
        let hash = id.iter().fold(OFFSET, |h, &b| {
            let h = h ^ u128::from(b);
            h.wrapping_mul(PRIME_LOW).wrapping_add(h << 88)
        });
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
    /// An `RL.REFUND ... DEDUP id` or an `RL.SETTLE` has settled it (or its reservation has
    /// ended and given its units back): a later refund or settle with the id gives nothing.
    pub settled: bool,
    /// `HOLD ttl`: the end of the reservation (Unix µs; the call's time plus `ttl`), 0 for an id
    /// remembered without `HOLD`. An unsettled reservation is live while the time is before it.
    pub hold_end: Micros,
    /// A reservation's units charged for the id: `granted` until it is settled, then the units
    /// it was settled with (0 when it ended unsettled). 0 for an id without `HOLD`.
    pub charged: u64,
}

impl Entry {
    /// An id remembered with its grant, without `HOLD`.
    pub fn plain(id: DedupId, granted: u64, until: Micros, settled: bool) -> Self {
        Entry {
            id,
            granted,
            until,
            settled,
            hold_end: 0,
            charged: 0,
        }
    }

    /// Whether this is a reservation (`HOLD`) not settled yet, whatever the time.
    pub fn pending(&self) -> bool {
        self.hold_end != 0 && !self.settled
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
        // The same as the product by the whole prime, byte by byte.
        const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
        let mut seed = 5u64;
        for len in 0..300usize {
            let id: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (seed >> 56) as u8
                })
                .collect();
            let want = id
                .iter()
                .fold(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d_u128, |h, &b| {
                    (h ^ u128::from(b)).wrapping_mul(PRIME)
                });
            assert_eq!(DedupId::of(&id).0, want);
        }
    }
}
