//! The packed log of RL.SLIDING (see the parent module's docs for the layout): its entries, its
//! marks, pruning, the merge of the oldest entries at the bound, and compaction of the dead prefix.

use crate::core::error::CoreError;
use crate::core::time::{Micros, US_PER_MS};
use crate::core::varint::{self, Reader};

/// One mark every this many entries.
pub(super) const MARK_EVERY: u32 = 64;

/// The dead prefix is cut away only from this size on (tiny copies are not worth a call).
pub(super) const COMPACT_MIN: usize = 16;

/// Append one packed entry.
pub(super) fn put_entry(out: &mut Vec<u8>, delta_ms: u64, units: u64) {
    let flag = u64::from(units != 1);
    varint::put_u64(out, delta_ms.saturating_mul(2) | flag);
    if units != 1 {
        varint::put_u64(out, units);
    }
}

/// The varints of one packed entry, written to the start of `out` (two slots); how many.
pub(super) fn entry_words(delta_ms: u64, units: u64, out: &mut [u64]) -> usize {
    let flag = u64::from(units != 1);
    let words = [delta_ms.saturating_mul(2) | flag, units];
    let n = if units != 1 { 2 } else { 1 };
    for (slot, w) in out.iter_mut().zip(words.iter().take(n)) {
        *slot = *w;
    }
    n.min(out.len())
}

/// Bytes [`put_entry`] writes.
fn entry_len(delta_ms: u64, units: u64) -> usize {
    let flag = u64::from(units != 1);
    let n = varint::len_u64(delta_ms.saturating_mul(2) | flag);
    if units != 1 {
        n.saturating_add(varint::len_u64(units))
    } else {
        n
    }
}

/// Read one packed entry at `*at`, advancing it: its Δms and its units.
fn get_entry(data: &[u8], at: &mut usize) -> Option<(u64, u64)> {
    let mut r = Reader::new(data.get(*at..)?);
    let v = r.u64()?;
    let units = if v & 1 == 1 { r.u64()? } else { 1 };
    *at = data.len().checked_sub(r.remaining())?;
    Some((v >> 1, units))
}

/// The kept entries in the codec's layout: the first entry's (Δms, units) when it is not the
/// tail, the packed bytes between it and the tail, and the tail's (Δms, units).
#[derive(Debug, Clone, Copy)]
pub(super) struct Encoding<'a> {
    pub(super) first: Option<(u64, u64)>,
    pub(super) packed: &'a [u8],
    pub(super) last: (u64, u64),
}

impl Encoding<'_> {
    /// Bytes it takes.
    pub(super) fn len(&self) -> usize {
        self.first
            .map_or(0, |(d, u)| entry_len(d, u))
            .saturating_add(self.packed.len())
            .saturating_add(entry_len(self.last.0, self.last.1))
    }
}

/// A known place in the log: where an entry starts, its ordinal, its time, and the units logged
/// before it (all since the last compaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pos {
    pub(super) offset: u32,
    pub(super) seq: u32,
    pub(super) ts: Micros,
    pub(super) cum: u128,
}

/// One entry, where it is, and its units.
#[derive(Debug, Clone, Copy)]
pub(super) struct Item {
    pub(super) pos: Pos,
    pub(super) units: u64,
}

/// The entries of a non-empty log. See the module docs.
#[derive(Debug, Clone)]
pub(super) struct Log {
    /// Packed entries, all but the tail; the bytes before `head.offset` are dead.
    pub(super) data: Vec<u8>,
    /// A position every [`MARK_EVERY`] entries, in order; those at or before the head are stale.
    pub(super) marks: Vec<Pos>,
    /// The first kept entry (`offset == data.len()` when it is the tail).
    pub(super) head: Pos,
    /// Units merged into the head entry beyond what its bytes say (see [`MAX_ENTRIES`](super::MAX_ENTRIES)).
    pub(super) merged: u64,
    /// Time of the last packed entry, the base of the next Δ.
    pub(super) last_ts: Micros,
    pub(super) tail_ts: Micros,
    pub(super) tail_seq: u32,
    /// Units logged before the tail.
    pub(super) tail_cum: u128,
    pub(super) tail_units: u64,
}

/// Walks the entries from a position to the tail.
pub(super) struct Scan<'a> {
    pub(super) log: &'a Log,
    pub(super) offset: usize,
    pub(super) seq: u32,
    pub(super) ts: Micros,
    pub(super) cum: u128,
    /// The entry at `offset` has time `ts` (a known position); later ones add their Δ.
    pub(super) first: bool,
    pub(super) merged: u64,
    pub(super) done: bool,
}

