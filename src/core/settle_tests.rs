//! Reservations (`HOLD`) and RL.SETTLE against independent models, one per algorithm, in exact
//! integer arithmetic over the textbook state (a TAT, a bucket's tokens or level, a window's
//! count, the sliding counter's counts per window, a log of entries), scaled so that every
//! fraction is whole: a hold, a call, a settle below the units held (given back as RL.REFUND
//! gives them) or above them (charged unconditionally, into debt), or no settle (given back at
//! the hold's end), then a query. The query's grant, remaining and retry must be the model's;
//! the retry is found by scanning the model ms by ms (the first ms at which the request fits:
//! exactly `retry_after_ms`, as fitting is monotone in time).

use proptest::prelude::*;

use crate::core::dedup::DedupId;
use crate::core::fixed_window::{Fixed, FixedParams};
use crate::core::flow::{self, apply};
use crate::core::gcra::{Gcra, GcraParams};
use crate::core::leaky_bucket::LeakyBucket;
use crate::core::limiter::{Decision, Request};
use crate::core::settle::{DEBT_TOO_LARGE, judge_settle, settle_settled};
use crate::core::sliding_counter::{SlidingCounter, SlidingCounterParams};
use crate::core::sliding_log::{SlidingLog, SlidingParams};
use crate::core::state::{LimiterState, Stored};
use crate::core::token_bucket::TokenBucket;

/// A limiter as the SPEC describes it, at whole-ms times.
trait Model {
    /// Charge `n` units at `t`, whatever the limit.
    fn charge(&mut self, t: i128, n: i128);
    /// Give back up to `n` units at `t` (RL.REFUND's rule of the algorithm).
    fn refund(&mut self, t: i128, n: i128);
    /// Whether `c` units fit at `t`.
    fn fits(&self, t: i128, c: i128) -> bool;
    /// Units that could be granted at `t`.
    fn remaining(&self, t: i128) -> i128;
}

/// GCRA: the TAT, in ms scaled by `rate` (T = period / rate ms is `period` scaled).
#[derive(Clone)]
struct GcraModel {
    burst: i128,
    rate: i128,
    period: i128,
    tat: i128,
}

impl Model for GcraModel {
    fn charge(&mut self, t: i128, n: i128) {
        self.tat = self.tat.max(t * self.rate) + n * self.period;
    }
    fn refund(&mut self, t: i128, n: i128) {
        self.tat = (self.tat - n * self.period).max(t * self.rate);
    }
    fn fits(&self, t: i128, c: i128) -> bool {
        let now = t * self.rate;
        self.tat.max(now) + c * self.period - self.burst * self.period <= now
    }
    fn remaining(&self, t: i128) -> i128 {
        let now = t * self.rate;
        ((now + self.burst * self.period - self.tat.max(now)) / self.period).max(0)
    }
}

/// Token bucket: tokens scaled by `period` (it gains `rate` of them per ms), at `last`.
#[derive(Clone)]
struct TokenModel {
    cap: i128,
    rate: i128,
    period: i128,
    tokens: i128,
    last: i128,
}

impl TokenModel {
    fn at(&self, t: i128) -> i128 {
        (self.tokens + (t - self.last) * self.rate).min(self.cap * self.period)
    }
}

impl Model for TokenModel {
    fn charge(&mut self, t: i128, n: i128) {
        self.tokens = self.at(t) - n * self.period;
        self.last = t;
    }
    fn refund(&mut self, t: i128, n: i128) {
        self.tokens = (self.at(t) + n * self.period).min(self.cap * self.period);
        self.last = t;
    }
    fn fits(&self, t: i128, c: i128) -> bool {
        self.at(t) >= c * self.period
    }
    fn remaining(&self, t: i128) -> i128 {
        self.at(t).div_euclid(self.period).max(0)
    }
}

/// Leaky bucket: the level scaled by `period` (it drains `rate` of it per ms), at `last`.
#[derive(Clone)]
struct LeakyModel {
    cap: i128,
    rate: i128,
    period: i128,
    level: i128,
    last: i128,
}

impl LeakyModel {
    fn at(&self, t: i128) -> i128 {
        (self.level - (t - self.last) * self.rate).max(0)
    }
}

