//! `DELAY d` on the schedule algorithms (RL.GCRA, RL.TOKENBUCKET, RL.LEAKYBUCKET), alone and in
//! RL.ALL, against a reference model written here: a bucket level in exact units of
//! `1 / period` unit, read as a piecewise-linear function of time around the moment it was last
//! charged as of (which a reservation puts in the future), every wait found by bisection on that
//! level. Never the implementation's formulas (no TAT, no ticks).

use proptest::prelude::*;

use crate::core::flow::Write;
use crate::core::gcra::{Gcra, GcraParams};
use crate::core::leaky_bucket::LeakyBucket;
use crate::core::limiter::{Request, Retry, Verdict};
use crate::core::multi::AnyParams;
use crate::core::state::{LimiterState, Stored};
use crate::core::testkit::{self, Key, T0};
use crate::core::token_bucket::TokenBucket;

/// How far the model looks for a wait, in µs (far beyond any wait of the parameters tested).
const HORIZON: u64 = 1 << 45;

/// Which algorithm the model stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// GCRA and the token bucket: a granted call replies no wait unless it was reserved.
    Gcra,
    Tokens,
    /// The leaky bucket: a granted call's retry is its queue delay (from the call's time).
    Queue,
}

/// One limiter: `free` units' worth (tokens, or capacity minus queue), in `1 / period` units,
/// as of the moment `at`. After `at` the level gains `rate` a µs up to the capacity; before
/// `at` (a reservation in the future) it is what is left once everything charged up to `at` is
/// taken and nothing refilled since: `free − rate·(at − x)`, negative when overdrawn.
#[derive(Debug, Clone)]
struct Model {
    shape: Shape,
    burst: i128,
    rate: i128,
    per: i128,
    free: i128,
    at: u64,
    /// The key's clock: the time of the last call that wrote.
    last: u64,
}

impl Model {
    fn new(shape: Shape, p: &GcraParams) -> Self {
        let per = i128::from(p.period());
        Model {
            shape,
            burst: i128::from(p.burst()),
            rate: i128::from(p.rate()),
            per,
            free: i128::from(p.burst()) * per,
            at: 0,
            last: 0,
        }
    }

    fn full(&self) -> i128 {
        self.burst * self.per
    }

    /// The free level at time `x`.
    fn free_at(&self, x: u64) -> i128 {
        let dt = i128::from(x) - i128::from(self.at);
        if dt >= 0 {
            (self.free + self.rate * dt).min(self.full())
        } else {
            self.free + self.rate * dt
        }
    }

