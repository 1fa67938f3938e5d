//! The running totals against a model stream (a sorted list of entries summed per window), with
//! time injected; IDs, plans and the next entry ID by table.

use std::cell::Cell;
use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId { ms, seq }
}

/// Why the model's sum failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadError {
    /// An entry without an integer `count`.
    Bad(StreamId),
    Inconsistent,
}

impl From<Inconsistent> for ReadError {
    fn from(_: Inconsistent) -> Self {
        ReadError::Inconsistent
    }
}

/// A stream as the tests model it: entries (ID, count; `None` for a count that is not an
/// integer), sorted, and how many entries the reads visited.
#[derive(Debug, Default)]
struct Model {
    entries: Vec<(StreamId, Option<u64>)>,
    visited: Cell<u64>,
}

impl Model {
    fn of(entries: &[(StreamId, u64)]) -> Self {
        Model {
            entries: entries.iter().map(|&(i, c)| (i, Some(c))).collect(),
            visited: Cell::new(0),
        }
    }

    fn range(&self, r: IdRange) -> &[(StreamId, Option<u64>)] {
        let lo = self.entries.partition_point(|e| e.0 < r.from);
        let hi = self.entries.partition_point(|e| e.0 <= r.to);
        let got = self.entries.get(lo..hi.max(lo)).unwrap_or_default();
        self.visited.set(self.visited.get() + got.len() as u64);
        got
    }

    /// The window's total from `cut`, or the first bad entry in it: computed from the list.
    fn window(&self, cut: StreamId) -> Result<u64, StreamId> {
        let mut total = 0;
        for &(i, c) in self.entries.iter().filter(|e| e.0 >= cut) {
            total += c.ok_or(i)?;
        }
        Ok(total)
    }

    fn below(&self, cut: StreamId) -> u64 {
        self.entries.iter().filter(|e| e.0 < cut).count() as u64
    }
}

impl Entries for Model {
    type Error = ReadError;
    fn len(&self) -> u64 {
        self.entries.len() as u64
    }
    fn last(&self) -> Option<StreamId> {
        self.entries.last().map(|e| e.0)
    }
    fn count(&self, r: IdRange) -> u64 {
        self.range(r).len() as u64
    }
    fn sum(&self, r: IdRange) -> Result<(u64, u64), ReadError> {
        let got = self.range(r);
        let mut total = 0u64;
        for &(i, c) in got {
            total += c.ok_or(ReadError::Bad(i))?;
        }
        Ok((got.len() as u64, total))
    }
}

/// Every cut of `t` against the model: its sum, the entries below it, the stream's figures.
fn check(t: &Tally, m: &Model) {
    assert_eq!(t.len, m.len(), "len");
    assert_eq!(t.last, m.last(), "last");
    let mut windows = BTreeSet::new();
    for c in t.cuts() {
        assert!(windows.insert(c.window_ms), "two cuts of {}", c.window_ms);
        assert_eq!(Ok(c.sum), m.window(c.at), "sum of {c:?} in {m:?}");
        assert_eq!(c.below, m.below(c.at), "below {c:?} in {m:?}");
        assert!(
            c.window_ms <= t.longest_ms,
            "{c:?} longer than {}",
            t.longest_ms
        );
    }
    assert!(t.cuts().len() <= MAX_WINDOWS);
}