impl Iterator for Scan<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        if self.done {
            return None;
        }
        let log = self.log;
        if self.offset >= log.data.len() {
            self.done = true;
            return Some(log.tail_item());
        }
        let start = self.offset;
        let step = (|| {
            let (delta_ms, units) = get_entry(&log.data, &mut self.offset)?;
            let ts = if self.first {
                self.ts
            } else {
                self.ts.checked_add(delta_ms.checked_mul(US_PER_MS)?)?
            };
            let units = units.checked_add(self.merged)?;
            Some((ts, units))
        })();
        let Some((ts, units)) = step else {
            // Unreachable with buffers this module wrote; stop rather than misread.
            self.done = true;
            return None;
        };
        let item = Item {
            pos: Pos {
                offset: u32::try_from(start).unwrap_or(u32::MAX),
                seq: self.seq,
                ts,
                cum: self.cum,
            },
            units,
        };
        self.first = false;
        self.merged = 0;
        self.ts = ts;
        self.seq = self.seq.saturating_add(1);
        self.cum = self.cum.saturating_add(u128::from(units));
        Some(item)
    }
}

/// Make room for `extra` more items, growing by half the length rather than doubling: a log's
/// spare capacity is at most half its size (amortized O(1) all the same).
fn reserve<T>(v: &mut Vec<T>, extra: usize, min_step: usize) {
    if v.capacity().saturating_sub(v.len()) < extra {
        v.reserve_exact((v.len() / 2).max(min_step).max(extra));
    }
}

/// Keep a buffer's spare capacity in proportion to its length.
fn trim<T>(v: &mut Vec<T>, slack: usize) {
    if v.capacity() > v.len().saturating_mul(4).saturating_add(slack) {
        v.shrink_to(v.len().saturating_mul(2).saturating_add(slack));
    }
}

impl Log {
    /// A log of one entry.
    pub(super) fn single(ts: Micros, units: u64) -> Self {
        Log {
            data: Vec::new(),
            marks: Vec::new(),
            head: Pos {
                offset: 0,
                seq: 0,
                ts,
                cum: 0,
            },
            merged: 0,
            last_ts: ts,
            tail_ts: ts,
            tail_seq: 0,
            tail_cum: 0,
            tail_units: units,
        }
    }

    /// Make this a log of one entry, releasing the buffers (the window has emptied: a key that
    /// was busy does not keep its peak memory).
    pub(super) fn reset(&mut self, ts: Micros, units: u64) {
        *self = Log::single(ts, units);
    }

    pub(super) fn data_len_u32(&self) -> u32 {
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }

    pub(super) fn tail_item(&self) -> Item {
        Item {
            pos: Pos {
                offset: self.data_len_u32(),
                seq: self.tail_seq,
                ts: self.tail_ts,
                cum: self.tail_cum,
            },
            units: self.tail_units,
        }
    }

    /// Entries kept.
    pub(super) fn len(&self) -> u32 {
        self.tail_seq
            .saturating_sub(self.head.seq)
            .saturating_add(1)
    }

    /// Units logged up to and including the tail.
    pub(super) fn cum_end(&self) -> u128 {
        self.tail_cum.saturating_add(u128::from(self.tail_units))
    }

