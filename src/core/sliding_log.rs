//! RL.SLIDING: an exact sliding-window log of granted units, packed to a few bytes per entry.
//!
//! An entry logged at time `ts` counts while `ts > now − window`; a request of `n` units is
//! granted iff the units counted at `now` plus `n` fit in `limit`. Denied requests are not logged.
//! A grant is logged at its bucket start `floor(now / precision)·precision` (default precision
//! 1 ms), or merged into the newest entry if that is not older — so the log is sorted, and a
//! `PRECISION` change only affects new entries. `retry_after` is exact: the time at which enough
//! of the oldest units have left the window; `reset_after` is when the newest entry leaves.
//! Parameter changes keep the entries (a raised limit never denies more than before).
//!
//! Layout: every entry but the newest is one LEB128 varint in a byte buffer, `(Δms << 1) | flag`
//! (Δ = milliseconds since the previous entry; every log time is a whole millisecond because
//! durations are), followed by the units as a second varint only when they are not 1. At 1 ms
//! precision a busy key takes one or two bytes per entry. The newest entry (the *tail*) is kept
//! unpacked so grants within one bucket are a plain addition. Expired entries are dropped by
//! advancing a *head* position over the buffer (O(1) per entry); the dead prefix is cut away
//! once it is at least half of the buffer, so that copy is amortized O(1) per entry too. One
//! *mark* (offset, ordinal, time and cumulative units before the entry) every 64 entries lets a
//! call find the first live entry, or the entry whose departure frees enough units, by binary
//! search and a scan of at most 64 entries: O(log N) per call, whatever the traffic, including
//! repeated denials on a full log.
//!
//! Bound: a key keeps at most [`MAX_ENTRIES`] entries. A grant that would add one more first
//! merges the two oldest entries into the later one: those units are kept, and leave the window
//! later than they would have — the limiter errs on the strict side and never forgets a unit
//! early. Keys that need more than 65,536 distinct buckets in one window should use a coarser
//! `PRECISION` (window / 65,536 keeps them exact).
//!
//! Memory: a 144-byte header, the packed entries (1–2 bytes each for unit costs at 1 ms), a
//! 32-byte mark per 64 entries, a dead prefix no larger than the live part, and spare capacity
//! below half (buffers grow by half, and shrink at compaction). A 1000-entry key measures about
//! 1.8 bytes per entry in `MEMORY USAGE`; a key at the bound with small entries 1 ms apart, about
//! 7 bytes per entry at worst (some 440 KB).

use crate::core::codec::{self, Reader};
use crate::core::gcra::MAX_PARAM;
use crate::core::limiter::{Algorithm, Retry, Verdict, state_access};
use crate::core::state::{AlgoState, Kind};
use crate::core::time::{MAX_TIME, Micros, US_PER_MS};
use crate::core::{CoreError, check_count, check_duration};

/// The most entries one key keeps (see the module docs for what happens past it).
pub const MAX_ENTRIES: u32 = 65_536;

/// One mark every this many entries.
const MARK_EVERY: u32 = 64;

/// The dead prefix is cut away only from this size on (tiny copies are not worth a call).
const COMPACT_MIN: usize = 16;

/// `PRECISION` when not given: 1 ms.
pub const DEFAULT_PRECISION: Micros = US_PER_MS;

/// Validated parameters: at most `limit` units in any `window`, logged in buckets of `precision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingParams {
    limit: u64,
    window: Micros,
    precision: Micros,
}

impl SlidingParams {
    /// Validate the parameters (`window` and `precision` in µs, whole milliseconds).
    ///
    /// # Errors
    /// [`CoreError::InvalidParam`] when `limit` is 0 or above [`MAX_PARAM`], a duration is not a
    /// positive whole number of milliseconds up to [`MAX_PARAM`] µs, or `precision > window`.
    pub fn new(limit: u64, window: Micros, precision: Micros) -> Result<Self, CoreError> {
        const WHOLE_MS: &str = "must be a whole number of milliseconds";
        let limit = check_count(limit, "limit")?;
        let window = check_duration(window, "window")?;
        let precision = check_duration(precision, "PRECISION")?;
        if !window.is_multiple_of(US_PER_MS) {
            return Err(CoreError::InvalidParam("window", WHOLE_MS));
        }
        if !precision.is_multiple_of(US_PER_MS) {
            return Err(CoreError::InvalidParam("PRECISION", WHOLE_MS));
        }
        if precision > window {
            return Err(CoreError::InvalidParam(
                "PRECISION",
                "must not be longer than window",
            ));
        }
        Ok(SlidingParams {
            limit,
            window,
            precision,
        })
    }

    /// Units allowed in one window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window in µs.
    pub fn window(&self) -> Micros {
        self.window
    }

    /// The bucket length in µs.
    pub fn precision(&self) -> Micros {
        self.precision
    }

    /// The start of `now`'s bucket.
    fn bucket(&self, now: Micros) -> Micros {
        now.saturating_sub(now.checked_rem(self.precision).unwrap_or(0))
    }
}

/// Append one packed entry.
fn put_entry(out: &mut Vec<u8>, delta_ms: u64, units: u64) {
    let flag = u64::from(units != 1);
    codec::put_u64(out, delta_ms.saturating_mul(2) | flag);
    if units != 1 {
        codec::put_u64(out, units);
    }
}

/// Read one LEB128 varint at `*at`, advancing it.
fn get_varint(data: &[u8], at: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift: u32 = 0;
    loop {
        let b = *data.get(*at)?;
        *at = at.checked_add(1)?;
        v |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift = shift.checked_add(7)?;
    }
}

/// Read one packed entry at `*at`: its Δms and its units.
fn get_entry(data: &[u8], at: &mut usize) -> Option<(u64, u64)> {
    let v = get_varint(data, at)?;
    let units = if v & 1 == 1 { get_varint(data, at)? } else { 1 };
    Some((v >> 1, units))
}

/// A known place in the log: where an entry starts, its ordinal, its time, and the units logged
/// before it (all since the last compaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pos {
    offset: u32,
    seq: u32,
    ts: Micros,
    cum: u128,
}

/// One entry, where it is, and its units.
#[derive(Debug, Clone, Copy)]
struct Item {
    pos: Pos,
    units: u64,
}

