"""Named policies against the real module, RESP2 and RESP3: ``policy_set`` / ``policy_get`` /
``policy_del`` / ``policy_list`` / ``policy_dump`` / ``policy_restore``, ``limit`` and
``policy=`` in ``all`` and ``check_all``. Expectations are worked out from each policy's
limiters and the AT times the tests chose."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio as aioredis

from redis_ratelimit_client import (
    GCRA,
    AsyncRateLimiter,
    Fixed,
    LimiterDetail,
    PolicyDefinition,
    RateLimiter,
    Result,
)
from redis_ratelimit_client.testing import RedisModuleServer


def five(r: Result) -> tuple[int, int, int, int, int]:
    return (r.granted, r.limit, r.remaining, r.retry_after_ms, r.reset_after_ms)


def clear(rl: RateLimiter) -> None:
    """Policies are server state outside the keyspace (FLUSHDB keeps them): start from none."""
    for name in rl.policy_list():
        assert rl.policy_del(name)
    assert rl.policy_list() == {}


def test_set_get_list_del(rl: RateLimiter) -> None:
    clear(rl)
    v1 = rl.policy_set("free", GCRA(10, 5, "1s"))
    limiters = [GCRA(100, 50, "1s", name="rps"), Fixed(10_000, "day", tz="UTC")]
    v2 = rl.policy_set("pro", limiters, shadow=True, desc="paid tier")
    assert isinstance(v1, int) and v2 > v1
    # GET: the arguments of the SET, after the name, as sent.
    assert rl.policy_get("free") == PolicyDefinition("free", ("GCRA", "10", "5", "1s"))
    pro = (
        *("GCRA", "100", "50", "1s", "NAME", "rps"),
        *("FIXED", "10000", "day", "TZ", "UTC"),
        *("SHADOW", "DESC", "paid tier"),
    )
    assert rl.policy_get("pro") == PolicyDefinition("pro", pro, True, "paid tier")
    assert rl.policy_get("nope") is None
    assert rl.policy_list() == {"free": v1, "pro": v2}
    # Replacing a policy gives it a newer version.
    v3 = rl.policy_set("free", GCRA(20, 5, "1s"))
    assert v3 > v2 and rl.policy_list() == {"free": v3, "pro": v2}
    # SHADOW and DESC are read limiter by limiter: a limiter named SHADOW is not the flag, a
    # DESC text SHADOW not either.
    rl.policy_set("odd", GCRA(1, 1, "1s", name="SHADOW"), desc="SHADOW")
    odd = rl.policy_get("odd")
    assert odd is not None and (odd.shadow, odd.desc) == (False, "SHADOW")
    assert odd.args == ("GCRA", "1", "1", "1s", "NAME", "SHADOW", "DESC", "SHADOW")
    # DEL: true once; later calls under it fail naming it.
    assert rl.policy_del("free") and not rl.policy_del("free")
    assert set(rl.policy_list()) == {"pro", "odd"}
    with pytest.raises(redis.ResponseError, match="unknown policy 'free'"):
        rl.limit("k", "free")
    with pytest.raises(redis.ResponseError, match="policy name"):
        rl.policy_set("Bad-Name", GCRA(1, 1, "1s"))
    with pytest.raises(ValueError):
        rl.policy_set("empty", [])
    clear(rl)


def test_limit_replies_as_the_limiters_own_command(rl: RateLimiter, now: int) -> None:
    clear(rl)
    rl.policy_set("p", GCRA(5, 1, "1s"))
    # Burst 5, 1 per second: five granted at one instant, then denied for a second.
    for i in range(5):
        want = (1, 5, 4 - i, 0, (i + 1) * 1000)
        assert five(rl.limit("a", "p", at=now)) == want
        assert five(rl.gcra("b", 5, 1, "1s", at=now)) == want
    denied = rl.limit("a", "p", at=now, detail=True)
    assert five(denied) == (0, 5, 0, 1000, 5000) and not denied.allowed
    assert (denied.reason, denied.denied_by) == ("limit", "a")
    assert denied.limiters == (LimiterDetail("a", "a", 1, 0, 5, 0, 1000, 5000, 5000, "p"),)
    # The options as the command's: 2 s later 2 units are back, BESTEFFORT grants them.
    r = rl.limit("a", "p", cost=3, best_effort=True, at=now + 2000)
    assert five(r) == (2, 5, 0, 3000, 5000) and not r.allowed
    # SHADOW on the call: let through, charging nothing.
    s = rl.limit("a", "p", at=now + 2000, shadow=True, detail=True)
    assert five(s) == (1, 5, 0, 0, 5000) and (s.reason, s.denied_by) == ("shadow", "a")
    assert five(rl.limit("a", "p", peek=True, at=now + 3000)) == (1, 5, 0, 0, 5000)
    # A policy of several limiters needs RL.ALL.
    rl.policy_set("two", [GCRA(5, 1, "1s"), Fixed(2, "1m")])
    with pytest.raises(redis.ResponseError, match="policy 'two' has 2 limiter"):
        rl.limit("k", "two", at=now)
    clear(rl)


def test_all_and_check_all_under_a_policy(rl: RateLimiter, now: int) -> None:
    clear(rl)
    reset = 60_000 - now % 60_000  # now is on a whole second
    limiters = [GCRA(5, 1, "1s"), Fixed(2, "1m", name="minute")]
    rl.policy_set("two", limiters)
    keys = ["{u}g", "{u}f"]
    chk = rl.check_all(keys, policy="two", at=now)
    assert five(chk) == (1, 2, 1, 0, reset)
    # GCRA 5 per 5 s (one unit a second); FIXED 2 a minute allows the fewest more calls.
    r = rl.all(keys, policy="two", at=now, detail=True)
    assert five(r) == (1, 2, 1, 0, reset) and r.reason == "granted"
    assert r.limiters == (
        LimiterDetail("{u}g", "{u}g", 1, 1, 5, 4, 0, 1000, 5000, "two"),
        LimiterDetail("minute", "{u}f", 1, 1, 2, 1, 0, reset, 60_000, "two"),
    )
    # reset_after_ms is the larger of the two: GCRA's 2 s in a minute's last second.
    assert five(rl.all(keys, policy="two", at=now)) == (1, 2, 0, 0, max(reset, 2000))
    denied = rl.all(keys, policy="two", at=now, detail=True)
    assert not denied.allowed and (denied.reason, denied.denied_by) == ("limit", "minute")
    assert not rl.check_all(keys, policy="two", at=now).allowed
    # All or nothing: GCRA was charged twice, not three times.
    assert rl.gcra("{u}g", 5, 1, "1s", cost=0, peek=True, at=now).remaining == 3
    # The policy in SHADOW: the same state, calls let through and charged as enforced.
    rl.policy_set("two", limiters, shadow=True)
    s = rl.all(keys, policy="two", at=now, detail=True)
    assert five(s) == (1, 2, 0, 0, max(reset, 2000))
    assert (s.reason, s.denied_by) == ("shadow", "minute")
    assert rl.check_all(keys, policy="two", at=now).allowed
    assert rl.gcra("{u}g", 5, 1, "1s", cost=0, peek=True, at=now).remaining == 3
    # Keys with policy=, limiters without it.
    with pytest.raises(TypeError):
        rl.all({"{u}g": GCRA(5, 1, "1s")}, policy="two")
    with pytest.raises(TypeError):
        rl.all(keys)
    with pytest.raises(redis.ResponseError, match="needs one key per limiter, got 1"):
        rl.all(["{u}g"], policy="two", at=now)
    clear(rl)


def test_dump_and_restore_copy_the_policies(rl: RateLimiter) -> None:
    clear(rl)
    v1 = rl.policy_set("free", GCRA(10, 5, "1s"), desc="free tier")
    v2 = rl.policy_set("pro", [GCRA(100, 50, "1s"), Fixed(1000, "day")])
    payload = rl.policy_dump()
    assert isinstance(payload, bytes) and payload
    with RedisModuleServer() as other:
        # decode_responses on the other side too: the payload stays bytes.
        o = RateLimiter(redis.Redis(host=other.host, port=other.port, decode_responses=True))
        assert o.policy_set("mine", GCRA(1, 1, "1s")) == 1
        # MERGE adds the payload's policies, each with the next version of this server.
        o.policy_restore(payload, merge=True)
        assert o.policy_list() == {"mine": 1, "free": 2, "pro": 3}
        assert o.policy_get("free") == rl.policy_get("free")
        # A full RESTORE replaces every policy, versions included.
        o.policy_restore(payload)
        assert o.policy_list() == {"free": v1, "pro": v2}
        assert [o.policy_get(n) for n in ("free", "pro")] == [
            rl.policy_get(n) for n in ("free", "pro")
        ]
        with pytest.raises(redis.ResponseError):
            o.policy_restore(payload[:-1])
        assert o.policy_list() == {"free": v1, "pro": v2}
        o.client.close()
    clear(rl)


@pytest.mark.parametrize("protocol", [2, 3])
def test_async_policies(server: RedisModuleServer, now: int, protocol: int) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port, protocol=protocol)
        await client.flushdb()
        rl = AsyncRateLimiter(client)
        for name in await rl.policy_list():
            await rl.policy_del(name)
        v = await rl.policy_set("one", GCRA(2, 1, "1s"), shadow=True)
        assert await rl.policy_list() == {"one": v}
        got = await rl.policy_get("one")
        assert got == PolicyDefinition("one", ("GCRA", "2", "1", "1s", "SHADOW"), True)
        assert five(await rl.limit("k", "one", at=now)) == (1, 2, 1, 0, 1000)
        assert five(await rl.limit("k", "one", at=now)) == (1, 2, 0, 0, 2000)
        # SHADOW policy: the third is let through, charging nothing.
        r = await rl.limit("k", "one", at=now, detail=True)
        assert five(r) == (1, 2, 0, 0, 2000) and r.reason == "shadow"
        assert r.limiters[0].policy == "one"
        r = await rl.all(["{a}x"], policy="one", at=now)
        assert five(r) == (1, 2, 1, 0, 1000)
        assert (await rl.check_all(["{a}x"], policy="one", at=now)).remaining == 0
        payload = await rl.policy_dump()
        assert await rl.policy_del("one") and await rl.policy_list() == {}
        await rl.policy_restore(payload)
        assert await rl.policy_list() == {"one": v}
        assert await rl.policy_del("one")
        await client.aclose()

    asyncio.run(main())