impl Model for LeakyModel {
    fn charge(&mut self, t: i128, n: i128) {
        self.level = self.at(t) + n * self.period;
        self.last = t;
    }
    fn refund(&mut self, t: i128, n: i128) {
        self.level = (self.at(t) - n * self.period).max(0);
        self.last = t;
    }
    fn fits(&self, t: i128, c: i128) -> bool {
        self.at(t) + c * self.period <= self.cap * self.period
    }
    fn remaining(&self, t: i128) -> i128 {
        (self.cap * self.period - self.at(t))
            .div_euclid(self.period)
            .max(0)
    }
}

/// Fixed window: the count of window `index`.
#[derive(Clone)]
struct FixedModel {
    limit: i128,
    window: i128,
    index: i128,
    count: i128,
}

impl FixedModel {
    fn count_at(&self, t: i128) -> i128 {
        if t.div_euclid(self.window) == self.index {
            self.count
        } else {
            0
        }
    }
}

impl Model for FixedModel {
    fn charge(&mut self, t: i128, n: i128) {
        self.count = self.count_at(t) + n;
        self.index = t.div_euclid(self.window);
    }
    fn refund(&mut self, t: i128, n: i128) {
        if t.div_euclid(self.window) == self.index {
            self.count -= self.count.min(n);
        }
    }
    fn fits(&self, t: i128, c: i128) -> bool {
        self.count_at(t) + c <= self.limit
    }
    fn remaining(&self, t: i128) -> i128 {
        (self.limit - self.count_at(t)).max(0)
    }
}

/// Sliding window counter: the units counted in each window, by index.
#[derive(Clone)]
struct CounterModel {
    limit: i128,
    window: i128,
    counts: std::collections::BTreeMap<i128, i128>,
}

impl CounterModel {
    /// The estimate at `t`, times the window.
    fn scaled(&self, t: i128) -> i128 {
        let i = t.div_euclid(self.window);
        let e = t.rem_euclid(self.window);
        let get = |k| self.counts.get(&k).copied().unwrap_or(0);
        get(i - 1) * (self.window - e) + get(i) * self.window
    }
}

impl Model for CounterModel {
    fn charge(&mut self, t: i128, n: i128) {
        *self.counts.entry(t.div_euclid(self.window)).or_insert(0) += n;
    }
    fn refund(&mut self, t: i128, n: i128) {
        let c = self.counts.entry(t.div_euclid(self.window)).or_insert(0);
        *c -= (*c).min(n);
    }
    fn fits(&self, t: i128, c: i128) -> bool {
        self.scaled(t) + c * self.window <= self.limit * self.window
    }
    fn remaining(&self, t: i128) -> i128 {
        (self.limit * self.window - self.scaled(t))
            .div_euclid(self.window)
            .max(0)
    }
}

/// Sliding log: entries `(ms, units)`, an entry counting while `ms > t − window`.
#[derive(Clone)]
struct LogModel {
    limit: i128,
    window: i128,
    entries: Vec<(i128, i128)>,
}

impl LogModel {
    fn count(&self, t: i128) -> i128 {
        self.entries
            .iter()
            .filter(|(ts, _)| *ts > t - self.window)
            .map(|(_, n)| n)
            .sum()
    }
}

impl Model for LogModel {
    fn charge(&mut self, t: i128, n: i128) {
        self.entries.push((t, n));
    }
    fn refund(&mut self, t: i128, n: i128) {
        let mut left = n;
        for e in self.entries.iter_mut().rev() {
            if e.0 <= t - self.window || left == 0 {
                break;
            }
            let take = e.1.min(left);
            e.1 -= take;
            left -= take;
        }
        self.entries.retain(|e| e.1 > 0);
    }
    fn fits(&self, t: i128, c: i128) -> bool {
        self.count(t) + c <= self.limit
    }
    fn remaining(&self, t: i128) -> i128 {
        (self.limit - self.count(t)).max(0)
    }
}

/// One scenario, times in ms after a base: a hold of `held` units under `ttl`, a plain call of
/// `cost` at `call_at`, a settle with `used` units at `settle_at` (or none), then a query of
/// `ask` units at `query_at`.
#[derive(Debug, Clone)]
struct Scenario {
    held: u64,
    ttl: u64,
    call_at: u64,
    cost: u64,
    settle: Option<(u64, u64)>,
    query_at: u64,
    ask: u64,
}

fn scenario(limit: u64) -> impl Strategy<Value = Scenario> {
    (
        1..=limit,
        1u64..3000,
        0u64..3000,
        0..=limit,
        prop::option::of((0..=5 * limit, 0u64..3000)),
        0u64..8000,
        1..=limit,
    )
        .prop_map(move |(held, ttl, call, cost, settle, query, ask)| {
            // The call and the settle while the hold is live, the query after both.
            let call_at = call % ttl;
            let settle = settle.map(|(used, at)| (used, call_at + at % (ttl - call_at)));
            let after = settle.map_or(call_at, |(_, at)| at);
            Scenario {
                held,
                ttl,
                call_at,
                cost,
                settle,
                query_at: after + query,
                ask,
            }
        })
}

