//! RL.SLIDING's unit and property tests.

use super::*;
use crate::core::codec;
use crate::core::dedup::DedupId;
use crate::core::flow::{self, Write};
use crate::core::limiter::{Decision, Request, Retry};
use crate::core::sliding_log::log::COMPACT_MIN;
use crate::core::state::LimiterState;
use crate::core::state::Stored;
use crate::core::testkit::{self, GrantedRetry, T0};
use proptest::prelude::*;

/// `limit` per window of `period` (whole ms), precision `extra` (whole ms, at most the window).
impl crate::core::testkit::Sample for SlidingLog {
    fn sample([limit, _, period, extra]: [u64; 4]) -> Option<SlidingParams> {
        let window = testkit::whole_ms(period);
        SlidingParams::new(limit, window, testkit::whole_ms(extra).min(window)).ok()
    }
}

const MS: Micros = US_PER_MS;

fn params(limit: u64, window_ms: u64, precision_ms: u64) -> SlidingParams {
    SlidingParams::new(limit, window_ms * MS, precision_ms * MS).unwrap()
}

fn log_of(state: &LimiterState) -> &SlidingLog {
    SlidingLog::from_state(state.algo.as_ref().unwrap()).unwrap()
}

/// One request through the shared flow (`apply`), keeping a created state.
fn call(state: &mut Option<LimiterState>, p: &SlidingParams, req: &Request) -> Verdict {
    let out = flow::apply::<SlidingLog>(state.as_mut(), p, req, 1000).unwrap();
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

    fn call(&mut self, p: &SlidingParams, now: Micros, cost: u64, be: bool, peek: bool) -> Verdict {
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
        assert!(log.data.len() <= 2 * (log.data.len() - log.head.offset as usize) + COMPACT_MIN);
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
                0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x0b, 0x03, 0x04, 0x00,
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

/// The codec's layout written from the entries one by one (the reference for `encode`, which
/// copies the packed bytes): parameters, count, then each entry's Δms from the previous one
/// (the first from the epoch) and its units.
fn encode_by_entries(s: &SlidingLog) -> Vec<u8> {
    let mut out = Vec::new();
    for v in [
        s.params().limit(),
        s.params().window(),
        s.params().precision(),
        s.entries().count() as u64,
    ] {
        varint::put_u64(&mut out, v);
    }
    let mut prev_ms = 0;
    for (ts, units) in s.entries() {
        assert_eq!(ts % MS, 0);
        log::put_entry(&mut out, ts / MS - prev_ms, units);
        prev_ms = ts / MS;
    }
    out
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
                shadow: false,
                best_effort: s.best_effort,
                dedup: None,
                now: t,
                block: None,
                delay: None,
                hold: None,
            };
            let out = flow::apply::<SlidingLog>(state.as_mut(), &p, &req, 1000).unwrap();
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

    /// `encode` (the packed bytes copied) writes exactly what the entries say, whatever the
    /// log went through: grants, expiry, compaction, merges at the bound, refunds, a decode.
    #[test]
    fn sliding_encoding_copies_the_packed_entries(
        max in prop_oneof![Just(MAX_ENTRIES), 2u32..6],
        p in params_strategy(),
        steps in proptest::collection::vec(
            (step_strategy(), proptest::option::weighted(0.1, 1u64..6), proptest::bool::weighted(0.05)),
            0..120,
        ),
    ) {
        let mut algo = SlidingLog::fresh(&p);
        let mut t = T0;
        for (s, refund, reload) in &steps {
            t = t.checked_add_signed(s.dt.abs()).unwrap();
            let v = algo.evaluate_with(&p, t, s.cost, s.best_effort, max).unwrap();
            if v.granted > 0 {
                algo.commit_with(&p, t, v.granted, max).unwrap();
            }
            if let Some(units) = refund {
                algo.refund(t, *units).unwrap();
            }
            let mut enc = Vec::new();
            algo.encode(&mut enc);
            prop_assert_eq!(&enc, &encode_by_entries(&algo));
            prop_assert_eq!(algo.encoded_len(), enc.len());
            if *reload {
                algo = SlidingLog::decode(&mut Reader::new(&enc)).unwrap();
                let mut again = Vec::new();
                algo.encode(&mut again);
                prop_assert_eq!(again, enc);
            }
        }
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
