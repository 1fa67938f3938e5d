//! The leases of one concurrency key: a set of `(id, units, expiry)` ordered two ways at once,
//! by id (to find a holder's lease) and by expiry (to drop the expired ones, and to know when
//! enough units come back), with O(log n) expected per operation.
//!
//! Both orders are treaps over one arena of nodes (a `Vec`, so `MEMORY USAGE` is its capacity
//! times the node size, 56 bytes a lease): each node carries its links in both trees, and the
//! expiry tree keeps in every node the units and the number of leases of its subtree, so "the
//! earliest time at which the leases expired by then hold `u` units" and "how many leases are
//! expired at `now`" are one walk from the root. Priorities come from a
//! counter mixed by splitmix64, never from the client's ids (a client could pick ids whose
//! priorities chain into one long branch). The trees' shape is not part of the value: equality
//! and the codec see only the leases in expiry order.

use crate::core::dedup::DedupId;
use crate::core::time::Micros;

const NIL: u32 = u32::MAX;

/// The id tree's links (left at `ID`, right at `ID | 1`), then the expiry tree's.
const ID: usize = 0;
const EXP: usize = 2;

/// One lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: DedupId,
    pub units: u32,
    /// Expired from this time on (Unix µs).
    pub expiry: Micros,
}

#[derive(Debug, Clone, Copy)]
struct Node {
    // The id's halves: alignment 8 keeps the node at 56 bytes.
    id_hi: u64,
    id_lo: u64,
    expiry: Micros,
    units: u32,
    /// Units in this node's subtree of the expiry tree.
    sum: u32,
    /// Leases in this node's subtree of the expiry tree.
    count: u32,
    priority: u32,
    /// Left, right in the id tree, then left, right in the expiry tree.
    links: [u32; 4],
}

impl Node {
    fn id(&self) -> u128 {
        (u128::from(self.id_hi) << 64) | u128::from(self.id_lo)
    }
}

/// The leases of one key.
#[derive(Debug, Clone)]
pub struct Leases {
    nodes: Vec<Node>,
    roots: [u32; 4],
    /// Priority source (not part of the value).
    seed: u64,
}

