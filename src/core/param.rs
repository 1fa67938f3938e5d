//! Bounds of every parameter, and the checks that name the argument and the problem.

use crate::core::error::CoreError;
use crate::core::time::Micros;

/// The largest count or duration (µs) a parameter may have: replies are signed 64-bit, and with
/// this bound every product in the algorithms fits in 128 bits.
pub const MAX_PARAM: u64 = i64::MAX as u64;

/// What a count must be when it is 0.
pub const MUST_BE_POSITIVE: &str = "must be a positive integer";
/// What a count must be when it is above [`MAX_PARAM`].
pub const MUST_FIT_COUNT: &str = "must be at most 9223372036854775807";
/// What a duration must be when it is 0.
pub const MUST_BE_POSITIVE_DURATION: &str = "must be a positive duration";
/// What a duration must be when it is above [`MAX_PARAM`] µs.
pub const MUST_FIT_DURATION: &str = "must be at most 9223372036854775 ms";

/// A count in `1..=MAX_PARAM`, else the error naming `name` and the problem.
///
/// # Errors
/// [`CoreError::InvalidParam`].
pub fn check_count(v: u64, name: &'static str) -> Result<u64, CoreError> {
    match v {
        0 => Err(CoreError::InvalidParam(name, MUST_BE_POSITIVE)),
        v if v > MAX_PARAM => Err(CoreError::InvalidParam(name, MUST_FIT_COUNT)),
        v => Ok(v),
    }
}

/// A duration (µs) in `1..=MAX_PARAM`, else the error naming `name` and the problem.
///
/// # Errors
/// [`CoreError::InvalidParam`].
pub fn check_duration(v: Micros, name: &'static str) -> Result<Micros, CoreError> {
    match v {
        0 => Err(CoreError::InvalidParam(name, MUST_BE_POSITIVE_DURATION)),
        v if v > MAX_PARAM => Err(CoreError::InvalidParam(name, MUST_FIT_DURATION)),
        v => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::US_PER_MS;

    #[test]
    fn bounds_in_messages_are_the_constants() {
        assert_eq!(MUST_FIT_COUNT, format!("must be at most {MAX_PARAM}"));
        assert_eq!(
            MUST_FIT_DURATION,
            format!("must be at most {} ms", MAX_PARAM / US_PER_MS)
        );
    }
}
