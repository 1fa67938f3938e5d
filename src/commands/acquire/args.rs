//! The arguments of RL.ACQUIRE (`commands::acquire`), `WAIT timeout` included
//! (`commands::acquire::wait`), and the lease id of RL.ACQUIRE and RL.RELEASE.

use crate::commands::Parsed;
use crate::commands::call::args::{Args, Options, duration, positive};
use crate::commands::call::options;
use crate::config;
use crate::core::Micros;
use crate::core::concurrency::ConcurrencyParams;
use crate::core::dedup::{DedupId, MAX_ID_LEN};
use crate::error::RlError;

/// A lease id: binary-safe, at most 256 bytes, hashed as DEDUP ids are.
pub fn lease_id(token: &[u8]) -> Result<DedupId, RlError> {
    if token.len() > MAX_ID_LEN {
        return Err(RlError::Conflict("lease id must be at most 256 bytes"));
    }
    Ok(DedupId::of(token))
}

/// `WAIT timeout` of RL.ACQUIRE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// How long the call may wait (µs), at most `ratelimit.max-wait`.
    pub timeout: Micros,
    /// Where the `WAIT` token stands in the arguments (the grant is replicated without it).
    pub index: usize,
}

/// Parse `RL.ACQUIRE key limit lease ID id [options] [WAIT timeout]`.
///
/// # Errors
/// Any argument error; `WAIT` with `PEEK`, `AT` or `BLOCK`, or above `ratelimit.max-wait`.
pub fn parse_acquire(
    items: &[&[u8]],
) -> Result<(Parsed<ConcurrencyParams>, Option<Wait>), RlError> {
    let (parsed, wait) = parse_with(items, true)?;
    if parsed.params.id().is_none() {
        return Err(RlError::Syntax("RL.ACQUIRE needs ID id"));
    }
    if parsed.opts.best_effort {
        return Err(RlError::Conflict(options::UNKNOWN_BESTEFFORT));
    }
    if parsed.opts.dedup.is_some() {
        return Err(RlError::Conflict(options::UNKNOWN_DEDUP));
    }
    if let Some(w) = wait {
        if parsed.opts.peek {
            return Err(RlError::Conflict(options::WAIT_PEEK));
        }
        if parsed.opts.at.is_some() {
            return Err(RlError::Conflict(options::WAIT_AT));
        }
        if parsed.opts.block.is_some() {
            return Err(RlError::Conflict(options::WAIT_BLOCK));
        }
        if w.timeout > config::max_wait_us() {
            return Err(RlError::Conflict(
                "WAIT timeout must be at most ratelimit.max-wait",
            ));
        }
    }
    Ok((parsed, wait))
}

/// `limit lease [ID id]` (the id optional: RL.ALL binds `DEDUP`), the shared options and,
/// when `wait` allows it, `WAIT timeout`.
pub fn parse_with(
    items: &[&[u8]],
    wait: bool,
) -> Result<(Parsed<ConcurrencyParams>, Option<Wait>), RlError> {
    let mut args = Args::new(items);
    let _name = args.required()?;
    let _key = args.required()?;
    let limit = positive(args.required()?, "limit")?;
    let lease = duration(args.required()?, "lease")?;
    let mut id: Option<DedupId> = None;
    let mut waits: Option<Wait> = None;
    let opts = Options::parse(&mut args, |token, args| match token {
        b"ID" => {
            if id.is_some() {
                return Err(RlError::Duplicate("ID"));
            }
            id = Some(lease_id(args.value_of("ID")?)?);
            Ok(true)
        }
        b"WAIT" if wait => {
            if waits.is_some() {
                return Err(RlError::Duplicate("WAIT"));
            }
            let index = args.index().saturating_sub(1);
            let timeout = duration(args.value_of("WAIT")?, "WAIT")?;
            waits = Some(Wait { timeout, index });
            Ok(true)
        }
        _ => Ok(false),
    })?;
    opts.check_hold(std::iter::once((crate::core::Kind::Concurrency, false)))?;
    let params = ConcurrencyParams::new(limit, lease, id)?;
    Ok((Parsed { params, opts }, waits))
}
