//! RL.STREAMCOUNT key window [ADD n] [LIMIT l] [AT t]
//!
//! A sliding-window counter on a real Redis stream, in the layout of the classic Lua script (one
//! entry per accepted call, field `count`), so existing keys keep working.
//!
//! The window's total is a running total ([`Tally`], kept in `tally_cache`): checked against the
//! stream's length, and after another writer's append or trim (an `xadd` or `xtrim` event) also
//! reconciled with its last entry ID (reading only entries appended by other writers), slid to
//! the new window start (reading only the entries that left or entered), and rebuilt by reading
//! the window when the figures disagree or a keyspace event dropped it. Amortized O(1) per call.
//!
//! The writes are the stream API's append, approximate `MINID` trim and absolute expiry; each is
//! replicated as its exact effect (`XADD key <id> count <n>`, `XTRIM key MINID <first kept ID>`,
//! `PEXPIREAT key <ms>`), so replicas and the AOF never depend on the master's clock or on its
//! stream node layout, and the keyspace events are those of the commands.

use redis_module::Context;

use crate::commands::args::{Args, at_time, duration, non_negative, once, positive, quote};
use crate::commands::{evaluation_time, with_bytes};
use crate::core::Micros;
use crate::core::decimal::{U64_DIGITS, format_u64_into};
use crate::core::stream_count::{
    Cached, ID_BUF, IdRange, Plan, Reconcile, Slide, StreamId, Tally, next_id, plan,
    window_start_ms,
};
use crate::error::RlError;
use crate::ffi::command::{Argv, Handler};
use crate::ffi::notify::{Class, notify_as};
use crate::ffi::replicate::{replicate_key_bytes, replicate_key_kw_bytes, replicate_xadd};
use crate::ffi::reply;
use crate::ffi::stream::{Kind, ScanError, StreamKey, selected_db};
use crate::{stats, tally_cache};

/// Parsed arguments of RL.STREAMCOUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCountRequest {
    pub window: Micros,
    pub add: u64,
    pub limit: Option<u64>,
    pub at: Option<Micros>,
}

impl StreamCountRequest {
    /// Parse the whole argument vector (`args[0]` is the command, `args[1]` the key).
    ///
    /// # Errors
    /// Arity, invalid or repeated options.
    pub fn parse(items: &[&[u8]]) -> Result<Self, RlError> {
        let mut args = Args::new(items);
        let _name = args.required()?;
        let _key = args.required()?;
        let window = duration(args.required()?, "window")?;
        let mut req = StreamCountRequest {
            window,
            add: 1,
            limit: None,
            at: None,
        };
        let mut seen_add = false;
        while let Some(token) = args.next() {
            match token.to_ascii_uppercase().as_slice() {
                b"ADD" => {
                    once(&mut seen_add, "ADD")?;
                    req.add = non_negative(args.value_of("ADD")?, "ADD")?;
                }
                b"LIMIT" => {
                    if req.limit.is_some() {
                        return Err(RlError::Duplicate("LIMIT"));
                    }
                    req.limit = Some(positive(args.value_of("LIMIT")?, "LIMIT")?);
                }
                b"AT" => {
                    if req.at.is_some() {
                        return Err(RlError::Duplicate("AT"));
                    }
                    req.at = Some(at_time(args.value_of("AT")?)?);
                }
                _ => return Err(RlError::UnknownOption(quote(token))),
            }
        }
        Ok(req)
    }
}

fn scan_error(e: ScanError) -> RlError {
    match e {
        ScanError::BadCount(id) => RlError::BadStreamEntry(format!("{}-{}", id.ms, id.seq)),
        ScanError::Overflow => RlError::Overflow,
    }
}

/// From `from` to the end of the stream.
fn to_end(from: StreamId) -> IdRange {
    IdRange {
        from,
        to: StreamId {
            ms: u64::MAX,
            seq: u64::MAX,
        },
    }
}

