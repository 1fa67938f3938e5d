//! GCRA and the schedule readings: tables, reference models and exactness properties.

use super::*;
use crate::core::flow::apply;
use crate::core::limiter::{Request, Retry};
use crate::core::state::LimiterState;
use proptest::prelude::*;

/// burst `limit`, `rate` per `period`.
impl crate::core::testkit::Sample for Gcra {
    fn sample([limit, rate, period, _]: [u64; 4]) -> Option<GcraParams> {
        GcraParams::new(limit, rate, period).ok()
    }
}

const SEC: u64 = 1_000_000;
const T0: u64 = 1_700_000_000 * SEC;

fn params(burst: u64, rate: u64, period: u64) -> GcraParams {
    GcraParams::new(burst, rate, period).unwrap()
}

/// A reference model written the other way round: the "continuous-state leaky bucket" of
/// ITU-T I.371, a counter `x` (in ticks of 1/rate µs) that drains as time passes, instead
/// of a theoretical arrival time.
#[derive(Debug, Clone)]
struct Model {
    burst: u128,
    rate: u128,
    period: u128,
    x: u128,
    lct: u64,
}

#[derive(Debug, PartialEq, Eq)]
struct Reply {
    granted: u64,
    remaining: u64,
    retry: Retry,
    reset_us: u64,
}

impl Model {
    fn new(p: &GcraParams) -> Self {
        Model {
            burst: p.burst.into(),
            rate: p.rate.into(),
            period: p.period.into(),
            x: 0,
            lct: 0,
        }
    }

    fn call(&mut self, t: u64, cost: u64, peek: bool, best_effort: bool) -> Reply {
        let t = t.max(self.lct);
        let drained = u128::from(t - self.lct) * self.rate;
        let xp = self.x.saturating_sub(drained);
        let room = self.burst * self.period - xp.min(self.burst * self.period);
        let fits = (room / self.period) as u64;
        let granted = if cost <= fits {
            cost
        } else if best_effort {
            fits
        } else {
            0
        };
        let x_after = xp + u128::from(granted) * self.period;
        let retry = if granted == cost {
            Retry::Granted
        } else if u128::from(cost) > self.burst {
            Retry::Never
        } else {
            let excess = x_after + u128::from(cost) * self.period - self.burst * self.period;
            Retry::After(excess.div_ceil(self.rate) as u64)
        };
        let reply = Reply {
            granted,
            remaining: fits - granted,
            retry,
            reset_us: x_after.div_ceil(self.rate) as u64,
        };
        if granted > 0 && !peek {
            self.x = x_after;
            self.lct = t;
        }
        reply
    }
}

fn run(state: &mut Option<LimiterState>, p: &GcraParams, req: &Request) -> Reply {
    let out = apply::<Gcra>(state.as_mut(), p, req, 100).unwrap();
    if let crate::core::flow::Write::Created(s) = out.write {
        *state = Some(s);
    }
    Reply {
        granted: out.verdict.granted,
        remaining: out.verdict.remaining,
        retry: out.verdict.retry,
        reset_us: out.verdict.reset_after,
    }
}

