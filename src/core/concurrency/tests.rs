use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::core::codec;
use crate::core::flow::{Write, apply};
use crate::core::limiter::{Decision, Request};

/// `limit` units in flight (at most `MAX_LEASES`), leases of `period`, lease id `extra`.
impl crate::core::testkit::Sample for Concurrency {
    fn sample([limit, _, period, extra]: [u64; 4]) -> Option<ConcurrencyParams> {
        // A lease id of its own: every call renews the same lease.
        let id = Some(DedupId(u128::from(extra)));
        ConcurrencyParams::new(limit.min(MAX_LEASES), period, id).ok()
    }
}

const T0: Micros = 1_700_000_000_000_000;

fn params(limit: u64, lease: Micros, id: u8) -> ConcurrencyParams {
    ConcurrencyParams::new(limit, lease, Some(DedupId::of(&[id]))).unwrap()
}

/// The key as the commands see it.
#[derive(Default)]
struct Key(Option<LimiterState>);

impl Key {
    fn acquire(&mut self, p: &ConcurrencyParams, req: &Request) -> Result<Decision, CoreError> {
        let out = apply::<Concurrency>(self.0.as_mut(), p, req, 10)?;
        let wrote = !matches!(out.write, Write::None);
        if let Write::Created(s) = out.write {
            self.0 = Some(s);
        }
        if wrote {
            // The key expires with its last lease.
            let conc =
                Concurrency::from_state(self.0.as_ref().unwrap().algo.as_ref().unwrap()).unwrap();
            assert_eq!(out.expires_at, conc.leases().last_expiry());
        }
        Ok(Decision::from(out.verdict))
    }

    fn release(&mut self, id: u8, now: Micros) -> u64 {
        let Some(s) = self.0.as_mut() else { return 0 };
        match release(s, DedupId::of(&[id]), now).unwrap() {
            Released::Nothing => 0,
            Released::Kept { units, .. } => units,
            Released::Emptied { units } => {
                self.0 = None;
                units
            }
        }
    }
}

/// The reference: id → (units, expiry), and the key's last update.
#[derive(Default, Debug)]
struct Model {
    leases: HashMap<u8, (u64, Micros)>,
    last: Micros,
}

impl Model {
    fn live(&self, now: Micros) -> impl Iterator<Item = (&u8, &(u64, Micros))> {
        self.leases.iter().filter(move |(_, (_, e))| *e > now)
    }

    fn held(&self, now: Micros) -> u64 {
        self.live(now).map(|(_, (u, _))| u).sum()
    }

    fn reset(&self, now: Micros, also: Micros) -> Micros {
        self.live(now)
            .map(|(_, (_, e))| *e)
            .max()
            .unwrap_or(0)
            .max(also)
            .saturating_sub(now)
    }

    /// `None`: the COST differs from the lease's units (an error).
    fn acquire(
        &mut self,
        limit: u64,
        lease: Micros,
        id: u8,
        cost: u64,
        peek: bool,
        t: Micros,
    ) -> Option<(u64, u64, i64, Micros)> {
        let now = t.max(self.last);
        let held = self.held(now);
        let free = limit.saturating_sub(held);
        if cost == 0 {
            return Some((0, free, 0, self.reset(now, 0)));
        }
        let until = now + lease;
        let own = self.leases.get(&id).copied().filter(|(_, e)| *e > now);
        if let Some((units, _)) = own {
            if units != cost {
                return None;
            }
            // A renewal under a limit that the units held (its own included) exceed is denied
            // below, like a new lease that does not fit.
            if held <= limit {
                let reset = self.reset(now, until);
                if !peek {
                    self.leases.insert(id, (units, until));
                    self.last = now;
                }
                return Some((cost, free, 0, reset));
            }
        } else if cost <= free {
            let reset = self.reset(now, until);
            if !peek {
                self.leases.retain(|_, (_, e)| *e > now);
                self.leases.insert(id, (cost, until));
                self.last = now;
                assert!(self.held(now) <= limit, "more than limit held");
            }
            return Some((cost, free - cost, 0, reset));
        }
        if cost > limit {
            return Some((0, free, -1, self.reset(now, 0)));
        }
        let at = self.fits_from(limit, id, cost, now);
        Some((
            0,
            free,
            i64::try_from((at - now).div_ceil(1000)).unwrap(),
            self.reset(now, 0),
        ))
    }