    /// The first wait `w ≤ max` µs after `x` at which the free level reaches `need`, found by
    /// bisection (the level never falls while nothing is charged).
    fn first(&self, x: u64, need: i128, max: u64) -> Option<u64> {
        if self.free_at(x) >= need {
            return Some(0);
        }
        if self.free_at(x + max) < need {
            return None;
        }
        let (mut lo, mut hi) = (0, max);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.free_at(x + mid) >= need {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }

    /// Units available at `x` (none when overdrawn).
    fn avail(&self, x: u64) -> u64 {
        (self.free_at(x).max(0) / self.per) as u64
    }

    /// The model charged `units` as of `moment`, by a call at `t`.
    fn charged(&self, t: u64, moment: u64, units: u64) -> Model {
        Model {
            free: self.free_at(moment) - i128::from(units) * self.per,
            at: moment,
            last: t,
            ..self.clone()
        }
    }

    /// The retry of a call at `t` granted in full as of `moment` on this (uncharged) model.
    fn granted_retry(&self, t: u64, moment: u64) -> Retry {
        let wait = moment - t;
        let total = match self.shape {
            Shape::Gcra | Shape::Tokens => wait,
            // Behind the units queued at `moment`, which leave at `rate` a µs.
            Shape::Queue => {
                let queued = self.full() - self.free_at(moment);
                wait + (queued.max(0) as u64).div_ceil(self.rate as u64)
            }
        };
        if total == 0 {
            Retry::Granted
        } else {
            Retry::After(total)
        }
    }

    /// The reply fields read from this model (after the call) at `t`, the retry given.
    fn verdict(&self, t: u64, granted: u64, retry: Retry) -> Verdict {
        Verdict {
            granted,
            limit: self.burst as u64,
            remaining: self.avail(t),
            retry,
            reset_after: self.first(t, self.full(), HORIZON).unwrap(),
        }
    }

    /// The retry of a call of `cost` not granted in full, from this model (after the call).
    fn denied_retry(&self, t: u64, cost: u64) -> Retry {
        if i128::from(cost) > self.burst {
            Retry::Never
        } else {
            Retry::After(self.first(t, i128::from(cost) * self.per, HORIZON).unwrap())
        }
    }

    /// One call of `cost` at `now`: granted in full now if it fits; else, with `DELAY d`,
    /// granted as of the first moment within `d` it fits; else with `BESTEFFORT` what fits now.
    fn call(&mut self, now: u64, cost: u64, be: bool, peek: bool, delay: Option<u64>) -> Verdict {
        let t = now.max(self.last);
        let need = i128::from(cost) * self.per;
        let avail = self.avail(t);
        let reserved = match delay {
            Some(d) if cost > avail && i128::from(cost) <= self.burst => {
                self.first(t, need, d).map(|w| t + w)
            }
            _ => None,
        };
        let (granted, moment) = match reserved {
            Some(moment) => (cost, moment),
            None if cost <= avail => (cost, t),
            None if be => (avail, t),
            None => (0, t),
        };
        let after = if granted > 0 {
            self.charged(t, moment, granted)
        } else {
            self.clone()
        };
        let retry = if granted == 0 && cost == 0 {
            Retry::Granted
        } else if granted == cost {
            self.granted_retry(t, moment)
        } else {
            after.denied_retry(t, cost)
        };
        let v = after.verdict(t, granted, retry);
        if granted > 0 && !peek {
            *self = after;
        }
        v
    }
}

/// The parameters tested: whole and fractional emission intervals, bursts of 1 and more.
fn param_sets() -> Vec<GcraParams> {
    vec![
        GcraParams::new(5, 3, 1_000_000).unwrap(),
        GcraParams::new(1, 1, 1_000_000).unwrap(),
        GcraParams::new(2, 7, 3_000_000).unwrap(),
        GcraParams::new(5, 1000, 1_000).unwrap(),
    ]
}

/// A call with `DELAY` through the real flow.
fn request(now: u64, cost: u64, be: bool, peek: bool, delay: Option<u64>) -> Request {
    Request {
        best_effort: be,
        peek,
        delay,
        ..Request::new(cost, now)
    }
}

/// Run `ops` on one key of algorithm `A` and on the model; every verdict must be the model's,
/// and every grant (placed at the moment it was charged as of) must fit the token-bucket
/// bound: over any span of moments, at most `burst + rate · span / period` units.
fn check_one<A: Stored<Params = GcraParams>>(
    shape: Shape,
    p: &GcraParams,
    ops: &[(i64, u64, bool, bool, Option<u64>)],
) -> Result<(), TestCaseError> {
    let mut key = Key::default();
    let mut model = Model::new(shape, p);
    let mut now = T0;
    let mut grants: Vec<(u64, u64)> = Vec::new();
    for (i, &(dt, cost, be, peek, delay)) in ops.iter().enumerate() {
        now = now.saturating_add_signed(dt);
        let t = now.max(key.last_update());
        let req = request(now, cost, be, peek, delay);
        let out = key.call::<A>(p, &req);
        let want = model.call(now, cost, be, peek, delay);
        prop_assert_eq!(out.verdict, want, "step {} {:?}", i, req);
        let wrote = !matches!(out.write, Write::None);
        prop_assert_eq!(wrote, want.granted > 0 && !peek, "step {}", i);
        if wrote {
            // The key lives at least until it is fresh again.
            prop_assert!(out.expires_at >= t + want.reset_after, "step {}", i);
            prop_assert_eq!(key.last_update(), t, "step {}: the key's clock", i);
            // The moment the model charged the grant as of.
            grants.push((model.at, want.granted));
        }
    }
    grants.sort_unstable();
    for a in 0..grants.len() {
        let mut sum = 0u128;
        for b in a..grants.len() {
            sum += u128::from(grants[b].1);
            let span = u128::from(grants[b].0 - grants[a].0);
            let most = u128::from(p.burst()) + span * u128::from(p.rate()) / u128::from(p.period());
            prop_assert!(
                sum <= most,
                "grants {}..={} ({} units in {} µs)",
                a,
                b,
                sum,
                span
            );
        }
    }
    Ok(())
}

fn ops() -> impl Strategy<Value = Vec<(i64, u64, bool, bool, Option<u64>)>> {
    let dt =
        prop_oneof![3 => 0i64..400_000, 1 => 0i64..4, 1 => -300_000i64..0, 1 => 0i64..3_000_000];
    let delay = prop::option::weighted(0.7, prop_oneof![1u64..5, 1u64..4_000_000]);
    prop::collection::vec(
        (
            dt,
            0u64..7,
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.15),
            delay,
        ),
        1..40,
    )
}

