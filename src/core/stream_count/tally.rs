//! The running total of one stream key: a [`Cut`] per window in use (up to [`MAX_WINDOWS`]),
//! brought up to date with what the stream holds by reading only what changed.
//!
//! A [`Tally`] remembers the stream's length and last entry ID as last seen and, per window
//! length, a cut (that window's start at its last call), the sum of `count` over the entries at
//! or after the cut, and how many entries lie before it. Its cuts are kept most recently used
//! first; a call with a fifth window length drops the least recently used cut.
//!
//! [`Tally::current`] brings a cached tally up to a call (see the folder's docs for the cases);
//! [`Tally::added`], [`Tally::raise_to`] and [`Tally::trimmed`] follow the call's own append and
//! trim, which keeps every entry of the longest window used on the key ([`Tally::trim_horizon`]).

use std::cmp::Ordering;

use super::id::{IdRange, StreamId};
use crate::core::time::{Micros, US_PER_MS};

/// A cached tally, as the tally cache (`TallyCache::begin`) hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cached {
    pub tally: Tally,
    /// No other writer appended to or trimmed the stream since the tally was stored (no `xadd`
    /// or `xtrim` event but our own): the stream's length alone confirms it.
    pub quiet: bool,
}

/// Windows whose running totals one key keeps. A call with another window length drops the
/// least recently used one (its next call reads its window again).
pub const MAX_WINDOWS: usize = 4;

/// What a tally reads from its stream: the command layer reads the stream key, tests a model.
pub trait Entries {
    /// Why a sum failed.
    type Error: From<Inconsistent>;
    /// Entries in the stream.
    fn len(&self) -> u64;
    /// Whether the stream has no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Its last entry, `None` when it has none.
    fn last(&self) -> Option<StreamId>;
    /// How many entries lie in `range` (their counts are not parsed).
    fn count(&self, range: IdRange) -> u64;
    /// How many entries lie in `range` and the sum of their `count`.
    ///
    /// # Errors
    /// An entry without an integer `count`, a sum over 64 bits.
    fn sum(&self, range: IdRange) -> Result<(u64, u64), Self::Error>;
}

/// The stream's figures disagree with themselves (more entries read than it holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inconsistent;

/// How a cut moves to a new position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slide {
    /// It does not move (or no entry lies between the two positions).
    Stay,
    /// Forward: the entries in the range leave the window.
    Leave(IdRange),
    /// Backward: the entries in the range enter the window.
    Enter(IdRange),
}

/// One window's running total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cut {
    /// The window's length in ms: its cut at `now` is `now − window_ms` (in ms).
    pub window_ms: u64,
    /// Entries at or after it are summed.
    pub at: StreamId,
    /// The sum of `count` over the entries at or after `at`.
    pub sum: u64,
    /// How many entries lie before `at`.
    pub below: u64,
}

impl Cut {
    /// What to read to move this cut to `to`, in a stream ending at `last`.
    pub fn slide(&self, to: StreamId, last: Option<StreamId>) -> Slide {
        let Some(last) = last else {
            return Slide::Stay;
        };
        match to.cmp(&self.at) {
            Ordering::Greater => match to.prev() {
                Some(end) if self.at <= last => Slide::Leave(IdRange {
                    from: self.at,
                    to: end.min(last),
                }),
                _ => Slide::Stay,
            },
            Ordering::Less => match self.at.prev() {
                Some(end) if to <= last => Slide::Enter(IdRange {
                    from: to,
                    to: end.min(last),
                }),
                _ => Slide::Stay,
            },
            Ordering::Equal => Slide::Stay,
        }
    }

    /// The cut moved to `to`, after reading the [`Slide`] range: `n` entries summing to `sum`
    /// (both 0 for [`Slide::Stay`]). `None` when the figures disagree.
    pub fn slid(self, to: StreamId, n: u64, sum: u64) -> Option<Self> {
        let (below, total) = match to.cmp(&self.at) {
            Ordering::Greater => (self.below.checked_add(n)?, self.sum.checked_sub(sum)?),
            Ordering::Less => (self.below.checked_sub(n)?, self.sum.checked_add(sum)?),
            Ordering::Equal => (self.below, self.sum),
        };
        Some(Cut {
            at: to,
            below,
            sum: total,
            ..self
        })
    }