/// The entries of a non-empty log. See the module docs.
#[derive(Debug, Clone)]
struct Log {
    /// Packed entries, all but the tail; the bytes before `head.offset` are dead.
    data: Vec<u8>,
    /// A position every [`MARK_EVERY`] entries, in order; those at or before the head are stale.
    marks: Vec<Pos>,
    /// The first kept entry (`offset == data.len()` when it is the tail).
    head: Pos,
    /// Units merged into the head entry beyond what its bytes say (see [`MAX_ENTRIES`]).
    carry: u64,
    /// Time of the last packed entry, the base of the next Δ.
    last_ts: Micros,
    tail_ts: Micros,
    tail_seq: u32,
    /// Units logged before the tail.
    tail_cum: u128,
    tail_units: u64,
}

/// Walks the entries from a position to the tail.
struct Scan<'a> {
    log: &'a Log,
    offset: usize,
    seq: u32,
    ts: Micros,
    cum: u128,
    /// The entry at `offset` has time `ts` (a known position); later ones add their Δ.
    first: bool,
    carry: u64,
    done: bool,
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
            let units = units.checked_add(self.carry)?;
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
        self.carry = 0;
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
    fn single(ts: Micros, units: u64) -> Self {
        Log {
            data: Vec::new(),
            marks: Vec::new(),
            head: Pos {
                offset: 0,
                seq: 0,
                ts,
                cum: 0,
            },
            carry: 0,
            last_ts: ts,
            tail_ts: ts,
            tail_seq: 0,
            tail_cum: 0,
            tail_units: units,
        }
    }

    /// Make this a log of one entry, releasing the buffers (the window has emptied: a key that
    /// was busy does not keep its peak memory).
    fn reset(&mut self, ts: Micros, units: u64) {
        *self = Log::single(ts, units);
    }

    fn data_len_u32(&self) -> u32 {
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }

    fn tail_item(&self) -> Item {
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
    fn len(&self) -> u32 {
        self.tail_seq
            .saturating_sub(self.head.seq)
            .saturating_add(1)
    }

    /// Units logged up to and including the tail.
    fn cum_end(&self) -> u128 {
        self.tail_cum.saturating_add(u128::from(self.tail_units))
    }

    /// Walk from `pos`; `carry` is added to its entry (only the head has one).
    fn scan_from(&self, pos: Pos, carry: u64) -> Scan<'_> {
        Scan {
            log: self,
            offset: usize::try_from(pos.offset).unwrap_or(usize::MAX),
            seq: pos.seq,
            ts: pos.ts,
            cum: pos.cum,
            first: true,
            carry,
            done: false,
        }
    }

    /// Walk every kept entry.
    fn scan(&self) -> Scan<'_> {
        self.scan_from(self.head, self.carry)
    }

    /// Walk from a kept entry (found by an earlier scan).
    fn scan_at(&self, item: &Item) -> Scan<'_> {
        if item.pos.seq == self.head.seq {
            self.scan()
        } else {
            self.scan_from(item.pos, 0)
        }
    }

    /// The marks past the head, the only ones that describe kept entries exactly.
    fn live_marks(&self) -> &[Pos] {
        let i = self.marks.partition_point(|m| m.offset <= self.head.offset);
        self.marks.get(i..).unwrap_or_default()
    }

    /// The oldest entry that counts after `cutoff` (all count when `None`).
    fn first_live(&self, cutoff: Option<Micros>) -> Option<Item> {
        let live = |ts: Micros| cutoff.is_none_or(|c| ts > c);
        let from = if live(self.head.ts) {
            None
        } else {
            let marks = self.live_marks();
            let expired = marks.partition_point(|m| !live(m.ts));
            expired.checked_sub(1).and_then(|i| marks.get(i)).copied()
        };
        let mut scan = match from {
            Some(mark) => self.scan_from(mark, 0),
            None => self.scan(),
        };
        scan.find(|item| live(item.pos.ts))
    }

    /// The first entry by whose end `target` units (counted like `cum`) have been logged.
    fn reaching(&self, target: u128) -> Option<Item> {
        let marks = self.live_marks();
        let before = marks.partition_point(|m| m.cum < target);
        let mut scan = match before.checked_sub(1).and_then(|i| marks.get(i)) {
            Some(mark) => self.scan_from(*mark, 0),
            None => self.scan(),
        };
        scan.find(|item| item.pos.cum.saturating_add(u128::from(item.units)) >= target)
    }

    /// Drop the entries that no longer count after `cutoff`; `false` if none counts.
    fn prune(&mut self, cutoff: Option<Micros>) -> bool {
        let Some(first) = self.first_live(cutoff) else {
            return false;
        };
        if first.pos.seq != self.head.seq {
            self.head = first.pos;
            self.carry = 0;
        }
        true
    }

    /// Merge the oldest entry into the next one (which keeps its later time).
    fn merge_oldest(&mut self) -> Result<(), CoreError> {
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
            self.carry = 0;
        } else {
            self.head = Pos {
                cum: oldest.pos.cum,
                ..next.pos
            };
            self.carry = oldest.units;
        }
        Ok(())
    }

    /// Pack the tail and start a new one at `ts` (later than the tail).
    fn push(&mut self, ts: Micros, units: u64) -> Result<(), CoreError> {
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
    fn compact(&mut self) {
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

    /// Heap bytes held, this struct included.
    fn heap_size(&self) -> usize {
        std::mem::size_of::<Self>()
            .saturating_add(self.data.capacity())
            .saturating_add(
                self.marks
                    .capacity()
                    .saturating_mul(std::mem::size_of::<Pos>()),
            )
    }
}

/// RL.SLIDING's state: the parameters and, once anything was granted, the log.
#[derive(Debug, Clone)]
pub struct SlidingLog {
    params: SlidingParams,
    // Boxed: the fixed-size algorithms must not pay for the log in every key.
    log: Option<Box<Log>>,
}

impl PartialEq for SlidingLog {
    /// Equal parameters and entries (however the buffers happen to be laid out).
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params && self.entries().eq(other.entries())
    }
}

impl Eq for SlidingLog {}