#[test]
fn gcra_table_of_replies() {
    // burst 10, 5 per second: T = 200 ms.
    let p = params(10, 5, SEC);
    let mut s = None;
    #[rustfmt::skip]
    let cases: &[(u64, u64, bool, u64, u64, Retry, u64)] = &[
        // at (ms after T0), cost, best_effort, granted, remaining, retry, reset_after (µs)
        (0,    1,  false, 1,  9, Retry::Granted,         200_000),
        (0,    9,  false, 9,  0, Retry::Granted,         2_000_000),
        (0,    1,  false, 0,  0, Retry::After(200_000),  2_000_000),
        (100,  1,  false, 0,  0, Retry::After(100_000),  1_900_000),
        (200,  1,  false, 1,  0, Retry::Granted,         2_000_000),
        (200,  11, false, 0,  0, Retry::Never,           2_000_000),
        (1000, 5,  true,  4,  0, Retry::After(1_000_000), 2_000_000),
        (1000, 0,  false, 0,  0, Retry::Granted,         2_000_000),
        (5000, 0,  false, 0, 10, Retry::Granted,         0),
        // A clock step back is evaluated at the last update (1000 ms).
        (500,  1,  false, 0,  0, Retry::After(200_000),  2_000_000),
    ];
    for (i, &(at, cost, be, granted, remaining, retry, reset)) in cases.iter().enumerate() {
        let req = Request {
            best_effort: be,
            ..Request::new(cost, T0 + at * 1000)
        };
        let got = run(&mut s, &p, &req);
        let want = Reply {
            granted,
            remaining,
            retry,
            reset_us: reset,
        };
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn gcra_is_exact_for_rates_that_do_not_divide_a_microsecond() {
    // 3 per second: T = 333333.33 µs. After 3 grants at T0 the bucket (burst 3) is empty;
    // one unit is back after exactly 1/3 s, which is 333334 µs rounded up.
    let p = params(3, 3, SEC);
    let mut s = None;
    assert_eq!(run(&mut s, &p, &Request::new(3, T0)).granted, 3);
    let r = run(&mut s, &p, &Request::new(1, T0));
    assert_eq!(r.retry, Retry::After(333_334));
    assert_eq!(run(&mut s, &p, &Request::new(1, T0 + 333_333)).granted, 0);
    assert_eq!(run(&mut s, &p, &Request::new(1, T0 + 333_334)).granted, 1);
    // A million per second keeps sub-microsecond intervals exact: 1000 units per ms.
    let p = params(1, 1_000_000, SEC);
    let mut s = None;
    let mut granted = 0;
    for i in 0..10_000u64 {
        granted += run(&mut s, &p, &Request::new(1, T0 + i)).granted;
    }
    assert_eq!(granted, 10_000);
}

#[test]
fn gcra_parameter_change_keeps_used_units() {
    // 10 per second with burst 10; use 6, then switch to 20 per second, burst 10: the 6
    // used units stay used (4 remain), and drain at the new rate.
    let mut s = None;
    run(&mut s, &params(10, 10, SEC), &Request::new(6, T0));
    let r = run(&mut s, &params(10, 20, SEC), &Request::new(0, T0));
    assert_eq!(r.remaining, 4);
    assert_eq!(r.reset_us, 300_000);
    // Raising the burst grants the difference at once (redis-cell #54 would deny).
    let r = run(&mut s, &params(20, 20, SEC), &Request::new(14, T0));
    assert_eq!(r.granted, 14);
}

#[test]
fn gcra_hundred_year_jump_saturates() {
    let p = params(5, 1, SEC);
    let mut s = None;
    run(&mut s, &p, &Request::new(5, T0));
    let far = T0 + 100 * 365 * 86_400 * SEC;
    let r = run(&mut s, &p, &Request::new(1, far));
    assert_eq!(r.granted, 1);
    // The largest parameters and the latest time still compute.
    let big = params(MAX_PARAM, MAX_PARAM, MAX_PARAM);
    let mut s = None;
    let r = run(
        &mut s,
        &big,
        &Request::new(MAX_PARAM, crate::core::time::MAX_TIME),
    );
    assert_eq!(r.granted, MAX_PARAM);
    let r = run(
        &mut s,
        &big,
        &Request::new(MAX_PARAM, crate::core::time::MAX_TIME),
    );
    assert_eq!(r.granted, 0);
}

#[test]
fn gcra_refuses_parameters_whose_span_does_not_fit() {
    // Reproducer: the reset of a full bucket would be 9.9e22 µs, beyond any reply or expiry.
    assert_eq!(
        GcraParams::new(1_000_000_000_961, 10_093, 1_000_000_000_000_000),
        Err(CoreError::SpanTooLong)
    );
    // The bound is exact: burst · period / rate, rounded up, at most MAX_SPAN.
    assert!(GcraParams::new(1, 1, MAX_SPAN).is_ok());
    assert!(GcraParams::new(2, 2, MAX_SPAN).is_ok());
    assert_eq!(
        GcraParams::new(2, 1, MAX_SPAN / 2 + 1),
        Err(CoreError::SpanTooLong)
    );
    assert!(GcraParams::new(2, 1, MAX_SPAN / 2).is_ok());
    assert_eq!(
        GcraParams::new(3, 2, MAX_SPAN / 3 * 2 + 1),
        Err(CoreError::SpanTooLong)
    );
}

#[test]
fn gcra_refuses_a_carried_backlog_that_would_not_fit() {
    // A million units queued, then one unit per 10^15 µs: 10^21 µs to drain.
    let mut s = None;
    run(
        &mut s,
        &params(1_000_000, 1_000_000, SEC),
        &Request::new(1_000_000, T0),
    );
    let slow = params(1, 1, 1_000_000_000 * SEC);
    let out = apply::<Gcra>(s.as_mut(), &slow, &Request::new(1, T0), 100);
    assert_eq!(out.unwrap_err(), CoreError::StateTooLong);
}

fn arb_params() -> impl Strategy<Value = GcraParams> {
    (
        1u64..20,
        1u64..2_000,
        prop_oneof![Just(SEC), 1u64..5_000_000],
    )
        .prop_map(|(b, r, p)| params(b, r, p))
}

#[derive(Debug, Clone)]
struct Op {
    dt: i64,
    cost: u64,
    peek: bool,
    best_effort: bool,
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        (
            -300_000i64..1_500_000,
            0u64..25,
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(dt, cost, peek, be)| Op {
                dt,
                cost,
                peek: peek && cost % 3 == 0,
                best_effort: be,
            }),
        1..60,
    )
}

/// Parameter sets whose periods do not divide one another (a conversion between them has
/// a fraction), including those of the reproducers.
fn changing_params() -> Vec<GcraParams> {
    vec![
        params(2, 2, 180 * SEC),
        params(2, 7, 60 * SEC),
        params(3, 2, 8_400 * SEC),
        params(1, 10, 3_600 * SEC),
        params(5, 3, SEC),
        params(4, 1000, 7_000),
        params(7, 11, 13_000_000),
    ]
}

/// The exact model of a schedule across parameter changes: the level in units, as a
/// rational with the common denominator `den` (a multiple of every period, so draining
/// `rate / period` units per µs is exact). `free` reads it as the token bucket (tokens are
/// kept, capped at the new capacity); otherwise the backlog is kept, uncapped.
struct Exact {
    den: u128,
    free: bool,
    /// Stored parameters, level (units × den; tokens for the token bucket), last update.
    stored: Option<(GcraParams, u128, u64)>,
}

impl Exact {
    fn new(sets: &[GcraParams], free: bool) -> Self {
        fn gcd(a: u128, b: u128) -> u128 {
            if b == 0 { a } else { gcd(b, a % b) }
        }
        let den = sets.iter().fold(1u128, |l, p| {
            let q = u128::from(p.period);
            l / gcd(l, q) * q
        });
        Exact {
            den,
            free,
            stored: None,
        }
    }

    /// Units available at `now` under `p`, exactly, as units × den.
    fn room(&self, p: &GcraParams, now: u64) -> (u64, u128) {
        let cap = u128::from(p.burst) * self.den;
        let Some((q, level, last)) = self.stored else {
            return (now, cap);
        };
        let t = now.max(last);
        let flow = u128::from(t - last) * u128::from(q.rate) * (self.den / u128::from(q.period));
        let room = if self.free {
            let qcap = u128::from(q.burst) * self.den;
            (level + flow).min(qcap).min(cap)
        } else {
            cap.saturating_sub(level.saturating_sub(flow))
        };
        (t, room)
    }

    fn charge(&mut self, p: &GcraParams, now: u64, granted: u64) {
        let (t, room) = self.room(p, now);
        let g = u128::from(granted) * self.den;
        let level = if self.free {
            room - g
        } else {
            // The backlog: capacity minus room, which may exceed the capacity (uncapped).
            let Some((q, level, last)) = self.stored else {
                self.stored = Some((*p, g, t));
                return;
            };
            let flow =
                u128::from(t - last) * u128::from(q.rate) * (self.den / u128::from(q.period));
            level.saturating_sub(flow) + g
        };
        self.stored = Some((*p, level, t));
    }
}

/// Run random calls with random parameter changes against [`Exact`]: the implementation
/// never grants a unit the exact model denies, and is stricter by less than one unit.
fn check_against_exact<A: crate::core::state::Stored<Params = GcraParams>>(
    free: bool,
    start: u64,
    steps: &[(u64, usize, u64, bool)],
) -> Result<(), TestCaseError> {
    let sets = changing_params();
    let mut exact = Exact::new(&sets, free);
    let mut s: Option<LimiterState> = None;
    let mut t = start;
    for &(dt, which, cost, be) in steps {
        t += if dt >= NEAR { 0 } else { dt };
        // Some steps land within a µs or two of the instant a stored unit comes back,
        // where rounding decides.
        if let (Some((q, ..)), Some(delta)) = (exact.stored, dt.checked_sub(NEAR)) {
            let whole = |at: u64| exact.room(&q, at).1 / exact.den;
            let now_units = whole(t);
            let (mut lo, mut hi) = (0u64, 1u64 << 45);
            if whole(t + hi) > now_units {
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if whole(t + mid) > now_units {
                        hi = mid
                    } else {
                        lo = mid
                    }
                }
                t = (t + hi + delta).saturating_sub(2);
            }
        }
        let p = &sets[which % sets.len()];
        let (_, room) = exact.room(p, t);
        let exact_avail = (room / exact.den) as u64;
        let peek = Request {
            peek: true,
            ..Request::new(0, t)
        };
        let out = apply::<A>(s.as_mut(), p, &peek, 10).unwrap();
        let avail = out.verdict.remaining;
        prop_assert!(avail <= exact_avail, "{avail} > exact {exact_avail} at {t}");
        prop_assert!(
            avail + 1 >= exact_avail,
            "{avail} << exact {exact_avail} at {t}"
        );
        let req = Request {
            best_effort: be,
            ..Request::new(cost, t)
        };
        let out = apply::<A>(s.as_mut(), p, &req, 10).unwrap();
        if let crate::core::flow::Write::Created(new) = out.write {
            s = Some(new);
        }
        let g = out.verdict.granted;
        prop_assert!(g <= exact_avail, "granted {g} > exact {exact_avail} at {t}");
        if g > 0 {
            exact.charge(p, t, g);
        }
    }
    Ok(())
}