    /// For a denied acquire of `cost` ≤ `limit` under `id` at `now`: the earliest expiry of
    /// another live lease at which the other leases still live hold at most `limit − cost`,
    /// tried one by one (then `id` renews, or acquires anew once its own lease ended).
    fn fits_from(&self, limit: u64, id: u8, cost: u64, now: Micros) -> Micros {
        let others = |at: Micros| self.live(at).filter(move |(i, _)| **i != id);
        let mut ends: Vec<Micros> = others(now).map(|(_, (_, e))| *e).collect();
        ends.sort_unstable();
        ends.into_iter()
            .find(|&end| others(end).map(|(_, (u, _))| u).sum::<u64>() + cost <= limit)
            .unwrap()
    }

    fn release(&mut self, id: u8, t: Micros) -> u64 {
        let now = t.max(self.last);
        match self.leases.get(&id).copied() {
            Some((units, e)) if e > now => {
                self.leases.remove(&id);
                self.leases.retain(|_, (_, e)| *e > now);
                self.last = now;
                if self.leases.is_empty() {
                    // The key is deleted with its last lease: a new one starts its own clock.
                    self.last = 0;
                }
                units
            }
            _ => 0,
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        id: u8,
        cost: u64,
        peek: bool,
        /// Use the other parameters.
        other: bool,
    },
    Release {
        id: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..8, 0u64..5, prop::bool::weighted(0.1), prop::bool::weighted(0.2))
            .prop_map(|(id, cost, peek, other)| Op::Acquire { id, cost, peek, other }),
        1 => (0u8..8).prop_map(|id| Op::Release { id }),
    ]
}

proptest! {
    /// Every acquire and release against the model of id → (units, expiry): the same reply,
    /// never more than `limit` held after a grant, exact retry (the first time a retry at
    /// `retry_after_ms` is granted), renew, release and expiry in any order, the clock stepping
    /// back now and then, and the state surviving the codec at every step.
    #[test]
    fn concurrency_matches_the_model(
        limits in (1u64..6, 1u64..6),
        leases in (1u64..3_000, 1u64..3_000),
        ops in prop::collection::vec((op(), -500i64..1_500), 1..60),
    ) {
        let mut key = Key::default();
        let mut model = Model::default();
        let mut t = T0;
        for (op, dt_ms) in ops {
            // A step back of up to 0.5 s: the key's clock does not follow it.
            t = t.checked_add_signed(dt_ms * 997).unwrap();
            match op {
                Op::Acquire { id, cost, peek, other } => {
                    let (limit, lease) = if other { (limits.1, leases.1) } else { (limits.0, leases.0) };
                    let lease = lease * 1000 + 7;
                    let p = params(limit, lease, id);
                    let req = Request { peek, ..Request::new(cost, t) };
                    let want = model.acquire(limit, lease, id, cost, peek, t);
                    let got = key.acquire(&p, &req);
                    match want {
                        None => prop_assert_eq!(
                            got,
                            Err(CoreError::Refused("COST differs from the units the lease holds"))
                        ),
                        Some((granted, remaining, retry, reset)) => {
                            let d = got.unwrap();
                            prop_assert_eq!(
                                (d.granted as u64, d.limit as u64, d.remaining as u64, d.retry_after_ms, d.reset_after_ms),
                                (granted, limit, remaining, retry, i64::try_from(reset.div_ceil(1000)).unwrap())
                            );
                            if retry > 0 {
                                // Exact: granted at the retry time (rounded up to the ms), and
                                // not a µs before the exact time.
                                let now = t.max(model.last);
                                let at = now + retry as u64 * 1000;
                                let peek = Request { peek: true, ..Request::new(cost, at) };
                                prop_assert_eq!(key.acquire(&p, &peek).unwrap().granted as u64, cost);
                                let exact = model.fits_from(limit, id, cost, now);
                                let before = Request { peek: true, ..Request::new(cost, exact - 1) };
                                prop_assert_eq!(key.acquire(&p, &before).unwrap().granted, 0);
                            }
                        }
                    }
                }
                Op::Release { id } => {
                    prop_assert_eq!(key.release(id, t), model.release(id, t));
                }
            }
            if let Some(s) = &key.0 {
                prop_assert_eq!(s.last_update, model.last);
                prop_assert_eq!(&codec::decode(&codec::encode(s)), &Some(s.clone()));
                let conc = Concurrency::from_state(s.algo.as_ref().unwrap()).unwrap();
                // Every stored lease is one of the model's, with its units and expiry.
                for l in conc.leases().iter() {
                    let (id, v) = model.leases.iter().find(|(id, _)| DedupId::of(&[**id]) == l.id).unwrap();
                    prop_assert_eq!((u64::from(l.units), l.expiry), *v, "lease {}", id);
                }
                prop_assert_eq!(conc.held(model.last), model.held(model.last));
                // RL.INFO's `leases` and `held`, now and at a later time the key has not seen.
                for at in [model.last, model.last + 1_000_000] {
                    prop_assert_eq!(conc.live_leases(at), model.live(at).count() as u64);
                    prop_assert_eq!(conc.held(at), model.held(at));
                }
            } else {
                prop_assert_eq!(model.held(model.last), 0);
            }
        }
    }
}