impl SlidingLog {
    /// The kept entries, oldest first, as (time in µs, units). Some may have expired since the
    /// last grant: they are dropped by the next one.
    pub fn entries(&self) -> impl Iterator<Item = (Micros, u64)> + '_ {
        self.log
            .iter()
            .flat_map(|l| l.scan().map(|item| (item.pos.ts, item.units)))
    }

    /// Number of kept entries.
    pub fn len(&self) -> usize {
        self.log
            .as_ref()
            .map_or(0, |l| usize::try_from(l.len()).unwrap_or(usize::MAX))
    }

    /// No entry kept.
    pub fn is_empty(&self) -> bool {
        self.log.is_none()
    }

    /// [`Algorithm::evaluate`] with an explicit bound on entries (tests use small ones).
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the numbers do not fit (not with validated parameters).
    pub fn evaluate_with(
        &self,
        params: &SlidingParams,
        now: Micros,
        cost: u64,
        best_effort: bool,
        max_entries: u32,
    ) -> Result<Verdict, CoreError> {
        let window = params.window;
        let limit = params.limit;
        let log = self.log.as_deref();
        let first = log.and_then(|l| l.first_live(now.checked_sub(window)));
        let (count, live_entries, newest) = match (log, &first) {
            (Some(l), Some(f)) => {
                let units = l.cum_end().saturating_sub(f.pos.cum);
                let entries = l.tail_seq.saturating_sub(f.pos.seq).saturating_add(1);
                (
                    u64::try_from(units).unwrap_or(u64::MAX),
                    entries,
                    Some(l.tail_ts),
                )
            }
            _ => (0, 0, None),
        };
        let avail = limit.saturating_sub(count);
        let granted = if cost <= avail {
            cost
        } else if best_effort {
            avail
        } else {
            0
        };
        // Where this call's units go: its bucket, or the newest entry if that is not older.
        let at = newest.map_or(params.bucket(now), |t| t.max(params.bucket(now)));
        let adds_entry = granted > 0 && newest != Some(at);
        let merges = adds_entry && live_entries >= max_entries.max(2);

        let retry = if granted == cost {
            Retry::Granted
        } else if cost > limit {
            Retry::Never
        } else {
            // Units that must leave the window first (≥ 1, and at most those logged).
            let need = u128::from(count)
                .saturating_add(u128::from(granted))
                .saturating_add(u128::from(cost))
                .checked_sub(u128::from(limit))
                .ok_or(CoreError::Overflow)?;
            let leaves = match (log, &first) {
                (Some(l), Some(f)) => match l.reaching(f.pos.cum.saturating_add(need)) {
                    // This call's grant merges the two oldest: the first leaves with the second.
                    Some(e) if merges && e.pos.seq == f.pos.seq => {
                        l.scan_at(f).nth(1).map_or(at, |second| second.pos.ts)
                    }
                    Some(e) => e.pos.ts,
                    // Only this call's own units are left to leave.
                    None => at,
                },
                _ => at,
            };
            Retry::After(leaves.saturating_add(window).saturating_sub(now))
        };
        let newest_after = if granted > 0 { Some(at) } else { newest };
        Ok(Verdict {
            granted,
            limit,
            remaining: limit.saturating_sub(count.saturating_add(granted)),
            retry,
            reset_after: newest_after.map_or(0, |t| t.saturating_add(window).saturating_sub(now)),
        })
    }

    /// [`Algorithm::commit`] with an explicit bound on entries.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] if the numbers do not fit (not with validated parameters).
    pub fn commit_with(
        &mut self,
        params: &SlidingParams,
        now: Micros,
        granted: u64,
        max_entries: u32,
    ) -> Result<(), CoreError> {
        self.params = *params;
        if granted == 0 {
            return Ok(());
        }
        let bucket = params.bucket(now);
        let Some(log) = self.log.as_deref_mut() else {
            self.log = Some(Box::new(Log::single(bucket, granted)));
            return Ok(());
        };
        if !log.prune(now.checked_sub(params.window)) {
            // Everything expired: start over.
            log.reset(bucket, granted);
            return Ok(());
        }
        let at = log.tail_ts.max(bucket);
        if at == log.tail_ts {
            log.tail_units = log
                .tail_units
                .checked_add(granted)
                .ok_or(CoreError::Overflow)?;
        } else {
            if log.len() >= max_entries.max(2) {
                log.merge_oldest()?;
            }
            log.push(at, granted)?;
        }
        log.compact();
        Ok(())
    }
}

impl Algorithm for SlidingLog {
    type Params = SlidingParams;
    const KIND: Kind = Kind::Sliding;

    fn fresh(params: &SlidingParams) -> Self {
        SlidingLog {
            params: *params,
            log: None,
        }
    }

    fn params(&self) -> &SlidingParams {
        &self.params
    }

    fn evaluate(
        &self,
        params: &SlidingParams,
        now: Micros,
        cost: u64,
        best_effort: bool,
    ) -> Result<Verdict, CoreError> {
        self.evaluate_with(params, now, cost, best_effort, MAX_ENTRIES)
    }

    fn commit(
        &mut self,
        params: &SlidingParams,
        now: Micros,
        granted: u64,
    ) -> Result<(), CoreError> {
        self.commit_with(params, now, granted, MAX_ENTRIES)
    }

    /// When the newest entry leaves the window.
    fn fresh_at(&self) -> Micros {
        self.log
            .as_ref()
            .map_or(0, |l| l.tail_ts.saturating_add(self.params.window))
    }

    fn dedup_until(params: &SlidingParams, now: Micros) -> Micros {
        now.saturating_add(params.window)
    }

    fn describe(params: &SlidingParams) -> Vec<(&'static str, u64)> {
        vec![
            ("limit", params.limit),
            ("window_ms", params.window / US_PER_MS),
            ("precision_ms", params.precision / US_PER_MS),
        ]
    }

    fn heap_size(&self) -> usize {
        self.log.as_ref().map_or(0, |l| l.heap_size())
    }

    /// Parameters (µs), the number of entries, then each entry as in the in-memory buffer:
    /// `(Δms << 1) | flag` and the units when the flag is set, where the first Δ is from the
    /// Unix epoch.
    fn encode(&self, out: &mut Vec<u8>) {
        codec::put_u64(out, self.params.limit);
        codec::put_u64(out, self.params.window);
        codec::put_u64(out, self.params.precision);
        codec::put_u64(out, self.len() as u64);
        let mut prev_ms = 0;
        for (ts, units) in self.entries() {
            let ms = ts / US_PER_MS;
            put_entry(out, ms.saturating_sub(prev_ms), units);
            prev_ms = ms;
        }
    }