impl Default for Leases {
    fn default() -> Self {
        Leases {
            nodes: Vec::new(),
            roots: [NIL; 4],
            seed: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

impl PartialEq for Leases {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Leases {}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Leases {
    /// Number of leases stored (live or not yet dropped).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// No lease stored.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Heap bytes held.
    pub fn heap_size(&self) -> usize {
        self.nodes
            .capacity()
            .saturating_mul(std::mem::size_of::<Node>())
    }

    /// Units held by every stored lease.
    pub fn total(&self) -> u64 {
        u64::from(self.sum(self.root(EXP)))
    }

    fn root(&self, t: usize) -> u32 {
        self.roots.get(t).copied().unwrap_or(NIL)
    }

    fn set_root(&mut self, t: usize, v: u32) {
        if let Some(r) = self.roots.get_mut(t) {
            *r = v;
        }
    }

    fn node(&self, i: u32) -> Option<&Node> {
        self.nodes.get(usize::try_from(i).ok()?)
    }

    fn node_mut(&mut self, i: u32) -> Option<&mut Node> {
        self.nodes.get_mut(usize::try_from(i).ok()?)
    }

    fn link(&self, i: u32, side: usize) -> u32 {
        self.node(i)
            .and_then(|n| n.links.get(side).copied())
            .unwrap_or(NIL)
    }

    fn set_link(&mut self, i: u32, side: usize, v: u32) {
        if let Some(l) = self.node_mut(i).and_then(|n| n.links.get_mut(side)) {
            *l = v;
        }
    }

    fn sum(&self, i: u32) -> u32 {
        self.node(i).map_or(0, |n| n.sum)
    }

    fn count(&self, i: u32) -> u32 {
        self.node(i).map_or(0, |n| n.count)
    }

    fn priority(&self, i: u32) -> u32 {
        self.node(i).map_or(0, |n| n.priority)
    }

    /// Recompute `i`'s subtree units and leases in tree `t` (only the expiry tree keeps them).
    fn update(&mut self, t: usize, i: u32) {
        if t != EXP {
            return;
        }
        let (l, r) = (self.link(i, EXP), self.link(i, EXP | 1));
        let sum = self.sum(l).saturating_add(self.sum(r));
        let count = self.count(l).saturating_add(self.count(r));
        if let Some(n) = self.node_mut(i) {
            n.sum = n.units.saturating_add(sum);
            n.count = count.saturating_add(1);
        }
    }

    /// The order of tree `t`: is node `a` before node `b`?
    fn before(&self, t: usize, a: u32, b: u32) -> bool {
        match (self.node(a), self.node(b)) {
            (Some(a), Some(b)) if t == EXP => (a.expiry, a.id()) < (b.expiry, b.id()),
            (Some(a), Some(b)) => a.id() < b.id(),
            _ => false,
        }
    }

    /// Split tree `t` under `root` into the nodes before `pivot` and the others.
    fn split(&mut self, t: usize, root: u32, pivot: u32) -> (u32, u32) {
        if root == NIL {
            return (NIL, NIL);
        }
        if self.before(t, root, pivot) {
            let (l, r) = self.split(t, self.link(root, t | 1), pivot);
            self.set_link(root, t | 1, l);
            self.update(t, root);
            (root, r)
        } else {
            let (l, r) = self.split(t, self.link(root, t), pivot);
            self.set_link(root, t, r);
            self.update(t, root);
            (l, root)
        }
    }

    /// Join two trees of `t`, every node of `a` before every node of `b`.
    fn merge(&mut self, t: usize, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.priority(a) > self.priority(b) {
            let r = self.merge(t, self.link(a, t | 1), b);
            self.set_link(a, t | 1, r);
            self.update(t, a);
            a
        } else {
            let l = self.merge(t, a, self.link(b, t));
            self.set_link(b, t, l);
            self.update(t, b);
            b
        }
    }

    /// Put node `x` (unlinked) into tree `t`.
    fn link_in(&mut self, t: usize, x: u32) {
        self.set_link(x, t, NIL);
        self.set_link(x, t | 1, NIL);
        self.update(t, x);
        let (l, r) = self.split(t, self.root(t), x);
        let lx = self.merge(t, l, x);
        let root = self.merge(t, lx, r);
        self.set_root(t, root);
    }

    /// Take node `x` out of tree `t`.
    fn link_out(&mut self, t: usize, x: u32) {
        let (l, rest) = self.split(t, self.root(t), x);
        // `x` is the first node of `rest`: cut it off its leftmost branch.
        let after = self.link(x, t | 1);
        let rest = if rest == x {
            after
        } else {
            // The leftmost path of `rest` down to `x`'s parent.
            let mut path = Vec::new();
            let mut i = rest;
            while i != NIL && i != x {
                path.push(i);
                i = self.link(i, t);
            }
            if let Some(&parent) = path.last() {
                self.set_link(parent, t, after);
            }
            for i in path.into_iter().rev() {
                self.update(t, i);
            }
            rest
        };
        let root = self.merge(t, l, rest);
        self.set_root(t, root);
    }

    /// The node holding `id`, if any.
    fn find(&self, id: DedupId) -> Option<u32> {
        let mut i = self.root(ID);
        while let Some(n) = self.node(i) {
            let nid = n.id();
            if nid == id.0 {
                return Some(i);
            }
            i = self.link(i, if id.0 < nid { ID } else { ID | 1 });
        }
        None
    }

    /// The lease of `id`, if stored.
    pub fn get(&self, id: DedupId) -> Option<Lease> {
        self.find(id).and_then(|i| self.lease(i))
    }

    fn lease(&self, i: u32) -> Option<Lease> {
        self.node(i).map(|n| Lease {
            id: DedupId(n.id()),
            units: n.units,
            expiry: n.expiry,
        })
    }

    /// Store a lease for an id that holds none. `false` if the arena is full (2^32 − 1 leases).
    pub fn insert(&mut self, lease: Lease) -> bool {
        let Ok(x) = u32::try_from(self.nodes.len()) else {
            return false;
        };
        if x == NIL {
            return false;
        }
        self.seed = self.seed.wrapping_add(1);
        self.nodes.push(Node {
            id_hi: (lease.id.0 >> 64) as u64,
            id_lo: lease.id.0 as u64,
            expiry: lease.expiry,
            units: lease.units,
            sum: lease.units,
            count: 1,
            priority: splitmix(self.seed) as u32,
            links: [NIL; 4],
        });
        self.link_in(ID, x);
        self.link_in(EXP, x);
        true
    }

    /// Move `id`'s lease to expire at `expiry`.
    pub fn renew(&mut self, id: DedupId, expiry: Micros) -> bool {
        let Some(x) = self.find(id) else {
            return false;
        };
        self.link_out(EXP, x);
        if let Some(n) = self.node_mut(x) {
            n.expiry = expiry;
        }
        self.link_in(EXP, x);
        true
    }

    /// Drop `id`'s lease; its units if it was stored.
    pub fn remove(&mut self, id: DedupId) -> Option<u32> {
        let x = self.find(id)?;
        let units = self.node(x).map(|n| n.units);
        self.unlink_node(x);
        units
    }

    /// Take node `x` out of both trees and the arena (the last node moves into its slot).
    fn unlink_node(&mut self, x: u32) {
        self.link_out(ID, x);
        self.link_out(EXP, x);
        let last = u32::try_from(self.nodes.len().saturating_sub(1)).unwrap_or(NIL);
        if x != last {
            // Whoever points at `last` points at `x` once `last` moves there.
            for t in [ID, EXP] {
                if self.root(t) == last {
                    self.set_root(t, x);
                    continue;
                }
                let mut i = self.root(t);
                while i != NIL {
                    let side = if self.before(t, last, i) { t } else { t | 1 };
                    let child = self.link(i, side);
                    if child == last {
                        self.set_link(i, side, x);
                        break;
                    }
                    i = child;
                }
            }
            if let (Ok(xi), Ok(li)) = (usize::try_from(x), usize::try_from(last)) {
                self.nodes.swap(xi, li);
            }
        }
        self.nodes.pop();
        if self.nodes.len() < self.nodes.capacity() / 4 {
            self.nodes.shrink_to(self.nodes.len().saturating_mul(2));
        }
    }

    /// The first lease in expiry order.
    fn first(&self) -> u32 {
        let mut i = self.root(EXP);
        loop {
            let l = self.link(i, EXP);
            if l == NIL {
                return i;
            }
            i = l;
        }
    }

    /// Drop every lease expired at `now` (expiry ≤ now).
    pub fn drop_expired(&mut self, now: Micros) {
        loop {
            let x = self.first();
            match self.node(x) {
                Some(n) if n.expiry <= now => self.unlink_node(x),
                _ => return,
            }
        }
    }

    /// Units of the leases expired at `now`.
    pub fn expired_units(&self, now: Micros) -> u64 {
        let mut units = 0u64;
        let mut i = self.root(EXP);
        while let Some(n) = self.node(i) {
            if n.expiry <= now {
                let left = u64::from(self.sum(self.link(i, EXP)));
                units = units
                    .saturating_add(left)
                    .saturating_add(u64::from(n.units));
                i = self.link(i, EXP | 1);
            } else {
                i = self.link(i, EXP);
            }
        }
        units
    }

    /// Number of leases expired at `now` (expiry ≤ now), not yet dropped.
    pub fn expired_leases(&self, now: Micros) -> u64 {
        let mut leases = 0u64;
        let mut i = self.root(EXP);
        while let Some(n) = self.node(i) {
            if n.expiry <= now {
                let left = u64::from(self.count(self.link(i, EXP)));
                leases = leases.saturating_add(left).saturating_add(1);
                i = self.link(i, EXP | 1);
            } else {
                i = self.link(i, EXP);
            }
        }
        leases
    }

    /// The earliest expiry by which the leases expired hold at least `units` units (`None` when
    /// all of them together hold fewer).
    pub fn time_when_freed(&self, units: u64) -> Option<Micros> {
        if units == 0 {
            return Some(0);
        }
        let mut need = units;
        let mut i = self.root(EXP);
        while let Some(n) = self.node(i) {
            let left = u64::from(self.sum(self.link(i, EXP)));
            if need <= left {
                i = self.link(i, EXP);
            } else if need <= left.saturating_add(u64::from(n.units)) {
                return Some(n.expiry);
            } else {
                need = need.saturating_sub(left).saturating_sub(u64::from(n.units));
                i = self.link(i, EXP | 1);
            }
        }
        None
    }

    /// The latest expiry (0 when empty).
    pub fn last_expiry(&self) -> Micros {
        let mut i = self.root(EXP);
        let mut last = 0;
        while let Some(n) = self.node(i) {
            last = n.expiry;
            i = self.link(i, EXP | 1);
        }
        last
    }

    /// The leases in expiry order.
    pub fn iter(&self) -> impl Iterator<Item = Lease> + '_ {
        let mut stack = Vec::new();
        let mut i = self.root(EXP);
        std::iter::from_fn(move || {
            while i != NIL {
                stack.push(i);
                i = self.link(i, EXP);
            }
            let x = stack.pop()?;
            i = self.link(x, EXP | 1);
            self.lease(x)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_node_is_56_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 56);
    }

    /// Every operation against a plain list, with the tree invariants checked after each.
    #[test]
    fn leases_match_a_list() {
        let mut l = Leases::default();
        let mut model: Vec<Lease> = Vec::new();
        let mut x = 12345u64;
        let mut rnd = |n: u64| {
            x = splitmix(x);
            x % n
        };
        for step in 0..4000u64 {
            let id = DedupId(u128::from(rnd(300)) * 0x1_0000_0000_0001);
            match rnd(5) {
                0 | 1 => {
                    if !model.iter().any(|m| m.id == id) {
                        let lease = Lease {
                            id,
                            units: rnd(4) as u32 + 1,
                            expiry: step + rnd(500),
                        };
                        assert!(l.insert(lease));
                        model.push(lease);
                    }
                }
                2 => {
                    let e = step + rnd(500);
                    let had = model.iter_mut().find(|m| m.id == id).map(|m| m.expiry = e);
                    assert_eq!(l.renew(id, e), had.is_some());
                }
                3 => {
                    let pos = model.iter().position(|m| m.id == id);
                    let want = pos.map(|p| model.remove(p).units);
                    assert_eq!(l.remove(id), want);
                }
                _ => {
                    l.drop_expired(step);
                    model.retain(|m| m.expiry > step);
                }
            }
            model.sort_by_key(|m| (m.expiry, m.id.0));
            assert_eq!(l.iter().collect::<Vec<_>>(), model);
            assert_eq!(l.len(), model.len());
            let total: u64 = model.iter().map(|m| u64::from(m.units)).sum();
            assert_eq!(l.total(), total);
            let t = step + rnd(300);
            let expired: u64 = model
                .iter()
                .filter(|m| m.expiry <= t)
                .map(|m| u64::from(m.units))
                .sum();
            assert_eq!(l.expired_units(t), expired);
            let expired_leases = model.iter().filter(|m| m.expiry <= t).count() as u64;
            assert_eq!(l.expired_leases(t), expired_leases);
            let u = rnd(total + 2);
            let mut acc = 0;
            let want = if u == 0 {
                Some(0)
            } else {
                model.iter().find_map(|m| {
                    acc += u64::from(m.units);
                    (acc >= u).then_some(m.expiry)
                })
            };
            assert_eq!(l.time_when_freed(u), want);
            assert_eq!(l.last_expiry(), model.last().map_or(0, |m| m.expiry));
            assert_eq!(l.get(id), model.iter().find(|m| m.id == id).copied());
        }
        assert!(l.heap_size() >= l.len() * 56);
    }
}