fn quiet(t: Tally) -> Option<Cached> {
    Some(Cached {
        tally: t,
        quiet: true,
    })
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
fn a_cut_reads_only_between_its_old_and_new_position() {
    // Entries at 10, 20, 30 (counts 1, 2, 3); a cut at 15: sum 5, one entry below.
    let c = Cut {
        window_ms: 1,
        at: id(15, 0),
        sum: 5,
        below: 1,
    };
    let last = Some(id(30, 0));
    let leave = |from, to| Slide::Leave(IdRange { from, to });
    let enter = |from, to| Slide::Enter(IdRange { from, to });
    assert_eq!(c.slide(id(25, 0), last), leave(id(15, 0), id(24, u64::MAX)));
    assert_eq!(c.slide(id(5, 0), last), enter(id(5, 0), id(14, u64::MAX)));
    // Past the last entry: only up to the last entry is read.
    assert_eq!(c.slide(id(100, 0), last), leave(id(15, 0), id(30, 0)));
    assert_eq!(c.slide(id(15, 0), last), Slide::Stay);
    assert_eq!(c.slide(id(25, 0), None), Slide::Stay);
    assert_eq!(
        c.slid(id(25, 0), 1, 2).map(|c| (c.sum, c.below)),
        Some((3, 2))
    );
    assert_eq!(
        c.slid(id(5, 0), 1, 1).map(|c| (c.sum, c.below)),
        Some((6, 0))
    );
    // More left than the cut held: the figures disagree.
    assert_eq!(c.slid(id(25, 0), 1, 6), None);
    assert_eq!(c.slid(id(5, 0), 2, 1), None);
}

#[test]
fn two_windows_keep_their_cuts_and_slide_only_what_moved() {
    // One entry per ms from 1 to 1000, count 1; a 100 ms and a 600 ms window at 1000.
    let mut m = Model::of(&(1..=1000).map(|ms| (id(ms, 0), 1)).collect::<Vec<_>>());
    let t = Tally::current(None, &m, 100, id(900, 0)).unwrap();
    assert_eq!(t.total(), 101);
    let t = Tally::current(quiet(t), &m, 600, id(400, 0)).unwrap();
    assert_eq!(t.total(), 601);
    check(&t, &m);
    // The 600 ms cut was moved from the 100 ms one: only [400, 900) was read, not the window.
    assert_eq!(m.visited.get(), 101 + 500);
    // Each call slides its own cut by 1 ms: one entry read.
    m.visited.set(0);
    let t = Tally::current(quiet(t), &m, 100, id(901, 0)).unwrap();
    assert_eq!((t.total(), m.visited.get()), (100, 1));
    let t = Tally::current(quiet(t), &m, 600, id(401, 0)).unwrap();
    assert_eq!((t.total(), m.visited.get()), (600, 2));
    assert_eq!(t.cuts().first().map(|c| c.window_ms), Some(600));
    // The call's own append at 1001, then the trim: the horizon is the longest window's start.
    let t = t.added(id(1001, 0), 1).unwrap();
    m.entries.push((id(1001, 0), Some(1)));
    let h = t.trim_horizon(1001 * 1000);
    assert_eq!(h, id(401, 0));
    assert!(!t.nothing_below(h));
    m.entries.drain(..400);
    let t = t.trimmed(400).unwrap();
    check(&t, &m);
    assert_eq!(t.trimmed(1), None);
}

#[test]
fn a_fifth_window_drops_the_least_recently_used_cut() {
    let m = Model::of(&(1..=100).map(|ms| (id(ms, 0), 1)).collect::<Vec<_>>());
    let mut t = None;
    for w in [10, 20, 30, 40, 50] {
        let got = Tally::current(t, &m, w, id(100 - w, 0)).unwrap();
        assert_eq!(got.total(), w + 1);
        t = quiet(got);
    }
    let t = t.unwrap().tally;
    let windows: Vec<u64> = t.cuts().iter().map(|c| c.window_ms).collect();
    assert_eq!(windows, [50, 40, 30, 20]);
    // The evicted window still bounds the trim.
    assert_eq!(t.longest_ms, 50);
    check(&t, &m);
}

#[test]
fn raising_cuts_lets_the_trim_remove_only_entries_below_every_cut() {
    // A 50 ms cut left at 20 by a call long ago, a 10 ms cut at 90; a trim at 100 keeps 50 ms.
    let m = Model::of(&(1..=100).map(|ms| (id(ms, 0), 1)).collect::<Vec<_>>());
    let t = Tally::current(None, &m, 50, id(20, 0)).unwrap();
    let mut t = Tally::current(quiet(t), &m, 10, id(90, 0)).unwrap();
    let h = t.trim_horizon(100 * 1000);
    assert_eq!(h, id(50, 0));
    t.raise_to(&m, h);
    assert!(t.cuts().iter().all(|c| c.at >= h));
    check(&t, &m);
}

#[test]
fn other_writers_entries_are_split_at_the_cuts_and_read_once() {
    // Entries at 10 and 20; cuts at 15 (100 ms window) and 25 (90 ms window).
    let mut m = Model::of(&[(id(10, 0), 1), (id(20, 0), 2)]);
    let t = Tally::current(None, &m, 100, id(15, 0)).unwrap();
    let t = Tally::current(quiet(t), &m, 90, id(25, 0)).unwrap();
    // Another writer appends at 21, 30 and 40, and trims 10.
    m.entries.extend([
        (id(21, 0), Some(4)),
        (id(30, 0), Some(8)),
        (id(40, 0), Some(16)),
    ]);
    m.entries.remove(0);
    m.visited.set(0);
    let loud = Some(Cached {
        tally: t,
        quiet: false,
    });
    let t = Tally::current(loud, &m, 90, id(25, 0)).unwrap();
    assert_eq!(t.total(), 24);
    check(&t, &m);
    assert_eq!(t.cuts().len(), 2);
    // The three new entries, each once.
    assert_eq!(m.visited.get(), 3);
    // A trim past the 15 cut drops that window's cut only.
    m.entries.drain(..2);
    let loud = Some(Cached {
        tally: t,
        quiet: false,
    });
    let t = Tally::current(loud, &m, 90, id(25, 0)).unwrap();
    check(&t, &m);
    assert_eq!(t.cuts().len(), 1);
    // One new entry exactly at a cut: in that window, below the later cut.
    let t = Tally::current(quiet(t), &m, 50, id(45, 0)).unwrap();
    m.entries.push((id(45, 0), Some(32)));
    let loud = Some(Cached {
        tally: t,
        quiet: false,
    });
    let t = Tally::current(loud, &m, 50, id(45, 0)).unwrap();
    assert_eq!(t.total(), 32);
    check(&t, &m);
}

#[test]
fn with_four_windows_every_entry_is_read_a_bounded_number_of_times() {
    // 5,000 entries, then 4,000 calls over 4 windows in turn, 1 ms apart, each appending.
    let mut m = Model::of(&(0..5_000).map(|ms| (id(ms, 0), 1)).collect::<Vec<_>>());
    let windows = [500u64, 1_500, 3_000, 10_000];
    let mut cached = None;
    let calls = 4_000u64;
    for i in 0..calls {
        let now = 5_000 + i;
        let w = windows[(i % 4) as usize];
        let cut = id(now.saturating_sub(w), 0);
        let t = Tally::current(cached, &m, w, cut).unwrap();
        assert_eq!(Ok(t.total()), m.window(cut));
        m.entries.push((id(now, 0), Some(1)));
        cached = quiet(t.added(id(now, 0), 1).unwrap());
    }
    let entries = m.len();
    // Each entry enters and leaves each window once, plus the reads that start a window.
    assert!(
        m.visited.get() <= 2 * windows.len() as u64 * entries,
        "{} reads for {entries} entries",
        m.visited.get()
    );
}

/// What happens to the stream between two calls.
#[derive(Debug, Clone)]
enum Op {
    /// A call at the current time plus `dt` ms (possibly backward) with the `w`-th window.
    Call { dt: i64, w: usize, add: u64 },
    /// Another writer appends `n` entries at the current time plus `dt` ms (`count` `None`: a
    /// count that is not an integer).
    Append {
        dt: u64,
        count: Option<u64>,
        n: usize,
    },
    /// Another writer trims the oldest `n` entries (XTRIM MAXLEN / MINID).
    TrimHead { n: usize },
    /// Another writer deletes an entry (XDEL): the keyspace event drops the tally.
    Delete { i: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (-30i64..60, 0usize..5, 0u64..4).prop_map(|(dt, w, add)| Op::Call { dt, w, add }),
        2 => (0u64..20, proptest::option::weighted(0.95, 0u64..9), 1usize..4)
            .prop_map(|(dt, count, n)| Op::Append { dt, count, n }),
        1 => (1usize..6).prop_map(|n| Op::TrimHead { n }),
        1 => (0usize..50).prop_map(|i| Op::Delete { i }),
    ]
}

proptest! {
    /// With 1 to 5 window lengths on one stream, every call's total equals a fresh sum of its
    /// window in the model (or fails on the bad entry in it), every cut kept is exact, and the
    /// call's own trim never reaches into the window of any length used since the tally was
    /// made.
    #[test]
    fn tallies_of_several_windows_match_a_fresh_sum(
        windows in proptest::sample::subsequence(vec![5u64, 17, 40, 90, 200], 1..=5),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let mut m = Model::default();
        // The stream's last ID: entries only ever get IDs above it, even after trims.
        let mut top: Option<(u64, u64)> = None;
        let mut cached: Option<Cached> = None;
        let mut used: BTreeSet<u64> = BTreeSet::new();
        let mut now: u64 = 1_000;
        for op in ops {
            match op {
                Op::Call { dt, w, add } => {
                    now = now.saturating_add_signed(dt).max(1);
                    let w = windows[w % windows.len()];
                    let cut = StreamId::at_ms(window_start_ms(now * 1000, w * 1000));
                    if cached.is_none() {
                        used.clear();
                    }
                    used.insert(w);
                    let got = Tally::current(cached.take(), &m, w, cut);
                    let t = match (m.window(cut), got) {
                        (Ok(want), Ok(t)) => {
                            prop_assert_eq!(t.total(), want);
                            t
                        }
                        (Err(bad), Err(e)) => {
                            prop_assert_eq!(e, ReadError::Bad(bad));
                            continue;
                        }
                        (want, got) => {
                            prop_assert!(false, "want {:?}, got {:?}", want, got.map(|t| t.total()));
                            unreachable!()
                        }
                    };
                    check(&t, &m);
                    let mut t = t;
                    if add > 0 {
                        let (ms, seq) = next_id(now * 1000, top).unwrap();
                        top = Some((ms, seq));
                        m.entries.push((id(ms, seq), Some(add)));
                        t = t.added(id(ms, seq), add).unwrap();
                        let h = t.trim_horizon(now * 1000);
                        for &u in &used {
                            prop_assert!(h.ms <= now.saturating_sub(u), "horizon {:?} in the {} window at {}", h, u, now);
                        }
                        t.raise_to(&m, h);
                        check(&t, &m);
                        // MINID ~ h: some of the entries below it go, whole nodes at a time.
                        let below = m.below(h) as usize;
                        prop_assert!(!t.nothing_below(h) || below == 0);
                        let removed = if t.nothing_below(h) { 0 } else { below.div_ceil(2) };
                        m.entries.drain(..removed);
                        t = t.trimmed(removed as u64).unwrap();
                        check(&t, &m);
                    }
                    cached = quiet(t);
                }
                Op::Append { dt, count, n } => {
                    for _ in 0..n {
                        let (ms, seq) = next_id((now + dt) * 1000, top).unwrap();
                        top = Some((ms, seq));
                        m.entries.push((id(ms, seq), count));
                    }
                    if let Some(c) = cached.as_mut() {
                        c.quiet = false;
                    }
                }
                Op::TrimHead { n } => {
                    let n = n.min(m.entries.len());
                    m.entries.drain(..n);
                    if let Some(c) = cached.as_mut() {
                        c.quiet = false;
                    }
                }
                Op::Delete { i } => {
                    if !m.entries.is_empty() {
                        m.entries.remove(i % m.entries.len());
                        cached = None;
                    }
                }
            }
        }
    }
}

#[test]
fn stream_window_and_plans() {
    assert_eq!(window_start_ms(10_500_999, 1_000_000), 9_500);
    assert_eq!(window_start_ms(500_000, 1_000_000), 0);
    assert_eq!(window_ms(1_999), 1);
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