#[test]
fn concurrency_table() {
    let p = |id| params(3, 10_000_000, id);
    let mut k = Key::default();
    let mut call = |id: u8, cost: u64, at_ms: u64| {
        k.acquire(&p(id), &Request::new(cost, T0 + at_ms * 1000))
            .map(|d| {
                [
                    d.granted,
                    d.limit,
                    d.remaining,
                    d.retry_after_ms,
                    d.reset_after_ms,
                ]
            })
    };
    #[rustfmt::skip]
    let rows: &[(u8, u64, u64, [i64; 5])] = &[
        // id cost at ms    granted limit remaining retry   reset
        (1, 2, 0,           [2, 3, 1, 0,      10_000]),
        (2, 1, 1_000,       [1, 3, 0, 0,      10_000]),
        // Full: the next unit comes back when lease 2 ends (at 11 s), 2 units when lease 1 does.
        (3, 1, 2_000,       [0, 3, 0, 8_000,  9_000]),
        (3, 2, 2_000,       [0, 3, 0, 8_000,  9_000]),
        (3, 3, 2_000,       [0, 3, 0, 9_000,  9_000]),
        (3, 4, 2_000,       [0, 3, 0, -1,     9_000]),
        // Renewing lease 1 moves its end to 15 s: now 3 units wait for 11 s then 15 s.
        (1, 2, 5_000,       [2, 3, 0, 0,      10_000]),
        (3, 3, 5_000,       [0, 3, 0, 10_000, 10_000]),
        (3, 1, 5_000,       [0, 3, 0, 6_000,  10_000]),
        // Lease 2 expired at 11 s: its unit is free.
        (3, 1, 11_000,      [1, 3, 0, 0,      10_000]),
        (4, 0, 11_000,      [0, 3, 0, 0,      10_000]),
    ];
    for (i, (id, cost, at, want)) in rows.iter().enumerate() {
        assert_eq!(call(*id, *cost, *at), Ok(*want), "row {i}");
    }
    assert_eq!(
        call(1, 1, 12_000),
        Err(CoreError::Refused(
            "COST differs from the units the lease holds"
        ))
    );
    // Lease 1 (2 units) is released: 2 free.
    assert_eq!(k.release(1, T0 + 12_000_000), 2);
    assert_eq!(k.release(1, T0 + 12_000_000), 0);
    assert_eq!(k.release(9, T0 + 12_000_000), 0);
    let conc = Concurrency::from_state(k.0.as_ref().unwrap().algo.as_ref().unwrap()).unwrap();
    assert_eq!(conc.held(T0 + 12_000_000), 1);
    // The last lease released: the key is gone.
    assert_eq!(k.release(3, T0 + 13_000_000), 1);
    assert!(k.0.is_none());
}

