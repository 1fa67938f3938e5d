"""The pytest plugin the package installs (entry point pytest11): its fixtures start a server
with the module from RL_MODULE and hand out a flushed client."""

from __future__ import annotations

import redis

from redis_ratelimit_client import RateLimiter


def test_ratelimit_redis_fixture(ratelimit_redis: redis.Redis) -> None:
    assert ratelimit_redis.dbsize() == 0
    r = RateLimiter(ratelimit_redis).gcra("plugin", 3, 1, "1s")
    assert (r.granted, r.limit, r.remaining) == (1, 3, 2)
    ratelimit_redis.set("left", "behind")


def test_ratelimit_redis_is_flushed_between_tests(ratelimit_redis: redis.Redis) -> None:
    assert ratelimit_redis.exists("left", "plugin") == 0