    /// Walk from `pos`; `merged` is added to its entry (only the head has one).
    pub(super) fn scan_from(&self, pos: Pos, merged: u64) -> Scan<'_> {
        Scan {
            log: self,
            offset: usize::try_from(pos.offset).unwrap_or(usize::MAX),
            seq: pos.seq,
            ts: pos.ts,
            cum: pos.cum,
            first: true,
            merged,
            done: false,
        }
    }

    /// Walk every kept entry.
    pub(super) fn scan(&self) -> Scan<'_> {
        self.scan_from(self.head, self.merged)
    }

    /// Walk from a kept entry (found by an earlier scan).
    pub(super) fn scan_at(&self, pos: Pos) -> Scan<'_> {
        if pos.seq == self.head.seq {
            self.scan()
        } else {
            self.scan_from(pos, 0)
        }
    }

    /// The marks past the head, the only ones that describe kept entries exactly.
    pub(super) fn live_marks(&self) -> &[Pos] {
        let i = self.marks.partition_point(|m| m.offset <= self.head.offset);
        self.marks.get(i..).unwrap_or_default()
    }

    /// Where the oldest entry that counts after `cutoff` is (all count when `None`).
    pub(super) fn first_live(&self, cutoff: Option<Micros>) -> Option<Pos> {
        let live = |ts: Micros| cutoff.is_none_or(|c| ts > c);
        if live(self.head.ts) {
            // Nothing expired: the head is known without reading it.
            return Some(self.head);
        }
        let marks = self.live_marks();
        let expired = marks.partition_point(|m| !live(m.ts));
        let mut scan = match expired.checked_sub(1).and_then(|i| marks.get(i)) {
            Some(mark) => self.scan_from(*mark, 0),
            None => self.scan(),
        };
        scan.find(|item| live(item.pos.ts)).map(|item| item.pos)
    }

    /// The first entry by whose end `target` units (counted like `cum`) have been logged.
    pub(super) fn reaching(&self, target: u128) -> Option<Item> {
        let marks = self.live_marks();
        let before = marks.partition_point(|m| m.cum < target);
        let mut scan = match before.checked_sub(1).and_then(|i| marks.get(i)) {
            Some(mark) => self.scan_from(*mark, 0),
            None => self.scan(),
        };
        scan.find(|item| item.pos.cum.saturating_add(u128::from(item.units)) >= target)
    }

    /// Drop the entries that no longer count after `cutoff`; `false` if none counts.
    pub(super) fn prune(&mut self, cutoff: Option<Micros>) -> bool {
        let Some(first) = self.first_live(cutoff) else {
            return false;
        };
        if first.seq != self.head.seq {
            self.head = first;
            self.merged = 0;
        }
        true
    }

    /// Merge the oldest entry into the next one (which keeps its later time).
    pub(super) fn merge_oldest(&mut self) -> Result<(), CoreError> {
        let mut scan = self.scan();
        let (Some(oldest), Some(next)) = (scan.next(), scan.next()) else {
            return Ok(());
        };
        if next.pos.seq == self.tail_seq {
            self.tail_units = self
                .tail_units
                .checked_add(oldest.units)
                .ok_or(CoreError::Overflow)?;
            self.tail_cum = oldest.pos.cum;
            self.head = self.tail_item().pos;
            self.merged = 0;
        } else {
            self.head = Pos {
                cum: oldest.pos.cum,
                ..next.pos
            };
            self.merged = oldest.units;
        }
        Ok(())
    }

    /// Pack the tail and start a new one at `ts` (later than the tail).
    pub(super) fn push(&mut self, ts: Micros, units: u64) -> Result<(), CoreError> {
        let offset = u32::try_from(self.data.len()).map_err(|_| CoreError::Overflow)?;
        let first_kept = offset <= self.head.offset;
        let delta_ms = if first_kept {
            0
        } else {
            self.tail_ts.saturating_sub(self.last_ts) / US_PER_MS
        };
        if !first_kept && self.tail_seq.is_multiple_of(MARK_EVERY) {
            reserve(&mut self.marks, 1, 1);
            self.marks.push(Pos {
                offset,
                seq: self.tail_seq,
                ts: self.tail_ts,
                cum: self.tail_cum,
            });
        }
        // An entry takes at most two 10-byte varints.
        reserve(&mut self.data, 20, 32);
        put_entry(&mut self.data, delta_ms, self.tail_units);
        self.last_ts = self.tail_ts;
        self.tail_cum = self.cum_end();
        self.tail_seq = self.tail_seq.checked_add(1).ok_or(CoreError::Overflow)?;
        self.tail_ts = ts;
        self.tail_units = units;
        Ok(())
    }

    /// Cut the dead prefix away once it is at least half the buffer, rebasing every position.
    pub(super) fn compact(&mut self) {
        let h = usize::try_from(self.head.offset).unwrap_or(usize::MAX);
        if h < COMPACT_MIN || h.saturating_mul(2) < self.data.len() || h > self.data.len() {
            return;
        }
        self.data.drain(..h);
        let head = self.head;
        self.marks.retain(|m| m.offset > head.offset);
        for m in &mut self.marks {
            m.offset = m.offset.saturating_sub(head.offset);
            m.seq = m.seq.saturating_sub(head.seq);
            m.cum = m.cum.saturating_sub(head.cum);
        }
        self.tail_seq = self.tail_seq.saturating_sub(head.seq);
        self.tail_cum = self.tail_cum.saturating_sub(head.cum);
        self.head = Pos {
            offset: 0,
            seq: 0,
            ts: head.ts,
            cum: 0,
        };
        trim(&mut self.data, 64);
        trim(&mut self.marks, 4);
    }

    /// The kept entries as the codec writes them (see `SlidingLog::encode`), in O(1): the head
    /// entry again, its Δ from the Unix epoch and its merged units added, then the packed bytes
    /// after it as they are (the same layout), then the tail.
    pub(super) fn encoding(&self) -> Encoding<'_> {
        let mut at = usize::try_from(self.head.offset).unwrap_or(usize::MAX);
        let head_units = if at < self.data.len() {
            get_entry(&self.data, &mut at).map(|(_, units)| units.saturating_add(self.merged))
        } else {
            None
        };
        match head_units {
            Some(units) => Encoding {
                first: Some((self.head.ts / US_PER_MS, units)),
                packed: self.data.get(at..).unwrap_or_default(),
                last: (
                    self.tail_ts.saturating_sub(self.last_ts) / US_PER_MS,
                    self.tail_units,
                ),
            },
            // The head is the tail: one entry.
            None => Encoding {
                first: None,
                packed: &[],
                last: (self.tail_ts / US_PER_MS, self.tail_units),
            },
        }
    }

    /// Heap bytes held, this struct included.
    pub(super) fn heap_size(&self) -> usize {
        std::mem::size_of::<Self>()
            .saturating_add(self.data.capacity())
            .saturating_add(
                self.marks
                    .capacity()
                    .saturating_mul(std::mem::size_of::<Pos>()),
            )
    }
}
