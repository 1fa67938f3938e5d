//! Time as Unix microseconds, and the conversions to the milliseconds of replies.
//!
//! State stores absolute Unix time (never a monotonic clock) so it survives restarts and moves
//! between machines. Replies round durations *up* to whole milliseconds, so a client that waits
//! `retry_after_ms` and retries is granted.

/// A point in time or a duration, in microseconds. Unix time when used as a point.
pub type Micros = u64;

/// Microseconds in one millisecond.
pub const US_PER_MS: u64 = 1_000;

/// Microseconds in one second.
pub const US_PER_SEC: u64 = 1_000_000;

/// The latest `AT` accepted: 9999-12-31T23:59:59.999Z, in microseconds. Far enough for any real
/// use, and small enough that every product in the algorithms fits in 128 bits.
pub const MAX_TIME: Micros = 253_402_300_799_999_000;

/// The longest duration any result may span from its `now`: a `retry_after` or `reset_after`,
/// or the key's expiry counted from the call. Parameters whose results could be longer are
/// refused when parsed, so nothing is ever capped: with `now ≤ MAX_TIME`, every expiry fits in
/// a `u64` of µs and, in ms, is a Unix time Redis accepts (below year 300 000).
pub const MAX_SPAN: Micros = i64::MAX as u64;

/// [`MAX_SPAN`] in whole ms, as error messages state it.
pub const MAX_SPAN_MS: u64 = MAX_SPAN / US_PER_MS;

/// A duration in whole milliseconds, rounded up, saturated to `i64::MAX`.
pub fn ceil_ms(us: u64) -> i64 {
    i64::try_from(us.div_ceil(US_PER_MS)).unwrap_or(i64::MAX)
}

/// The absolute expiry in Unix milliseconds for a state that is fresh again at `us`, rounded up
/// so a key never disappears before its limiter is fresh.
pub fn expiry_ms(us: Micros) -> i64 {
    ceil_ms(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_ms_rounds_up() {
        assert_eq!(ceil_ms(0), 0);
        assert_eq!(ceil_ms(1), 1);
        assert_eq!(ceil_ms(1_000), 1);
        assert_eq!(ceil_ms(1_001), 2);
        assert_eq!(ceil_ms(u64::MAX), 18_446_744_073_709_552);
    }
}