#[test]
fn concurrency_codec_fixture_is_stable() {
    // Limit 5, lease 2 s, two leases granted at T0 (id [1], 2 units) and T0 + 1 ms (id [2],
    // 1 unit).
    let mut k = Key::default();
    k.acquire(&params(5, 2_000_000, 1), &Request::new(2, T0))
        .unwrap();
    k.acquire(&params(5, 2_000_000, 2), &Request::new(1, T0 + 1_000))
        .unwrap();
    let s = k.0.unwrap();
    let bytes = codec::encode(&s);
    // LEB128 varints computed apart from the module (a 6-line Python encoder), the FNV-1a 128 hashes of [1] and [2] little-endian.
    let h1 = DedupId::of(&[1]).0.to_le_bytes();
    let h2 = DedupId::of(&[2]).0.to_le_bytes();
    let want: Vec<u8> = [
        &[1u8, 7][..],
        // last update T0 + 1000
        &[232, 135, 249, 192, 193, 196, 130, 3],
        // limit 5, lease 2_000_000, 2 leases
        &[5, 128, 137, 122, 2],
        &h1,
        // 2 units, expiry T0 + 2 s (absolute)
        &[2, 128, 137, 243, 193, 193, 196, 130, 3],
        &h2,
        // 1 unit, expiry 1 ms after the previous
        &[1, 232, 7],
        // no dedup ids
        &[0],
    ]
    .concat();
    assert_eq!(bytes, want);
    assert_eq!(codec::decode(&want), Some(s));
    // Two leases of one id, a zero-unit lease, more units than 65536: refused.
    let mut dup = want.clone();
    dup.splice(15..31, h2);
    assert_eq!(codec::decode(&dup), None);
    let mut zero = want.clone();
    zero[31] = 0;
    assert_eq!(codec::decode(&zero), None);
    let mut huge = want;
    huge.truncate(14);
    huge.push(0xff); // a count far above what is left
    huge.extend_from_slice(&[0xff, 0x7f]);
    assert_eq!(codec::decode(&huge), None);
}

#[test]
fn concurrency_holds_65536_leases_in_logarithmic_depth() {
    let limit = MAX_LEASES;
    let mut c = Concurrency::fresh(&params(limit, 1_000_000, 0));
    for i in 0..limit {
        let p = ConcurrencyParams::new(limit, 1_000_000, Some(DedupId(u128::from(i)))).unwrap();
        c.commit(&p, T0 + i, 1).unwrap();
    }
    let p = params(limit, 1_000_000, 0);
    let v = c.evaluate(&p, T0 + limit, 1, false).unwrap();
    assert_eq!((v.granted, v.remaining), (0, 0));
    // The first lease ends at T0 + 1 s.
    assert_eq!(v.retry, Retry::After(1_000_000 - limit));
    assert_eq!(
        c.heap_size(),
        std::mem::size_of::<Inner>() + c.leases().len() * 56
    );
    assert_eq!(
        codec::decode(&codec::encode(&LimiterState::new(
            c.clone().into_state(),
            T0
        )))
        .map(|s| s.algo),
        Some(Some(c.into_state()))
    );
}

