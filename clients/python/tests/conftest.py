"""Fixtures: one redis-server with the module for the session (RL_MODULE, RL_SERVER), clients
over RESP2 and RESP3, with and without decode_responses."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from redis_ratelimit_client import RateLimiter
from redis_ratelimit_client.testing import RedisModuleServer


@pytest.fixture(scope="session")
def server() -> Iterator[RedisModuleServer]:
    # AT may run ahead of the server's clock: the tests pin every call's time.
    with RedisModuleServer(module_args=["at-max-ahead", "-1"]) as s:
        yield s


@pytest.fixture(
    params=[(2, False), (2, True), (3, False), (3, True)],
    ids=lambda p: f"resp{p[0]}{'-decoded' if p[1] else ''}",
)
def client(request: pytest.FixtureRequest, server: RedisModuleServer) -> Iterator[redis.Redis]:
    protocol, decode = request.param
    c = redis.Redis(host=server.host, port=server.port, protocol=protocol, decode_responses=decode)
    c.flushdb()
    yield c
    c.close()


@pytest.fixture
def rl(client: redis.Redis) -> RateLimiter:
    return RateLimiter(client)


@pytest.fixture
def now() -> int:
    """A time (Unix ms) a little ahead of the server's clock, on a whole second."""
    return (int(time.time() * 1000) // 1000 + 2) * 1000
