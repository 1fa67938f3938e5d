"""``shadow=True`` (SHADOW) against the real module, RESP2 and RESP3: a call enforcement would deny
is granted, with ``reason`` shadow and the would-be denier, and it leaves the state enforcement
leaves. Expectations are worked out from each call's parameters and AT times."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from redis_ratelimit_client import (
    GCRA,
    AsyncRateLimiter,
    Fixed,
    LimiterDetail,
    RateLimiter,
    Result,
    rate_limit_headers,
)
from redis_ratelimit_client.testing import RedisModuleServer


def five(r: Result) -> tuple[int, int, int, int, int]:
    return (r.granted, r.limit, r.remaining, r.retry_after_ms, r.reset_after_ms)


def test_shadow_gcra_grants_what_enforcement_denies(rl: RateLimiter, now: int) -> None:
    # GCRA burst 2, 1 per second: one unit is 1 s, a full limiter is fresh after 2 s. The same
    # calls on "e" (enforced) and "s" (shadow) leave the same state after each.
    for i in (1, 2):
        expected = (1, 2, 2 - i, 0, 1000 * i)
        assert five(rl.gcra("e", 2, 1, "1s", at=now)) == expected
        s = rl.gcra("s", 2, 1, "1s", at=now, shadow=True)
        assert five(s) == expected and s.allowed and not s.detailed
    # Enforced, a third call is denied for 1 s; shadowed it is granted without a wait.
    assert five(rl.gcra("e", 2, 1, "1s", at=now)) == (0, 2, 0, 1000, 2000)
    s = rl.gcra("s", 2, 1, "1s", at=now, shadow=True)
    assert five(s) == (1, 2, 0, 0, 2000) and s.allowed and s.retry_after_header is None
    d = rl.gcra("s", 2, 1, "1s", at=now, shadow=True, detail=True)
    assert five(d) == (1, 2, 0, 0, 2000) and d.allowed
    assert (d.reason, d.denied_by) == ("shadow", "s")
    # The limiter's entry is what enforcement would have replied.
    assert d.limiters == (LimiterDetail("s", "s", 1, 0, 2, 0, 1000, 2000, 2000, None),)
    # Nothing was charged by the calls let through: PEEK and an enforced call see what they
    # see on "e", one unit back at now + 1 s.
    for key in ("e", "s"):
        assert five(rl.gcra(key, 2, 1, "1s", peek=True, at=now)) == (0, 2, 0, 1000, 2000)
        assert five(rl.gcra(key, 2, 1, "1s", at=now + 999)) == (0, 2, 0, 1, 1001)
        assert five(rl.gcra(key, 2, 1, "1s", peek=True, at=now + 1000)) == (1, 2, 0, 0, 2000)
    # A cost above the limit: let through too, the entry says never (-1).
    n = rl.gcra("s", 2, 1, "1s", cost=3, at=now, shadow=True, detail=True)
    assert five(n) == (3, 2, 0, 0, 2000) and n.allowed and not n.never
    assert (n.reason, n.denied_by) == ("shadow", "s")
    assert n.limiters == (LimiterDetail("s", "s", 3, 0, 2, 0, -1, 2000, 2000, None),)
    # The RateLimit headers say what the reply says: granted, no Retry-After.
    # t: the next unit is back in 1 s, as an enforced check of one unit says.
    check = rl.check("s", GCRA(2, 1, "1s"), at=now, detail=True)
    assert rate_limit_headers(d, GCRA(2, 1, "1s"), next_unit=check) == {
        "RateLimit-Policy": '"s";q=2;w=2',
        "RateLimit": '"s";r=0;t=1',
    }
    # Without the check, t is left out.
    assert rate_limit_headers(s, GCRA(2, 1, "1s")) == {
        "RateLimit-Policy": '"default";q=2;w=2',
        "RateLimit": '"default";r=0',
    }


def test_shadow_fixed_sliding_and_buckets(rl: RateLimiter, now: int) -> None:
    # now is on a whole second: the 1 min window ends at the next multiple of 60 s.
    reset = 60_000 - now % 60_000
    assert five(rl.fixed("f", 1, "1m", at=now, shadow=True)) == (1, 1, 0, 0, reset)
    f = rl.fixed("f", 1, "1m", at=now, shadow=True, detail=True)
    assert five(f) == (1, 1, 0, 0, reset) and (f.reason, f.denied_by) == ("shadow", "f")
    assert f.limiters == (LimiterDetail("f", "f", 1, 0, 1, 0, reset, reset, 60_000, None),)
    assert five(rl.fixed("f", 1, "1m", at=now)) == (0, 1, 0, reset, reset)
    # Sliding log, 1 per 10 s: the second call, 4 s later, would wait the 6 s left.
    assert five(rl.sliding("s", 1, "10s", at=now, shadow=True)) == (1, 1, 0, 0, 10_000)
    r = rl.sliding("s", 1, "10s", at=now + 4000, shadow=True, detail=True)
    assert five(r) == (1, 1, 0, 0, 6000) and (r.reason, r.denied_by) == ("shadow", "s")
    assert five(rl.sliding("s", 1, "10s", at=now + 4000)) == (0, 1, 0, 6000, 6000)
    # Sliding counter, 1 per 10 s: a second call in the same window is over the limit.
    assert rl.sliding_counter("c", 1, "10s", at=now, shadow=True).remaining == 0
    r = rl.sliding_counter("c", 1, "10s", at=now, shadow=True, detail=True)
    assert r.allowed and (r.reason, r.denied_by) == ("shadow", "c")
    assert not rl.sliding_counter("c", 1, "10s", at=now).allowed
    # Token bucket 2, 1 per second; leaky bucket 2, 1 per second (a granted call waits its
    # place in the queue: 0 for the first, 1 s for the second).
    for _ in range(2):
        rl.token_bucket("t", 2, 1, "1s", at=now, shadow=True)
    t = rl.token_bucket("t", 2, 1, "1s", at=now, shadow=True, detail=True)
    assert five(t) == (1, 2, 0, 0, 2000) and (t.reason, t.denied_by) == ("shadow", "t")
    assert five(rl.token_bucket("t", 2, 1, "1s", at=now)) == (0, 2, 0, 1000, 2000)
    assert rl.leaky_bucket("l", 2, 1, "1s", at=now, shadow=True).retry_after_ms == 0
    assert rl.leaky_bucket("l", 2, 1, "1s", at=now, shadow=True).retry_after_ms == 1000
    lb = rl.leaky_bucket("l", 2, 1, "1s", at=now, shadow=True, detail=True)
    assert lb.allowed and (lb.reason, lb.denied_by) == ("shadow", "l")
    assert not rl.leaky_bucket("l", 2, 1, "1s", at=now).allowed
    # apply() takes it as the methods do.
    a = rl.apply("f", Fixed(1, "1m"), at=now, shadow=True, detail=True)
    assert a.allowed and a.reason == "shadow"


def test_shadow_all_check_checkall_acquire(rl: RateLimiter, now: int) -> None:
    # {u}:rpm GCRA 60 per minute (one unit a second), {u}:tpm FIXED 100 per minute, 90 used.
    reset = 60_000 - now % 60_000
    rl.fixed("{u}:tpm", 100, "1m", cost=90, at=now)
    limits = {
        "{u}:rpm": GCRA(60, 1, "1s", name="rpm"),
        "{u}:tpm": Fixed(100, "1m", name="tpm", charge=20),
    }
    # Enforced, tpm denies (90 + 20 > 100) until the minute ends and nothing is charged.
    denied = rl.all(limits, at=now, detail=True)
    assert not denied.allowed and (denied.reason, denied.denied_by) == ("limit", "tpm")
    # Shadowed it is granted with no wait; limit and remaining those of tpm (10 left / 20 per
    # call = 0 more calls), the longest reset (tpm's); each entry what enforcement replied.
    r = rl.all(limits, at=now, shadow=True, detail=True)
    assert five(r) == (1, 100, 10, 0, reset) and r.allowed
    assert (r.reason, r.denied_by) == ("shadow", "tpm")
    assert r.limiters == (
        LimiterDetail("rpm", "{u}:rpm", 1, 0, 60, 60, 0, 0, 60_000, None),
        LimiterDetail("tpm", "{u}:tpm", 20, 0, 100, 10, reset, reset, 60_000, None),
    )
    assert five(rl.all(limits, at=now, shadow=True)) == (1, 100, 10, 0, reset)
    # All or nothing as enforced: rpm was never charged, tpm still has 10.
    assert rl.client.exists("{u}:rpm") == 0
    assert rl.fixed("{u}:tpm", 100, "1m", peek=True, cost=10, at=now).remaining == 0
    # RL.CHECK / RL.CHECKALL: the reply the shadow call would give, charging nothing.
    c = rl.check("{u}:tpm", Fixed(100, "1m"), cost=20, at=now, shadow=True, detail=True)
    assert five(c) == (20, 100, 10, 0, reset) and (c.reason, c.denied_by) == ("shadow", "{u}:tpm")
    assert not rl.check("{u}:tpm", Fixed(100, "1m"), cost=20, at=now).allowed
    ca = rl.check_all(limits, at=now, shadow=True, detail=True)
    assert five(ca) == (1, 100, 10, 0, reset) and (ca.reason, ca.denied_by) == ("shadow", "tpm")
    assert not rl.check_all(limits, at=now).allowed
    # RL.ACQUIRE: a lease that does not fit is let through and recorded nowhere.
    assert five(rl.acquire("c", 1, "10s", "a", at=now)) == (1, 1, 0, 0, 10_000)
    s = rl.acquire("c", 1, "10s", "b", at=now, shadow=True, detail=True)
    assert five(s) == (1, 1, 0, 0, 10_000) and (s.reason, s.denied_by) == ("shadow", "c")
    assert rl.release("c", "b", at=now) == 0 and rl.release("c", "a", at=now) == 1


@pytest.mark.parametrize("protocol", [2, 3])
def test_async_shadow(server: RedisModuleServer, now: int, protocol: int) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port, protocol=protocol)
        await client.flushdb()
        rl = AsyncRateLimiter(client)
        assert five(await rl.gcra("g", 1, 1, "1s", at=now)) == (1, 1, 0, 0, 1000)
        r = await rl.gcra("g", 1, 1, "1s", at=now, shadow=True, detail=True)
        assert five(r) == (1, 1, 0, 0, 1000) and (r.reason, r.denied_by) == ("shadow", "g")
        assert (await rl.apply("g", GCRA(1, 1, "1s"), at=now, shadow=True)).allowed
        assert five(await rl.gcra("g", 1, 1, "1s", at=now)) == (0, 1, 0, 1000, 1000)
        assert (await rl.all({"{a}x": GCRA(1, 1, "1s")}, at=now, shadow=True)).allowed
        assert not (await rl.all({"{a}x": GCRA(1, 1, "1s")}, at=now)).allowed
        assert (await rl.check("g", GCRA(1, 1, "1s"), at=now, shadow=True)).allowed
        assert (await rl.check_all({"{a}x": GCRA(1, 1, "1s")}, at=now, shadow=True)).allowed
        assert (await rl.fixed("f", 1, "1m", at=now)).allowed
        assert (await rl.fixed("f", 1, "1m", at=now, shadow=True)).allowed
        assert (await rl.acquire("c", 1, "1m", "a", at=now)).allowed
        assert (await rl.acquire("c", 1, "1m", "b", at=now, shadow=True)).allowed
        await client.aclose()

    asyncio.run(main())
