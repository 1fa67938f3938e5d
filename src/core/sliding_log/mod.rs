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
//! Debt (RL.SETTLE above a reservation): the extra units are logged as any grant (at `now`'s
//! bucket, or merged into the newest entry), so the window counts above its limit until enough
//! of them leave it; `retry_after` finds that entry as for any request. The log holds at most
//! [`MAX_PARAM`] units in all (the codec's bound): more debt is refused.
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
//! Memory: a fixed header, the packed entries (1–2 bytes each for unit costs at 1 ms), a mark
//! per 64 entries, a dead prefix no larger than the live part, and spare capacity below half
//! (buffers grow by half, and shrink at compaction). `bench/sliding_memory.py` measures it.

mod log;
#[cfg(test)]
mod tests;

use crate::core::error::CoreError;
use crate::core::limiter::{self, Algorithm, Verdict};
use crate::core::param::{MAX_PARAM, check_count, check_duration};
use crate::core::time::{MAX_TIME, Micros, US_PER_MS};
use crate::core::varint::{self, Fixed, Reader};

use log::{Log, entry_words, put_entry};

/// The most entries one key keeps (see the module docs for what happens past it).
pub const MAX_ENTRIES: u32 = 65_536;

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

    /// Bytes [`Algorithm::encode`] writes, in O(1).
    pub fn encoded_len(&self) -> usize {
        let p = &self.params;
        [p.limit, p.window, p.precision, self.len() as u64]
            .into_iter()
            .map(varint::len_u64)
            .sum::<usize>()
            .saturating_add(self.log.as_ref().map_or(0, |l| l.encoding().len()))
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
                let units = l.cum_end().saturating_sub(f.cum);
                let entries = l.tail_seq.saturating_sub(f.seq).saturating_add(1);
                (
                    u64::try_from(units).unwrap_or(u64::MAX),
                    entries,
                    Some(l.tail_ts),
                )
            }
            _ => (0, 0, None),
        };
        let avail = limit.saturating_sub(count);
        let granted = limiter::grant(cost, avail, best_effort);
        // Where this call's units go: its bucket, or the newest entry if that is not older.
        let at = newest.map_or(params.bucket(now), |t| t.max(params.bucket(now)));
        let adds_entry = granted > 0 && newest != Some(at);
        let merges = adds_entry && live_entries >= max_entries.max(2);

        let retry = limiter::retry(granted, cost, limit, || {
            // Units that must leave the window first (≥ 1, and at most those logged).
            let need = u128::from(count)
                .saturating_add(u128::from(granted))
                .saturating_add(u128::from(cost))
                .checked_sub(u128::from(limit))
                .ok_or(CoreError::Overflow)?;
            let leaves = match (log, &first) {
                (Some(l), Some(f)) => match l.reaching(f.cum.saturating_add(need)) {
                    // This call's grant merges the two oldest: the first leaves with the second.
                    Some(e) if merges && e.pos.seq == f.seq => {
                        l.scan_at(*f).nth(1).map_or(at, |second| second.pos.ts)
                    }
                    Some(e) => e.pos.ts,
                    // Only this call's own units are left to leave.
                    None => at,
                },
                _ => at,
            };
            Ok(leaves.saturating_add(window).saturating_sub(now))
        })?;
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
        if granted > 0 {
            self.log_grant(params, now, granted, max_entries)?;
        }
        // Adopted only once the grant is logged: a failed commit changes nothing.
        self.params = *params;
        Ok(())
    }

    /// Log `granted` units at `now`'s bucket (or the newest entry's, if later).
    fn log_grant(
        &mut self,
        params: &SlidingParams,
        now: Micros,
        granted: u64,
        max_entries: u32,
    ) -> Result<(), CoreError> {
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

    fn known_encoded_len(&self) -> Option<usize> {
        Some(self.encoded_len())
    }

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

    /// The newest live entries first. O(1) when the newest entry holds more than `units`, else
    /// the live entries are rebuilt without the refunded ones: O(N).
    fn refund(&mut self, now: Micros, units: u64) -> Result<u64, CoreError> {
        let window = self.params.window;
        let cutoff = now.checked_sub(window);
        let live = |ts: Micros| cutoff.is_none_or(|c| ts > c);
        let Some(log) = self.log.as_deref_mut() else {
            return Ok(0);
        };
        if !live(log.tail_ts) {
            return Ok(0);
        }
        if log.tail_units > units {
            log.tail_units = log.tail_units.saturating_sub(units);
            return Ok(units);
        }
        let mut entries: Vec<(Micros, u64)> = self.entries().filter(|(ts, _)| live(*ts)).collect();
        let mut left = units;
        while left > 0 {
            let Some(last) = entries.last_mut() else {
                break;
            };
            let take = last.1.min(left);
            last.1 = last.1.saturating_sub(take);
            left = left.saturating_sub(take);
            if last.1 == 0 {
                entries.pop();
            }
        }
        let mut rebuilt: Option<Box<Log>> = None;
        for (ts, n) in entries {
            match rebuilt.as_deref_mut() {
                Some(l) => l.push(ts, n)?,
                None => rebuilt = Some(Box::new(Log::single(ts, n))),
            }
        }
        self.log = rebuilt;
        Ok(units.saturating_sub(left))
    }

    /// Debt (RL.SETTLE above a reservation): the units are logged at `now` as any grant (so
    /// the window counts above its limit until they leave it), refused when the log would
    /// hold more than [`MAX_PARAM`] units in all (the codec's bound).
    fn charge_debt(&mut self, now: Micros, units: u64) -> Result<(), CoreError> {
        self.entries()
            .try_fold(units, |sum, (_, n)| sum.checked_add(n))
            .filter(|&t| t <= MAX_PARAM)
            .ok_or(CoreError::Overflow)?;
        let params = self.params;
        let mut after = self.clone();
        after.commit(&params, now, units)?;
        *self = after;
        Ok(())
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

    fn window(params: &SlidingParams, _now: Micros) -> Micros {
        params.window
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
        let p = &self.params;
        let enc = self.log.as_deref().map(Log::encoding);
        // The parameters, the count and the first entry: built on the stack, copied at once.
        let mut words = [p.limit, p.window, p.precision, self.len() as u64, 0, 0];
        let mut n = 4;
        if let Some((delta_ms, units)) = enc.and_then(|e| e.first)
            && let Some(rest) = words.get_mut(4..)
        {
            n = entry_words(delta_ms, units, rest).saturating_add(4);
        }
        let words = words.get(..n).unwrap_or_default();
        let mut head = Fixed::<96>::new();
        for &w in words {
            head.u64(w);
        }
        match head.bytes() {
            Some(bytes) => out.extend_from_slice(bytes),
            None => words.iter().for_each(|&w| varint::put_u64(out, w)),
        }
        if let Some(enc) = enc {
            out.extend_from_slice(enc.packed);
            put_entry(out, enc.last.0, enc.last.1);
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

    /// Entries are logged at a call's bucket, or the newest entry's: never after the last
    /// call. (Decoding already bounds their times and units.)
    fn valid_at(&self, last_update: Micros) -> bool {
        self.log.as_ref().is_none_or(|l| l.tail_ts <= last_update)
    }
}
