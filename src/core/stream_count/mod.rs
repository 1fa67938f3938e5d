//! The pure part of RL.STREAMCOUNT: window arithmetic, the decision, the next entry ID and the
//! running totals.
//!
//! RL.STREAMCOUNT keeps the layout of the classic Lua stream counter: a real Redis stream whose
//! entries carry one field, `count`. The window's total is the sum of `count` over entries whose
//! ID time is at least `now − window` (in ms, like stream IDs). Reading and writing the stream is
//! I/O, done by the command layer through [`Entries`]; this folder decides.
//!
//! **The running total.** Summing the window on every call costs O(entries). Instead a
//! [`Tally`] remembers, per stream key, the stream's length and last entry ID as last seen and,
//! for each window length in use (up to [`MAX_WINDOWS`]), a [`Cut`]: the window start of that
//! window's last call, the sum of `count` over the entries at or after it, and how many entries
//! lie before it. A call reconciles the tally with what the stream holds now:
//! - same length and last ID: nothing changed (the key's other changes are reported by keyspace
//!   events, which drop the tally; see `tally_cache`);
//! - a later last ID: entries were appended after the old last ID (XADD never adds an ID at or
//!   below the stream's last ID); they are read once, split at the cuts, and the length tells
//!   how many old entries were trimmed away from the head. Trims remove the oldest entries
//!   first, so a cut with at least that many entries below it keeps its sum; any other cut is
//!   dropped (its window is read again when next used: one rebuild);
//! - anything else: every cut is dropped.
//!
//! Reading the last entry ID costs a stream iterator, so it is skipped while the tally is
//! *quiet*: no `xadd` or `xtrim` keyspace event of another writer reached the key since the
//! tally was stored (the call's own events do not count, see [`TallyCache::touched`]). A quiet
//! tally whose length is the stream's is taken as it is.
//!
//! Then the call's window's cut slides to the new window start, reading only the entries
//! between the old and the new position (each entry leaves each window once): amortized O(1)
//! per call, for every window of the key. A window without a cut starts from the nearest cut
//! at or after its start (reading the entries in between), else reads its window; a fifth
//! window length drops the least recently used cut.
//!
//! **Trims.** An appending call trims entries below the start of the longest window used on
//! the key since its tally was made ([`Tally::trim_horizon`]), not below its own window's start:
//! a one-minute call must not remove what the one-hour window still counts. Cuts below that
//! horizon are first moved up to it, so the trim removes only entries below every cut.

mod cache;
mod id;
mod tally;
#[cfg(test)]
mod tests;

pub use cache::{EventEffect, TallyCache, event_effect};
pub use id::{ID_BUF, IdRange, StreamId};
pub use tally::{Cached, Cut, Entries, Inconsistent, MAX_WINDOWS, Slide, Tally};

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

/// The window's length in whole ms, as its start is computed ([`window_start_ms`]).
pub fn window_ms(window: Micros) -> u64 {
    window / US_PER_MS
}