#[test]
fn parameter_change_rounds_against_the_client() {
    // Reproducers. A token bucket of 2 per 3 min, emptied, then 1 µs short of 3 minutes
    // later holds 1.99999999 tokens; converted to 7 per minute it must not grant 2.
    let mut s = None;
    let take = |s: &mut Option<LimiterState>, p: &GcraParams, cost, at| {
        let out = apply::<crate::core::token_bucket::TokenBucket>(
            s.as_mut(),
            p,
            &Request::new(cost, at),
            10,
        )
        .unwrap();
        if let crate::core::flow::Write::Created(new) = out.write {
            *s = Some(new);
        }
        out.verdict.granted
    };
    let t = 2_541_131_987_215_912;
    assert_eq!(take(&mut s, &params(2, 2, 180 * SEC), 2, t), 2);
    assert_eq!(
        take(&mut s, &params(2, 7, 60 * SEC), 2, t + 180 * SEC - 1),
        0
    );
    assert_eq!(
        take(&mut s, &params(2, 7, 60 * SEC), 1, t + 180 * SEC - 1),
        1
    );
    // CL.THROTTLE c1 2 2 8400 (burst 3, one unit per 4200 s), then 1 µs before the unit
    // has drained, burst 1 at 10 per hour: 1 µs of backlog is still a backlog.
    let mut s = None;
    let t = 1_795_459_239_944_343;
    assert_eq!(
        run(&mut s, &params(3, 2, 8_400 * SEC), &Request::new(1, t)).granted,
        1
    );
    let later = t + 4_200 * SEC - 1;
    assert_eq!(
        run(&mut s, &params(1, 10, 3_600 * SEC), &Request::new(1, later)).granted,
        0
    );
    assert_eq!(
        run(
            &mut s,
            &params(1, 10, 3_600 * SEC),
            &Request::new(1, later + 1)
        )
        .granted,
        1
    );
}