    /// Moved to `to` by reading the stream; `None` when the figures disagree.
    fn slid_in<S: Entries>(
        self,
        s: &S,
        to: StreamId,
        last: Option<StreamId>,
    ) -> Result<Option<Self>, S::Error> {
        let (n, sum) = match self.slide(to, last) {
            Slide::Stay => (0, 0),
            Slide::Leave(r) | Slide::Enter(r) => s.sum(r)?,
        };
        Ok(self.slid(to, n, sum))
    }

    /// After entries were appended (`below_n` of them before the cut, the rest summing to
    /// `window_sum` at or after it) and `removed` old ones trimmed from the head. `None` when
    /// more went than lay before the cut.
    fn appended(self, removed: u64, below_n: u64, window_sum: u64) -> Option<Self> {
        Some(Cut {
            sum: self.sum.checked_add(window_sum)?,
            below: self.below.checked_sub(removed)?.checked_add(below_n)?,
            ..self
        })
    }

    /// After `removed` entries went from the head; `None` when some were at or after the cut.
    fn trimmed(self, removed: u64) -> Option<Self> {
        Some(Cut {
            below: self.below.checked_sub(removed)?,
            ..self
        })
    }
}

/// The running total of one stream key (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Entries in the stream.
    pub len: u64,
    /// Its last entry, `None` when it has none.
    pub last: Option<StreamId>,
    /// The longest window (ms) used on the key since its tally was made, cut dropped or not:
    /// this module's trims keep every entry it counts.
    pub longest_ms: u64,
    /// The cuts, most recently used first; `cuts[..n]` are in use.
    cuts: [Cut; MAX_WINDOWS],
    n: usize,
}

/// A run of new entries between two cut positions, as read by a reconcile.
#[derive(Debug, Clone, Copy)]
struct Segment {
    range: IdRange,
    n: u64,
    /// `None`: not summed (below every cut), or an entry without an integer `count`.
    sum: Option<u64>,
}

impl Tally {
    /// A tally of no window for a stream of `len` entries ending at `last`.
    pub fn empty(len: u64, last: Option<StreamId>) -> Self {
        Tally {
            len,
            last,
            longest_ms: 0,
            cuts: [Cut::default(); MAX_WINDOWS],
            n: 0,
        }
    }

    /// The tally of a missing key after a call with a window of `window_ms` cut at `at`.
    pub fn missing(window_ms: u64, at: StreamId) -> Self {
        let mut t = Tally::empty(0, None);
        t.longest_ms = window_ms;
        t.push_front(Cut {
            window_ms,
            at,
            sum: 0,
            below: 0,
        });
        t
    }

    /// The cuts in use, most recently used first.
    pub fn cuts(&self) -> &[Cut] {
        self.cuts.get(..self.n).unwrap_or_default()
    }

    /// The total of the window of the last call (0 without one).
    pub fn total(&self) -> u64 {
        self.cuts().first().map_or(0, |c| c.sum)
    }

    /// This tally with only the cuts `keep` (in their order; at most [`MAX_WINDOWS`]).
    fn with_cuts(self, keep: impl Iterator<Item = Cut>) -> Self {
        let mut t = Tally { n: 0, ..self };
        for (slot, c) in t.cuts.iter_mut().zip(keep) {
            *slot = c;
            t.n = t.n.saturating_add(1);
        }
        t
    }

    /// Put `c` first, dropping the least recently used cut when all are in use.
    fn push_front(&mut self, c: Cut) {
        self.n = self.n.saturating_add(1).min(MAX_WINDOWS);
        if let Some(used) = self.cuts.get_mut(..self.n) {
            used.rotate_right(1);
        }
        if let Some(first) = self.cuts.first_mut() {
            *first = c;
        }
    }

