//! Why the core refused a request. The command layer turns these into Redis errors.

use crate::core::kind::Kind;

/// Why the core refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// The key holds a limiter of another algorithm.
    WrongKind { held: Kind, wanted: Kind },
    /// A parameter is out of its valid range; the text names it.
    InvalidParam(&'static str),
    /// Arithmetic on the given parameters would overflow.
    Overflow,
    /// RL.REFUND on an algorithm whose units come back through another command (`via`).
    NoRefund { held: Kind, via: &'static str },
}