/// The tally of the window starting at `cut` read from the stream of `len` entries.
///
/// # Errors
/// An entry in the window without an integer `count`, a sum over 64 bits.
fn rebuild(key: &StreamKey, len: u64, cut: StreamId) -> Result<Tally, RlError> {
    let (n, sum) = key.sum(to_end(cut)).map_err(scan_error)?;
    Tally::rebuilt(len, key.last(), cut, n, sum).ok_or(RlError::Overflow)
}

/// `t` brought up to the stream of `len` entries ending at `last`, reading only what other
/// writers appended; `None` when it must be rebuilt.
///
/// # Errors
/// An appended entry without an integer `count`, a sum over 64 bits.
fn reconcile(
    key: &StreamKey,
    t: Tally,
    len: u64,
    last: Option<StreamId>,
) -> Result<Option<Tally>, RlError> {
    Ok(match t.reconcile(len, last) {
        Reconcile::Same => Some(t),
        Reconcile::HeadTrimmed => t.head_trimmed(len),
        Reconcile::Appended { below, window } => {
            let below_n = below.map_or(0, |r| key.count(r));
            let (window_n, window_sum) = match window {
                Some(r) => key.sum(r).map_err(scan_error)?,
                None => (0, 0),
            };
            last.and_then(|last| t.appended(len, last, below_n, window_n, window_sum))
        }
        Reconcile::Rebuild => None,
    })
}

/// The tally of the window starting at `cut`: the cached one brought up to date, else one read
/// from the stream.
///
/// A quiet cached tally (no other writer's append or trim since it was stored) of the
/// stream's length is taken as it is; any other is reconciled with the stream's length and
/// last entry.
///
/// # Errors
/// An entry in the window without an integer `count`, a sum over 64 bits.
fn current_tally(key: &StreamKey, cached: Option<Cached>, cut: StreamId) -> Result<Tally, RlError> {
    let len = key.len();
    let reconciled = match cached {
        Some(c) if c.quiet && c.tally.len == len => Some(c.tally),
        Some(c) => reconcile(key, c.tally, len, key.last())?,
        None => None,
    };
    let Some(t) = reconciled else {
        return rebuild(key, len, cut);
    };
    let (n, sum) = match t.slide(cut) {
        Slide::Stay => (0, 0),
        Slide::Leave(r) | Slide::Enter(r) => key.sum(r).map_err(scan_error)?,
    };
    match t.slid(cut, n, sum) {
        Some(t) => Ok(t),
        None => rebuild(key, len, cut),
    }
}

/// The key's tally for the length of one call: taken from the cache at the start, given back
/// (or dropped, when the call did not say what it is) at the end, on every path.
struct TallyGuard<'a> {
    db: i32,
    key: &'a [u8],
    tally: Option<Tally>,
}

impl Drop for TallyGuard<'_> {
    fn drop(&mut self) {
        tally_cache::finish(self.db, self.key, self.tally);
    }
}

fn reply_total(ctx: &Context, total: u64) {
    reply::integer(ctx, i64::try_from(total).unwrap_or(i64::MAX));
}

/// The handler Redis calls for RL.STREAMCOUNT (registered in `lib.rs`).
pub struct StreamCount;

impl Handler for StreamCount {
    fn call(ctx: &Context, argv: Argv<'_>) -> Result<(), RlError> {
        with_bytes(argv, |bytes| run(ctx, argv, bytes))
    }
}