/// The base time, in ms (a round hour, so windows start on it).
const BASE: u64 = 1_700_002_800_000;

fn request(cost: u64, t_ms: u64) -> Request {
    Request::new(cost, (BASE + t_ms) * 1000)
}

/// The reply of `ask` units at `t` (ms after the base) on `state`, changing nothing.
fn peek<A: Stored>(state: &LimiterState, p: &A::Params, ask: u64, t: u64) -> Decision {
    let mut copy = state.clone();
    let req = Request {
        peek: true,
        ..request(ask, t)
    };
    Decision::from(apply::<A>(Some(&mut copy), p, &req, 100).unwrap().verdict)
}

/// The model's `retry_after_ms` for `c` units at `t`: 0 when they fit, else the first ms
/// after `t` at which they do.
fn model_retry(m: &dyn Model, t: i128, c: i128) -> i64 {
    (0..10_000_000i64)
        .find(|&d| m.fits(t + i128::from(d), c))
        .expect("the debt is repaid")
}

/// Run `s` on algorithm `A` under `p` and on `model`, comparing every reply.
fn check<A: Stored>(p: &A::Params, mut model: Box<dyn Model>, s: &Scenario) {
    let id = DedupId::of(b"r");
    let t = |ms: u64| i128::from(BASE + ms);
    // The hold, on a fresh limiter: granted in full.
    let hold = Request {
        dedup: Some(id),
        hold: Some(s.ttl * 1000),
        ..request(s.held, 0)
    };
    let out = apply::<A>(None, p, &hold, 100).unwrap();
    let mut state = match out.write {
        flow::Write::Created(state) => state,
        other => panic!("a hold creates the key: {other:?}"),
    };
    assert_eq!(out.verdict.granted, s.held);
    model.charge(t(0), i128::from(s.held));
    // A plain call while the hold is live.
    let fits = model.fits(t(s.call_at), i128::from(s.cost));
    let out = apply::<A>(Some(&mut state), p, &request(s.cost, s.call_at), 100).unwrap();
    assert_eq!(out.verdict.granted == s.cost, fits, "call");
    if fits {
        model.charge(t(s.call_at), i128::from(s.cost));
    }
    // The settle: the difference given back, or charged into debt.
    if let Some((used, at)) = s.settle {
        let judged = judge_settle(&state, (BASE + at) * 1000, id, used)
            .unwrap()
            .unwrap();
        let reply = Decision::from(judged.verdict);
        settle_settled(&mut state, judged);
        let (held, used_i) = (i128::from(s.held), i128::from(used));
        if used_i < held {
            model.refund(t(at), held - used_i);
        } else {
            model.charge(t(at), used_i - held);
        }
        assert_eq!(reply.granted, used as i64, "settle: granted");
        assert_eq!(
            i128::from(reply.remaining),
            model.remaining(t(at)),
            "settle: remaining"
        );
        assert_eq!(
            reply.retry_after_ms,
            model_retry(model.as_ref(), t(at), 1),
            "settle: retry for one unit"
        );
        // Retried: the same reply, nothing changes.
        let again = judge_settle(&state, (BASE + at) * 1000, id, used + 1)
            .unwrap()
            .unwrap();
        assert!(!again.changes());
        assert_eq!(Decision::from(again.verdict), reply, "settle: retried");
    } else if s.query_at >= s.ttl {
        // Not settled: given back at its end.
        model.refund(t(s.ttl), i128::from(s.held));
    }
    // The query.
    let d = peek::<A>(&state, p, s.ask, s.query_at);
    let q = t(s.query_at);
    let ask = i128::from(s.ask);
    assert_eq!(
        d.granted == s.ask as i64,
        model.fits(q, ask),
        "query: granted"
    );
    if d.granted == 0 {
        assert_eq!(
            d.retry_after_ms,
            model_retry(model.as_ref(), q, ask),
            "query: retry"
        );
    }
    let d0 = peek::<A>(&state, p, 0, s.query_at);
    assert_eq!(
        i128::from(d0.remaining),
        model.remaining(q),
        "query: remaining"
    );
}

