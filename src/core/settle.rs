//! RL.SETTLE on one key: the reservation `id` made with `HOLD` settled with the units really
//! used ([`judge_settle`], then [`settle_settled`]). Below the units held, the difference is
//! given back as RL.REFUND gives units back (`flow::refund_algo`); above them the extra is
//! charged unconditionally ([`Algorithm::charge_debt`]), into debt, which the algorithm repays
//! as it frees units (each algorithm's module docs say how). A reservation ended unsettled is
//! given back first, at its end ([`LimiterState::catch_up`]).

use crate::core::dedup::DedupId;
use crate::core::error::CoreError;
use crate::core::flow::refund_algo;
use crate::core::limiter::{Algorithm, Refund, Retry, Verdict, blocked};
use crate::core::state::{LimiterState, Stored, dispatch};
use crate::core::time::Micros;

/// RL.SETTLE on one key, judged ([`judge_settle`]), not yet applied ([`settle_settled`]).
#[derive(Debug)]
pub struct SettleJudged {
    /// The time it is evaluated at on the key.
    pub now: Micros,
    /// The limiter reply after the settle: `granted` the units charged for the id, `limit`,
    /// `remaining` and `reset_after` as for `COST 0`, the retry until one unit could be granted.
    pub verdict: Verdict,
    /// The key holds (or held) a reservation under the id: settled now, before, or ended.
    pub held: bool,
    /// The key's new value, when the settle (or a reservation ended before it) changes it.
    after: Option<Box<LimiterState>>,
}

impl SettleJudged {
    /// Whether the key's value changes (write and replicate).
    pub fn changes(&self) -> bool {
        self.after.is_some()
    }
}

/// The error of a settle whose debt the key's state cannot hold.
pub const DEBT_TOO_LARGE: &str =
    "settle would put the limiter in debt beyond what its state can represent";

/// The error of RL.SETTLE on a concurrency limiter.
pub const NO_SETTLE: &str =
    "RL.SETTLE does not apply to a concurrency limiter, its units come back with RL.RELEASE";

/// RL.SETTLE, judged on one key: the reservation `id` settled at `now` with the `units` really
/// used. Below the units held, the difference is given back as RL.REFUND gives units back;
/// above them the extra is charged unconditionally ([`Algorithm::charge_debt`]), into debt if
/// need be. A reservation settled already or ended (given back at its end, first,
/// [`LimiterState::catch_up`]), or an id never held, settles nothing and replies what stays
/// charged for it (0 for an unknown id). `None` for a key holding only a block. Never changes
/// anything.
///
/// # Errors
/// [`CoreError::Refused`] on a concurrency limiter, or for debt the state cannot hold (beyond
/// [`MAX_SPAN`](crate::core::time::MAX_SPAN) or the counts' bounds: `LimiterState::is_valid`);
/// [`CoreError::Overflow`].
pub fn judge_settle(
    state: &LimiterState,
    now: Micros,
    id: DedupId,
    units: u64,
) -> Result<Option<SettleJudged>, CoreError> {
    let now = state.clock(now);
    let Some(algo) = &state.algo else {
        return Ok(None);
    };
    if !dispatch!(algo, a => takes_refund(a)) {
        return Err(CoreError::Refused(NO_SETTLE));
    }
    let mut after = state.clone();
    let mut changed = after.catch_up(now)?;
    let entry = after.extras.entry(id, now).copied();
    let charged = match entry {
        Some(e) if e.pending() && e.hold_end > now => {
            if let Some(algo) = after.algo.as_mut() {
                if units < e.granted {
                    let back = e.granted.saturating_sub(units);
                    dispatch!(algo, a => refund_algo(a, now, back))?;
                } else if units > e.granted {
                    let extra = units.saturating_sub(e.granted);
                    dispatch!(algo, a => a.charge_debt(now, extra))
                        .map_err(|_| CoreError::Refused(DEBT_TOO_LARGE))?;
                }
            }
            after.extras.settle(id, now, units);
            changed = true;
            units
        }
        Some(e) if e.hold_end != 0 => e.charged,
        _ => 0,
    };
    if changed {
        after.touch(now);
        if !after.is_valid() {
            return Err(CoreError::Refused(DEBT_TOO_LARGE));
        }
    }
    let verdict = settled_reply(&after, now, charged)?;
    Ok(Some(SettleJudged {
        now,
        verdict,
        held: entry.is_some_and(|e| e.hold_end != 0),
        after: changed.then(|| Box::new(after)),
    }))
}

/// The reply of RL.SETTLE on `state` at `now`: `charged` units for the id, the limiter as for
/// `COST 0` (a block honoured), the retry until one unit could be granted (0 if one can now).
fn settled_reply(state: &LimiterState, now: Micros, charged: u64) -> Result<Verdict, CoreError> {
    let Some(algo) = &state.algo else {
        return Err(CoreError::Overflow);
    };
    let current = dispatch!(algo, a => a.evaluate(a.params(), now, 0, false))?;
    let one = dispatch!(algo, a => a.evaluate(a.params(), now, 1, false))?;
    let (one, current) = match state.extras.blocked_at(now) {
        Some(until) => (
            blocked(one, current, 1, until, now),
            blocked(current, current, 0, until, now),
        ),
        None => (one, current),
    };
    let retry = if one.granted == 1 {
        Retry::Granted
    } else {
        one.retry
    };
    Ok(Verdict {
        granted: charged,
        retry,
        ..current
    })
}

/// Apply a settle judged on this key: the key's new expiry when it changed.
pub fn settle_settled(state: &mut LimiterState, judged: SettleJudged) -> Option<Micros> {
    let after = judged.after?;
    *state = *after;
    Some(state.expiry(judged.now))
}

/// Whether the algorithm gives units back (RL.REFUND, RL.SETTLE).
fn takes_refund<A: Stored>(_a: &A) -> bool {
    A::REFUND == Refund::Units
}