/// Reproducer for D5: `RL.ACQUIRE lk 10 1h ID w1 COST 5`, then `RL.ACQUIRE lk 3 1h ID w1 COST 5`
/// renewed the lease (`5 3 0 0 3600000`), so a holder above a lowered limit renewed forever. A
/// renewal is granted only if the units held, its own included, fit the limit given; a denied
/// one keeps the lease's end.
#[test]
fn renewal_above_a_lowered_limit_is_denied_and_keeps_its_end() {
    const HOUR: Micros = 3_600_000_000;
    let p = |limit, id| params(limit, HOUR, id);
    let mut k = Key::default();
    let mut call = |limit: u64, id: u8, at_ms: u64| {
        let d = k
            .acquire(&p(limit, id), &Request::new(5, T0 + at_ms * 1000))
            .unwrap();
        [
            d.granted,
            d.limit,
            d.remaining,
            d.retry_after_ms,
            d.reset_after_ms,
        ]
    };
    #[rustfmt::skip]
    let rows: &[(u64, u8, u64, [i64; 5])] = &[
        // limit id at ms  granted limit remaining retry      reset
        (10, 1, 0,         [5, 10, 5, 0,         3_600_000]),
        (10, 2, 1_000,     [5, 10, 0, 0,         3_600_000]),
        // Limit 6: 10 held. Lease 1 fits again (renewed, or anew after its end at 1 h) once
        // the others hold at most 1: when lease 2 ends, at 1 h + 1 s.
        (6,  1, 2_000,     [0, 6, 0, 3_599_000,  3_599_000]),
        // Limit 3: 5 units never fit.
        (3,  1, 2_000,     [0, 3, 0, -1,         3_599_000]),
        // Limit 10 again: renewed to 1 h + 3 s.
        (10, 1, 3_000,     [5, 10, 0, 0,         3_600_000]),
    ];
    for (i, (limit, id, at, want)) in rows.iter().enumerate() {
        assert_eq!(call(*limit, *id, *at), *want, "row {i}");
    }
    // The denied renewals wrote nothing: lease 1 ended at 1 h + 3 s (the last renewal), not
    // later.
    let conc = Concurrency::from_state(k.0.as_ref().unwrap().algo.as_ref().unwrap()).unwrap();
    let ends: Vec<(u32, Micros)> = conc.leases().iter().map(|l| (l.units, l.expiry)).collect();
    assert_eq!(
        ends,
        [(5, T0 + HOUR + 1_000_000), (5, T0 + HOUR + 3_000_000)]
    );
    assert_eq!(k.0.as_ref().unwrap().last_update, T0 + 3_000_000);
}

/// A denied renewal waits for the other leases only: its own lease ending first frees nothing
/// for it (it must take its units again).
#[test]
fn denied_renewal_waits_for_the_other_leases_not_its_own() {
    let mut k = Key::default();
    let at = |ms: u64| T0 + ms * 1000;
    // Lease 1: 2 units until 10 s; lease 2: 2 units until 20 s; lease 3: 1 unit until 30 s.
    for (id, cost, lease_ms, t) in [
        (1u8, 2u64, 10_000u64, 0u64),
        (2, 2, 19_000, 1_000),
        (3, 1, 28_000, 2_000),
    ] {
        let d = k
            .acquire(&params(5, lease_ms * 1000, id), &Request::new(cost, at(t)))
            .unwrap();
        assert_eq!(d.granted as u64, cost);
    }
    // Limit 3 at 3 s: 5 held; lease 1 fits once the others hold at most 1: lease 2 ends at
    // 20 s (lease 1's own end at 10 s frees nothing for it).
    let d = k
        .acquire(&params(3, 10_000_000, 1), &Request::new(2, at(3_000)))
        .unwrap();
    assert_eq!(
        [
            d.granted,
            d.limit,
            d.remaining,
            d.retry_after_ms,
            d.reset_after_ms
        ],
        [0, 3, 0, 17_000, 27_000]
    );
    // Exact: at 20 s lease 1 (ended) is taken anew; a µs before, not.
    let peek = |t| Request {
        peek: true,
        ..Request::new(2, t)
    };
    assert_eq!(
        k.acquire(&params(3, 10_000_000, 1), &peek(at(20_000) - 1))
            .unwrap()
            .granted,
        0
    );
    assert_eq!(
        k.acquire(&params(3, 10_000_000, 1), &peek(at(20_000)))
            .unwrap()
            .granted,
        2
    );
}

/// `holds` sees a live lease of the id only: none before, none after its end or its release,
/// none on another id.
#[test]
fn holds_sees_only_a_live_lease_of_the_id() {
    const SEC: Micros = 1_000_000;
    let mut k = Key::default();
    let id = |b: u8| DedupId::of(&[b]);
    assert!(k.0.is_none());
    k.acquire(&params(3, SEC, 1), &Request::new(1, T0)).unwrap();
    let state = k.0.as_ref().unwrap();
    assert!(holds(state, id(1), T0));
    assert!(holds(state, id(1), T0 + SEC - 1));
    assert!(!holds(state, id(1), T0 + SEC));
    assert!(!holds(state, id(2), T0));
    k.acquire(&params(3, SEC, 2), &Request::new(1, T0)).unwrap();
    k.release(1, T0 + 1);
    assert!(holds(k.0.as_ref().unwrap(), id(2), T0 + 1));
    assert!(!holds(k.0.as_ref().unwrap(), id(1), T0 + 1));
}
