//! Named policies (`RL.POLICY`): limits stored in the server, outside the keyspace, and applied
//! by name (`RL.LIMIT key policy`, `RL.ALL ... POLICY name`).
//!
//! A [`Policy`] holds its limiters already parsed (a call looks the name up and parses nothing)
//! and the arguments that defined it (for `GET`, `DUMP`, the RDB and replication, which carry
//! the definition and re-parse it, so whatever loads a policy validates it). Every change takes
//! the next number of the store's counter as the policy's version, so a version is never reused,
//! not even after `DEL` and a new `SET` of the name (the counter is saved whenever it is not 0,
//! also when no policy is left). Versions stay at most [`VERSION_MAX`], and a payload restored
//! by a client at most [`RESTORE_MAX`], so no `RESTORE` can leave a store without versions to
//! give.
//!
//! The wire form ([`encode`], [`decode`]) is versioned and bounded: a payload that does not
//! decode, or that breaks a bound, is refused whole.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::core::multi::AnyParams;
use crate::core::varint::{Reader, put_u64};

/// Longest policy name, in bytes.
pub const NAME_MAX: usize = 64;
/// Most limiters in one policy.
pub const LIMITERS_MAX: usize = 16;
/// Longest `DESC` text, in bytes.
pub const DESC_MAX: usize = 1024;
/// Most arguments in one definition (after the name).
pub const ARGS_MAX: usize = 256;
/// Longest argument of a definition (a `DESC` text is the longest), in bytes.
pub const ARG_MAX: usize = DESC_MAX;
/// Largest accepted `ratelimit.max-policies`.
pub const MAX_POLICIES_LIMIT: usize = 1_000_000;

/// The largest version a store gives: 2^53 − 1, the largest integer every client reads exactly
/// (a JavaScript number, a Lua number in a script, a JSON number), so two versions never look
/// alike to a client that caches definitions by (name, version).
pub const VERSION_MAX: u64 = (1 << 53) - 1;
/// The largest counter (so version) of a payload a client may restore: 2^52, half of
/// [`VERSION_MAX`], so a restored store still has 2^52 − 1 versions to give (142 years of a
/// million changes a second): no `RESTORE` can leave `SET` without a version.
pub const RESTORE_MAX: u64 = 1 << 52;

/// First bytes of every payload.
const MAGIC: &[u8; 3] = b"RLP";
/// The payload format written by [`encode`].
pub const FORMAT: u8 = 1;

/// Whether `name` is a policy name: 1 to [`NAME_MAX`] bytes of `a-z`, `0-9`, `_` (so it is
/// also a Prometheus label value and part of a metric name).
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

/// One limiter of a policy, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyLimiter {
    pub params: AnyParams,
    /// `CHARGE n`: the units asked of it instead of the call's cost.
    pub charge: Option<u64>,
    /// `NAME name`: its name in the detailed reply.
    pub name: Option<Vec<u8>>,
}

/// A policy's parsed definition (what `RL.POLICY SET name ...` says after the name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub limiters: Vec<PolicyLimiter>,
    /// `SHADOW`: every call under it behaves as with the `SHADOW` option.
    pub shadow: bool,
    /// `DESC text`.
    pub desc: Option<Vec<u8>>,
}

/// The counters of one policy shown by `INFO ratelimit`, monotonic while the name exists (a
/// `SET` that replaces the policy keeps them).
#[derive(Debug, Default)]
pub struct PolicyStats {
    pub calls: AtomicU64,
    pub granted: AtomicU64,
    pub denied: AtomicU64,
    pub shadow_denied: AtomicU64,
    pub near_limit: AtomicU64,
}

