"""pytest fixtures (loaded by pytest through the ``pytest11`` entry point):

- ``ratelimit_server``: a :class:`~redis_ratelimit_client.testing.RedisModuleServer`, one per
  test session, with the module of ``--ratelimit-module`` or ``RL_MODULE``, else the one of the
  ``redis-ratelimit-module`` wheel when it is installed;
- ``ratelimit_redis``: a ``redis.Redis`` on it, its database flushed before each test;
- ``ratelimit_async_redis``: a ``redis.asyncio.Redis`` on it, its database flushed before each
  test, for tests that run their own event loop (``asyncio.run``, anyio): its connections are
  opened in that loop, and closed after the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio

from .testing import RedisModuleServer


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("redis-ratelimit")
    group.addoption(
        "--ratelimit-module",
        default=None,
        help="the module .so (default RL_MODULE, else the redis-ratelimit-module wheel's)",
    )
    group.addoption(
        "--ratelimit-server", default=None, help="redis-server binary (default RL_SERVER)"
    )


def _wheel_module() -> str | None:
    """The module of the ``redis-ratelimit-module`` wheel (``path()``), if it is installed."""
    try:
        wheel = importlib.import_module("redis_ratelimit_module")
    except ImportError:
        return None
    path: str = wheel.path()
    return path


@pytest.fixture(scope="session")
def ratelimit_server(request: pytest.FixtureRequest) -> Iterator[RedisModuleServer]:
    """``redis-server --loadmodule`` on a free loopback port for the session."""
    module = (
        request.config.getoption("--ratelimit-module")
        or os.environ.get("RL_MODULE")
        or _wheel_module()
    )
    if not module:
        pytest.fail(
            "ratelimit_server needs --ratelimit-module, RL_MODULE or"
            " `pip install redis-ratelimit-module`"
        )
    server = request.config.getoption("--ratelimit-server")
    with RedisModuleServer(module, server=server) as s:
        yield s


@pytest.fixture
def ratelimit_redis(ratelimit_server: RedisModuleServer) -> Iterator[redis.Redis]:
    """A client on ``ratelimit_server``, its database flushed first."""
    client = redis.Redis(host=ratelimit_server.host, port=ratelimit_server.port)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def ratelimit_async_redis(ratelimit_server: RedisModuleServer) -> Iterator[redis.asyncio.Redis]:
    """A ``redis.asyncio.Redis`` on ``ratelimit_server``, its database flushed first."""
    with redis.Redis(host=ratelimit_server.host, port=ratelimit_server.port) as sync:
        sync.flushdb()
    client = redis.asyncio.Redis(host=ratelimit_server.host, port=ratelimit_server.port)
    yield client
    # Its connections belong to the test's loop, gone by now: drop them without awaiting.
    with contextlib.suppress(Exception):
        asyncio.run(client.connection_pool.disconnect(inuse_connections=True))
