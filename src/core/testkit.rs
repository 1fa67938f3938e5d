//! Test support shared by the algorithms' unit and property tests: a driver that runs requests
//! through the real request flow ([`apply`]), random request sequences, and the checks every
//! algorithm must pass against its reference model.
//!
//! A reference model is written independently in each algorithm's test module (a naive
//! simulation or rational arithmetic over the algorithm's textbook state, never the
//! implementation's formulas). It sees the same calls and must give the same [`Verdict`].

use proptest::prelude::*;

use crate::core::codec;
use crate::core::flow::{Outcome, Write, apply};
use crate::core::kind::{Kind, of};
use crate::core::limiter::{Request, Retry, Verdict};
use crate::core::multi::{AnyParams, MultiError, MultiOutcome, Slot, apply_all};
use crate::core::state::LimiterState;
use crate::core::state::{Stored, WiredState};
use crate::core::time::Micros;

/// An algorithm's parameters made from four numbers, for the tests that run every registered
/// algorithm ([`sample`]: RL.ALL's properties, the refund and block models, the codec):
/// `[limit, rate, period, extra]`, where `limit` is the units allowed at once, `period` a
/// duration in µs, and `rate` and `extra` what else the algorithm takes (units per period, an
/// offset, a precision, a lease id). A number is fitted to what the algorithm accepts where
/// that is plain (whole milliseconds, a cap, a remainder); `None` when the algorithm refuses
/// the rest. Implemented in each algorithm's test module: one missing is a compile error in
/// [`sample`].
pub trait Sample: Stored {
    /// The parameters from `[limit, rate, period, extra]`, if the algorithm accepts them.
    fn sample(numbers: [u64; 4]) -> Option<Self::Params>;
}

macro_rules! define_sample {
    ([] $($variant:ident)*) => {
        /// Algorithm `kind`'s parameters from `numbers` ([`Sample`]), if it accepts them: with
        /// [`Kind::ALL`], every registered algorithm.
        pub fn sample(kind: Kind, numbers: [u64; 4]) -> Option<AnyParams> {
            match kind {
                $(Kind::$variant => {
                    type A = <of::$variant as WiredState>::State;
                    <A as Sample>::sample(numbers).map(|p| AnyParams::of::<A>(&p))
                })*
            }
        }
    };
}

crate::core::kind::each!(define_sample);

/// `us` as whole milliseconds, at least one.
pub fn whole_ms(us: Micros) -> Micros {
    (us / 1000).max(1) * 1000
}

/// A realistic start time: 2023-11-14T22:13:20Z.
pub const T0: Micros = 1_700_000_000_000_000;

/// A hundred years of 365.25 days, in µs.
pub const CENTURY: Micros = 100 * 36_525 * 86_400 * 1_000_000;

/// One limiter key, driven through [`apply`] as the command layer does.
#[derive(Debug, Clone, Default)]
pub struct Key {
    pub state: Option<LimiterState>,
}

impl Key {
    /// Run `req` with `params`, storing a created value.
    pub fn call<A: Stored>(&mut self, params: &A::Params, req: &Request) -> Outcome {
        let out = apply::<A>(self.state.as_mut(), params, req, 1000).expect("apply");
        if let Write::Created(s) = &out.write {
            self.state = Some(s.clone());
        }
        out
    }

    /// A plain request of `cost` at `now`; the exact verdict.
    pub fn take<A: Stored>(&mut self, params: &A::Params, now: Micros, cost: u64) -> Verdict {
        self.call::<A>(params, &Request::new(cost, now)).verdict
    }

    /// What `cost` at `now` would get, changing nothing.
    pub fn peek<A: Stored>(&self, params: &A::Params, now: Micros, cost: u64) -> Verdict {
        let mut probe = self.clone();
        let req = Request {
            peek: true,
            ..Request::new(cost, now)
        };
        let out = probe.call::<A>(params, &req);
        assert!(matches!(out.write, Write::None), "PEEK wrote");
        out.verdict
    }

    /// The parameters the key was last written with.
    pub fn params<A: Stored>(&self) -> Option<A::Params> {
        let s = self.state.as_ref()?;
        s.algo
            .as_ref()
            .and_then(A::from_state)
            .map(|a| a.params().clone())
    }

    /// The key's last update (0 when empty): calls older than this are evaluated at it.
    pub fn last_update(&self) -> Micros {
        self.state.as_ref().map_or(0, |s| s.last_update)
    }
}

/// One row of a table-driven test: (µs after [`T0`], cost, `BESTEFFORT`, granted, remaining,
/// retry, reset µs); retry is 0 for granted in full, -1 for never, else µs.
pub type Row = (u64, u64, bool, u64, u64, i64, u64);