impl PolicyStats {
    /// Count one evaluated call: `granted` (in full or in part, or let through by a shadow
    /// policy), `shadow_denied` (enforcement would have denied it), and `near` (granted with
    /// `remaining` below `ratelimit.near-limit-percent` of `limit`, as the caller judged it).
    pub fn record(&self, granted: bool, shadow_denied: bool, near: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if granted {
            self.granted.fetch_add(1, Ordering::Relaxed);
            if near {
                self.near_limit.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            self.denied.fetch_add(1, Ordering::Relaxed);
        }
        if shadow_denied {
            self.shadow_denied.fetch_add(1, Ordering::Relaxed);
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

/// The suffixes of a policy's INFO fields (`policy_<name>_<suffix>`).
pub const STAT_NAMES: [&str; 5] = ["calls", "granted", "denied", "shadow_denied", "near_limit"];

/// Whether policies named `a` and `b` would share an INFO field: `policy_<a>_shadow_denied`
/// is `policy_<b>_denied` when `b` is `a` followed by `_shadow` (the only suffix of
/// [`STAT_NAMES`] that ends another).
pub fn fields_collide(a: &[u8], b: &[u8]) -> bool {
    let shadowed = |x: &[u8], y: &[u8]| y.strip_suffix(b"_shadow") == Some(x);
    shadowed(a, b) || shadowed(b, a)
}

/// One named policy.
#[derive(Debug)]
pub struct Policy {
    pub name: Vec<u8>,
    /// The store's counter at its last change.
    pub version: u64,
    /// The arguments of the `SET` that made it, after the name.
    pub args: Vec<Vec<u8>>,
    pub def: Definition,
    pub stats: Arc<PolicyStats>,
}

/// A policy in its wire form: what [`decode`] gives, before its definition is parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub name: Vec<u8>,
    pub version: u64,
    pub args: Vec<Vec<u8>>,
}

/// A decoded payload: the store's counter and its policies, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    pub counter: u64,
    pub records: Vec<Record>,
}

/// Every policy, by name, and the counter that numbers their versions.
#[derive(Debug, Default)]
pub struct PolicyStore {
    policies: BTreeMap<Vec<u8>, Arc<Policy>>,
    counter: u64,
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The store holds `ratelimit.max-policies` policies already.
    Full(usize),
    /// The counter is at [`VERSION_MAX`] (never in practice: see [`RESTORE_MAX`]).
    Exhausted,
}

impl PolicyStore {
    /// An empty store.
    pub const fn new() -> Self {
        PolicyStore {
            policies: BTreeMap::new(),
            counter: 0,
        }
    }

    /// The policy named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&Arc<Policy>> {
        self.policies.get(name)
    }

    /// Number of policies.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// No policy at all.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The counter: the newest version given.
    pub fn counter(&self) -> u64 {
        self.counter
    }

    /// Every policy, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Policy>> {
        self.policies.values()
    }

    /// Create or replace `name` (valid) with `def`, defined by `args`, as the next version; at
    /// most `max` policies. Its counters carry over a replaced policy's. The new version.
    ///
    /// # Errors
    /// [`StoreError::Full`] for a new name in a full store; [`StoreError::Exhausted`].
    pub fn set(
        &mut self,
        name: &[u8],
        args: Vec<Vec<u8>>,
        def: Definition,
        max: usize,
    ) -> Result<u64, StoreError> {
        let existing = self.policies.get(name);
        if existing.is_none() && self.policies.len() >= max {
            return Err(StoreError::Full(max));
        }
        let version = self.next_versions(1)?;
        let stats = existing.map(|p| Arc::clone(&p.stats)).unwrap_or_default();
        self.counter = version;
        self.policies.insert(
            name.to_vec(),
            Arc::new(Policy {
                name: name.to_vec(),
                version,
                args,
                def,
                stats,
            }),
        );
        Ok(version)
    }

    /// The first of `n` (at least 1) versions after the counter, if all of them are at most
    /// [`VERSION_MAX`].
    fn next_versions(&self, n: usize) -> Result<u64, StoreError> {
        let last = self
            .counter
            .checked_add(n as u64)
            .filter(|v| *v <= VERSION_MAX)
            .ok_or(StoreError::Exhausted)?;
        Ok(last.saturating_sub(n as u64).saturating_add(1))
    }

