//! Per-command counters shown by `INFO ratelimit`: monotonic from the module's load, as
//! Prometheus counters are (servers do not tell modules about `CONFIG RESETSTAT`, and the module
//! watches no other command to find out). Each command's are in its row of `commands::table`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one command. Only the main thread writes them.
#[derive(Debug)]
pub struct CommandStats {
    /// The command as `INFO` names it (`None`: not shown): a valid Prometheus metric name
    /// (letters, digits, underscores), as exporters take module INFO fields as they are.
    pub name: Option<&'static str>,
    /// Calls that were evaluated (errors excluded): granted + denied.
    pub calls: AtomicU64,
    /// Calls that got what they asked for, in full or in part.
    pub granted: AtomicU64,
    /// Calls that asked for units and got none.
    pub denied: AtomicU64,
    /// `SHADOW` calls that enforcement would have denied, let through (counted as granted).
    pub shadow_denied: AtomicU64,
    /// Granted calls left with `remaining` below `ratelimit.near-limit-percent` of `limit`.
    pub near_limit: AtomicU64,
}

/// How one evaluated call counts ([`Count::of`]): in the granted or the denied column, and
/// maybe in the shadow_denied one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// Enforcement grants the call.
    enforced: bool,
    /// The call was made with `SHADOW`.
    shadow: bool,
    /// Granted with `remaining` below `ratelimit.near-limit-percent` of `limit` ([`Count::near`]).
    near: bool,
}

impl Count {
    /// A call that enforcement grants (`granted`) or denies, made with `SHADOW` or not: a
    /// `SHADOW` call is let through, so it is granted, and if enforcement denies it also
    /// `shadow_denied` (SPEC "The detailed reply"). The same rule for every counter of calls,
    /// a command's or a policy's.
    pub const fn of(granted: bool, shadow: bool) -> Count {
        Count {
            enforced: granted,
            shadow,
            near: false,
        }
    }

    /// The same call, near its limit if it is granted with `remaining` below `percent`% of
    /// `limit` ([`near_limit`]).
    #[inline(always)]
    pub fn near(self, remaining: i64, limit: i64, percent: u64) -> Count {
        Count {
            near: self.granted() && near_limit(remaining, limit, percent),
            ..self
        }
    }

    /// In the near_limit column.
    pub const fn near_limit(self) -> bool {
        self.near
    }

    /// In the granted column (else the denied one).
    pub const fn granted(self) -> bool {
        self.enforced || self.shadow
    }

    /// In the shadow_denied column: enforcement denies it, `SHADOW` let it through.
    pub const fn shadow_denied(self) -> bool {
        self.shadow && !self.enforced
    }
}

impl From<bool> for Count {
    /// A call without `SHADOW`, granted or denied.
    fn from(granted: bool) -> Count {
        Count::of(granted, false)
    }
}

impl CommandStats {
    /// Zeroed counters for `name`.
    pub const fn new(name: Option<&'static str>) -> Self {
        CommandStats {
            name,
            calls: AtomicU64::new(0),
            granted: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            shadow_denied: AtomicU64::new(0),
            near_limit: AtomicU64::new(0),
        }
    }