/// Run `rows` in order on one fresh key with `params`, whose limit is `limit`.
pub fn run_table<A: Stored>(params: &A::Params, limit: u64, rows: &[Row]) {
    let mut key = Key::default();
    for (i, &(t, cost, best_effort, granted, remaining, retry, reset_after)) in
        rows.iter().enumerate()
    {
        let req = Request {
            best_effort,
            ..Request::new(cost, T0 + t)
        };
        let want = Verdict {
            granted,
            limit,
            remaining,
            retry: match retry {
                0 => Retry::Granted,
                -1 => Retry::Never,
                us => Retry::After(us as u64),
            },
            reset_after,
        };
        assert_eq!(key.call::<A>(params, &req).verdict, want, "row {i}");
    }
}

/// One random call: a time step from the previous call (may be negative), the shared options,
/// and which of the test's parameter sets to use.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub dt: i64,
    pub cost: u64,
    pub peek: bool,
    pub best_effort: bool,
    pub params: usize,
}

/// Steps whose time deltas are scaled to `unit` µs (about one window or period), with costs up
/// to `max_cost` and a parameter set out of `n_params` (the first one most of the time).
pub fn steps(unit: i64, max_cost: u64, n_params: usize) -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![
        3 => 0..=unit / 4,
        2 => 0..=2 * unit,
        1 => 0..=3i64,
        1 => -unit..=0,
    ];
    let params = prop_oneof![6 => Just(0usize), 1 => 0..n_params];
    let step = (
        dt,
        0..=max_cost,
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.2),
        params,
    )
        .prop_map(|(dt, cost, peek, best_effort, params)| Step {
            dt,
            cost,
            peek,
            best_effort,
            params,
        });
    prop::collection::vec(step, 1..40)
}

/// What a reference model answers for one call; it commits the call itself when it grants
/// something without `PEEK`, and evaluates at `max(now, last write)` like the real flow.
pub trait Model {
    type Params;
    fn call(
        &mut self,
        p: &Self::Params,
        now: Micros,
        cost: u64,
        best_effort: bool,
        peek: bool,
    ) -> Verdict;
}

/// Which retry checks apply to an algorithm's granted calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantedRetry {
    /// A granted call replies `Retry::Granted`.
    Zero,
    /// A granted call may reply its queue delay (the leaky bucket).
    QueueDelay,
}

/// Every call as it happened, for invariants over the whole history.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// The evaluation time (after the per-key clamp).
    pub at: Micros,
    /// Units granted and kept (0 for a `PEEK`).
    pub granted: u64,
}

/// Run `steps` from `start` on a fresh key and on `model`, asserting that every verdict is
/// the model's, and the shared invariants of SPEC.md:
/// - `granted ≤ cost`, `remaining ≤ limit`, partial grants only with `BESTEFFORT`;
/// - denied or `PEEK` calls write nothing; a granted call's expiry is at or after its reset;
/// - `retry_after` is exact: the same request (as a `PEEK`) is denied 1 µs before
///   `now + retry` and granted at it; `Never` exactly when the cost is above the limit.
///
/// Returns the history, for the algorithm's own invariants (units per window).
pub fn check_against_model<A: Stored, M: Model<Params = A::Params>>(
    model: &mut M,
    params: &[A::Params],
    start: Micros,
    steps: &[Step],
    granted_retry: GrantedRetry,
) -> Vec<Event> {
    let mut key = Key::default();
    let mut now = start;
    let mut history = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        now = now.saturating_add_signed(s.dt);
        let p = &params[s.params];
        let at = now.max(key.last_update());
        let req = Request {
            cost: s.cost,
            peek: s.peek,
            shadow: false,
            best_effort: s.best_effort,
            dedup: None,
            now,
            block: None,
            delay: None,
            hold: None,
        };
        let out = key.call::<A>(p, &req);
        let v = out.verdict;
        let want = model.call(p, now, s.cost, s.best_effort, s.peek);
        assert_eq!(v, want, "step {i} {s:?} at {at}");

        assert!(v.granted <= s.cost, "step {i}: granted above cost");
        assert!(v.remaining <= v.limit, "step {i}: remaining above limit");
        if v.granted < s.cost {
            assert!(v.granted == 0 || s.best_effort, "step {i}: partial grant");
            assert_ne!(v.retry, Retry::Granted, "step {i}");
        } else {
            match (granted_retry, v.retry) {
                (_, Retry::Granted) => {}
                (GrantedRetry::QueueDelay, Retry::After(_)) => {}
                (_, other) => panic!("step {i}: granted in full but retry {other:?}"),
            }
        }
        let wrote = !matches!(out.write, Write::None);
        assert_eq!(wrote, v.granted > 0 && !s.peek, "step {i}: write");
        if wrote {
            assert!(
                out.expires_at >= at.saturating_add(v.reset_after),
                "step {i}"
            );
        }

        // The retry time is exact to the microsecond. It describes the state after the call, so
        // it is checked when that state is the stored one (not after a PEEK that would have
        // granted part) and under the parameters it was stored with (a parameter change is
        // applied at the time of the call that makes it).
        let stored = key.params::<A>().is_none_or(|q| q == *p);
        if v.granted < s.cost && stored && !(s.peek && v.granted > 0) {
            match v.retry {
                Retry::Never => assert!(s.cost > v.limit, "step {i}: never"),
                Retry::After(us) => {
                    assert!(s.cost <= v.limit && us >= 1, "step {i}: after {us}");
                    let base = at.max(key.last_update());
                    let before = key.peek::<A>(p, base + us - 1, s.cost);
                    let after = key.peek::<A>(p, base + us, s.cost);
                    assert_eq!(before.granted, 0, "step {i}: granted before retry {us}");
                    assert_eq!(after.granted, s.cost, "step {i}: denied at retry {us}");
                }
                Retry::Granted => unreachable!(),
            }
        }
        history.push(Event {
            at,
            granted: if s.peek { 0 } else { v.granted },
        });
    }
    history
}