    /// `RESTORE ... MERGE` from a client: add `policies`, or replace those of the same names,
    /// each policy it adds or changes (other arguments than the stored policy's) taking the
    /// next version, in the given order; a policy equal to the stored one keeps its version.
    /// All or nothing: at most `max` policies, enough versions left. The number of policies
    /// added or changed.
    ///
    /// # Errors
    /// [`StoreError::Full`], [`StoreError::Exhausted`], changing nothing.
    pub fn merge(&mut self, policies: Vec<Policy>, max: usize) -> Result<usize, StoreError> {
        let changed: Vec<Policy> = policies
            .into_iter()
            .filter(|p| {
                self.policies
                    .get(&p.name)
                    .is_none_or(|old| old.args != p.args)
            })
            .collect();
        let added = changed
            .iter()
            .filter(|p| !self.policies.contains_key(&p.name))
            .count();
        if added > 0 && self.policies.len().saturating_add(added) > max {
            return Err(StoreError::Full(max));
        }
        if changed.is_empty() {
            return Ok(0);
        }
        let mut version = self.next_versions(changed.len())?;
        let n = changed.len();
        for mut p in changed {
            p.version = version;
            version = version.saturating_add(1);
            self.put(p);
        }
        Ok(n)
    }

    /// Put `p` (its version given) in the store as it is, the counter raised to its version:
    /// replication and the AOF. Its counters carry over a replaced policy's.
    pub fn put(&mut self, mut p: Policy) {
        if let Some(old) = self.policies.get(&p.name) {
            p.stats = Arc::clone(&old.stats);
        }
        self.counter = self.counter.max(p.version);
        self.policies.insert(p.name.clone(), Arc::new(p));
    }

    /// Raise the counter to `counter` (a replicated merge's), never lower it.
    pub fn raise_counter(&mut self, counter: u64) {
        self.counter = self.counter.max(counter);
    }

    /// A policy whose INFO fields would collide with those of a policy named `name`
    /// ([`fields_collide`]), if any.
    pub fn collision(&self, name: &[u8]) -> Option<&[u8]> {
        let shadow = name.strip_suffix(b"_shadow");
        let longer = [name, b"_shadow"].concat();
        shadow
            .and_then(|s| self.policies.get_key_value(s))
            .or_else(|| self.policies.get_key_value(longer.as_slice()))
            .map(|(k, _)| k.as_slice())
    }

    /// Remove `name`; whether it existed.
    pub fn del(&mut self, name: &[u8]) -> bool {
        self.policies.remove(name).is_some()
    }

    /// Replace everything with `policies` and `counter` (at least the newest version among
    /// them). Counters of names kept carry over.
    pub fn replace_all(&mut self, counter: u64, policies: Vec<Policy>) {
        let old = std::mem::take(&mut self.policies);
        self.counter = counter;
        for mut p in policies {
            if let Some(o) = old.get(&p.name) {
                p.stats = Arc::clone(&o.stats);
            }
            self.counter = self.counter.max(p.version);
            self.policies.insert(p.name.clone(), Arc::new(p));
        }
    }

    /// Forget everything (a load that replaces the dataset starts here).
    pub fn clear(&mut self) {
        self.policies.clear();
        self.counter = 0;
    }

    /// The store's wire form, every policy.
    pub fn dump(&self) -> Vec<u8> {
        encode(self.counter, self.policies.values().map(|p| p.as_ref()))
    }

    /// The wire form of the one policy `p`, with the store's counter.
    pub fn dump_one(&self, p: &Policy) -> Vec<u8> {
        encode(self.counter, std::iter::once(p))
    }

    /// A checksum over every policy's name, definition and version (not its counters), the
    /// same on any server holding the same policies: 64-bit FNV-1a over the records in name
    /// order, each length-prefixed.
    pub fn checksum(&self) -> u64 {
        let mut h = Fnv::new();
        for p in self.policies.values() {
            h.bytes(&p.name);
            h.u64(p.version);
            h.u64(p.args.len() as u64);
            for a in &p.args {
                h.bytes(a);
            }
        }
        h.0
    }
}

/// 64-bit FNV-1a.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn byte(&mut self, b: u8) {
        self.0 ^= u64::from(b);
        self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
    }

    fn u64(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.byte(b);
        }
    }

    fn bytes(&mut self, s: &[u8]) {
        self.u64(s.len() as u64);
        for &b in s {
            self.byte(b);
        }
    }
}

