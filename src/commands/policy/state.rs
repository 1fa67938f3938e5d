//! The server's named policies (module state outside the keyspace, `core::policy`), shared by
//! RL.POLICY (`commands::policy`), RL.LIMIT and `POLICY name` in RL.ALL and RL.CHECKALL: the
//! store, its propagation as a whole (`RL.POLICY RESTORE <every policy>`) and the server events
//! it follows, and its INFO fields.
//!
//! An AOF rewrite without an RDB preamble writes a base file of keys only, with no place for
//! module state (the module aux data goes to RDB files and RDB preambles only). The server
//! opens the rewrite's new incremental file before it forks the rewriting child, and everything
//! propagated after the fork goes to that file, which the rewritten AOF is made of with the new
//! base. So the fork of a rewrite ([`server_event`]) has every policy propagated right after
//! it, which puts them at the start of the new incremental file.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use redis_module::Context;

use crate::commands::call::args::quote;
use crate::core::policy::{self, Policy, PolicyStore};
use crate::error::RlError;
use crate::ffi;

/// Every policy of the server.
static STORE: Mutex<PolicyStore> = Mutex::new(PolicyStore::new());

/// The store, locked (a panic while it was held leaves it as it was: every change is one map
/// operation).
pub fn store() -> MutexGuard<'static, PolicyStore> {
    STORE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The store if it is free now (INFO in a crash report must not wait).
pub fn try_store() -> Option<MutexGuard<'static, PolicyStore>> {
    match STORE.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// The policy named `name`.
///
/// # Errors
/// `ERR unknown policy '<name>'`.
#[inline]
pub fn lookup(name: &[u8]) -> Result<Arc<Policy>, RlError> {
    store()
        .get(name)
        .cloned()
        .ok_or_else(|| RlError::UnknownPolicy(quote(name)))
}

/// Whether there is anything to save: a policy or a version counter above 0 (kept when no
/// policy is left, so a version is never given twice).
pub fn any() -> bool {
    store().counter() != 0
}

/// Every policy, in the wire form (an RDB's aux data, `DUMP`).
pub fn dump_all() -> Vec<u8> {
    store().dump()
}

/// A full copy of the policies is owed to the AOF: an AOF rewrite began. It is sent by a timer
/// right after (not from the fork's event: inside the command that forked, BGREWRITEAOF or
/// CONFIG SET appendonly, the server would take the module's propagation for a change made by
/// that command and propagate the command too), or earlier by the first command that depends on
/// policies; never while clients are paused (nothing may be propagated then: the timer waits).
static PENDING: AtomicBool = AtomicBool::new(false);

/// How long the timer waits again while clients are paused.
const PAUSED_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// The timer of `PENDING`.
fn on_pending_timer(ctx: &Context, (): ()) {
    if !PENDING.load(Ordering::Relaxed) {
        return;
    }
    if ffi::events::avoid_replica_traffic() {
        ctx.create_timer(PAUSED_RETRY, on_pending_timer, ());
        return;
    }
    PENDING.store(false, Ordering::Relaxed);
    propagate_all(ctx);
}

/// Propagate every policy and the version counter (`RL.POLICY RESTORE <payload>`), unless
/// there is nothing to keep ([`any`]).
fn propagate_all(ctx: &Context) {
    let payload = {
        let s = store();
        if s.counter() == 0 {
            return;
        }
        s.dump()
    };
    ffi::replicate::replicate_policies(ctx, &payload, false);
}

/// A full copy was just propagated (a RESTORE's): nothing is owed any more.
pub fn owe_nothing() {
    PENDING.store(false, Ordering::Relaxed);
}

/// Send the copy `PENDING` owes, if any: called by every command that applies a policy,
/// before it propagates (clients are not paused when a write runs).
#[inline]
pub fn flush_pending(ctx: &Context) {
    if PENDING.load(Ordering::Relaxed) && !ffi::events::avoid_replica_traffic() {
        PENDING.store(false, Ordering::Relaxed);
        propagate_all(ctx);
    }
}

/// Server events: a load that replaces the dataset (RDB, AOF, a full sync from a master)
/// starts with no policies (the aux data or the AOF brings them); a fork for an AOF rewrite
/// propagates every policy and the counter, so the new incremental AOF file, opened before the
/// fork, starts with them (the rewritten base file only has the keys when it has no RDB
/// preamble).
pub fn server_event(ctx: &Context, event: ffi::events::ServerEvent) {
    match event {
        ffi::events::ServerEvent::LoadStart => store().clear(),
        ffi::events::ServerEvent::ForkBorn => {
            if !ffi::events::aof_rewrite_in_progress(ctx) || !any() {
                return;
            }
            PENDING.store(true, Ordering::Relaxed);
            ctx.create_timer(std::time::Duration::ZERO, on_pending_timer, ());
        }
        ffi::events::ServerEvent::Other => {}
    }
}

/// `INFO ratelimit`'s policy fields: `policies`, `policies_checksum` (16 hex digits), then per
/// policy `policy_<name>_<counter>` for each of `core::policy::STAT_NAMES`. Nothing when the
/// store is busy (a crash report while a command held it).
pub fn info_fields() -> Vec<(String, InfoValue)> {
    let Some(s) = try_store() else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(2usize.saturating_add(s.len().saturating_mul(5)));
    out.push(("policies".to_string(), InfoValue::Int(s.len() as u64)));
    out.push((
        "policies_checksum".to_string(),
        InfoValue::Text(format!("{:016x}", s.checksum())),
    ));
    for p in s.iter() {
        let name = String::from_utf8_lossy(&p.name);
        for (suffix, v) in policy::STAT_NAMES.iter().zip(p.stats.values()) {
            out.push((format!("policy_{name}_{suffix}"), InfoValue::Int(v)));
        }
    }
    out
}

/// One INFO value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoValue {
    Int(u64),
    Text(String),
}
