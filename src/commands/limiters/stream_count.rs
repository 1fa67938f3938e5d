//! RL.STREAMCOUNT key window [ADD n] [LIMIT l] [AT t]
//!
//! A sliding-window counter on a real Redis stream, in the layout of the classic Lua script (one
//! entry per accepted call, field `count`), so existing keys keep working.
//!
//! The window's total is a running total ([`Tally`], kept in `tally_cache`), with a cut per
//! window length in use on the key (up to four): checked against the stream's length, and after
//! another writer's append or trim (an `xadd` or `xtrim` event) also reconciled with its last
//! entry ID (reading only entries appended by other writers), its window's cut slid to the new
//! window start (reading only the entries that left or entered), and read again when the figures
//! disagree or a keyspace event dropped it. Amortized O(1) per call.
//!
//! The trim keeps every entry of the longest window used on the key (a one-minute call never
//! removes what the one-hour window counts).
//!
//! The writes are the stream API's append, approximate `MINID` trim and absolute expiry; each is
//! replicated as its exact effect (`XADD key <id> count <n>`, `XTRIM key MINID <first kept ID>`,
//! `PEXPIREAT key <ms>`), so replicas and the AOF never depend on the master's clock or on its
//! stream node layout, and the keyspace events are those of the commands.

use redis_module::Context;

use crate::commands::call::args::{Args, at_time, duration, non_negative, once, positive, quote};
use crate::commands::call::propagate::replicate_pexpireat;
use crate::commands::evaluation_time;
use crate::commands::row::{Command, Run};
use crate::core::Micros;
use crate::core::stream_count::{
    self, ID_BUF, IdRange, Inconsistent, Plan, StreamId, Tally, next_id, plan, window_ms,
    window_start_ms,
};
use crate::core::time::US_PER_MS;
use crate::docs::{AT, ArgType, CommandDoc, KEY, arg, opt};
use crate::error::RlError;
use crate::ffi::command::Argv;
use crate::ffi::events::subscribe_key_events;
use crate::ffi::notify::{Class, notify_as};
use crate::ffi::replicate::{replicate_key_kw_bytes, replicate_xadd};
use crate::ffi::reply;
use crate::ffi::stream::{Kind, ScanError, StreamKey, selected_db};
use crate::stats::CommandStats;
use crate::tally_cache;

/// RL.STREAMCOUNT's COMMAND DOCS.
pub const DOC: CommandDoc = CommandDoc {
    arity: -3,
    summary: c"Sliding-window counter on a Redis stream (the classic Lua layout): add to the window's total, optionally under a limit",
    complexity: c"O(1) amortized: a running total reads only the entries that entered or left the window since the last call; O(N) in the window's entries for the first call on a key, and after a change other than an append or a trim (XDEL, DEL, RENAME, a flush...)",
    args: &[
        KEY,
        arg(c"window", ArgType::String),
        opt(c"n", ArgType::Integer, c"ADD"),
        opt(c"limit", ArgType::Integer, c"LIMIT"),
        AT,
    ],
    shared_options: false,
};

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

/// The stream key as the running total reads it.
struct Entries<'a>(&'a StreamKey);

impl From<Inconsistent> for RlError {
    fn from(_: Inconsistent) -> Self {
        RlError::Overflow
    }
}

impl stream_count::Entries for Entries<'_> {
    type Error = RlError;
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn last(&self) -> Option<StreamId> {
        self.0.last()
    }
    fn count(&self, range: IdRange) -> u64 {
        self.0.count(range)
    }
    fn sum(&self, range: IdRange) -> Result<(u64, u64), RlError> {
        self.0.sum(range).map_err(scan_error)
    }
}

/// The key's tally for the length of one call: taken from the cache at the start, given back
/// (or dropped, when the call did not say what it is) at the end, on every path.
struct TallyGuard<'a> {
    db: i32,
    key: &'a [u8],
    tally: Tally,
    /// Whether to keep it.
    keep: bool,
}

impl Drop for TallyGuard<'_> {
    fn drop(&mut self) {
        tally_cache::finish(self.db, self.key, self.keep.then_some(self.tally));
    }
}

fn reply_total(ctx: &Context, total: u64) {
    reply::integer(ctx, i64::try_from(total).unwrap_or(i64::MAX));
}

/// RL.STREAMCOUNT's handler (its row in `commands::table`).
pub struct StreamCount;

impl Run for StreamCount {
    fn run(
        ctx: &Context,
        argv: Argv<'_>,
        bytes: &[&[u8]],
        this: &'static Command,
    ) -> Result<(), RlError> {
        run(ctx, argv, bytes, &this.stats)
    }
}