fn schedule() -> impl Strategy<Value = (u64, u64, u64)> {
    (1u64..8, 1u64..5, 1u64..2000)
}

fn window() -> impl Strategy<Value = (u64, u64)> {
    (1u64..8, 1u64..2000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn settle_on_gcra_matches_the_tat_model(
        (b, r, per) in schedule(),
        s in (1u64..8).prop_flat_map(scenario),
    ) {
        prop_assume!(s.held <= b && s.ask <= b && s.cost <= b);
        let p = GcraParams::new(b, r, per * 1000).unwrap();
        let m = GcraModel { burst: b.into(), rate: r.into(), period: per.into(), tat: 0 };
        check::<Gcra>(&p, Box::new(m), &s);
    }

    #[test]
    fn settle_on_token_bucket_matches_the_tokens_model(
        (b, r, per) in schedule(),
        s in (1u64..8).prop_flat_map(scenario),
    ) {
        prop_assume!(s.held <= b && s.ask <= b && s.cost <= b);
        let p = GcraParams::new(b, r, per * 1000).unwrap();
        let m = TokenModel {
            cap: b.into(), rate: r.into(), period: per.into(),
            tokens: i128::from(b) * i128::from(per), last: 0,
        };
        check::<TokenBucket>(&p, Box::new(m), &s);
    }

    #[test]
    fn settle_on_leaky_bucket_matches_the_level_model(
        (b, r, per) in schedule(),
        s in (1u64..8).prop_flat_map(scenario),
    ) {
        prop_assume!(s.held <= b && s.ask <= b && s.cost <= b);
        let p = GcraParams::new(b, r, per * 1000).unwrap();
        let m = LeakyModel { cap: b.into(), rate: r.into(), period: per.into(), level: 0, last: 0 };
        check::<LeakyBucket>(&p, Box::new(m), &s);
    }

    #[test]
    fn settle_on_fixed_matches_the_count_model(
        (l, w) in window(),
        s in (1u64..8).prop_flat_map(scenario),
    ) {
        prop_assume!(s.held <= l && s.ask <= l && s.cost <= l);
        let p = FixedParams::new(l, w * 1000, 0).unwrap();
        let m = FixedModel { limit: l.into(), window: w.into(), index: -1, count: 0 };
        check::<Fixed>(&p, Box::new(m), &s);
    }

    #[test]
    fn settle_on_sliding_counter_matches_the_counts_model(
        (l, w) in window(),
        s in (1u64..8).prop_flat_map(scenario),
    ) {
        prop_assume!(s.held <= l && s.ask <= l && s.cost <= l);
        let p = SlidingCounterParams::new(l, w * 1000).unwrap();
        let m = CounterModel { limit: l.into(), window: w.into(), counts: Default::default() };
        check::<SlidingCounter>(&p, Box::new(m), &s);
    }

    #[test]
    fn settle_on_sliding_log_matches_the_entries_model(
        (l, w) in window(),
        s in (1u64..8).prop_flat_map(scenario),
    ) {
        prop_assume!(s.held <= l && s.ask <= l && s.cost <= l);
        let p = SlidingParams::new(l, w * 1000, 1000).unwrap();
        let m = LogModel { limit: l.into(), window: w.into(), entries: Vec::new() };
        check::<SlidingLog>(&p, Box::new(m), &s);
    }
}

#[test]
fn debt_beyond_the_state_bounds_is_refused_and_changes_nothing() {
    // One unit per 106751991 days: a second unit's TAT would be more than 2^63 - 1 µs ahead.
    let p = GcraParams::new(1, 1, 106_751_991 * 86_400_000_000).unwrap();
    let id = DedupId::of(b"r");
    let hold = Request {
        dedup: Some(id),
        hold: Some(1_000_000),
        ..request(1, 0)
    };
    let flow::Write::Created(state) = apply::<Gcra>(None, &p, &hold, 100).unwrap().write else {
        panic!("created");
    };
    let e = judge_settle(&state, BASE * 1000, id, 2).unwrap_err();
    assert_eq!(e, crate::core::CoreError::Refused(DEBT_TOO_LARGE));
    // A fixed window counts at most 2^63 - 1 units: r settled to that, s cannot add one more.
    let p = FixedParams::new(10, 1_000_000, 0).unwrap();
    let held = |id: &[u8]| Request {
        dedup: Some(DedupId::of(id)),
        hold: Some(1_000_000),
        ..request(1, 0)
    };
    let flow::Write::Created(mut state) = apply::<Fixed>(None, &p, &held(b"r"), 100).unwrap().write
    else {
        panic!("created");
    };
    apply::<Fixed>(Some(&mut state), &p, &held(b"s"), 100).unwrap();
    let max = i64::MAX as u64;
    let judged = judge_settle(&state, BASE * 1000, DedupId::of(b"r"), max - 1)
        .unwrap()
        .unwrap();
    settle_settled(&mut state, judged);
    let before = state.clone();
    let e = judge_settle(&state, BASE * 1000, DedupId::of(b"s"), 2).unwrap_err();
    assert_eq!(e, crate::core::CoreError::Refused(DEBT_TOO_LARGE));
    assert_eq!(state, before);
    // Settled with what it held, it fits.
    let ok = judge_settle(&state, BASE * 1000, DedupId::of(b"s"), 1)
        .unwrap()
        .unwrap();
    assert_eq!(ok.verdict.granted, 1);
}

#[test]
fn reservations_ended_unsettled_are_given_back_in_order_of_their_end() {
    // A sliding log of 10 per 10 s: a (3 units, ends at +5 s) and b (4 units, ends at +2 s),
    // then 2 more units at +1 s. b gives back its 4 first (at +2 s, the newest entries: the 2
    // units of +1 s and 2 of the 7 at +0), then a its 3 (at +5 s, of the 5 left at +0): 2 left.
    let p = SlidingParams::new(10, 10_000_000, 1000).unwrap();
    let held = |id: &[u8], n, ttl_ms: u64| Request {
        dedup: Some(DedupId::of(id)),
        hold: Some(ttl_ms * 1000),
        ..request(n, 0)
    };
    let flow::Write::Created(mut s) = apply::<SlidingLog>(None, &p, &held(b"a", 3, 5000), 100)
        .unwrap()
        .write
    else {
        panic!("created");
    };
    apply::<SlidingLog>(Some(&mut s), &p, &held(b"b", 4, 2000), 100).unwrap();
    apply::<SlidingLog>(Some(&mut s), &p, &request(2, 1000), 100).unwrap();
    assert_eq!(peek::<SlidingLog>(&s, &p, 0, 1999).remaining, 1);
    assert_eq!(peek::<SlidingLog>(&s, &p, 0, 2000).remaining, 5);
    assert_eq!(peek::<SlidingLog>(&s, &p, 0, 6000).remaining, 8);
    // Read at +6 s the value is unchanged; written at +6 s it has given both back.
    let before = s.clone();
    assert_eq!(s.extras.pending(), 2);
    apply::<SlidingLog>(Some(&mut s), &p, &request(1, 6000), 100).unwrap();
    assert_ne!(s, before);
    assert_eq!(s.extras.pending(), 0);
    assert_eq!(peek::<SlidingLog>(&s, &p, 0, 6000).remaining, 7);
}

#[test]
fn debt_is_kept_when_the_parameters_change() {
    // A token bucket of 10, 10 a second, 15 tokens short of zero after a settle of 25 on a hold
    // of 4. Called with a capacity of 20 (same rate), it is still 15 short: one token is back
    // after 16 · 100 ms. A leaky bucket keeps its level (25, 15 above its capacity of 10) the
    // same way: under a capacity of 20 one unit fits once it drained to 19, after 600 ms.
    let hold = Request {
        dedup: Some(DedupId::of(b"r")),
        hold: Some(10_000_000),
        ..request(4, 0)
    };
    let before = GcraParams::new(10, 10, 1_000_000).unwrap();
    let after = GcraParams::new(20, 10, 1_000_000).unwrap();
    fn in_debt<A: Stored<Params = GcraParams>>(p: &GcraParams, hold: &Request) -> LimiterState {
        let flow::Write::Created(mut s) = apply::<A>(None, p, hold, 100).unwrap().write else {
            panic!("created");
        };
        let j = judge_settle(&s, BASE * 1000, DedupId::of(b"r"), 25)
            .unwrap()
            .unwrap();
        settle_settled(&mut s, j);
        s
    }
    let tb = in_debt::<TokenBucket>(&before, &hold);
    let d = peek::<TokenBucket>(&tb, &after, 1, 0);
    assert_eq!((d.granted, d.remaining, d.retry_after_ms), (0, 0, 1600));
    let lb = in_debt::<LeakyBucket>(&before, &hold);
    let d = peek::<LeakyBucket>(&lb, &after, 1, 0);
    assert_eq!((d.granted, d.remaining, d.retry_after_ms), (0, 0, 600));
}