    /// Count one evaluated call: granted or denied (a `bool`), or as [`Count::of`] says.
    #[inline(always)]
    pub fn record(&self, count: impl Into<Count>) {
        let count = count.into();
        self.calls.fetch_add(1, Ordering::Relaxed);
        // A call enforcement grants tests nothing more (the common path) but near.
        if count.enforced {
            self.granted.fetch_add(1, Ordering::Relaxed);
            if count.near {
                self.near_limit.fetch_add(1, Ordering::Relaxed);
            }
        } else if count.shadow {
            self.granted.fetch_add(1, Ordering::Relaxed);
            self.shadow_denied.fetch_add(1, Ordering::Relaxed);
            if count.near {
                self.near_limit.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            self.denied.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters in the order of [`STAT_NAMES`].
    pub fn values(&self) -> [u64; 5] {
        [
            &self.calls,
            &self.granted,
            &self.denied,
            &self.shadow_denied,
            &self.near_limit,
        ]
        .map(|c| c.load(Ordering::Relaxed))
    }
}

/// The names of a command's counters, in [`CommandStats::values`] order: a policy's, as a
/// command counts what a policy counts.
pub use crate::core::policy::STAT_NAMES;

/// Whether `remaining` is below `percent`% of `limit` (exactly: `remaining · 100 <
/// limit · percent`): a grant near its limit. `percent` 20, the default of
/// `ratelimit.near-limit-percent`, is Envoy's ratelimit service's 80% used.
#[inline(always)]
pub fn near_limit(remaining: i64, limit: i64, percent: u64) -> bool {
    // Exact in i128 (|i64| · 100 and |i64| · u64 are below 2^127): no saturating or checked
    // multiplication, which would be a call on the hot path.
    i128::from(remaining).wrapping_mul(100) < i128::from(limit).wrapping_mul(i128::from(percent))
}

/// `RL.ACQUIRE ... WAIT` calls waiting now.
pub static WAIT_WAITING: AtomicU64 = AtomicU64::new(0);
/// `RL.ACQUIRE ... WAIT` calls that waited and were then granted.
pub static WAIT_GRANTED: AtomicU64 = AtomicU64::new(0);
/// `RL.ACQUIRE ... WAIT` calls that waited until their timeout (denied).
pub static WAIT_TIMED_OUT: AtomicU64 = AtomicU64::new(0);
/// `RL.ACQUIRE ... WAIT` calls whose client disconnected while waiting.
pub static WAIT_DROPPED: AtomicU64 = AtomicU64::new(0);
/// µs waited by the `RL.ACQUIRE ... WAIT` calls whose wait ended granted or timed out.
pub static WAIT_WAITED_US: AtomicU64 = AtomicU64::new(0);

/// Add `n` to counter `c`.
pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Set gauge `g` to `n`.
pub fn set(g: &AtomicU64, n: usize) {
    g.store(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// Count one more of `counter`.
pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_counts_calls_grants_and_denials() {
        let s = CommandStats::new(Some("t"));
        s.record(true);
        s.record(false);
        s.record(false);
        let got =
            [&s.calls, &s.granted, &s.denied, &s.shadow_denied].map(|c| c.load(Ordering::Relaxed));
        assert_eq!(got, [3, 1, 2, 0]);
    }

    #[test]
    fn a_shadow_call_enforcement_denies_counts_as_granted_and_shadow_denied() {
        #[rustfmt::skip]
        let cases = [
            // enforced granted, SHADOW   granted, shadow_denied
            ((true,  false),              (true,  false)),
            ((false, false),              (false, false)),
            ((true,  true),               (true,  false)),
            ((false, true),               (true,  true)),
        ];
        for ((granted, shadow), want) in cases {
            let c = Count::of(granted, shadow);
            assert_eq!((c.granted(), c.shadow_denied()), want, "{granted} {shadow}");
        }
        let s = CommandStats::new(Some("t"));
        s.record(Count::of(false, true));
        s.record(Count::of(true, true));
        s.record(false);
        let got =
            [&s.calls, &s.granted, &s.denied, &s.shadow_denied].map(|c| c.load(Ordering::Relaxed));
        assert_eq!(got, [3, 2, 1, 1]);
    }

    #[test]
    fn near_counts_grants_below_the_percent_of_the_limit() {
        // 20%: remaining below 2 of 10.
        assert!(near_limit(1, 10, 20) && !near_limit(2, 10, 20));
        assert!(near_limit(0, 1, 20) && !near_limit(0, 1, 0));
        assert!(near_limit(99, 100, 100) && !near_limit(100, 100, 100));
        assert!(!near_limit(i64::MAX, i64::MAX, 100) && near_limit(i64::MIN, 0, 0));
        let s = CommandStats::new(Some("t"));
        s.record(Count::of(true, false).near(1, 10, 20));
        s.record(Count::of(true, false).near(5, 10, 20));
        // A denial is never near; a shadow call let through is judged as granted.
        s.record(Count::of(false, false).near(0, 10, 20));
        s.record(Count::of(false, true).near(0, 10, 20));
        assert_eq!(s.values(), [4, 3, 1, 1, 2]);
    }
}
