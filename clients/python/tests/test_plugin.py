"""The pytest plugin the package installs (entry point pytest11): its fixtures start a server
with the module from RL_MODULE and hand out a flushed client."""

from __future__ import annotations

import asyncio

import redis
import redis.asyncio

from redis_ratelimit_client import AsyncRateLimiter, RateLimiter


def test_ratelimit_redis_fixture(ratelimit_redis: redis.Redis) -> None:
    assert ratelimit_redis.dbsize() == 0
    r = RateLimiter(ratelimit_redis).gcra("plugin", 3, 1, "1s")
    assert (r.granted, r.limit, r.remaining) == (1, 3, 2)
    ratelimit_redis.set("left", "behind")


def test_ratelimit_redis_is_flushed_between_tests(ratelimit_redis: redis.Redis) -> None:
    assert ratelimit_redis.exists("left", "plugin") == 0


def test_ratelimit_async_redis_fixture(ratelimit_async_redis: redis.asyncio.Redis) -> None:
    async def main() -> tuple[int, int]:
        size = await ratelimit_async_redis.dbsize()
        r = await AsyncRateLimiter(ratelimit_async_redis).gcra("plugin-async", 3, 1, "1s")
        await ratelimit_async_redis.set("left", "behind")
        return size, r.remaining

    assert asyncio.run(main()) == (0, 2)


def test_ratelimit_async_redis_is_flushed(ratelimit_async_redis: redis.asyncio.Redis) -> None:
    async def main() -> int:
        return int(await ratelimit_async_redis.exists("left", "plugin-async"))

    assert asyncio.run(main()) == 0