/// RL.STREAMCOUNT key window [ADD n] [LIMIT l] [AT t], on the call's arguments and their bytes;
/// on `Ok` it has replied.
///
/// # Errors
/// Argument errors, WRONGTYPE, an entry whose `count` is not an integer (named by its ID).
pub fn run(
    ctx: &Context,
    argv: Argv<'_>,
    bytes: &[&[u8]],
    stats: &'static CommandStats,
) -> Result<(), RlError> {
    let req = StreamCountRequest::parse(bytes)?;
    let name = argv.get(1).ok_or(RlError::Arity)?;
    let eval = evaluation_time(ctx, req.at)?;
    let now = eval.now;
    // The events that keep the running totals right, from the first call on.
    subscribe_key_events(ctx).map_err(RlError::Server)?;
    let cut = StreamId::at_ms(window_start_ms(now, req.window));
    let db = selected_db(ctx);

    // Opening the key first lets Redis expire it (the event drops its tally) before the cache
    // is read.
    let key = StreamKey::open(ctx, name, false);
    let kind = key.kind();
    let mut guard = TallyGuard {
        db,
        key: name.bytes(),
        tally: Tally::empty(0, None),
        keep: false,
    };
    let cached = tally_cache::begin(db, name.bytes());
    guard.tally = match kind {
        Kind::Other => return Err(RlError::WrongType),
        Kind::Missing => Tally::missing(window_ms(req.window), cut),
        Kind::Stream => {
            let mut t = Tally::current(cached, &Entries(&key), window_ms(req.window), cut)?;
            if cached.is_none() {
                // No running total of this key in this process (a restart, a reload, an evicted
                // or dropped tally): the windows used on it before are not known, so the trim
                // keeps what the stream holds now (a one-minute call never drops what an hour's
                // window of before still counts).
                let held = key
                    .first()
                    .map_or(0, |first| (now / US_PER_MS).saturating_sub(first.ms));
                t.longest_ms = t.longest_ms.max(held);
            }
            t
        }
    };
    // A missing key has no tally to keep (its creation, by whoever, starts afresh).
    guard.keep = kind == Kind::Stream;
    let after = match plan(guard.tally.total(), req.add, req.limit).ok_or(RlError::Overflow)? {
        Plan::Deny => {
            stats.record(false);
            reply::integer(ctx, -1);
            return Ok(());
        }
        Plan::Report(total) => {
            stats.record(true);
            reply_total(ctx, total);
            return Ok(());
        }
        Plan::Append(after) => after,
    };
    drop(key);

    // From here the stream changes: the tally is dropped unless every step is accounted for.
    guard.keep = false;
    let mut key = StreamKey::open(ctx, name, true);
    // The evaluation time's ID, never below the last entry; if a deleted entry left the
    // stream's last ID higher, the next automatic ID after it.
    let wanted =
        next_id(now, guard.tally.last.map(|l| (l.ms, l.seq))).map(|(ms, seq)| StreamId { ms, seq });
    let id = wanted
        .and_then(|id| key.add(Some(id), req.add))
        .or_else(|| key.add(None, req.add))
        .ok_or_else(|| {
            RlError::Server("ERR the stream has exhausted the last possible ID".into())
        })?;
    let mut kept = guard.tally.add(id, req.add);
    let mut id_buf = [0u8; ID_BUF];
    replicate_xadd(ctx, name, id.format_into(&mut id_buf), req.add);
    tally_cache::own_event(|| notify_as(ctx, Class::Stream, c"xadd", name));

    // The trim keeps every entry of the longest window used on the key: the cuts below its
    // start first move up to it, so it removes only entries below every cut. With no entry
    // below it (the tally knows) there is nothing to trim.
    let horizon = guard.tally.trim_horizon(now);
    if kept {
        guard.tally.raise_to(&Entries(&key), horizon);
    }
    let trimmed = if kept && guard.tally.nothing_below(horizon) {
        0
    } else {
        key.trim_below(horizon)
    };
    if trimmed > 0 {
        kept = kept && guard.tally.trim(trimmed);
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

    // `window` after the evaluation time, and no earlier than a call behind the clock keeps it;
    // never earlier than it was (a shorter window's call must not expire what a longer one
    // still counts). A stream without expiry gets one.
    let expire_at = eval.expiry(now.saturating_add(req.window)).ms;
    let current = key.expire_at();
    if current < 0 || current < expire_at {
        key.set_expire_at(expire_at);
        replicate_pexpireat(ctx, name, expire_at);
        notify_as(ctx, Class::Generic, c"expire", name);
    }
    // Still what the stream holds? Its last entry is the one just added when that is at or
    // after the cut (the trim keeps those; an automatic ID behind an `AT` ahead of the clock
    // may not be), so its length says whether anything else changed; another writer's append
    // or trim from inside our events left the tally not quiet, to be reconciled next time.
    let t = &guard.tally;
    guard.keep = kept && t.len == key.len() && (id >= cut || t.last == key.last());
    stats.record(true);
    reply_total(ctx, after);
    Ok(())
}