    /// The inverse of `encode`. Refuses invalid parameters, more than [`MAX_ENTRIES`] entries
    /// (or more than the bytes left could hold), unsorted or duplicate times, times past
    /// [`MAX_TIME`], a flagged unit count below 2, and more than [`MAX_PARAM`] units in all.
    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        let limit = input.u64()?;
        let window = input.u64()?;
        let precision = input.u64()?;
        let params = SlidingParams::new(limit, window, precision).ok()?;
        let count = input.u64()?;
        if count > u64::from(MAX_ENTRIES) || count > input.remaining() as u64 {
            return None;
        }
        let mut log: Option<Box<Log>> = None;
        let mut ms: u64 = 0;
        let mut total: u64 = 0;
        for i in 0..count {
            let v = input.u64()?;
            let units = if v & 1 == 1 {
                Some(input.u64()?).filter(|&u| u >= 2)?
            } else {
                1
            };
            let delta = v >> 1;
            if i > 0 && delta == 0 {
                return None;
            }
            ms = ms.checked_add(delta)?;
            let ts = ms.checked_mul(US_PER_MS).filter(|&t| t <= MAX_TIME)?;
            total = total.checked_add(units).filter(|&t| t <= MAX_PARAM)?;
            match log.as_deref_mut() {
                Some(l) => l.push(ts, units).ok()?,
                None => log = Some(Box::new(Log::single(ts, units))),
            }
        }
        Some(SlidingLog { params, log })
    }

    state_access!(Sliding);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::dedup::DedupId;
    use crate::core::limiter::{self, Decision, Request, Write};
    use crate::core::state::LimiterState;
    use crate::core::testkit::{self, GrantedRetry, T0};
    use proptest::prelude::*;
    const MS: Micros = US_PER_MS;

    fn params(limit: u64, window_ms: u64, precision_ms: u64) -> SlidingParams {
        SlidingParams::new(limit, window_ms * MS, precision_ms * MS).unwrap()
    }

    fn log_of(state: &LimiterState) -> &SlidingLog {
        SlidingLog::from_state(&state.algo).unwrap()
    }

    /// One request through the shared flow (`apply`), keeping a created state.
    fn call(state: &mut Option<LimiterState>, p: &SlidingParams, req: &Request) -> Verdict {
        let out = limiter::apply::<SlidingLog>(state.as_mut(), p, req, 1000).unwrap();
        if let Write::Created(s) = out.write {
            *state = Some(s);
        }
        out.verdict
    }

    // ---- the naive model: a plain list of (time, units), written from SPEC.md ----

    #[derive(Debug, Clone)]
    struct Model {
        log: Vec<(Micros, u64)>,
        max: usize,
    }

    impl Model {
        fn new(max: u32) -> Self {
            Model {
                log: Vec::new(),
                max: max as usize,
            }
        }

        /// Units that count at `t`: logged at ts with ts > t − window.
        fn count(&self, window: Micros, t: Micros) -> u64 {
            self.log
                .iter()
                .filter(|(ts, _)| ts + window > t)
                .map(|(_, u)| u)
                .sum()
        }

        /// Log a grant; returns the time it was logged at.
        fn commit(&mut self, p: &SlidingParams, now: Micros, granted: u64) -> Micros {
            let w = p.window();
            self.log.retain(|(ts, _)| ts + w > now);
            let bucket = now / p.precision() * p.precision();
            let at = self.log.last().map_or(bucket, |e| e.0.max(bucket));
            match self.log.last_mut() {
                Some(e) if e.0 == at => e.1 += granted,
                _ => {
                    if self.log.len() >= self.max {
                        let (_, units) = self.log.remove(0);
                        self.log[0].1 += units;
                    }
                    self.log.push((at, granted));
                }
            }
            at
        }

        /// The reply, computed on the state after the call; retry by trying every expiry time.
        fn verdict(&self, p: &SlidingParams, now: Micros, cost: u64, be: bool) -> (Verdict, Self) {
            let (limit, w) = (p.limit(), p.window());
            let count = self.count(w, now);
            let avail = limit.saturating_sub(count);
            let granted = if cost <= avail {
                cost
            } else if be {
                avail
            } else {
                0
            };
            let mut post = self.clone();
            if granted > 0 {
                post.commit(p, now, granted);
            }
            let expiries: Vec<Micros> = post
                .log
                .iter()
                .filter(|(ts, _)| ts + w > now)
                .map(|(ts, _)| ts + w)
                .collect();
            let retry = if granted == cost {
                Retry::Granted
            } else if cost > limit {
                Retry::Never
            } else {
                let t = expiries
                    .iter()
                    .copied()
                    .filter(|&t| post.count(w, t) + cost <= limit)
                    .min()
                    .expect("some departure frees enough units");
                Retry::After(t - now)
            };
            let verdict = Verdict {
                granted,
                limit,
                remaining: limit.saturating_sub(post.count(w, now)),
                retry,
                reset_after: expiries.iter().max().map_or(0, |t| t - now),
            };
            (verdict, post)
        }
    }

    /// The naive model behind the shared suite's driver: the per-key clock, and a commit on
    /// every granted call that is not a PEEK.
    struct Clocked {
        model: Model,
        last: Micros,
    }

    impl testkit::Model for Clocked {
        type Params = SlidingParams;

        fn call(
            &mut self,
            p: &SlidingParams,
            now: Micros,
            cost: u64,
            be: bool,
            peek: bool,
        ) -> Verdict {
            let now = now.max(self.last);
            let (v, post) = self.model.verdict(p, now, cost, be);
            if v.granted > 0 && !peek {
                self.model = post;
                self.last = now;
            }
            v
        }
    }

    fn clocked() -> Clocked {
        Clocked {
            model: Model::new(MAX_ENTRIES),
            last: 0,
        }
    }

    /// A limit of 7 in 1 s at 1 ms, and variants: other limits, windows and precisions.
    fn param_sets() -> Vec<SlidingParams> {
        vec![
            params(7, 1000, 1),
            params(3, 1000, 1),
            params(12, 400, 50),
            params(7, 2500, 300),
        ]
    }

    // ---- table-driven semantics ----

    #[test]
    fn sliding_replies_follow_the_log() {
        let p = params(3, 1000, 1);
        #[rustfmt::skip]
        let cases: &[(u64, u64, bool, u64, u64, Retry, u64)] = &[
            // at_ms  cost best   granted remaining retry                   reset_ms
            (0,       1,   false, 1,      2,        Retry::Granted,         1000),
            (100,     1,   false, 1,      1,        Retry::Granted,         1000),
            (200,     1,   false, 1,      0,        Retry::Granted,         1000),
            // full: the entry at 0 leaves at 1000
            (300,     1,   false, 0,      0,        Retry::After(700 * MS), 900),
            (300,     0,   false, 0,      0,        Retry::Granted,         900),
            (300,     4,   false, 0,      0,        Retry::Never,           900),
            // at exactly 1000 the entry at 0 no longer counts
            (1000,    1,   false, 1,      0,        Retry::Granted,         1000),
            // two units must leave: the second oldest (200) leaves at 1200
            (1000,    2,   false, 0,      0,        Retry::After(200 * MS), 1000),
            // 100 left at 1100: one unit available, granted in part; then all three must leave
            (1150,    3,   true,  1,      0,        Retry::After(1000 * MS), 1000),
        ];
        let mut state = None;
        for &(at_ms, cost, best, granted, remaining, retry, reset_ms) in cases {
            let req = Request {
                best_effort: best,
                ..Request::new(cost, T0 + at_ms * MS)
            };
            let v = call(&mut state, &p, &req);
            let want = Verdict {
                granted,
                limit: 3,
                remaining,
                retry,
                reset_after: reset_ms * MS,
            };
            assert_eq!(v, want, "at {at_ms} ms, cost {cost}");
        }
        let entries: Vec<_> = log_of(state.as_ref().unwrap()).entries().collect();
        assert_eq!(
            entries,
            vec![(T0 + 200 * MS, 1), (T0 + 1000 * MS, 1), (T0 + 1150 * MS, 1)]
        );
    }

    #[test]
    fn sliding_retry_is_exact_to_the_microsecond() {
        let p = params(2, 1000, 1);
        let mut state = None;
        call(&mut state, &p, &Request::new(1, T0 + 1_500));
        call(&mut state, &p, &Request::new(1, T0 + 3_250));
        let denied = call(&mut state, &p, &Request::new(1, T0 + 500_123));
        // The first grant is logged at T0 + 1 ms (its bucket) and leaves at T0 + 1001 ms.
        assert_eq!(denied.retry, Retry::After(1_001_000 - 500_123));
        assert_eq!(Decision::from(denied).retry_after_ms, 501);
        let s = log_of(state.as_ref().unwrap());
        assert_eq!(s.evaluate(&p, T0 + 1_000_999, 1, false).unwrap().granted, 0);
        assert_eq!(s.evaluate(&p, T0 + 1_001_000, 1, false).unwrap().granted, 1);
    }

    #[test]
    fn sliding_precision_merges_a_bucket_into_one_entry() {
        let p = params(10, 1000, 100);
        let mut state = None;
        for at in [1_000, 1_050, 1_099_999 / MS] {
            call(&mut state, &p, &Request::new(1, T0 + at * MS));
        }
        call(&mut state, &p, &Request::new(2, T0 + 1_099_999));
        let s = log_of(state.as_ref().unwrap());
        assert_eq!(s.entries().collect::<Vec<_>>(), vec![(T0 + 1_000 * MS, 5)]);
        // The bucket leaves at its start + window.
        let v = s.evaluate(&p, T0 + 1_500 * MS, 6, false).unwrap();
        assert_eq!(v.retry, Retry::After(500 * MS));
        assert_eq!(v.reset_after, 500 * MS);
    }

    #[test]
    fn sliding_precision_change_never_logs_before_the_newest_entry() {
        let mut state = None;
        call(
            &mut state,
            &params(10, 5000, 1),
            &Request::new(1, T0 + 1_999_500),
        );
        // A coarser precision would put this call at T0 + 1 s, before the newest entry: it is
        // merged into that entry instead, so the log stays sorted.
        call(
            &mut state,
            &params(10, 5000, 1000),
            &Request::new(1, T0 + 1_999_700),
        );
        call(
            &mut state,
            &params(10, 5000, 1000),
            &Request::new(1, T0 + 2_000_100),
        );
        let s = log_of(state.as_ref().unwrap());
        assert_eq!(
            s.entries().collect::<Vec<_>>(),
            vec![(T0 + 1_999 * MS, 2), (T0 + 2_000 * MS, 1)]
        );
        assert_eq!(s.params().precision(), 1_000 * MS);
    }

    #[test]
    fn sliding_parameter_change_keeps_the_entries() {
        let mut state = None;
        for i in 0..3 {
            call(
                &mut state,
                &params(3, 1000, 1),
                &Request::new(1, T0 + i * MS),
            );
        }
        // Raising the limit grants on top of what is logged; lowering it denies.
        let v = call(
            &mut state,
            &params(5, 1000, 1),
            &Request::new(2, T0 + 10 * MS),
        );
        assert_eq!((v.granted, v.remaining), (2, 0));
        let v = call(
            &mut state,
            &params(2, 1000, 1),
            &Request::new(1, T0 + 20 * MS),
        );
        assert_eq!((v.granted, v.remaining), (0, 0));
        // 4 of the 5 logged units must leave: the one logged at 10 ms leaves at 1010 ms.
        assert_eq!(v.retry, Retry::After(990 * MS));
        // A shorter window lets the old entries go sooner.
        let v = call(&mut state, &params(2, 5, 1), &Request::new(1, T0 + 20 * MS));
        assert_eq!((v.granted, v.remaining), (1, 1));
    }

    #[test]
    fn sliding_dedup_is_remembered_for_one_window() {
        let p = params(5, 1000, 1);
        let mut state = None;
        let id = DedupId::of(b"req-1");
        let req = |cost, at_ms| Request {
            dedup: Some(id),
            ..Request::new(cost, T0 + at_ms * MS)
        };
        assert_eq!(call(&mut state, &p, &req(2, 0)).granted, 2);
        let again = call(&mut state, &p, &req(2, 999));
        assert_eq!((again.granted, again.remaining), (2, 3));
        assert_eq!(log_of(state.as_ref().unwrap()).len(), 1);
        // A window later the id is forgotten and the call is charged.
        let later = call(&mut state, &p, &req(2, 1000));
        assert_eq!((later.granted, later.remaining), (2, 3));
    }

    #[test]
    fn sliding_time_never_goes_back_for_a_key() {
        let p = params(1, 1000, 1);
        let mut state = None;
        call(&mut state, &p, &Request::new(1, T0 + 5_000 * MS));
        // A call from the past is evaluated at the last update: still denied.
        let v = call(&mut state, &p, &Request::new(1, T0));
        assert_eq!(v.granted, 0);
        assert_eq!(v.retry, Retry::After(1000 * MS));
    }

    // ---- the packed log ----

    #[test]
    fn sliding_log_packs_an_entry_in_one_or_two_bytes() {
        for (spacing_ms, window_ms, max_bytes) in
            [(1, 1_000, 1.0), (60, 60_000, 1.0), (3_600, 3_600_000, 2.0)]
        {
            let p = params(1000, window_ms, 1);
            let mut s = SlidingLog::fresh(&p);
            for i in 0..1000 {
                s.commit(&p, T0 + i * spacing_ms * MS, 1).unwrap();
            }
            let log = s.log.as_ref().unwrap();
            assert_eq!(log.len(), 1000);
            assert!(
                log.data.len() as f64 <= 999.0 * max_bytes,
                "{}",
                log.data.len()
            );
            let per_entry = s.heap_size() as f64 / 1000.0;
            assert!(
                per_entry <= 4.0,
                "{per_entry} bytes per entry at {spacing_ms} ms"
            );
        }
    }

    #[test]
    fn sliding_log_drops_expired_entries_and_compacts() {
        let p = params(1_000_000, 100, 1);
        let mut s = SlidingLog::fresh(&p);
        for i in 0..20_000 {
            s.commit(&p, T0 + i * MS, 1 + i % 3).unwrap();
            let log = s.log.as_ref().unwrap();
            assert!(log.len() <= 100);
            // The dead prefix never outgrows the live part (plus a few bytes).
            assert!(
                log.data.len() <= 2 * (log.data.len() - log.head.offset as usize) + COMPACT_MIN
            );
            assert!(log.marks.len() <= 4);
        }
        let entries: Vec<_> = s.entries().collect();
        let want: Vec<_> = (19_900..20_000).map(|i| (T0 + i * MS, 1 + i % 3)).collect();
        assert_eq!(entries, want);
        assert!(s.heap_size() < 1_024, "{}", s.heap_size());
    }

    #[test]
    fn sliding_log_finds_entries_through_marks() {
        // 10,000 entries with distinct unit counts: every lookup through the marks agrees with
        // a plain linear walk over the entries.
        let p = params(u64::MAX >> 2, 100_000, 1);
        let mut s = SlidingLog::fresh(&p);
        for i in 0..10_000u64 {
            s.commit(&p, T0 + i * 7 * MS, 1 + i % 5).unwrap();
        }
        let entries: Vec<(Micros, u64)> = s.entries().collect();
        assert!(s.log.as_ref().unwrap().marks.len() >= 150);
        for probe in (0..80_000).step_by(997) {
            let now = T0 + 70_000 * MS + probe * MS;
            let live: Vec<_> = entries
                .iter()
                .filter(|(ts, _)| ts + p.window() > now)
                .collect();
            let count: u64 = live.iter().map(|(_, u)| u).sum();
            for cost in [1, 7, 1_000, 9_999] {
                let limit = count + cost / 2;
                let q = SlidingParams::new(limit, p.window(), p.precision()).unwrap();
                let got = s.evaluate(&q, now, cost, false).unwrap();
                let need = count + cost - limit;
                let mut sum = 0;
                let leaves = live
                    .iter()
                    .find(|(_, u)| {
                        sum += u;
                        sum >= need
                    })
                    .map(|(ts, _)| ts + p.window());
                assert_eq!(got.granted, 0);
                assert_eq!(got.remaining, cost / 2);
                assert_eq!(
                    got.retry,
                    Retry::After(leaves.unwrap() - now),
                    "now {now} cost {cost}"
                );
            }
        }
    }

    #[test]
    fn sliding_log_merges_the_oldest_past_the_bound() {
        let p = params(100, 1000, 1);
        let mut s = SlidingLog::fresh(&p);
        for i in 0..5 {
            s.commit_with(&p, T0 + i * 10 * MS, 1 + i, 3).unwrap();
        }
        // 0 merged into 10, then that into 20: units are kept and leave later, never earlier.
        assert_eq!(
            s.entries().collect::<Vec<_>>(),
            vec![(T0 + 20 * MS, 6), (T0 + 30 * MS, 4), (T0 + 40 * MS, 5)]
        );
    }

    #[test]
    fn sliding_log_stays_bounded_under_a_million_units() {
        // One call of a million units is one entry.
        let p = params(2_000_000, 3_600_000, 1);
        let mut s = SlidingLog::fresh(&p);
        s.commit(&p, T0, 1_000_000).unwrap();
        assert_eq!(s.len(), 1);
        // 200,000 calls in distinct milliseconds: the log stops at MAX_ENTRIES, every unit kept.
        for i in 1..200_000 {
            let now = T0 + i * MS;
            let v = s.evaluate(&p, now, 5, false).unwrap();
            assert_eq!(v.granted, 5);
            s.commit(&p, now, 5).unwrap();
        }
        assert_eq!(s.len(), MAX_ENTRIES as usize);
        let v = s.evaluate(&p, T0 + 200_000 * MS, 0, false).unwrap();
        assert_eq!(v.remaining, 2_000_000 - 1_000_000 - 5 * 199_999);
        // 65,536 two-byte entries, at most as many dead bytes before a compaction, spare
        // capacity of at most half, and the marks: well under 8 bytes per entry.
        assert!(
            s.heap_size() < 8 * MAX_ENTRIES as usize,
            "{}",
            s.heap_size()
        );
        // Deep denials on the full log: each a binary search and a short scan.
        for cost in (1..2_000_000).step_by(10_007) {
            let v = s.evaluate(&p, T0 + 200_000 * MS, cost, false).unwrap();
            assert!(v.granted == cost || matches!(v.retry, Retry::After(_)));
        }
    }

    #[test]
    fn sliding_state_fits_the_shared_value_size() {
        assert!(std::mem::size_of::<SlidingLog>() <= 32);
        assert!(std::mem::size_of::<LimiterState>() <= 64);
    }

    // ---- the codec ----

    /// limit 10, window 1 s, precision 1 ms; entries at T0 (1 unit), +5 ms (3), +7 ms (1).
    fn fixture_state() -> LimiterState {
        let p = params(10, 1000, 1);
        let mut s = SlidingLog::fresh(&p);
        s.commit(&p, T0, 1).unwrap();
        s.commit(&p, T0 + 5 * MS + 300, 3).unwrap();
        s.commit(&p, T0 + 7 * MS, 1).unwrap();
        LimiterState::new(s.into_state(), T0 + 7 * MS)
    }

    #[rustfmt::skip]
    const FIXTURE: &[u8] = &[
        0x01, 0x05,                                     // version, kind Sliding
        0xd8, 0xb6, 0xf9, 0xc0, 0xc1, 0xc4, 0x82, 0x03, // last update (µs)
        0x0a, 0xc0, 0x84, 0x3d, 0xe8, 0x07,             // limit 10, window 1e6 µs, precision 1e3 µs
        0x03,                                           // 3 entries
        0x80, 0xa0, 0xab, 0xfe, 0xf9, 0x62,             // T0 in ms << 1, 1 unit
        0x0b, 0x03,                                     // +5 ms, flag, 3 units
        0x04,                                           // +2 ms, 1 unit
        0x00,                                           // no dedup ids
    ];

    #[test]
    fn sliding_codec_matches_the_byte_fixture() {
        let state = fixture_state();
        assert_eq!(codec::encode(&state), FIXTURE);
        assert_eq!(codec::decode(FIXTURE), Some(state));
    }

    #[test]
    fn sliding_codec_refuses_bad_payloads() {
        for len in 0..FIXTURE.len() {
            assert_eq!(codec::decode(&FIXTURE[..len]), None, "truncated at {len}");
        }
        let with = |at: usize, bytes: &[u8]| {
            let mut v = FIXTURE[..at].to_vec();
            v.extend_from_slice(bytes);
            v
        };
        let bad: Vec<Vec<u8>> = vec![
            // precision (2 s) longer than the window
            with(14, &[0x80, 0x89, 0x7a, 0x00]),
            // a count larger than the bytes left
            with(16, &[0xff, 0xff, 0x03, 0x02, 0x00]),
            // a count above MAX_ENTRIES
            with(16, &[0x81, 0x80, 0x04]),
            // a second entry at the same time as the first
            with(23, &[0x00, 0x04, 0x00]),
            // a flagged unit count of 1
            with(23, &[0x0b, 0x01, 0x04, 0x00]),
            // a time past MAX_TIME
            with(
                17,
                &[
                    0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x0b, 0x03, 0x04,
                    0x00,
                ],
            ),
            // more units than MAX_PARAM
            with(
                23,
                &[
                    0x0b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x04, 0x00,
                ],
            ),
            // a trailing byte
            with(FIXTURE.len(), &[0x00]),
        ];
        for payload in bad {
            assert_eq!(codec::decode(&payload), None, "{payload:02x?}");
        }
    }

    // ---- property tests against the model ----

    #[derive(Debug, Clone)]
    struct Step {
        dt: i64,
        cost: u64,
        peek: bool,
        best_effort: bool,
        params: Option<SlidingParams>,
    }

    fn params_strategy() -> impl Strategy<Value = SlidingParams> {
        (1u64..12, 1u64..1500)
            .prop_flat_map(|(limit, window)| (Just(limit), Just(window), 1..=window))
            .prop_map(|(l, w, d)| params(l, w, d))
    }

    fn step_strategy() -> impl Strategy<Value = Step> {
        let dt = prop_oneof![
            3 => 0i64..2_000,
            3 => (0i64..500).prop_map(|ms| ms * 1000),
            1 => (1i64..2_000).prop_map(|ms| ms * 1000 + 17),
            1 => (-400i64..0).prop_map(|ms| ms * 1000 - 7),
            1 => Just(0i64),
        ];
        let cost = prop_oneof![4 => 1u64..3, 2 => 0u64..14];
        let change = proptest::option::weighted(0.08, params_strategy());
        (
            dt,
            cost,
            proptest::bool::weighted(0.15),
            proptest::bool::weighted(0.3),
            change,
        )
            .prop_map(|(dt, cost, peek, best_effort, params)| Step {
                dt,
                cost,
                peek,
                best_effort,
                params,
            })
    }

    /// Granted units in any `span` of call times, and in any window of logged times when the
    /// precision divides the window, never exceed the limit.
    fn check_window_invariant(
        p: &SlidingParams,
        grants: &[(Micros, Micros, u64)],
    ) -> Result<(), TestCaseError> {
        let (w, d) = (p.window(), p.precision());
        for &(t, a, _) in grants {
            let by_call: u64 = grants
                .iter()
                .filter(|g| g.0 + (w - d) >= t && g.0 <= t)
                .map(|g| g.2)
                .sum();
            prop_assert!(
                by_call <= p.limit(),
                "{by_call} units in [{t} - (w - d), {t}]"
            );
            if w % d == 0 {
                let by_log: u64 = grants
                    .iter()
                    .filter(|g| g.1 + w > a && g.1 <= a)
                    .map(|g| g.2)
                    .sum();
                prop_assert!(
                    by_log <= p.limit(),
                    "{by_log} units logged in ({a} - w, {a}]"
                );
            }
        }
        Ok(())
    }

    /// Retry is exact on the state after the call: denied 1 µs before, granted at it.
    fn check_retry(
        post: &SlidingLog,
        p: &SlidingParams,
        now: Micros,
        cost: u64,
        retry: Retry,
        max: u32,
    ) -> Result<(), TestCaseError> {
        if let Retry::After(r) = retry {
            prop_assert!(r >= 1);
            let before = post
                .evaluate_with(p, now + r - 1, cost, false, max)
                .unwrap();
            let at = post.evaluate_with(p, now + r, cost, false, max).unwrap();
            prop_assert_eq!(before.granted, 0);
            prop_assert_eq!(at.granted, cost);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The full request flow (apply: monotonic time, PEEK, COST 0, BESTEFFORT, writes)
        /// against the model, field by field, with the invariants and exact retries.
        #[test]
        fn sliding_matches_the_naive_model(
            p0 in params_strategy(),
            steps in proptest::collection::vec(step_strategy(), 1..80),
        ) {
            let mut state: Option<LimiterState> = None;
            let mut model = Model::new(MAX_ENTRIES);
            let mut last_update = 0;
            let mut t = T0;
            let mut p = p0;
            let mut changed = false;
            let mut grants = Vec::new();
            for s in steps {
                t = t.checked_add_signed(s.dt).unwrap();
                if let Some(np) = s.params {
                    changed |= np != p;
                    p = np;
                }
                let req = Request {
                    cost: s.cost,
                    peek: s.peek,
                    best_effort: s.best_effort,
                    dedup: None,
                    now: t,
                };
                let out = limiter::apply::<SlidingLog>(state.as_mut(), &p, &req, 1000).unwrap();
                let now = t.max(last_update);
                let (want, post) = model.verdict(&p, now, s.cost, s.best_effort);
                prop_assert_eq!(out.verdict, want);
                let writes = !s.peek && want.granted > 0;
                prop_assert_eq!(!matches!(out.write, Write::None), writes);
                if writes {
                    prop_assert_eq!(out.expires_at, now + want.reset_after);
                    let at = post.log.last().unwrap().0;
                    grants.push((now, at, want.granted));
                    model = post;
                    last_update = now;
                }
                if let Write::Created(created) = out.write {
                    state = Some(created);
                }
                let mut algo = state
                    .as_ref()
                    .map_or(SlidingLog::fresh(&p), |s| log_of(s).clone());
                prop_assert_eq!(algo.entries().collect::<Vec<_>>(), model.log.clone());
                if s.peek && want.granted > 0 {
                    algo.commit(&p, now, want.granted).unwrap();
                }
                check_retry(&algo, &p, now, s.cost, want.retry, MAX_ENTRIES)?;
            }
            if !changed {
                check_window_invariant(&p, &grants)?;
            }
        }

        /// The same at the algorithm level with a tiny bound on entries, so the merging of
        /// the oldest entries is exercised.
        #[test]
        fn sliding_bound_merges_match_the_model(
            max in 2u32..6,
            p in params_strategy(),
            steps in proptest::collection::vec(step_strategy(), 1..80),
        ) {
            let mut s_log = SlidingLog::fresh(&p);
            let mut model = Model::new(max);
            let mut t = T0;
            let mut grants = Vec::new();
            for s in steps {
                t = t.checked_add_signed(s.dt.abs()).unwrap();
                let got = s_log.evaluate_with(&p, t, s.cost, s.best_effort, max).unwrap();
                let (want, post) = model.verdict(&p, t, s.cost, s.best_effort);
                prop_assert_eq!(got, want);
                let mut after = s_log.clone();
                if want.granted > 0 {
                    after.commit_with(&p, t, want.granted, max).unwrap();
                }
                prop_assert!(after.len() <= max as usize);
                prop_assert_eq!(after.entries().collect::<Vec<_>>(), post.log.clone());
                check_retry(&after, &p, t, s.cost, want.retry, max)?;
                if !s.peek && want.granted > 0 {
                    grants.push((t, post.log.last().unwrap().0, want.granted));
                    s_log = after;
                    model = post;
                }
            }
            check_window_invariant(&p, &grants)?;
        }

        /// Long runs on big limits: hundreds of entries, so lookups go through the marks and
        /// the buffer is compacted many times, still field by field equal to the model.
        #[test]
        fn sliding_long_runs_match_the_model(
            limit in 64u64..300,
            window_ms in 50u64..400,
            precision_ms in prop_oneof![3 => Just(1u64), 1 => 1u64..8],
            steps in proptest::collection::vec(
                (0u64..3_000, prop_oneof![3 => Just(1u64), 1 => 0u64..40], proptest::bool::weighted(0.2)),
                100..600,
            ),
        ) {
            let p = params(limit, window_ms, precision_ms.min(window_ms));
            let mut algo = SlidingLog::fresh(&p);
            let mut model = Model::new(MAX_ENTRIES);
            let mut t = T0;
            for (dt, cost, best_effort) in steps {
                t += dt;
                let got = algo.evaluate(&p, t, cost, best_effort).unwrap();
                let (want, post) = model.verdict(&p, t, cost, best_effort);
                prop_assert_eq!(got, want);
                if want.granted > 0 {
                    algo.commit(&p, t, want.granted).unwrap();
                    model = post;
                }
                check_retry(&algo, &p, t, cost, want.retry, MAX_ENTRIES)?;
            }
            prop_assert_eq!(algo.entries().collect::<Vec<_>>(), model.log);
        }

        /// The shared suite: every verdict equal to the model's, the invariants of SPEC.md, and
        /// exact retries, with parameter changes mid-way.
        #[test]
        fn sliding_passes_the_shared_suite(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_000_000, 9, 4),
        ) {
            let h = testkit::check_against_model::<SlidingLog, _>(
                &mut clocked(), &param_sets(), start, &steps, GrantedRetry::Zero);
            prop_assert_eq!(h.len(), steps.len());
        }

        #[test]
        fn sliding_survives_century_jumps_and_clock_steps_back(
            steps in testkit::steps(1_000_000, 9, 1),
        ) {
            let p = param_sets()[0];
            testkit::check_century_jump::<SlidingLog>(&p, T0, &steps);
            testkit::check_clock_step_back::<SlidingLog>(&p, T0, &steps);
            testkit::check_codec_round_trip::<SlidingLog>(&param_sets(), &steps);
        }

        /// decode(encode(s)) == s, byte-identical re-encoding, and the decoded state decides
        /// every next request exactly as the original.
        #[test]
        fn sliding_codec_round_trips(
            max in prop_oneof![Just(MAX_ENTRIES), 2u32..6],
            p in params_strategy(),
            steps in proptest::collection::vec(step_strategy(), 0..60),
            probe in step_strategy(),
        ) {
            let mut algo = SlidingLog::fresh(&p);
            let mut t = T0;
            for s in &steps {
                t = t.checked_add_signed(s.dt.abs()).unwrap();
                let v = algo.evaluate_with(&p, t, s.cost, s.best_effort, max).unwrap();
                if v.granted > 0 {
                    algo.commit_with(&p, t, v.granted, max).unwrap();
                }
            }
            let state = LimiterState::new(algo.into_state(), t);
            let bytes = codec::encode(&state);
            let back = codec::decode(&bytes).unwrap();
            prop_assert_eq!(&back, &state);
            prop_assert_eq!(codec::encode(&back), bytes);
            let now = t.checked_add_signed(probe.dt.abs()).unwrap();
            let a = log_of(&state).evaluate(&p, now, probe.cost, probe.best_effort).unwrap();
            let b = log_of(&back).evaluate(&p, now, probe.cost, probe.best_effort).unwrap();
            prop_assert_eq!(a, b);
        }

        /// No payload, however mangled, panics the decoder; what it accepts re-encodes.
        #[test]
        fn sliding_codec_survives_mangled_payloads(
            flips in proptest::collection::vec((0usize..FIXTURE.len(), any::<u8>()), 1..4),
            tail in proptest::collection::vec(any::<u8>(), 0..16),
        ) {
            let mut bytes = FIXTURE.to_vec();
            for (i, b) in flips {
                bytes[i] = b;
            }
            bytes.truncate(FIXTURE.len() - 1);
            bytes.extend(tail);
            if let Some(state) = codec::decode(&bytes) {
                prop_assert_eq!(codec::decode(&codec::encode(&state)), Some(state));
            }
        }
    }
}
