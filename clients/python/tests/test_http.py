"""The ASGI middleware, the FastAPI dependency and the Flask decorator against the real module:
status codes, header fields, and failing open or closed within the timeout when Redis is down
(nothing listens on the port) or paused (DEBUG SLEEP)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import flask
import pytest
import redis
import redis.asyncio as aioredis
from fastapi import Depends, FastAPI

from redis_ratelimit_client import GCRA, AsyncRateLimiter, Fixed, RateLimiter
from redis_ratelimit_client._http import FailMode
from redis_ratelimit_client.asgi import RateLimitMiddleware
from redis_ratelimit_client.fastapi import RateLimitDependency
from redis_ratelimit_client.flask import rate_limit
from redis_ratelimit_client.testing import RedisModuleServer, free_port

# bursts of 5, 5 per 10 s: one unit back every 2 s, fresh after 10 s.
POLICY = GCRA(5, 5, "10s")


async def hello(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-app", b"1")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def asgi_get(app: Any, path: str, key: str) -> tuple[int, dict[str, str]]:
    """One GET through an ASGI app: the status and the headers (lower-case names)."""
    scope = {
        "type": "http",
        "method": "GET",
        "path": path.split("?")[0],
        "raw_path": path.encode(),
        "query_string": path.partition("?")[2].encode(),
        "headers": [(b"x-api-key", key.encode()), (b"host", b"test")],
        "client": ("127.0.0.1", 5000),
        "server": ("test", 80),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
        "asgi": {"version": "3.0"},
    }
    out: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}

    await app(scope, receive, send)
    return out["status"], out["headers"]


def api_key(scope: Any) -> str:
    return str(dict(scope["headers"])[b"x-api-key"].decode())


def batch_cost(scope: Any) -> int:
    q = scope["query_string"].decode()
    return int(q.split("=")[1]) if q.startswith("items=") else 1


def test_asgi_middleware(server: RedisModuleServer) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port)
        await client.flushdb()
        app = RateLimitMiddleware(
            hello, AsyncRateLimiter(client), POLICY, key=api_key, cost=batch_cost
        )
        for i in range(1, 6):
            status, h = await asgi_get(app, "/", "a")
            assert status == 200 and h["x-app"] == "1"
            assert h["ratelimit-policy"] == '"default";q=5;w=10'
            # r counts down; t: the next unit is back in 2 s (minus the ms that passed).
            assert h["ratelimit"] in (f'"default";r={5 - i};t=2', f'"default";r={5 - i};t=1')
            assert "retry-after" not in h
        status, h = await asgi_get(app, "/", "a")
        assert (
            status == 429 and h["retry-after"] in ("1", "2") and '"default";r=0' in h["ratelimit"]
        )
        status, h = await asgi_get(app, "/?items=6", "b")
        assert status == 413 and "retry-after" not in h and h["ratelimit"] == '"default";r=5;t=0'
        assert h["content-type"] == "application/problem+json"
        status, h = await asgi_get(app, "/?items=5", "c")
        assert status == 200 and h["ratelimit"] in ('"default";r=0;t=2', '"default";r=0;t=1')
        await client.aclose()

    asyncio.run(main())


def test_asgi_several_limits(server: RedisModuleServer) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port)
        await client.flushdb()
        limits = {"burst": GCRA(5, 5, "10s"), "daily": Fixed(3, "1d")}
        app = RateLimitMiddleware(hello, AsyncRateLimiter(client), limits, key=api_key)
        status, h = await asgi_get(app, "/", "m")
        assert status == 200
        assert h["ratelimit-policy"] == '"burst";q=5;w=10, "daily";q=3;w=86400'
        assert h["ratelimit"].startswith(('"burst";r=4;t=2, "daily";r=2;t=', '"burst";r=4;t=1'))
        # One hash tag per client: both keys live in one slot.
        name = app.limit.name
        assert await client.exists(f"rl:{name}:{{m}}:burst", f"rl:{name}:{{m}}:daily") == 2
        await client.aclose()

    asyncio.run(main())


def test_fastapi_dependency(server: RedisModuleServer) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port, protocol=3)
        await client.flushdb()
        dep = RateLimitDependency(
            AsyncRateLimiter(client),
            GCRA(2, 2, "10s"),
            key=lambda r: r.headers["x-api-key"],
            name="fastapi",
        )
        app = FastAPI()

        @app.get("/hello", dependencies=[Depends(dep)])
        async def route() -> dict[str, bool]:
            return {"ok": True}

        s1, h1 = await asgi_get(app, "/hello", "f")
        s2, _ = await asgi_get(app, "/hello", "f")
        s3, h3 = await asgi_get(app, "/hello", "f")
        assert (s1, s2, s3) == (200, 200, 429)
        assert h1["ratelimit-policy"] == '"fastapi";q=2;w=10' and h1["ratelimit"] in (
            '"fastapi";r=1;t=5',
            '"fastapi";r=1;t=4',
        )
        assert h3["retry-after"] in ("4", "5") and "ratelimit" in h3
        await client.aclose()

    asyncio.run(main())


def make_flask(limiter: RateLimiter, **kw: Any) -> flask.Flask:
    app = flask.Flask(__name__)

    @app.get("/hello")
    @rate_limit(limiter, GCRA(2, 2, "10s"), key=lambda req: req.headers["X-Api-Key"], **kw)
    def view() -> dict[str, bool]:
        return {"ok": True}

    return app


def test_flask_decorator(server: RedisModuleServer) -> None:
    client = redis.Redis(host=server.host, port=server.port)
    client.flushdb()
    app = make_flask(RateLimiter(client)).test_client()
    r1 = app.get("/hello", headers={"X-Api-Key": "k"})
    r2 = app.get("/hello", headers={"X-Api-Key": "k"})
    r3 = app.get("/hello", headers={"X-Api-Key": "k"})
    assert (r1.status_code, r2.status_code, r3.status_code) == (200, 200, 429)
    assert r1.headers["RateLimit-Policy"] == '"default";q=2;w=10'
    assert r1.headers["RateLimit"] in ('"default";r=1;t=5', '"default";r=1;t=4')
    assert r1.json == {"ok": True}
    assert r3.headers["Retry-After"] in ("4", "5") and "Retry-After" not in r2.headers


def test_flask_detailed_headers(server: RedisModuleServer) -> None:
    client = redis.Redis(host=server.host, port=server.port, protocol=3)
    client.flushdb()
    app = flask.Flask(__name__)
    limits = {"burst": GCRA(5, 5, "10s"), "daily": Fixed(3, "1d")}

    @app.get("/hello")
    @rate_limit(RateLimiter(client), limits, key=lambda req: "d")
    def view() -> dict[str, bool]:
        return {"ok": True}

    day = 86_400_000
    before = -(-(day - int(time.time() * 1000) % day) // 1000)
    r = app.test_client().get("/hello")
    after = -(-(day - int(time.time() * 1000) % day) // 1000)
    assert r.status_code == 200
    assert r.headers["RateLimit-Policy"] == '"burst";q=5;w=10, "daily";q=3;w=86400'
    # burst: one unit used, back in 2 s; daily: 2 left until the UTC day ends.
    assert r.headers["RateLimit"] in {
        f'"burst";r=4;t={b},"daily";r=2;t={t}'.replace(",", ", ")
        for t in range(after, before + 1)
        for b in (1, 2)
    }
    name = "burst.gcra-5-5-10s+daily.fixed-3-1d"
    assert client.exists(f"rl:{name}:{{d}}:burst", f"rl:{name}:{{d}}:daily") == 2


def test_flask_and_asgi_shadow(server: RedisModuleServer) -> None:
    client = redis.Redis(host=server.host, port=server.port)
    client.flushdb()
    limiter = RateLimiter(client)
    # GCRA(2, 2, "10s"): one unit back every 5 s, fresh after 10 s.
    app = make_flask(limiter, shadow=True, prefix="sh:").test_client()
    r = [app.get("/hello", headers={"X-Api-Key": "k"}) for _ in range(3)]
    # The third would be denied: let through, no Retry-After, nothing left, fresh in 10 s.
    assert [x.status_code for x in r] == [200, 200, 200]
    assert "Retry-After" not in r[2].headers
    assert r[2].headers["RateLimit"] in ('"default";r=0;t=5', '"default";r=0;t=4')
    # Charged as enforced: an enforced call is denied.
    assert not limiter.gcra("sh:gcra-2-2-10s:k", 2, 2, "10s", peek=True).allowed

    async def main() -> None:
        aclient = aioredis.Redis(host=server.host, port=server.port)
        limits = {"burst": GCRA(2, 2, "10s"), "daily": Fixed(1, "1d")}
        app = RateLimitMiddleware(
            hello, AsyncRateLimiter(aclient), limits, key=api_key, shadow=True, prefix="sh:"
        )
        await asgi_get(app, "/", "m")
        status, h = await asgi_get(app, "/", "m")
        # daily (1 a day) would deny the second request: let through, charging nothing (burst
        # keeps the one unit of the first request, back in 5 s).
        assert status == 200 and "retry-after" not in h
        assert h["ratelimit"].startswith(
            ('"burst";r=1;t=5, "daily";r=0;t=', '"burst";r=1;t=4, "daily";r=0;t=')
        )
        await aclient.aclose()

    asyncio.run(main())


def test_asgi_detailed_single_limit(server: RedisModuleServer) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port)
        await client.flushdb()
        app = RateLimitMiddleware(
            hello, AsyncRateLimiter(client), GCRA(2, 2, "10s"), key=api_key, name="one"
        )
        s1, h1 = await asgi_get(app, "/", "s")
        await asgi_get(app, "/", "s")
        s3, h3 = await asgi_get(app, "/", "s")
        assert (s1, s3) == (200, 429)
        assert h1["ratelimit-policy"] == '"one";q=2;w=10'
        assert h1["ratelimit"] in ('"one";r=1;t=5', '"one";r=1;t=4')
        assert h3["ratelimit"] in ('"one";r=0;t=5', '"one";r=0;t=4')
        assert h3["retry-after"] in ("4", "5")
        await client.aclose()

    asyncio.run(main())


# Failing open and closed.

TIMEOUT_MS = 300
TIMEOUT = TIMEOUT_MS / 1000


@pytest.fixture
def paused() -> Iterator[RedisModuleServer]:
    """A server that sleeps (DEBUG SLEEP 1) while the test runs."""
    with RedisModuleServer() as s:
        c = redis.Redis(host=s.host, port=s.port)
        t = threading.Thread(target=lambda: c.execute_command("DEBUG", "SLEEP", "1"))
        t.start()
        time.sleep(0.1)
        yield s
        t.join()
        c.close()


def dead_port() -> int:
    return free_port()  # nothing listens there


@pytest.mark.parametrize("fail,expected", [("open", 200), ("closed", 503)])
@pytest.mark.parametrize("state", ["down", "paused"])
def test_flask_fails_open_or_closed(
    fail: FailMode, expected: int, state: str, request: pytest.FixtureRequest
) -> None:
    port = dead_port() if state == "down" else request.getfixturevalue("paused").port
    client = redis.Redis(port=port, socket_connect_timeout=5, socket_timeout=5)
    app = make_flask(RateLimiter(client), fail=fail, timeout_ms=TIMEOUT_MS).test_client()
    start = time.monotonic()
    r = app.get("/hello", headers={"X-Api-Key": "k"})
    elapsed = time.monotonic() - start
    assert r.status_code == expected and "RateLimit" not in r.headers
    assert elapsed < TIMEOUT + 0.5, elapsed


@pytest.mark.parametrize("fail,expected", [("open", 200), ("closed", 503)])
@pytest.mark.parametrize("state", ["down", "paused"])
def test_asgi_fails_open_or_closed(
    fail: FailMode, expected: int, state: str, request: pytest.FixtureRequest
) -> None:
    port = dead_port() if state == "down" else request.getfixturevalue("paused").port

    async def main() -> tuple[int, dict[str, str], float]:
        client = aioredis.Redis(port=port, socket_connect_timeout=5, socket_timeout=5)
        app = RateLimitMiddleware(
            hello, AsyncRateLimiter(client), POLICY, fail=fail, timeout_ms=TIMEOUT_MS
        )
        start = time.monotonic()
        status, h = await asgi_get(app, "/", "k")
        elapsed = time.monotonic() - start
        await client.aclose()
        return status, h, elapsed

    status, h, elapsed = asyncio.run(main())
    assert status == expected and "ratelimit" not in h
    assert elapsed < TIMEOUT + 0.5, elapsed