/// A step's `dt` at or above this means: go to 2 µs before the next unit comes back, plus
/// `dt − NEAR`.
const NEAR: u64 = u64::MAX - 4;

fn exact_steps() -> impl Strategy<Value = Vec<(u64, usize, u64, bool)>> {
    prop::collection::vec(
        (
            prop_oneof![
                0u64..3,
                0u64..2_000_000,
                0u64..20_000_000_000,
                NEAR..=u64::MAX
            ],
            0usize..7,
            0u64..8,
            any::<bool>(),
        ),
        1..50,
    )
}

proptest! {
    /// GCRA across parameter changes never grants what exact arithmetic would deny.
    #[test]
    fn gcra_parameter_changes_match_exact_arithmetic(start in T0..T0 + SEC, steps in exact_steps()) {
        check_against_exact::<Gcra>(false, start, &steps)?;
    }

    /// The leaky bucket keeps its level across changes, never in the client's favour.
    #[test]
    fn leaky_bucket_parameter_changes_match_exact_arithmetic(start in T0..T0 + SEC, steps in exact_steps()) {
        check_against_exact::<crate::core::leaky_bucket::LeakyBucket>(false, start, &steps)?;
    }

    /// The token bucket keeps its tokens across changes, never in the client's favour.
    #[test]
    fn token_bucket_parameter_changes_match_exact_arithmetic(start in T0..T0 + SEC, steps in exact_steps()) {
        check_against_exact::<crate::core::token_bucket::TokenBucket>(true, start, &steps)?;
    }
}