/// The wire form of `policies` with `counter`: `RLP`, the format byte, the counter, the number
/// of policies, then per policy its name, version and arguments (lengths as varints).
pub fn encode<'a>(counter: u64, policies: impl Iterator<Item = &'a Policy>) -> Vec<u8> {
    let policies: Vec<&Policy> = policies.collect();
    let mut out = Vec::with_capacity(16);
    out.extend_from_slice(MAGIC);
    out.push(FORMAT);
    put_u64(&mut out, counter);
    put_u64(&mut out, policies.len() as u64);
    for p in policies {
        put_bytes(&mut out, &p.name);
        put_u64(&mut out, p.version);
        put_u64(&mut out, p.args.len() as u64);
        for a in &p.args {
            put_bytes(&mut out, a);
        }
    }
    out
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Decode a payload of [`encode`], with at most `max` policies: `None` if it does not decode
/// exactly (trailing bytes included), breaks a bound ([`NAME_MAX`] and valid names,
/// [`ARGS_MAX`], [`ARG_MAX`]), names a policy twice, or has a version above its counter or of
/// 0. Each definition still has to be parsed.
pub fn decode(input: &[u8], max: usize) -> Option<Payload> {
    let mut r = Reader::new(input);
    if r.bytes(MAGIC.len())? != MAGIC || r.byte()? != FORMAT {
        return None;
    }
    let counter = r.u64()?;
    let count = usize::try_from(r.u64()?).ok()?;
    if count > max {
        return None;
    }
    let mut records: Vec<Record> = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let name = get_bytes(&mut r, NAME_MAX)?;
        if !valid_name(name) {
            return None;
        }
        let version = r.u64()?;
        if version == 0 || version > counter {
            return None;
        }
        let nargs = usize::try_from(r.u64()?).ok()?;
        if nargs == 0 || nargs > ARGS_MAX {
            return None;
        }
        let mut args = Vec::with_capacity(nargs);
        for _ in 0..nargs {
            args.push(get_bytes(&mut r, ARG_MAX)?.to_vec());
        }
        records.push(Record {
            name: name.to_vec(),
            version,
            args,
        });
    }
    if r.remaining() != 0 {
        return None;
    }
    let mut names: Vec<&[u8]> = records.iter().map(|r| r.name.as_slice()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w.first() == w.get(1)) {
        return None;
    }
    Some(Payload { counter, records })
}

