//! The queues of `RL.ACQUIRE ... WAIT`: per key, the waiting calls in arrival order, each with
//! its deadline, and when the key should next be looked at (`wake_at`: the head's exact wait, or
//! at once when something may have freed units).
//!
//! Pure bookkeeping: the caller decides whether a head fits, grants it, replies. `H` is the
//! handle of a waiting client (unique while it waits), `T` what the caller keeps of its call.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::Hash;

use crate::core::time::Micros;

/// One waiting call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<H, T> {
    /// The waiting client.
    pub handle: H,
    /// When its wait ends without a grant (Unix µs).
    pub deadline: Micros,
    /// The call.
    pub call: T,
}

#[derive(Debug)]
struct Queue<H, T> {
    /// The waiters in arrival order, each with its arrival number (increasing).
    waiters: VecDeque<(u64, Waiter<H, T>)>,
    /// When the head may fit (Unix µs); `None`: only an event can make it fit.
    wake_at: Option<Micros>,
}

impl<H, T> Queue<H, T> {
    /// Where the waiter that arrived `seq`-th stands.
    fn position(&self, seq: u64) -> Option<usize> {
        self.waiters.binary_search_by_key(&seq, |(s, _)| *s).ok()
    }
}

/// Every key's queue, and the deadlines in order: finding the next thing due costs the number
/// of keys waited on (not of waiters), a deadline or a client's waiter is found in O(log n).
/// A key without waiters has no queue.
#[derive(Debug)]
pub struct Waiters<K, H, T> {
    queues: HashMap<K, Queue<H, T>>,
    /// (deadline, arrival number) of every waiter.
    deadlines: BTreeSet<(Micros, u64)>,
    /// The key of every waiter, by arrival number.
    keys: HashMap<u64, K>,
    /// The arrival number of every waiting client.
    handles: HashMap<H, u64>,
    next_seq: u64,
}

impl<K, H, T> Default for Waiters<K, H, T> {
    fn default() -> Self {
        Waiters {
            queues: HashMap::new(),
            deadlines: BTreeSet::new(),
            keys: HashMap::new(),
            handles: HashMap::new(),
            next_seq: 0,
        }
    }
}

impl<K: Eq + Hash + Clone, H: Copy + Eq + Hash, T> Waiters<K, H, T> {
    /// Waiters on every key.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Nobody waits.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Somebody waits on `key`.
    pub fn has(&self, key: &K) -> bool {
        self.queues.contains_key(key)
    }

    /// Queue `waiter` last on `key`; a new queue wakes at `wake_at`.
    pub fn push(&mut self, key: K, waiter: Waiter<H, T>, wake_at: Option<Micros>) {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.deadlines.insert((waiter.deadline, seq));
        self.handles.insert(waiter.handle, seq);
        self.keys.insert(seq, key.clone());
        self.queues
            .entry(key)
            .or_insert_with(|| Queue {
                waiters: VecDeque::new(),
                wake_at,
            })
            .waiters
            .push_back((seq, waiter));
    }

    /// The first waiter on `key`.
    pub fn head(&self, key: &K) -> Option<&Waiter<H, T>> {
        self.queues
            .get(key)
            .and_then(|q| q.waiters.front())
            .map(|(_, w)| w)
    }

    /// Take the first waiter off `key` (the queue goes with its last waiter; the next head is
    /// looked at at once).
    pub fn pop_head(&mut self, key: &K) -> Option<Waiter<H, T>> {
        let seq = self.queues.get(key)?.waiters.front()?.0;
        self.take(key, seq)
    }

    /// Take out the waiter that arrived `seq`-th on `key`, forgetting it everywhere; a queue
    /// that loses its head is looked at at once, an emptied queue goes.
    fn take(&mut self, key: &K, seq: u64) -> Option<Waiter<H, T>> {
        let queue = self.queues.get_mut(key)?;
        let index = queue.position(seq)?;
        let (_, waiter) = queue.waiters.remove(index)?;
        if queue.waiters.is_empty() {
            self.queues.remove(key);
        } else if index == 0 {
            queue.wake_at = Some(0);
        }
        self.deadlines.remove(&(waiter.deadline, seq));
        self.keys.remove(&seq);
        self.handles.remove(&waiter.handle);
        Some(waiter)
    }

    /// Look at `key` again at `at` (`None`: on an event only).
    pub fn set_wake(&mut self, key: &K, at: Option<Micros>) {
        if let Some(q) = self.queues.get_mut(key) {
            q.wake_at = at;
        }
    }

    /// Look at `key` at once (something may have freed units).
    pub fn poke(&mut self, key: &K) {
        self.set_wake(key, Some(0));
    }

    /// Look at every key at once.
    pub fn poke_all(&mut self) {
        for q in self.queues.values_mut() {
            q.wake_at = Some(0);
        }
    }

    /// Take the waiter of client `handle` out, with its key; a removed head pokes the key
    /// (the next one may fit).
    pub fn remove(&mut self, handle: H) -> Option<(K, Waiter<H, T>)> {
        let seq = *self.handles.get(&handle)?;
        let key = self.keys.get(&seq)?.clone();
        let waiter = self.take(&key, seq)?;
        Some((key, waiter))
    }

    /// Take out every waiter whose deadline is at or before `now`, earliest deadline first; a
    /// key whose head went is poked.
    pub fn take_expired(&mut self, now: Micros) -> Vec<(K, Waiter<H, T>)> {
        let mut out = Vec::new();
        while let Some(&(deadline, seq)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            let Some(key) = self.keys.get(&seq).cloned() else {
                // Never: every deadline has its waiter. Drop the stray entry.
                self.deadlines.remove(&(deadline, seq));
                continue;
            };
            match self.take(&key, seq) {
                Some(waiter) => out.push((key, waiter)),
                None => {
                    self.deadlines.remove(&(deadline, seq));
                    self.keys.remove(&seq);
                }
            }
        }
        out
    }

