//! When a call is evaluated ([`evaluation_time`]: the server's clock or `AT`, within
//! `ratelimit.at-max-ahead` and `ratelimit.at-max-behind`) and the expiry of the keys it writes
//! ([`Evaluation::expiry`]).

use redis_module::{Context, ContextFlags};

use crate::config;
use crate::core::Micros;
use crate::core::time::expiry_ms;
use crate::error::RlError;
use crate::ffi::clock::server_now;

/// When a call is evaluated, and how long the keys it writes are kept at least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluation {
    /// The evaluation time: the server's clock, or `AT`.
    pub now: Micros,
    /// For a call behind the server's clock: the server's clock plus `ratelimit.at-max-behind`,
    /// before which no key it writes may expire (a key whose expiry was counted from an old
    /// `AT` must not come back fresh for the next old `AT`). `None` for every other call.
    pub keep_until: Option<Micros>,
}

/// A key's expiry as a call writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// Unix ms.
    pub ms: i64,
    /// Kept past the state's own expiry (which is what replicas and the AOF compute).
    pub kept: bool,
}

impl Evaluation {
    /// A call at `now` whose keys expire by the state's own rule.
    pub fn exact(now: Micros) -> Self {
        Evaluation {
            now,
            keep_until: None,
        }
    }

    /// The expiry of a key this call leaves fresh again at `fresh_at`: that time, or later when
    /// the call is behind the server's clock.
    pub fn expiry(&self, fresh_at: Micros) -> Expiry {
        let ms = expiry_ms(fresh_at);
        match self.keep_until.map(expiry_ms) {
            Some(kept) if kept > ms => Expiry {
                ms: kept,
                kept: true,
            },
            _ => Expiry { ms, kept: false },
        }
    }
}

/// The evaluation of a call: at the server's clock, or at `at` when given. An `at` more than
/// `ratelimit.at-max-ahead` ahead of the server's clock, or more than `ratelimit.at-max-behind`
/// behind it, is refused; an accepted `at` behind it keeps the keys the call writes until the
/// server's clock plus that bound. A call from the master or the AOF is exempt from both (it
/// carries the master's resolved time, which must be applied as is, and the master's resolved
/// expiry follows it).
///
/// A call without `AT` reads the clock and nothing else.
///
/// # Errors
/// [`RlError::AtAhead`], [`RlError::AtBehind`].
pub fn evaluation_time(ctx: &Context, at: Option<Micros>) -> Result<Evaluation, RlError> {
    let Some(at) = at else {
        return Ok(Evaluation::exact(server_now()));
    };
    if ctx
        .get_flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
    {
        return Ok(Evaluation::exact(at));
    }
    let clock = server_now();
    if config::at_max_ahead_us().is_some_and(|ahead| at > clock.saturating_add(ahead)) {
        return Err(RlError::AtAhead);
    }
    let Some(behind) = config::at_max_behind_us() else {
        return Ok(Evaluation::exact(at));
    };
    if at >= clock {
        return Ok(Evaluation::exact(at));
    }
    if clock.saturating_sub(at) > behind {
        return Err(RlError::AtBehind);
    }
    Ok(Evaluation {
        now: at,
        keep_until: Some(clock.saturating_add(behind)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_kept_until_the_bound_only_when_later() {
        let exact = Evaluation::exact(5_000_000);
        assert_eq!(
            exact.expiry(7_000_001),
            Expiry {
                ms: 7_001,
                kept: false
            }
        );
        let behind = Evaluation {
            now: 5_000_000,
            keep_until: Some(9_000_500),
        };
        // Rounded up like every expiry; kept only when that is a later ms than the state's.
        #[rustfmt::skip]
        let cases: &[(Micros, i64, bool)] = &[
            // fresh at   ms      kept
            (7_000_001,   9_001,  true),
            (9_000_001,   9_001,  false),
            (9_000_999,   9_001,  false),
            (9_001_001,   9_002,  false),
        ];
        for &(fresh_at, ms, kept) in cases {
            assert_eq!(behind.expiry(fresh_at), Expiry { ms, kept }, "{fresh_at}");
        }
    }
}