proptest! {
    #[test]
    fn gcra_delay_matches_the_model(which in 0usize..4, ops in ops()) {
        check_one::<Gcra>(Shape::Gcra, &param_sets()[which], &ops)?;
    }

    #[test]
    fn token_bucket_delay_matches_the_model(which in 0usize..4, ops in ops()) {
        check_one::<TokenBucket>(Shape::Tokens, &param_sets()[which], &ops)?;
    }

    #[test]
    fn leaky_bucket_delay_matches_the_model(which in 0usize..4, ops in ops()) {
        check_one::<LeakyBucket>(Shape::Queue, &param_sets()[which], &ops)?;
    }
}

/// GCRA, 1 at once and 1 a second: a wait of exactly `d` is granted, a µs more is not; a
/// reserved call charges the future, so the next waits behind it; PEEK, BESTEFFORT, COST 0 and
/// a cost above the limit with DELAY.
#[test]
fn delay_grants_a_wait_of_exactly_d() {
    let p = GcraParams::new(1, 1, 1_000_000).unwrap();
    let mut key = Key::default();
    let call = |key: &mut Key, at: u64, cost: u64, be: bool, peek: bool, d: Option<u64>| {
        key.call::<Gcra>(&p, &request(T0 + at, cost, be, peek, d))
            .verdict
    };
    let v = |granted, remaining, retry, reset_after| Verdict {
        granted,
        limit: 1,
        remaining,
        retry,
        reset_after,
    };
    assert_eq!(
        call(&mut key, 0, 1, false, false, None),
        v(1, 0, Retry::Granted, 1_000_000)
    );
    // Allowed in 0.75 s: not within 749 999 µs, granted within 750 ms.
    let d = Some(749_999);
    assert_eq!(
        call(&mut key, 250_000, 1, false, false, d),
        v(0, 0, Retry::After(750_000), 750_000)
    );
    let d = Some(750_000);
    assert_eq!(
        call(&mut key, 250_000, 1, false, true, d),
        v(1, 0, Retry::After(750_000), 1_750_000),
        "PEEK"
    );
    assert_eq!(
        call(&mut key, 250_000, 1, false, false, d),
        v(1, 0, Retry::After(750_000), 1_750_000)
    );
    // The next one waits behind the reservation: 1.75 s.
    assert_eq!(
        call(&mut key, 250_000, 1, false, false, Some(1_000_000)),
        v(0, 0, Retry::After(1_750_000), 1_750_000)
    );
    // COST 0 and a cost above the limit are never delayed.
    assert_eq!(
        call(&mut key, 250_000, 0, false, false, d),
        v(0, 0, Retry::Granted, 1_750_000)
    );
    assert_eq!(
        call(&mut key, 250_000, 2, false, false, Some(10_000_000)),
        v(0, 0, Retry::Never, 1_750_000)
    );
    // BESTEFFORT with nothing available within DELAY: nothing.
    assert_eq!(
        call(&mut key, 250_000, 1, true, false, Some(1)),
        v(0, 0, Retry::After(1_750_000), 1_750_000)
    );
    // At the reservation's time the key is as if the call was made then.
    assert_eq!(
        call(&mut key, 1_000_000, 0, false, false, None),
        v(0, 0, Retry::Granted, 1_000_000)
    );
    assert_eq!(
        call(&mut key, 2_000_000, 1, false, false, None),
        v(1, 0, Retry::Granted, 1_000_000)
    );
}

/// The leaky bucket with DELAY: a reserved request's retry is its queue delay from the call.
#[test]
fn leaky_bucket_delay_is_the_queue_delay() {
    // Capacity 2, one unit a second.
    let p = GcraParams::new(2, 1, 1_000_000).unwrap();
    let mut key = Key::default();
    let mut call = |at: u64, d: Option<u64>| {
        key.call::<LeakyBucket>(&p, &request(T0 + at, 1, false, false, d))
            .verdict
    };
    assert_eq!(call(0, None).retry, Retry::Granted);
    assert_eq!(call(0, None).retry, Retry::After(1_000_000));
    // Full: the third fits in 1 s, and is processed after the two before it: 2 s.
    assert_eq!(call(0, Some(999_000)).granted, 0);
    let v = call(0, Some(1_000_000));
    assert_eq!(
        (v.granted, v.remaining, v.retry, v.reset_after),
        (1, 0, Retry::After(2_000_000), 3_000_000)
    );
}

