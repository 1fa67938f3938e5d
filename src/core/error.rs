//! Why the core refused a request. The command layer turns these into Redis errors.

use crate::core::kind::Kind;

/// Why the core refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// The key holds a limiter of another algorithm.
    WrongKind { held: Kind, wanted: Kind },
    /// A parameter is out of its valid range: its name, and what it must be
    /// (`InvalidParam("burst", MUST_BE_POSITIVE)` reads "burst must be a positive integer").
    InvalidParam(&'static str, &'static str),
    /// GCRA-schedule parameters whose full span `burst · period / rate` is above
    /// [`MAX_SPAN`](crate::core::time::MAX_SPAN) (the command layer names the arguments).
    SpanTooLong,
    /// A key's state converted to new parameters would be fresh again later than
    /// [`MAX_SPAN`](crate::core::time::MAX_SPAN) from now (a long backlog at a much slower rate).
    StateTooLong,
    /// A request the algorithm does not take; the text says why (`ERR <text>`).
    Refused(&'static str),
    /// Arithmetic on the given parameters would overflow.
    Overflow,
    /// RL.REFUND on an algorithm whose units come back through another command (`via`).
    NoRefund { held: Kind, via: &'static str },
}