/// A forward jump of a century from `start` (and to the end of time) after `steps`: no panic,
/// no overflow, and the limiter is fresh again.
pub fn check_century_jump<A: Stored>(params: &A::Params, start: Micros, steps: &[Step]) {
    let mut key = Key::default();
    let mut now = start;
    for s in steps {
        now = now.saturating_add_signed(s.dt);
        let _ = key.take::<A>(params, now, s.cost);
    }
    for later in [now.saturating_add(CENTURY), Micros::MAX] {
        let v = key.peek::<A>(params, later, 0);
        assert_eq!(v.remaining, v.limit, "fresh at {later}");
        assert_eq!(v.reset_after, 0, "fresh at {later}");
        let v = key.peek::<A>(params, later, v.limit);
        assert_eq!(v.granted, v.limit, "a full request at {later}");
    }
}

/// After every call of `steps` (parameters drawn from `params`), the key's value decodes from its
/// encoding to itself.
pub fn check_codec_round_trip<A: Stored>(params: &[A::Params], steps: &[Step]) {
    let mut key = Key::default();
    let mut now = T0;
    for s in steps {
        now = now.saturating_add_signed(s.dt);
        key.take::<A>(&params[s.params], now, s.cost);
        if let Some(state) = &key.state {
            assert_eq!(codec::decode(&codec::encode(state)).as_ref(), Some(state));
        }
    }
}

/// Replaying a history with the clock stepped back gives the same grants as replaying it with
/// those calls made at the key's last update instead: a step back grants nothing extra.
pub fn check_clock_step_back<A: Stored>(params: &A::Params, start: Micros, steps: &[Step]) {
    let mut stepped = Key::default();
    let mut clamped = Key::default();
    let mut now = start;
    for (i, s) in steps.iter().enumerate() {
        now = now.saturating_add_signed(s.dt);
        let at = now.max(clamped.last_update());
        let a = stepped.take::<A>(params, now, s.cost);
        let b = clamped.take::<A>(params, at, s.cost);
        assert_eq!(a, b, "step {i}");
    }
}

#[test]
fn every_algorithm_has_samples_of_its_kind() {
    for kind in Kind::ALL {
        for numbers in [[8, 4, 1_000_000, 0], [1, 1, 1, 1], [5, 3, 2_500_000, 7_000]] {
            let spec = sample(*kind, numbers).unwrap();
            assert_eq!(spec.kind(), *kind);
        }
    }
}

/// RL.ALL (`multi::apply_all`, 10 `DEDUP` ids per key) on the keys `states`: a missing key
/// (`None`) gets the value a grant creates.
///
/// # Errors
/// `apply_all`'s.
pub fn apply_all_on(
    states: &mut [Option<LimiterState>],
    specs: &[AnyParams],
    req: &Request,
) -> Result<MultiOutcome, MultiError> {
    let mut slots: Vec<Slot<'_>> = states
        .iter_mut()
        .map(|s| match s {
            Some(s) => Slot::Existing(s),
            None => Slot::New(None),
        })
        .collect();
    let out = apply_all(&mut slots, specs, req, 10)?;
    let created: Vec<Option<LimiterState>> = slots
        .into_iter()
        .map(|s| match s {
            Slot::New(s) => s,
            Slot::Existing(_) => None,
        })
        .collect();
    for (s, new) in states.iter_mut().zip(created) {
        if new.is_some() {
            *s = new;
        }
    }
    Ok(out)
}