/// RL.ALL: the model of each limiter, judged together: the call is granted in full now if every
/// key grants it, else with `DELAY d` as of the latest moment each key allows it when that is
/// within `d`, else with `BESTEFFORT` the least every key has; the reply combined as SPEC says.
fn model_all(
    models: &mut [Model],
    now: u64,
    cost: u64,
    be: bool,
    peek: bool,
    delay: Option<u64>,
) -> Verdict {
    let t = models.iter().map(|m| now.max(m.last)).max().unwrap();
    let full_now = models.iter().all(|m| m.avail(t) >= cost);
    let reserved = match delay {
        Some(d) if !full_now => {
            let waits: Option<Vec<u64>> = models
                .iter()
                .map(|m| {
                    (i128::from(cost) <= m.burst)
                        .then(|| m.first(t, i128::from(cost) * m.per, HORIZON))
                        .flatten()
                })
                .collect();
            waits
                .map(|w| w.into_iter().max().unwrap())
                .filter(|&w| w <= d)
        }
        _ => None,
    };
    let (amount, moment) = match reserved {
        Some(w) => (cost, t + w),
        None if full_now => (cost, t),
        None if be => (models.iter().map(|m| m.avail(t)).min().unwrap(), t),
        None => (0, t),
    };
    let mut verdicts = Vec::new();
    let mut afters = Vec::new();
    for m in models.iter() {
        let after = if amount > 0 {
            m.charged(t, moment, amount)
        } else {
            m.clone()
        };
        let retry = if amount == 0 && cost == 0 {
            Retry::Granted
        } else if amount == cost {
            m.granted_retry(t, moment)
        } else {
            after.denied_retry(t, cost)
        };
        verdicts.push(after.verdict(t, amount, retry));
        afters.push(after);
    }
    if amount > 0 && !peek {
        models.clone_from_slice(&afters);
    }
    let tightest = *verdicts.iter().min_by_key(|v| v.remaining).unwrap();
    let retry = verdicts
        .iter()
        .fold(Retry::Granted, |acc, v| match (acc, v.retry) {
            (Retry::Never, _) | (_, Retry::Never) => Retry::Never,
            (Retry::After(a), Retry::After(b)) => Retry::After(a.max(b)),
            (Retry::After(a), Retry::Granted) | (Retry::Granted, Retry::After(a)) => {
                Retry::After(a)
            }
            (Retry::Granted, Retry::Granted) => Retry::Granted,
        });
    Verdict {
        granted: amount,
        limit: tightest.limit,
        remaining: tightest.remaining,
        retry,
        reset_after: verdicts.iter().map(|v| v.reset_after).max().unwrap(),
    }
}

fn spec_of(shape: Shape, p: &GcraParams) -> AnyParams {
    match shape {
        Shape::Gcra => AnyParams::of::<Gcra>(p),
        Shape::Tokens => AnyParams::of::<TokenBucket>(p),
        Shape::Queue => AnyParams::of::<LeakyBucket>(p),
    }
}

proptest! {
    /// RL.ALL with DELAY over 1 to 3 schedule limiters replies as the model, and a reserved call
    /// changes every key as of the same moment.
    #[test]
    fn all_delay_matches_the_model(
        limiters in prop::collection::vec((0usize..3, 0usize..4), 1..4),
        ops in ops(),
    ) {
        let shapes = [Shape::Gcra, Shape::Tokens, Shape::Queue];
        let sets = param_sets();
        let specs: Vec<AnyParams> =
            limiters.iter().map(|&(s, p)| spec_of(shapes[s], &sets[p])).collect();
        let mut models: Vec<Model> =
            limiters.iter().map(|&(s, p)| Model::new(shapes[s], &sets[p])).collect();
        let mut states: Vec<Option<LimiterState>> = vec![None; specs.len()];
        let mut now = T0;
        for (i, &(dt, cost, be, peek, delay)) in ops.iter().enumerate() {
            now = now.saturating_add_signed(dt);
            let req = request(now, cost, be, peek, delay);
            let want = model_all(&mut models, now, cost, be, peek, delay);
            let out = testkit::apply_all_on(&mut states, &specs, &req).unwrap();
            prop_assert_eq!(out.verdict, want, "step {} {:?}", i, req);
            prop_assert_eq!(
                out.writes.iter().all(Option::is_some),
                want.granted > 0 && !peek,
                "step {}", i
            );
        }
    }
}
