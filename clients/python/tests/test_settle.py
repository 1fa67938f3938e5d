"""Reservations (``hold=``, HOLD ttl with DEDUP) and ``settle()`` (RL.SETTLE) against the real
module, RESP2 and RESP3; expectations computed from each call's parameters and AT times."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from redis_ratelimit_client import GCRA, AsyncRateLimiter, RateLimiter, Result, TokenBucket
from redis_ratelimit_client.testing import RedisModuleServer

# A token bucket of 100 that refills 100 per hour: one token every 36 s, so calls at one AT see
# no refill and a debt of d tokens is repaid in d * 36 s.
CAP, TOKEN_MS = 100, 36_000


def five(r: Result | None) -> tuple[int, int, int, int, int]:
    assert r is not None
    return (r.granted, r.limit, r.remaining, r.retry_after_ms, r.reset_after_ms)


def test_settle_below_gives_back_and_above_charges_debt(rl: RateLimiter, now: int) -> None:
    r = rl.token_bucket("t", CAP, CAP, "1h", cost=40, dedup="r1", hold="30s", at=now)
    assert five(r) == (40, CAP, 60, 0, 40 * TOKEN_MS)
    # 25 used of the 40 held: 15 come back.
    settled = rl.settle(["t"], "r1", [25], at=now)
    assert [five(s) for s in settled] == [(25, CAP, 75, 0, 25 * TOKEN_MS)]
    # A retried settle changes nothing and replies the same.
    assert [five(s) for s in rl.settle(["t"], "r1", [25], at=now)] == [five(settled[0])]
    # 10 held, 90 used: the 80 above the reservation are charged unconditionally, 75 - 10 - 80
    # = -15 tokens; one unit can be granted once 16 tokens came back.
    assert rl.token_bucket("t", CAP, CAP, "1h", cost=10, dedup="r2", hold="30s", at=now)
    debt = rl.settle(["t"], "r2", [90], at=now)[0]
    assert five(debt) == (90, CAP, 0, 16 * TOKEN_MS, 115 * TOKEN_MS) and debt is not None
    assert not debt.allowed
    denied = rl.token_bucket("t", CAP, CAP, "1h", at=now)
    assert not denied.allowed and denied.retry_after_ms == 16 * TOKEN_MS
    assert rl.token_bucket("t", CAP, CAP, "1h", at=now + 16 * TOKEN_MS).allowed


def test_all_hold_then_settle_per_key(rl: RateLimiter, now: int) -> None:
    limits = {
        "{c}:rpm": GCRA(60, 60, "1m", name="rpm"),
        "{c}:tpm": TokenBucket(9000, 9000, "1m", name="tpm", charge=3000),
    }
    r = rl.all(limits, dedup="q1", hold="30s", at=now, detail=True)
    assert r.allowed and [d.remaining for d in r.limiters] == [59, 6000]
    # 1 request, 1200 tokens: the tokens bucket gets 1800 back (9000 per minute: 150 per s).
    s = rl.settle(["{c}:rpm", "{c}:tpm"], "q1", [1, 1200], at=now)
    assert [five(x) for x in s] == [(1, 60, 59, 0, 1000), (1200, 9000, 7800, 0, 8000)]
    # An id never held settles nothing; a missing key replies None.
    s = rl.settle(["{c}:tpm", "{c}:none"], "other", [500, 1], at=now)
    assert five(s[0]) == (0, 9000, 7800, 0, 8000) and s[1] is None


def test_an_unsettled_hold_is_given_back_at_its_ttl(rl: RateLimiter, now: int) -> None:
    # A fixed hour window, one second after an hour starts (ahead of the clock: the fixture lets
    # AT run ahead), so that the 10 s ttl ends inside the window.
    t0 = (now // 3_600_000 + 1) * 3_600_000 + 1000
    end = t0 - 1000 + 3_600_000
    r = rl.fixed("f", 100, "1h", cost=30, dedup="crash", hold="10s", at=t0)
    assert five(r) == (30, 100, 70, 0, end - t0)
    # Live until just before the ttl, given back at exactly the ttl.
    assert rl.fixed("f", 100, "1h", cost=0, peek=True, at=t0 + 9_999).remaining == 70
    assert rl.fixed("f", 100, "1h", cost=0, peek=True, at=t0 + 10_000).remaining == 100
    # Settling an expired reservation charges nothing.
    s = rl.settle(["f"], "crash", [30], at=t0 + 10_000)
    assert five(s[0]) == (0, 100, 100, 0, 0)


def test_settle_and_hold_arguments(rl: RateLimiter) -> None:
    with pytest.raises(ValueError, match="hold needs dedup"):
        rl.gcra("g", 1, 1, "1s", hold="1s")
    with pytest.raises(ValueError, match="one units per key"):
        rl.settle(["a", "b"], "id", [1])
    with pytest.raises(ValueError):
        rl.settle(["a"], "id", [-1])
    with pytest.raises(ValueError):
        rl.settle([], "id", [])
    with pytest.raises(TypeError):
        rl.settle("a", "id", [1])


@pytest.mark.parametrize("protocol", [2, 3])
def test_async_hold_and_settle(server: RedisModuleServer, now: int, protocol: int) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port, protocol=protocol)
        await client.flushdb()
        rl = AsyncRateLimiter(client)
        r = await rl.token_bucket("a", CAP, CAP, "1h", cost=40, dedup="x", hold="5s", at=now)
        assert five(r) == (40, CAP, 60, 0, 40 * TOKEN_MS)
        s = await rl.settle(["a"], "x", [0], at=now)
        assert [five(x) for x in s] == [(0, CAP, CAP, 0, 0)]
        t = await rl.all({"{b}:g": GCRA(5, 5, "5s")}, dedup="y", hold="5s", cost=2, at=now)
        assert t.allowed and t.remaining == 3
        s = await rl.settle(["{b}:g"], "y", [3], at=now)
        assert [five(x) for x in s] == [(3, 5, 2, 0, 3000)]
        await client.aclose()

    asyncio.run(main())