proptest! {
    /// Every reply field matches the reference model, whatever the sequence.
    #[test]
    fn gcra_matches_reference_model(p in arb_params(), ops in arb_ops()) {
        let mut model = Model::new(&p);
        let mut s = None;
        let mut t = T0;
        for op in ops {
            t = t.saturating_add_signed(op.dt);
            let req = Request { peek: op.peek, best_effort: op.best_effort, ..Request::new(op.cost, t) };
            let want = model.call(t, op.cost, op.peek, op.best_effort);
            let got = run(&mut s, &p, &req);
            prop_assert_eq!(got, want);
        }
    }

    /// Never more than `burst + elapsed / T` units in any run of calls.
    #[test]
    fn gcra_never_grants_more_than_burst_plus_rate(p in arb_params(), ops in arb_ops()) {
        let mut s = None;
        let mut t = T0;
        let mut log: Vec<(u64, u64)> = Vec::new();
        for op in ops {
            t = t.saturating_add_signed(op.dt.max(0));
            let req = Request { best_effort: op.best_effort, ..Request::new(op.cost, t) };
            let r = run(&mut s, &p, &req);
            if r.granted > 0 { log.push((t, r.granted)); }
        }
        for (i, &(start, _)) in log.iter().enumerate() {
            let mut total = 0u128;
            for &(at, g) in &log[i..] {
                total += u128::from(g);
                let allowance = u128::from(p.burst)
                    + u128::from(at - start) * u128::from(p.rate) / u128::from(p.period);
                prop_assert!(total <= allowance, "{total} > {allowance}");
            }
        }
    }

    /// A denied request is denied 1 µs before `now + retry_after` and granted at it.
    #[test]
    fn gcra_retry_after_is_exact(p in arb_params(), ops in arb_ops(), cost in 1u64..20) {
        let mut s = None;
        let mut t = T0;
        for op in ops {
            t = t.saturating_add_signed(op.dt.max(0));
            run(&mut s, &p, &Request::new(op.cost, t));
        }
        let probe = |s: &Option<LimiterState>, at: u64| {
            let mut copy = s.clone();
            run(&mut copy, &p, &Request::new(cost, at))
        };
        match probe(&s, t).retry {
            Retry::After(us) => {
                prop_assert_eq!(probe(&s, t + us - 1).granted, 0);
                prop_assert_eq!(probe(&s, t + us).granted, cost);
            }
            Retry::Never => prop_assert!(cost > p.burst),
            Retry::Granted => {}
        }
    }

    /// Raising the burst or the rate never denies what the old parameters granted.
    #[test]
    fn gcra_raising_limits_never_denies_more(
        p in arb_params(), ops in arb_ops(), more_burst in 0u64..5, more_rate in 0u64..50, cost in 0u64..20,
    ) {
        let mut s = None;
        let mut t = T0;
        for op in ops {
            t = t.saturating_add_signed(op.dt.max(0));
            run(&mut s, &p, &Request::new(op.cost, t));
        }
        let raised = params(p.burst + more_burst, p.rate + more_rate, p.period);
        let before = run(&mut s.clone(), &p, &Request::new(cost, t));
        let after = run(&mut s.clone(), &raised, &Request::new(cost, t));
        prop_assert!(after.granted >= before.granted);
    }
}

#[test]
fn gcra_window_is_the_full_span_rounded_up() {
    use crate::core::limiter::Algorithm;
    #[rustfmt::skip]
    let cases: &[(u64, u64, u64, u64)] = &[
        // burst  rate  period µs     window µs
        (2,       1,    1_000_000,    2_000_000),
        (7,       3,    1_000_000,    2_333_334),
        (1,       3,    1,            1),
        (10,      1_000_000, 1_000,   1),
    ];
    for &(b, r, p, want) in cases {
        let params = GcraParams::new(b, r, p).unwrap();
        assert_eq!(Gcra::window(&params, 0), want, "{b} {r} {p}");
    }
}
