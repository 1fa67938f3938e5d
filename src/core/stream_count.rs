//! The pure part of RL.STREAMCOUNT: window arithmetic, the decision and the next entry ID.
//!
//! RL.STREAMCOUNT keeps the layout of the classic Lua stream counter: a real Redis stream whose
//! entries carry one field, `count`. The window's total is the sum of `count` over entries whose
//! ID time is at least `now − window` (in ms, like stream IDs). Reading and writing the stream is
//! I/O, done by the command layer; this file decides.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_window_and_plans() {
        assert_eq!(window_start_ms(10_500_999, 1_000_000), 9_500);
        assert_eq!(window_start_ms(500_000, 1_000_000), 0);
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
}