fn get_bytes<'a>(r: &mut Reader<'a>, max: usize) -> Option<&'a [u8]> {
    let len = usize::try_from(r.u64()?).ok()?;
    if len > max {
        return None;
    }
    r.bytes(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::gcra::{Gcra, GcraParams};

    fn def(burst: u64) -> Definition {
        Definition {
            limiters: vec![PolicyLimiter {
                params: AnyParams::of::<Gcra>(&GcraParams::new(burst, 1, 1_000_000).unwrap()),
                charge: None,
                name: None,
            }],
            shadow: false,
            desc: None,
        }
    }

    fn args(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn names_are_lowercase_letters_digits_and_underscores() {
        for ok in ["a", "free", "pro_2", &"x".repeat(64)] {
            assert!(valid_name(ok.as_bytes()), "{ok}");
        }
        for bad in ["", "Free", "a-b", "a.b", "a b", "é", &"x".repeat(65), "a\0"] {
            assert!(!valid_name(bad.as_bytes()), "{bad:?}");
        }
    }

    #[test]
    fn only_a_name_and_its_shadow_suffixed_twin_share_info_fields() {
        let fields = |n: &str| STAT_NAMES.map(|s| format!("policy_{n}_{s}"));
        let names = ["a", "a_shadow", "a_near", "a_calls", "b", "a_shadow_shadow"];
        for x in names {
            for y in names {
                let shared = x != y && fields(x).iter().any(|f| fields(y).contains(f));
                assert_eq!(
                    fields_collide(x.as_bytes(), y.as_bytes()),
                    shared,
                    "{x} {y}"
                );
            }
        }
        let mut s = PolicyStore::new();
        s.set(b"a", args("x"), def(1), 10).unwrap();
        assert_eq!(s.collision(b"a_shadow"), Some(&b"a"[..]));
        assert_eq!(s.collision(b"b"), None);
        s.set(b"c_shadow", args("x"), def(1), 10).unwrap();
        assert_eq!(s.collision(b"c"), Some(&b"c_shadow"[..]));
    }

    #[test]
    fn versions_grow_with_every_change_and_never_repeat() {
        let mut s = PolicyStore::new();
        assert_eq!(s.set(b"a", args("GCRA 1 1 1s"), def(1), 10), Ok(1));
        assert_eq!(s.set(b"b", args("GCRA 2 1 1s"), def(2), 10), Ok(2));
        assert_eq!(s.set(b"a", args("GCRA 3 1 1s"), def(3), 10), Ok(3));
        assert!(s.del(b"a"));
        assert!(!s.del(b"a"));
        assert_eq!(s.set(b"a", args("GCRA 1 1 1s"), def(1), 10), Ok(4));
        assert_eq!(s.get(b"a").unwrap().version, 4);
        assert_eq!(s.get(b"b").unwrap().version, 2);
    }

    fn policy(name: &str, version: u64, a: &str) -> Policy {
        Policy {
            name: name.as_bytes().to_vec(),
            version,
            args: args(a),
            def: def(1),
            stats: Arc::default(),
        }
    }

    fn versions(s: &PolicyStore) -> Vec<(String, u64)> {
        s.iter()
            .map(|p| (String::from_utf8_lossy(&p.name).into_owned(), p.version))
            .collect()
    }

    #[test]
    fn a_merge_gives_each_policy_it_adds_or_changes_the_next_version() {
        let mut s = PolicyStore::new();
        for (n, a) in [
            ("a", "GCRA 1 1 1s"),
            ("b", "GCRA 2 1 1s"),
            ("a", "GCRA 3 1 1s"),
        ] {
            s.set(n.as_bytes(), args(a), def(1), 10).unwrap();
        }
        // A changed `a` carried at version 1 and a new `c` at version 2: the next versions,
        // never the payload's (a's would go down, c's would repeat b's).
        let n = s.merge(
            vec![policy("a", 1, "GCRA 9 1 1s"), policy("c", 2, "GCRA 2 1 1s")],
            10,
        );
        assert_eq!(n, Ok(2));
        assert_eq!(
            versions(&s),
            [("a".into(), 4), ("b".into(), 2), ("c".into(), 5)]
        );
        assert_eq!(s.counter(), 5);
        // A policy equal to the stored one keeps its version; a DEL'd name comes back new.
        assert!(s.del(b"c"));
        let n = s.merge(
            vec![policy("b", 1, "GCRA 2 1 1s"), policy("c", 1, "GCRA 2 1 1s")],
            10,
        );
        assert_eq!(n, Ok(1));
        assert_eq!(
            versions(&s),
            [("a".into(), 4), ("b".into(), 2), ("c".into(), 6)]
        );
        // All or nothing: too many names, or too few versions left, change nothing.
        let before = (versions(&s), s.counter());
        let e = s.merge(vec![policy("a", 1, "x"), policy("d", 1, "x")], 3);
        assert_eq!(e, Err(StoreError::Full(3)));
        s.raise_counter(VERSION_MAX - 1);
        let e = s.merge(vec![policy("a", 1, "y"), policy("b", 1, "y")], 10);
        assert_eq!(e, Err(StoreError::Exhausted));
        assert_eq!(versions(&s), before.0);
        assert_eq!(s.merge(vec![policy("a", 1, "y")], 10), Ok(1));
        assert_eq!(s.get(b"a").unwrap().version, VERSION_MAX);
    }

    #[test]
    fn versions_stop_at_version_max_and_a_restored_counter_leaves_room() {
        let mut s = PolicyStore::new();
        s.raise_counter(VERSION_MAX - 1);
        assert_eq!(s.set(b"a", args("x"), def(1), 10), Ok(VERSION_MAX));
        assert_eq!(
            s.set(b"a", args("y"), def(1), 10),
            Err(StoreError::Exhausted)
        );
        assert_eq!(s.get(b"a").unwrap().args, args("x"));
        // Exact in a double (every client reads it exactly), and room after RESTORE_MAX.
        assert_eq!(VERSION_MAX as f64 as u64, VERSION_MAX);
        assert_eq!(
            (VERSION_MAX + 1) as f64 as u64,
            (VERSION_MAX + 2) as f64 as u64
        );
        let mut restored = PolicyStore::new();
        restored.raise_counter(RESTORE_MAX);
        assert_eq!(restored.next_versions(1 << 51), Ok(RESTORE_MAX + 1));
    }

    #[test]
    fn the_counter_alone_is_kept_in_the_wire_form() {
        let mut s = PolicyStore::new();
        s.set(b"a", args("x"), def(1), 10).unwrap();
        assert!(s.del(b"a"));
        assert!(s.is_empty());
        assert_eq!(s.dump(), b"RLP\x01\x01\x00");
        assert_eq!(
            decode(&s.dump(), 10),
            Some(Payload {
                counter: 1,
                records: vec![]
            })
        );
    }

    #[test]
    fn a_full_store_refuses_new_names_but_replaces_existing_ones() {
        let mut s = PolicyStore::new();
        s.set(b"a", args("x"), def(1), 1).unwrap();
        assert_eq!(s.set(b"b", args("x"), def(1), 1), Err(StoreError::Full(1)));
        assert_eq!(s.set(b"a", args("y"), def(2), 1), Ok(2));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_replaced_policy_keeps_its_counters() {
        let mut s = PolicyStore::new();
        s.set(b"a", args("x"), def(1), 10).unwrap();
        s.get(b"a").unwrap().stats.record(true, false, true);
        s.set(b"a", args("y"), def(2), 10).unwrap();
        assert_eq!(s.get(b"a").unwrap().stats.values(), [1, 1, 0, 0, 1]);
    }

    #[test]
    fn counters_count_grants_denials_shadow_and_near_limit() {
        let st = PolicyStats::default();
        st.record(true, false, false);
        st.record(true, false, true);
        st.record(false, false, true); // denied: never near
        st.record(true, true, false); // let through by a shadow policy
        assert_eq!(st.values(), [4, 3, 1, 1, 1]);
    }

    #[test]
    fn the_wire_form_round_trips_and_refuses_any_damage() {
        let mut s = PolicyStore::new();
        s.set(b"free", args("GCRA 10 5 1s"), def(10), 10).unwrap();
        s.set(b"pro", args("GCRA 100 50 1s DESC paid"), def(100), 10)
            .unwrap();
        s.del(b"free");
        let bytes = s.dump();
        let p = decode(&bytes, 10).unwrap();
        assert_eq!(p.counter, 2);
        assert_eq!(
            p.records,
            [Record {
                name: b"pro".to_vec(),
                version: 2,
                args: args("GCRA 100 50 1s DESC paid"),
            }]
        );
        // Every truncation, every extra byte, and a bound below its count are refused.
        for n in 0..bytes.len() {
            assert_eq!(decode(&bytes[..n], 10), None, "{n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer, 10), None);
        assert_eq!(decode(&bytes, 0), None);
        // Another format, a version above the counter, a bad name.
        let mut other = bytes.clone();
        other[3] = 2;
        assert_eq!(decode(&other, 10), None);
        let bad = encode(1, s.iter().map(|p| p.as_ref()));
        assert_eq!(decode(&bad, 10), None);
        let mut renamed = bytes.clone();
        let at = renamed.windows(3).position(|w| w == b"pro").unwrap();
        renamed[at] = b'P';
        assert_eq!(decode(&renamed, 10), None);
    }

    #[test]
    fn the_checksum_covers_names_definitions_and_versions_only() {
        let mut a = PolicyStore::new();
        let mut b = PolicyStore::new();
        assert_eq!(a.checksum(), b.checksum());
        a.set(b"x", args("GCRA 1 1 1s"), def(1), 10).unwrap();
        b.set(b"x", args("GCRA 1 1 1s"), def(1), 10).unwrap();
        assert_eq!(a.checksum(), b.checksum());
        a.get(b"x").unwrap().stats.record(true, false, true);
        assert_eq!(a.checksum(), b.checksum());
        // Same definition, another version; another definition.
        b.set(b"x", args("GCRA 1 1 1s"), def(1), 10).unwrap();
        assert_ne!(a.checksum(), b.checksum());
        let mut c = PolicyStore::new();
        c.set(b"x", args("GCRA 2 1 1s"), def(1), 10).unwrap();
        assert_ne!(a.checksum(), c.checksum());
        // Restored elsewhere from the wire form: equal.
        let mut d = PolicyStore::new();
        let p = decode(&b.dump(), 10).unwrap();
        d.replace_all(
            p.counter,
            p.records
                .into_iter()
                .map(|r| Policy {
                    name: r.name,
                    version: r.version,
                    args: r.args,
                    def: def(1),
                    stats: Arc::default(),
                })
                .collect(),
        );
        assert_eq!(d.checksum(), b.checksum());
        assert_eq!(d.dump(), b.dump());
    }

    use crate::core::flow::{self, Write};
    use crate::core::limiter::{Algorithm, Request};
    use crate::core::state::{LimiterState, Stored};
    use proptest::prelude::*;

    proptest! {
        /// A policy changed mid-traffic (RL.POLICY SET replacing its GCRA limiter, calls
        /// looking it up by name as RL.LIMIT does) never grants more than the model: a count of
        /// units used, kept across a change, that admits a request iff used + cost <= the
        /// policy's burst now, and drains at the rate the key holds (a key takes the policy's
        /// new parameters with its next charged call: the parameter-change rule, applied where
        /// the key's parameters are stored). Fed the module's decisions, the model admits every
        /// call the module grants.
        #[test]
        fn a_policy_changed_mid_traffic_never_grants_more_than_the_model(
            steps in prop::collection::vec(
                (prop::option::weighted(0.2, (1u64..20, 1u64..10, 1u64..5_000)),
                 0u64..700_000, 0u64..4),
                1..80,
            ),
        ) {
            let mut store = PolicyStore::new();
            let first = GcraParams::new(5, 2, 1_000_000).unwrap();
            let set = |store: &mut PolicyStore, p: &GcraParams| {
                let def = Definition {
                    limiters: vec![PolicyLimiter {
                        params: AnyParams::of::<Gcra>(p),
                        charge: None,
                        name: None,
                    }],
                    shadow: false,
                    desc: None,
                };
                store.set(b"tier", vec![b"GCRA".to_vec()], def, 10).unwrap();
            };
            set(&mut store, &first);
            let mut key: Option<LimiterState> = None;
            let mut t = 1_700_000_000_000_000u64;
            // The model: units used, drained at the rate in force since the last call.
            let (mut used, mut last) = (0f64, t);
            let (mut burst, mut per_unit_us) = (5f64, 500_000f64);
            // The drain rate of the parameters the key holds.
            let mut key_per_unit_us = per_unit_us;
            for (change, dt, cost) in steps {
                t += dt;
                used = (used - (t - last) as f64 / key_per_unit_us).max(0.0);
                last = t;
                if let Some((b, rate, period_ms)) = change {
                    let p = GcraParams::new(b, rate, period_ms * 1000).unwrap();
                    set(&mut store, &p);
                    burst = b as f64;
                    per_unit_us = (period_ms * 1000) as f64 / rate as f64;
                }
                let policy = Arc::clone(store.get(b"tier").unwrap());
                let spec = &policy.def.limiters[0].params;
                let params = Gcra::from_state(spec.state()).unwrap().params();
                let out = flow::apply::<Gcra>(key.as_mut(), params, &Request::new(cost, t), 10)
                    .unwrap();
                if let Write::Created(s) = out.write {
                    key = Some(s);
                }
                let granted = out.verdict.granted;
                if cost > 0 && granted == cost {
                    prop_assert!(
                        used + cost as f64 <= burst + 1e-9,
                        "granted {} with {} of {} used", cost, used, burst
                    );
                    used += cost as f64;
                    key_per_unit_us = per_unit_us;
                }
            }
        }
    }
}