    /// Take out every waiter.
    pub fn take_all(&mut self) -> Vec<(K, Waiter<H, T>)> {
        self.deadlines.clear();
        self.keys.clear();
        self.handles.clear();
        self.queues
            .drain()
            .flat_map(|(k, q)| q.waiters.into_iter().map(move |(_, w)| (k.clone(), w)))
            .collect()
    }

    /// The keys to look at by `now`.
    pub fn due(&self, now: Micros) -> Vec<K> {
        self.queues
            .iter()
            .filter(|(_, q)| q.wake_at.is_some_and(|at| at <= now))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The earliest time something is due: a key to look at or a deadline.
    pub fn next_due(&self) -> Option<Micros> {
        let wake = self.queues.values().filter_map(|q| q.wake_at).min();
        let deadline = self.deadlines.first().map(|(d, _)| *d);
        match (wake, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type W = Waiters<&'static str, u32, u64>;

    fn waiter(handle: u32, deadline: Micros) -> Waiter<u32, u64> {
        Waiter {
            handle,
            deadline,
            call: u64::from(handle),
        }
    }

    #[test]
    fn heads_leave_in_arrival_order_per_key() {
        let mut w = W::default();
        for h in 1..=3 {
            w.push("a", waiter(h, 100), None);
        }
        w.push("b", waiter(9, 100), Some(50));
        assert_eq!(w.len(), 4);
        assert_eq!(w.head(&"a").map(|x| x.handle), Some(1));
        let order: Vec<u32> = std::iter::from_fn(|| w.pop_head(&"a").map(|x| x.handle)).collect();
        assert_eq!(order, [1, 2, 3]);
        assert!(!w.has(&"a"));
        assert!(w.has(&"b"));
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn removing_the_head_pokes_the_key_and_a_later_one_does_not() {
        let mut w = W::default();
        for h in 1..=3 {
            w.push("a", waiter(h, 100), Some(70));
        }
        assert_eq!(w.remove(2).map(|(k, x)| (k, x.handle)), Some(("a", 2)));
        assert_eq!(w.due(10), Vec::<&str>::new());
        assert_eq!(w.remove(1).map(|(k, x)| (k, x.handle)), Some(("a", 1)));
        assert_eq!(w.due(10), vec!["a"]);
        assert_eq!(w.remove(1), None);
        assert_eq!(w.remove(3).map(|(_, x)| x.handle), Some(3));
        assert!(w.is_empty());
        assert!(!w.has(&"a"));
    }

    #[test]
    fn deadlines_take_out_exactly_the_expired_waiters() {
        let mut w = W::default();
        w.push("a", waiter(1, 10), Some(500));
        w.push("a", waiter(2, 30), None);
        w.push("a", waiter(3, 20), None);
        w.push("b", waiter(4, 40), Some(500));
        w.push("b", waiter(5, 20), None);
        assert_eq!(w.next_due(), Some(10));
        let mut gone: Vec<u32> = w
            .take_expired(20)
            .into_iter()
            .map(|(_, x)| x.handle)
            .collect();
        gone.sort_unstable();
        assert_eq!(gone, [1, 3, 5]);
        assert_eq!(w.len(), 2);
        // "a" lost its head: looked at at once; "b" kept its head: as before.
        assert_eq!(w.due(21), vec!["a"]);
        assert_eq!(w.head(&"a").map(|x| x.handle), Some(2));
        assert_eq!(w.head(&"b").map(|x| x.handle), Some(4));
        assert_eq!(w.take_expired(40).len(), 2);
        assert!(w.is_empty());
        assert_eq!(w.next_due(), None);
    }

    /// The indexes follow every way out: a client removed, a head popped, a deadline passed;
    /// nothing of a waiter stays behind (its deadline no longer counts, its handle is free).
    #[test]
    fn every_way_out_forgets_the_waiter_everywhere() {
        let mut w = W::default();
        w.push("a", waiter(1, 10), None);
        w.push("a", waiter(2, 20), None);
        w.push("b", waiter(3, 30), None);
        assert_eq!(w.pop_head(&"a").map(|x| x.handle), Some(1));
        // The new head is looked at at once; then only its deadline is due.
        assert_eq!(w.next_due(), Some(0));
        w.set_wake(&"a", None);
        assert_eq!(w.next_due(), Some(20));
        assert_eq!(w.remove(1), None);
        assert_eq!(w.remove(3).map(|(k, x)| (k, x.handle)), Some(("b", 3)));
        assert_eq!(w.next_due(), Some(20));
        assert!(w.take_expired(19).is_empty());
        assert_eq!(w.take_expired(20).len(), 1);
        assert!(w.is_empty());
        assert_eq!(w.next_due(), None);
        // A handle can wait again once it left.
        w.push("c", waiter(1, 5), Some(7));
        assert_eq!(w.remove(1).map(|(k, _)| k), Some("c"));
        assert!(w.is_empty() && !w.has(&"c"));
    }

    #[test]
    fn next_due_is_the_earliest_wake_or_deadline() {
        let mut w = W::default();
        w.push("a", waiter(1, 900), Some(300));
        w.push("b", waiter(2, 200), None);
        assert_eq!(w.next_due(), Some(200));
        w.set_wake(&"a", Some(100));
        assert_eq!(w.next_due(), Some(100));
        w.poke_all();
        assert_eq!(w.next_due(), Some(0));
        let mut due = w.due(0);
        due.sort_unstable();
        assert_eq!(due, ["a", "b"]);
        assert_eq!(w.take_all().len(), 2);
        assert!(w.is_empty());
    }
}
