//! The detailed reply (`DETAIL`, SPEC "The detailed reply"): the limiter reply, then which
//! limiter denied the call and why, and one entry per limiter with its own reply and the time
//! its limit applies over (`window_ms`). Without `DETAIL` no command takes this path.

use redis_module::Context;

use crate::core::limiter::{self, Decision, Reason, Verdict};
use crate::core::time::{Micros, ceil_ms};
use crate::ffi::reply::{self, DetailEntry};

/// One limiter of a call, as the detailed reply shows it.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    /// Its `NAME`, or its key.
    pub name: &'a [u8],
    pub key: &'a [u8],
    /// The units asked of it.
    pub cost: u64,
    /// Its reply, `granted` the units it was charged.
    pub verdict: Verdict,
    /// The time its limit applies over, µs.
    pub window: Micros,
    /// The named policy it comes from.
    pub policy: Option<&'a [u8]>,
}

impl Part<'_> {
    fn entry(&self) -> DetailEntry<'_> {
        let d = Decision::from(self.verdict);
        let [granted, limit, remaining, retry, reset] = values(&d);
        DetailEntry {
            name: self.name,
            key: self.key,
            values: [
                i64::try_from(self.cost).unwrap_or(i64::MAX),
                granted,
                limit,
                remaining,
                retry,
                reset,
                ceil_ms(self.window),
            ],
            policy: self.policy,
        }
    }
}

/// The limiter reply's values, in the order of its fields.
fn values(d: &Decision) -> [i64; 5] {
    [
        d.granted,
        d.limit,
        d.remaining,
        d.retry_after_ms,
        d.reset_after_ms,
    ]
}

/// Send the detailed reply: the merged reply `d`, the call's `reason` and the index of the
/// limiter that denied it (`denied_by`), and each limiter's part, in key order.
pub fn reply(
    ctx: &Context,
    d: &Decision,
    reason: Reason,
    denied_by: Option<usize>,
    parts: &[Part<'_>],
) {
    let denier = denied_by.and_then(|i| parts.get(i)).map(|p| p.name);
    reply::detail(
        ctx,
        values(d),
        denier,
        reason.name(),
        parts.iter().map(Part::entry),
    );
}

/// The detailed reply of a single-limiter call on `key`: enforcement's reply `verdict` for
/// `cost` units, the limiter denying for `reason` unless it is granted; with `shadow` the call
/// is let through ([`limiter::shadow`]), its entry still showing enforcement's reply.
#[allow(clippy::too_many_arguments)]
pub fn reply_one(
    ctx: &Context,
    key: &[u8],
    name: Option<&[u8]>,
    policy: Option<&[u8]>,
    cost: u64,
    verdict: Verdict,
    window: Micros,
    reason: Reason,
    shadow: bool,
) {
    let part = Part {
        name: name.unwrap_or(key),
        key,
        cost,
        verdict,
        window,
        policy,
    };
    let (top, reason) = if shadow {
        limiter::shadow(verdict, reason, cost)
    } else {
        (verdict, reason)
    };
    let denied_by = (reason != Reason::Granted).then_some(0);
    reply(ctx, &Decision::from(top), reason, denied_by, &[part]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::{DECISION_NAMES, decision_values};

    #[test]
    fn detailed_reply_starts_with_the_limiter_reply() {
        assert_eq!(reply::DETAIL_NAMES[..5], DECISION_NAMES);
        let d = Decision {
            granted: 1,
            limit: 2,
            remaining: 3,
            retry_after_ms: 4,
            reset_after_ms: 5,
        };
        assert_eq!(values(&d), decision_values(&d));
    }
}