    /// The tally of the window of `window_ms` starting at `cut`, for a call on stream `s`: the
    /// cached one brought up to date (reading only what changed), else one read from `s`. Its
    /// window's cut comes first ([`Tally::total`]).
    ///
    /// A quiet cached tally (no other writer's append or trim since it was stored) of the
    /// stream's length is taken as it is; any other is reconciled with the stream's length and
    /// last entry. A new window's cut is moved from the nearest cut at or after it, else read.
    ///
    /// # Errors
    /// An entry in the window without an integer `count`, a sum over 64 bits.
    #[inline]
    pub fn current<S: Entries>(
        cached: Option<Cached>,
        s: &S,
        window_ms: u64,
        cut: StreamId,
    ) -> Result<Self, S::Error> {
        let len = s.len();
        let mut t = match cached {
            Some(c) if c.quiet && c.tally.len == len => c.tally,
            Some(c) => c.tally.reconciled(s, len),
            None => Tally::empty(len, s.last()),
        };
        t.longest_ms = t.longest_ms.max(window_ms);
        let found = t.cuts().iter().position(|c| c.window_ms == window_ms);
        let from = match found {
            Some(i) => {
                if i > 0
                    && let Some(used) = t.cuts.get_mut(..=i)
                {
                    used.rotate_right(1);
                }
                t.cuts.first().copied()
            }
            None => t
                .cuts()
                .iter()
                .filter(|c| c.at >= cut)
                .min_by_key(|c| c.at)
                .map(|c| Cut { window_ms, ..*c }),
        };
        // A slide over an entry without an integer `count` reads the window instead (which
        // fails only if the entry is in it); figures that disagree trust no cut.
        let mut distrust = false;
        let moved = match from.map(|c| c.slid_in(s, cut, t.last)) {
            Some(Ok(Some(c))) => Some(c),
            Some(Ok(None)) => {
                distrust = true;
                None
            }
            Some(Err(_)) | None => None,
        };
        if distrust {
            t = t.with_cuts(std::iter::empty());
        }
        let c = match moved {
            Some(c) => c,
            None => {
                let (n, sum) = s.sum(IdRange::to_end(cut))?;
                Cut {
                    window_ms,
                    at: cut,
                    sum,
                    below: len.checked_sub(n).ok_or(Inconsistent)?,
                }
            }
        };
        match found {
            Some(_) if !distrust => {
                if let Some(first) = t.cuts.first_mut() {
                    *first = c;
                }
            }
            _ => t.push_front(c),
        }
        Ok(t)
    }

    /// This tally brought up to a stream of `len` entries: a head trim lowers each cut's count
    /// below it, entries appended after the old last ID are read once (split at the cuts) and
    /// added to each cut; a cut whose window lost entries (another writer's trim or an entry
    /// without an integer `count` in it) is dropped, and so is every cut when the stream
    /// changed otherwise.
    fn reconciled<S: Entries>(self, s: &S, len: u64) -> Self {
        let last = s.last();
        let fresh = Tally {
            len,
            last,
            n: 0,
            ..self
        };
        if last == self.last {
            return match len.cmp(&self.len) {
                Ordering::Equal => self,
                // Fewer entries, same last one: only the oldest entries went.
                Ordering::Less if last.is_some() => {
                    let removed = self.len.saturating_sub(len);
                    fresh.with_cuts(self.cuts().iter().filter_map(|c| c.trimmed(removed)))
                }
                _ => fresh,
            };
        }
        let Some(new_last) = last else {
            return fresh;
        };
        let first_new = match self.last {
            None => Some(StreamId::MIN),
            Some(old) if old < new_last => old.next(),
            Some(_) => None,
        };
        let Some(first_new) = first_new else {
            return fresh;
        };
        let segments = self.read_new(s, first_new, new_last);
        let new_n = segments.iter().fold(0u64, |a, g| a.saturating_add(g.n));
        // The difference in length is entries trimmed from the head.
        let Some(removed) = len
            .checked_sub(new_n)
            .and_then(|old_left| self.len.checked_sub(old_left))
        else {
            return fresh;
        };
        fresh.with_cuts(self.cuts().iter().filter_map(|c| {
            let mut below_n: u64 = 0;
            let mut window_sum: u64 = 0;
            for g in &segments {
                if g.range.to < c.at {
                    below_n = below_n.checked_add(g.n)?;
                } else {
                    window_sum = window_sum.checked_add(g.sum?)?;
                }
            }
            c.appended(removed, below_n, window_sum)
        }))
    }

