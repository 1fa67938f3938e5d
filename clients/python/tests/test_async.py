"""AsyncRateLimiter on redis.asyncio, RESP2 and RESP3: the same replies as the sync client."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from redis_ratelimit_client import (
    GCRA,
    AsyncRateLimiter,
    RateLimitExceeded,
    Result,
    install_response_callbacks,
)
from redis_ratelimit_client.testing import RedisModuleServer


def five(r: Result) -> tuple[int, int, int, int, int]:
    return (r.granted, r.limit, r.remaining, r.retry_after_ms, r.reset_after_ms)


@pytest.mark.parametrize("protocol", [2, 3])
def test_async_commands(server: RedisModuleServer, now: int, protocol: int) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port, protocol=protocol)
        await client.flushdb()
        rl = AsyncRateLimiter(client)
        assert five(await rl.gcra("g", 10, 5, "1s", at=now)) == (1, 10, 9, 0, 200)
        assert (await rl.gcra("g", 10, 5, "1s", cost=11, at=now)).never
        assert five(await rl.token_bucket("t", 100, 10, "1s", cost=30, at=now)) == (
            30,
            100,
            70,
            0,
            3000,
        )
        assert (await rl.leaky_bucket("l", 10, 2, "1s", at=now)).allowed
        assert (await rl.fixed("f", 5, "1m", at=now)).remaining == 4
        assert (await rl.sliding("s", 5, "1m", at=now)).remaining == 4
        assert (await rl.sliding_counter("c", 5, "1m", at=now)).remaining == 4
        limits = {"{u}:a": GCRA(10, 10, "1s"), "{u}:b": GCRA(1000, 1000, "1h")}
        assert five(await rl.all(limits, at=now)) == (1, 10, 9, 0, 3600)
        assert (await rl.check("{u}:a", GCRA(10, 10, "1s"), at=now)).remaining == 8
        r = await rl.refund("t", 10, at=now)
        assert r is not None and r.granted == 10 and r.remaining == 80
        assert (await rl.block("b", "1s")).total_seconds() == 1
        assert await rl.unblock("b")
        async with rl.lease("lc", 1, "10s") as lease:
            assert lease.result.remaining == 0
            assert (await lease.renew()).allowed
            with pytest.raises(RateLimitExceeded):
                async with rl.lease("lc", 1, "10s"):
                    pass
        assert (await rl.acquire("lc", 1, "10s", "z")).allowed
        # Full: a WAIT ends denied when its time is up.
        waited = await rl.acquire("lc", 1, "10s", "q", wait="100ms")
        assert waited.granted == 0 and 0 < waited.retry_after_ms <= 10000
        assert await rl.release("lc", "z") == 1
        assert (await rl.stream_count("x", "1m", add=2)).total == 2
        assert (await rl.throttle("cl", 15, 30, 60)).remaining == 15
        info = await rl.info("g")
        assert info is not None and info.algorithm == "gcra"
        raw = await client.execute_command("RL.GCRA", "g", 10, 5, "1s", "AT", now)
        assert not isinstance(raw, Result)  # the client's replies are left alone
        install_response_callbacks(client)
        raw = await client.execute_command("RL.GCRA", "g", 10, 5, "1s", "AT", now)
        assert isinstance(raw, Result) and raw.remaining == 7
        await client.aclose()

    asyncio.run(main())