/// RL.STREAMCOUNT key window [ADD n] [LIMIT l] [AT t], on the call's arguments and their bytes;
/// on `Ok` it has replied.
///
/// # Errors
/// Argument errors, WRONGTYPE, an entry whose `count` is not an integer (named by its ID).
pub fn run(ctx: &Context, argv: Argv<'_>, bytes: &[&[u8]]) -> Result<(), RlError> {
    let req = StreamCountRequest::parse(bytes)?;
    let name = argv.get(1).ok_or(RlError::Arity)?;
    let eval = evaluation_time(ctx, req.at)?;
    let now = eval.now;
    let cut = StreamId::at_ms(window_start_ms(now, req.window));
    let db = selected_db(ctx);

    // Opening the key first lets Redis expire it (the event drops its tally) before the cache
    // is read.
    let key = StreamKey::open(ctx, name, false);
    let kind = key.kind();
    let mut guard = TallyGuard {
        db,
        key: name.bytes(),
        tally: None,
    };
    let cached = tally_cache::begin(db, name.bytes());
    let tally = match kind {
        Kind::Other => return Err(RlError::WrongType),
        Kind::Missing => Tally::rebuilt(0, None, cut, 0, 0).ok_or(RlError::Overflow)?,
        Kind::Stream => current_tally(&key, cached, cut)?,
    };
    // A missing key has no tally to keep (its creation, by whoever, starts afresh).
    guard.tally = (kind == Kind::Stream).then_some(tally);
    let after = match plan(tally.sum, req.add, req.limit).ok_or(RlError::Overflow)? {
        Plan::Deny => {
            stats::STREAMCOUNT.record(false);
            reply::integer(ctx, -1);
            return Ok(());
        }
        Plan::Report(total) => {
            stats::STREAMCOUNT.record(true);
            reply_total(ctx, total);
            return Ok(());
        }
        Plan::Append(after) => after,
    };
    drop(key);

    // From here the stream changes: the tally is dropped unless every step is accounted for.
    guard.tally = None;
    let mut key = StreamKey::open(ctx, name, true);
    // The evaluation time's ID, never below the last entry; if a deleted entry left the
    // stream's last ID higher, the next automatic ID after it.
    let wanted =
        next_id(now, tally.last.map(|l| (l.ms, l.seq))).map(|(ms, seq)| StreamId { ms, seq });
    let id = wanted
        .and_then(|id| key.add(Some(id), req.add))
        .or_else(|| key.add(None, req.add))
        .ok_or_else(|| {
            RlError::Server("ERR the stream has exhausted the last possible ID".into())
        })?;
    let mut updated = tally.added(id, req.add);
    let mut id_buf = [0u8; ID_BUF];
    replicate_xadd(ctx, name, id.format_into(&mut id_buf), req.add);
    tally_cache::own_event(|| notify_as(ctx, Class::Stream, c"xadd", name));

    // With no entry below the cut (the tally knows) there is nothing to trim.
    let trimmed = if updated.is_some_and(|t| t.below == 0) {
        0
    } else {
        key.trim_below(cut)
    };
    if trimmed > 0 {
        updated = updated.and_then(|t| t.trimmed(trimmed));
        // What the approximate trim removed, exactly: everything before the first entry kept.
        if let Some(first) = key.first() {
            replicate_key_kw_bytes(
                ctx,
                c"XTRIM",
                name,
                c"MINID",
                first.format_into(&mut id_buf),
            );
        }
        tally_cache::own_event(|| notify_as(ctx, Class::Stream, c"xtrim", name));
    }

    // `window` after the evaluation time, and no earlier than a call behind the clock keeps it.
    let expire_at = eval.expiry(now.saturating_add(req.window)).ms;
    if key.expire_at() != expire_at {
        key.set_expire_at(expire_at);
        // A time from `ceil_ms`: never negative.
        let mut at_buf = [0u8; U64_DIGITS];
        let at = format_u64_into(expire_at.unsigned_abs(), &mut at_buf);
        replicate_key_bytes(ctx, c"PEXPIREAT", name, at);
        notify_as(ctx, Class::Generic, c"expire", name);
    }
    // Still what the stream holds? Its last entry is the one just added when that is at or
    // after the cut (the trim keeps those; an automatic ID behind an `AT` ahead of the clock
    // may not be), so its length says whether anything else changed; another writer's append
    // or trim from inside our events left the tally not quiet, to be reconciled next time.
    guard.tally = updated.filter(|t| t.len == key.len() && (id >= cut || t.last == key.last()));
    stats::STREAMCOUNT.record(true);
    reply_total(ctx, after);
    Ok(())
}