    /// The entries `[first_new, new_last]`, in segments split at the cuts: each entry is read
    /// once, and summed only when some cut counts it.
    fn read_new<S: Entries>(&self, s: &S, first_new: StreamId, new_last: StreamId) -> Vec<Segment> {
        let mut starts: Vec<StreamId> = self
            .cuts()
            .iter()
            .map(|c| c.at)
            .filter(|&at| first_new < at && at <= new_last)
            .collect();
        starts.push(first_new);
        starts.sort_unstable();
        starts.dedup();
        let lowest_cut = self.cuts().iter().map(|c| c.at).min();
        let mut segments = Vec::with_capacity(starts.len());
        for (i, &from) in starts.iter().enumerate() {
            let to = match starts.get(i.saturating_add(1)).and_then(|next| next.prev()) {
                Some(end) => end,
                None => new_last,
            };
            let range = IdRange { from, to };
            let counted = lowest_cut.is_some_and(|low| from >= low);
            let (n, sum) = if counted {
                match s.sum(range) {
                    Ok((n, sum)) => (n, Some(sum)),
                    Err(_) => (s.count(range), None),
                }
            } else {
                (s.count(range), None)
            };
            segments.push(Segment { range, n, sum });
        }
        segments
    }

    /// The first entry ID this module's trim at `now` keeps: the start of the longest window
    /// used on the key, so a shorter window's call never trims what a longer one counts.
    pub fn trim_horizon(&self, now: Micros) -> StreamId {
        StreamId::at_ms((now / US_PER_MS).saturating_sub(self.longest_ms))
    }

    /// Move every cut below `horizon` up to it (reading the entries that leave), so that a trim
    /// below `horizon` removes only entries below every cut. A cut that cannot be moved (an
    /// entry without an integer `count`, figures that disagree) is dropped.
    pub fn raise_to<S: Entries>(&mut self, s: &S, horizon: StreamId) {
        if self.cuts().iter().all(|c| c.at >= horizon) {
            return;
        }
        let last = self.last;
        let mut cuts = [Cut::default(); MAX_WINDOWS];
        let mut kept = 0;
        for c in self.cuts() {
            let c = if c.at < horizon {
                match c.slid_in(s, horizon, last) {
                    Ok(Some(c)) => c,
                    _ => continue,
                }
            } else {
                *c
            };
            if let Some(slot) = cuts.get_mut(kept) {
                *slot = c;
                kept = kept.saturating_add(1);
            }
        }
        *self = self.with_cuts(cuts.into_iter().take(kept));
    }

    /// Whether no entry lies below `horizon`, as far as the cuts tell (a cut at or below it
    /// with no entry before it).
    pub fn nothing_below(&self, horizon: StreamId) -> bool {
        self.cuts().iter().any(|c| c.at <= horizon && c.below == 0)
    }

    /// The tally after this module appended an entry `id` of `count`.
    pub fn added(mut self, id: StreamId, count: u64) -> Option<Self> {
        self.add(id, count).then_some(self)
    }

    /// [`Tally::added`] in place; `false` (the tally is then to be dropped) on overflow.
    pub fn add(&mut self, id: StreamId, count: u64) -> bool {
        let Some(len) = self.len.checked_add(1) else {
            return false;
        };
        self.len = len;
        self.last = Some(id);
        let n = self.n;
        for c in self.cuts.iter_mut().take(n) {
            let next = if id >= c.at {
                c.sum.checked_add(count).map(|sum| Cut { sum, ..*c })
            } else {
                c.below.checked_add(1).map(|below| Cut { below, ..*c })
            };
            match next {
                Some(next) => *c = next,
                None => return false,
            }
        }
        true
    }

    /// The tally after this module trimmed `removed` entries below every cut (after
    /// [`Tally::raise_to`] the trim's horizon). `None` when a cut had fewer below it.
    pub fn trimmed(mut self, removed: u64) -> Option<Self> {
        self.trim(removed).then_some(self)
    }

    /// [`Tally::trimmed`] in place; `false` (the tally is then to be dropped) when a cut had
    /// fewer entries below it.
    pub fn trim(&mut self, removed: u64) -> bool {
        let Some(len) = self.len.checked_sub(removed) else {
            return false;
        };
        self.len = len;
        let n = self.n;
        for c in self.cuts.iter_mut().take(n) {
            match c.trimmed(removed) {
                Some(next) => *c = next,
                None => return false,
            }
        }
        true
    }
}
