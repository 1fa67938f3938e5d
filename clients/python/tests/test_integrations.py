"""The HTTP integrations' defaults against the real module, one test per trap of issue 31: keys
that never collide by accident, failures that are seen, no late charges, draft-11 header fields
computed from the limits and AT, per-limit costs, the reservation flow, and the knobs."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import flask
import pytest
import redis
import redis.asyncio as aioredis
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from redis_ratelimit_client import (
    GCRA,
    AsyncRateLimiter,
    Fixed,
    ModuleNotLoadedError,
    RateLimiter,
    Reserve,
    TokenBucket,
    client_ip,
    parse_limit,
)
from redis_ratelimit_client.asgi import RateLimitMiddleware
from redis_ratelimit_client.fastapi import RateLimitDependency
from redis_ratelimit_client.flask import rate_limit
from redis_ratelimit_client.testing import RedisModuleServer, free_port

DAY = 86_400_000
# A whole second, one hour into a UTC day, in the future (the server runs at-max-ahead -1).
T = (int(time.time() * 1000) // DAY + 2) * DAY + 3_600_000
QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"


@pytest.fixture
def sync_client(server: RedisModuleServer) -> Iterator[redis.Redis]:
    c = redis.Redis(host=server.host, port=server.port)
    c.flushdb()
    yield c
    c.close()


def flask_app(limiter: RateLimiter, limits: Any, **kw: Any) -> flask.Flask:
    app = flask.Flask(__name__)
    kw.setdefault("key", lambda req: req.headers.get("X-Key", "k"))

    @app.get("/")
    @rate_limit(limiter, limits, **kw)
    def view() -> Any:
        return {"ok": True}

    return app


def get(app: flask.Flask, key: str = "k", **query: Any) -> Any:
    return app.test_client().get("/", headers={"X-Key": key}, query_string=query)


# 1. No shared key by accident.


def test_two_routes_with_different_limits_do_not_share_keys(sync_client: redis.Redis) -> None:
    rl = RateLimiter(sync_client)
    app = flask.Flask(__name__)

    @app.get("/login")
    @rate_limit(rl, "3/minute", key=lambda req: "u")
    def login() -> Any:
        return "ok"

    @app.get("/feed")
    @rate_limit(rl, "100/minute", key=lambda req: "u")
    def feed() -> Any:
        return "ok"

    client = app.test_client()
    statuses = []
    for _ in range(6):
        client.get("/feed")
        statuses.append(client.get("/login").status_code)
    # The strict limit denies after 3, whatever the loose one did.
    assert statuses == [200, 200, 200, 429, 429, 429]
    assert sorted(sync_client.keys("rl:*")) == [b"rl:gcra-100-100-1m:u", b"rl:gcra-3-3-1m:u"]


def test_colliding_integrations_are_refused(sync_client: redis.Redis) -> None:
    rl = RateLimiter(sync_client)
    first = flask_app(rl, GCRA(5, 5, "10s"))
    with pytest.raises(ValueError, match="give each its own name="):
        flask_app(rl, GCRA(5, 5, "10s"))
    with pytest.raises(ValueError, match="rl:gcra-5-5-10s"):
        flask_app(rl, GCRA(5, 5, "10s"), name="gcra-5-5-10s")
    # The same explicit name on both: shared on purpose.
    a = flask_app(rl, GCRA(5, 5, "10s"), name="shared")
    b = flask_app(rl, GCRA(5, 5, "10s"), name="shared")
    get(a)
    assert get(b).headers["RateLimit"].startswith('"shared";r=3;')
    # Another prefix is another key space; so is an app that is gone.
    flask_app(rl, GCRA(5, 5, "10s"), prefix="other:")
    del first
    flask_app(rl, GCRA(5, 5, "10s"))


# 2. Failures are seen.


@pytest.fixture
def plain_server() -> Iterator[tuple[str, int]]:
    """A redis-server without the module."""
    port = free_port()
    d = tempfile.mkdtemp(prefix="rl-plain-")
    server = os.environ.get("RL_SERVER") or "redis-server"
    env = dict(os.environ)
    if os.environ.get("RL_LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["RL_LD_LIBRARY_PATH"]
    args = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", d]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = redis.Redis(port=port)
    for _ in range(200):
        try:
            c.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.02)
    c.close()
    yield "127.0.0.1", port
    proc.terminate()
    proc.wait()


def test_module_missing_async(
    plain_server: tuple[str, int], caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[BaseException] = []

    async def main() -> list[int]:
        for protocol in (2, 3):
            aclient = aioredis.Redis(host=plain_server[0], port=plain_server[1], protocol=protocol)
            mw = RateLimitMiddleware(
                _ok_app,
                AsyncRateLimiter(aclient, backend="module"),
                "5/second",
                name=f"missing-{protocol}",
                on_error=lambda e, sc: errors.append(e),
            )
            statuses = [(await asgi_call(mw))[0] for _ in range(2)]
            await aclient.aclose()
        return statuses

    with caplog.at_level(logging.WARNING, logger="redis_ratelimit"):
        assert asyncio.run(main()) == [503, 503]
    assert len(errors) == 4 and all(isinstance(e, ModuleNotLoadedError) for e in errors)
    assert len([r for r in caplog.records if r.name == "redis_ratelimit"]) == 2


@pytest.mark.parametrize("fail,expected", [("closed", 503), ("open", 200)])
def test_module_missing_is_named_logged_and_hooked(
    plain_server: tuple[str, int], fail: Any, expected: int, caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[BaseException] = []
    rl = RateLimiter(redis.Redis(host=plain_server[0], port=plain_server[1]), backend="module")
    app = flask_app(rl, "5/second", fail=fail, on_error=lambda e, req: errors.append(e))
    with caplog.at_level(logging.WARNING, logger="redis_ratelimit"):
        answers = [get(app) for _ in range(3)]
    assert [a.status_code for a in answers] == [expected] * 3
    assert len(errors) == 3 and all(isinstance(e, ModuleNotLoadedError) for e in errors)
    assert "loadmodule /path/to/libredis_ratelimit.so" in str(errors[0])
    lines = [r.getMessage() for r in caplog.records if r.name == "redis_ratelimit"]
    assert len(lines) == 1, lines  # the first time only
    assert f"failing {fail}" in lines[0] and "redis-ratelimit module is not loaded" in lines[0]
    if fail == "closed":
        assert answers[0].content_type == "application/problem+json"
        assert answers[0].json["status"] == 503


def test_failure_logged_again_after_recovery(
    server: RedisModuleServer, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    rl = RateLimiter(redis.Redis(port=port, socket_connect_timeout=1))
    app = flask_app(rl, "50/second", fail="open", timeout_ms=300)
    with caplog.at_level(logging.WARNING, logger="redis_ratelimit"):
        get(app)
        get(app)
        s = RedisModuleServer(port=port).start()
        try:
            assert "RateLimit" in get(app).headers
            s.stop()
            get(app)
        finally:
            s.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "redis_ratelimit"]
    assert len(lines) == 3, lines
    assert "failing open" in lines[0] and "answers again" in lines[1] and "failing open" in lines[2]


def test_key_or_cost_function_that_raises_is_the_apps_error(sync_client: redis.Redis) -> None:
    errors: list[BaseException] = []
    rl = RateLimiter(sync_client)

    def bad(req: Any) -> str:
        raise KeyError("x-api-key")

    app = flask_app(rl, "5/second", key=bad, on_error=lambda e, r: errors.append(e))
    app.config["PROPAGATE_EXCEPTIONS"] = False
    assert get(app).status_code == 500
    app2 = flask_app(rl, "6/second", cost=bad, on_error=lambda e, r: errors.append(e))
    app2.config["PROPAGATE_EXCEPTIONS"] = False
    assert get(app2).status_code == 500
    # A cost function that returns a cost the limiter cannot take is the app's bug too (it was
    # reported as "rate limiter unavailable", a 503).
    app3 = flask_app(rl, "8/second", cost=lambda req: -1, on_error=lambda e, r: errors.append(e))
    app3.config["PROPAGATE_EXCEPTIONS"] = False
    assert get(app3).status_code == 500
    assert errors == []

    async def main() -> None:
        aclient = aioredis.Redis(
            host=sync_client.connection_pool.connection_kwargs["host"],
            port=sync_client.connection_pool.connection_kwargs["port"],
        )
        mw = RateLimitMiddleware(_ok_app, AsyncRateLimiter(aclient), "7/second", key=bad)
        with pytest.raises(KeyError):
            await asgi_call(mw)
        await aclient.aclose()

    asyncio.run(main())


# 3. No late charges.


@pytest.mark.parametrize("side", ["flask", "asgi"])
def test_requests_answered_during_an_outage_are_never_charged(side: str) -> None:
    port = free_port()
    s = RedisModuleServer(port=port).start()
    limits = GCRA(5, 5, "1m")
    try:
        if side == "flask":
            app = flask_app(RateLimiter(redis.Redis(port=port)), limits, timeout_ms=300)
            assert get(app).status_code == 200
            s.stop()
            statuses = [get(app).status_code for _ in range(3)]
            s = RedisModuleServer(port=port).start()
            time.sleep(3)  # longer than redis-py's retries would wait
            r = get(app)
            statuses.append(r.status_code)
            ratelimit = r.headers["RateLimit"]
        else:

            async def main() -> tuple[list[int], str]:
                nonlocal s
                aclient = aioredis.Redis(port=port)
                mw = RateLimitMiddleware(
                    _ok_app, AsyncRateLimiter(aclient), limits, key=lambda sc: "k", timeout_ms=300
                )
                assert (await asgi_call(mw))[0] == 200
                s.stop()
                statuses = [(await asgi_call(mw))[0] for _ in range(3)]
                s = RedisModuleServer(port=port).start()
                await asyncio.sleep(3)
                status, h = await asgi_call(mw)
                await aclient.aclose()
                return [*statuses, status], h["ratelimit"]

            statuses, ratelimit = asyncio.run(main())
        assert statuses == [503, 503, 503, 200]
        # The restarted server is empty: only the last request is charged. (`t` comes from a
        # second, read-only call and is left out when that call misses its deadline.)
        assert re.fullmatch(r'"default";r=4(;t=\d+)?', ratelimit), ratelimit
    finally:
        s.stop()


# 4. Header fields, exactly.


def at_clock(clock: list[int]) -> Any:
    return lambda req: clock[0]


def test_draft11_single_limit(sync_client: redis.Redis) -> None:
    clock = [T]
    app = flask_app(
        RateLimiter(sync_client), GCRA(5, 5, "10s"), at=at_clock(clock), cost=_cost_query
    )
    # GCRA(5, 5, 10s): 5 at once, one unit back every 2 s; w is the 10 s to get 5 back.
    fresh = get(app, "fresh", cost=0)
    assert fresh.headers["RateLimit"] == '"default";r=5;t=0'
    for i in range(1, 6):
        r = get(app)
        assert r.status_code == 200
        assert r.headers["RateLimit-Policy"] == '"default";q=5;w=10'
        # Within 2 s no more than what is left (the next unit is back in 2 s).
        assert r.headers["RateLimit"] == f'"default";r={5 - i};t=2'
        assert "Retry-After" not in r.headers
    r = get(app)
    assert r.status_code == 429
    assert (r.headers["RateLimit"], r.headers["Retry-After"]) == ('"default";r=0;t=2', "2")
    assert r.content_type == "application/problem+json"
    assert r.json == {
        "type": QUOTA_EXCEEDED,
        "title": "Too Many Requests",
        "status": 429,
        "detail": "the limit 'default' is exhausted; retry after 2.0s",
        "retry_after": 2.0,
    }
    # 3 s later: one unit back, the next in 1 s.
    clock[0] = T + 3000
    r = get(app)
    assert (r.status_code, r.headers["RateLimit"]) == (200, '"default";r=0;t=1')
    # A request of 6 can never pass: 413, no Retry-After.
    r = get(app, "big", cost=6)
    assert r.status_code == 413 and "Retry-After" not in r.headers
    assert r.headers["RateLimit"] == '"default";r=5;t=0'
    # A request of 3 when 1 is left (7 s of 10 used): Retry-After is the wait for 3 (3 s), t the
    # wait for a second unit (1 s).
    clock[0] = T + 5000
    r = get(app, cost=3)
    assert r.status_code == 429
    assert (r.headers["RateLimit"], r.headers["Retry-After"]) == ('"default";r=1;t=1', "3")


def _cost_query(req: Any) -> int:
    return int(req.args.get("cost", "1"))


def test_draft11_several_limits_each_named_with_its_own_numbers(sync_client: redis.Redis) -> None:
    limits = {"burst": GCRA(5, 5, "10s"), "daily": Fixed(3, "1d")}
    app = flask_app(RateLimiter(sync_client), limits, at=lambda req: T)
    policy = '"burst";q=5;w=10, "daily";q=3;w=86400'
    # T is one hour into the day: the daily window ends in 23 h (82800 s).
    expected = [
        '"burst";r=4;t=2, "daily";r=2;t=82800',
        '"burst";r=3;t=2, "daily";r=1;t=82800',
        '"burst";r=2;t=2, "daily";r=0;t=82800',
    ]
    for want in expected:
        r = get(app)
        assert r.status_code == 200
        assert (r.headers["RateLimit-Policy"], r.headers["RateLimit"]) == (policy, want)
    r = get(app)
    assert r.status_code == 429
    assert r.headers["RateLimit"] == '"burst";r=2;t=2, "daily";r=0;t=82800'
    assert r.headers["Retry-After"] == "82800"
    assert "'daily'" in r.json["detail"]
    keys = sorted(sync_client.keys("rl:*"))
    name = "burst.gcra-5-5-10s+daily.fixed-3-1d"
    assert keys == [f"rl:{name}:{{k}}:burst".encode(), f"rl:{name}:{{k}}:daily".encode()]


@pytest.mark.parametrize(
    "style,expected",
    [
        (
            "draft-7",
            {
                "RateLimit-Limit": "3",
                "RateLimit-Remaining": "2",
                "RateLimit-Reset": "82800",
                "RateLimit-Policy": "5;w=10, 3;w=86400",
            },
        ),
        (
            "legacy",
            {
                "X-RateLimit-Limit": "3",
                "X-RateLimit-Remaining": "2",
                "X-RateLimit-Reset": str(T // 1000 + 82800),
            },
        ),
        ("none", {}),
    ],
)
def test_header_styles(sync_client: redis.Redis, style: Any, expected: dict[str, str]) -> None:
    limits = {"burst": GCRA(5, 5, "10s"), "daily": Fixed(3, "1d")}
    app = flask_app(RateLimiter(sync_client), limits, at=lambda req: T, headers=style)
    r = get(app)
    got = {k: v for k, v in r.headers.items() if "ratelimit" in k.lower()}
    assert got == expected


def test_partition_key(sync_client: redis.Redis) -> None:
    app = flask_app(
        RateLimiter(sync_client), GCRA(5, 5, "10s"), at=lambda req: T, partition_key=True, name="pk"
    )
    r = get(app, "alice")
    pk = base64.b64encode(hashlib.sha256(b"alice").digest()[:12]).decode()
    assert r.headers["RateLimit-Policy"] == f'"pk";q=5;w=10;pk=:{pk}:'
    assert r.headers["RateLimit"] == f'"pk";r=4;t=2;pk=:{pk}:'


# 5. Per-limit costs and the reservation flow.


def test_per_limit_costs_requests_and_tokens(sync_client: redis.Redis) -> None:
    limits = {"rpm": GCRA(60, 60, "1m"), "tpm": TokenBucket(1000, 1000, "1m")}
    app = flask_app(
        RateLimiter(sync_client),
        limits,
        at=lambda req: T,
        costs={"tpm": lambda req: int(req.args["tokens"])},
    )
    r = get(app, tokens=400)
    assert r.status_code == 200
    # rpm: one request (a unit back each second); tpm: 400 tokens (one back each 60 ms).
    assert r.headers["RateLimit"] == '"rpm";r=59;t=1, "tpm";r=600;t=1'
    r = get(app, tokens=700)
    assert r.status_code == 429 and r.headers["RateLimit"] == '"rpm";r=59;t=1, "tpm";r=600;t=1'
    # 700 - 600 = 100 tokens more: 6 s.
    assert r.headers["Retry-After"] == "6"


def test_reservation_settles_the_real_usage(server: RedisModuleServer) -> None:
    limits = {"rpm": GCRA(60, 60, "1m"), "tpm": TokenBucket(1000, 1000, "1m")}

    async def upstream(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-used", b"250")]})
        await send({"type": "http.response.body", "body": b"ok"})

    def used(scope: Any, start: Any) -> dict[str, int]:
        return {"tpm": int(dict(start["headers"])[b"x-used"])}

    async def main() -> None:
        aclient = aioredis.Redis(host=server.host, port=server.port)
        await aclient.flushdb()
        mw = RateLimitMiddleware(
            upstream,
            AsyncRateLimiter(aclient),
            limits,
            key=lambda sc: "c",
            costs={"tpm": lambda sc: 800},
            reserve=Reserve(hold="30s", usage=used),
            at=lambda sc: T,
        )
        status, h = await asgi_call(mw)
        # Held: 800 tokens while the upstream ran.
        assert status == 200 and h["ratelimit"] == '"rpm";r=59;t=1, "tpm";r=200;t=1'
        rl = AsyncRateLimiter(aclient)
        key = f"rl:{mw.limit.name}:{{c}}:tpm"
        after = await rl.check(key, TokenBucket(1000, 1000, "1m"), cost=0, at=T)
        assert after.remaining == 750  # settled at the 250 really used
        await aclient.aclose()

    asyncio.run(main())


# 6. The knobs.


def test_skip_allowlist_status_on_denied_block(sync_client: redis.Redis) -> None:
    rl = RateLimiter(sync_client)
    app = flask_app(
        rl,
        GCRA(1, 1, "10s"),
        at=lambda req: T,
        skip=lambda req: req.args.get("health") == "1",
        allowlist={"admin"},
        status=420,
        block="10m",
    )
    assert [get(app, health=1).status_code for _ in range(3)] == [200] * 3
    assert [get(app, "admin").status_code for _ in range(3)] == [200] * 3
    assert "RateLimit" not in get(app, "admin").headers
    assert get(app).status_code == 200
    r = get(app)
    # Denied: status 420, and blocked for 10 minutes from T.
    assert r.status_code == 420 and r.headers["Retry-After"] == "600"
    assert r.headers["RateLimit"] == '"default";r=0;t=600'
    custom = flask_app(
        rl,
        GCRA(1, 1, "10s"),
        name="custom",
        at=lambda req: T,
        on_denied=lambda req, result: ({"slow": result.retry_after}, 429),
    )
    get(custom)
    r = get(custom)
    assert r.status_code == 429 and r.json == {"slow": 10.0} and r.headers["Retry-After"] == "10"


def test_limit_strings_are_gcra_exactly() -> None:
    assert parse_limit("5/minute") == GCRA(5, 5, "1m")
    assert parse_limit("5/m") == GCRA(5, 5, "1m")
    assert parse_limit("10 per hour") == GCRA(10, 10, "1h")
    assert parse_limit("3/s") == GCRA(3, 3, "1s")
    assert parse_limit("100/day") == GCRA(100, 100, "1d")
    assert parse_limit("2/seconds") == GCRA(2, 2, "1s")
    for bad in ("0/minute", "5/fortnight", "five/minute", "5"):
        with pytest.raises(ValueError, match="N/minute"):
            parse_limit(bad)


def test_client_address_helpers() -> None:
    assert client_ip("203.0.113.7") == "203.0.113.7"
    # Never trusted by default.
    assert client_ip("10.0.0.1", "203.0.113.7") == "10.0.0.1"
    assert client_ip("10.0.0.1", "198.51.100.1, 203.0.113.7", trust_proxy=1) == "203.0.113.7"
    assert client_ip("10.0.0.1", "198.51.100.1, 203.0.113.7", trust_proxy=2) == "198.51.100.1"
    assert client_ip("10.0.0.1", "203.0.113.7", trust_proxy=5) == "203.0.113.7"
    assert client_ip("2001:db8:1:2ff:aaaa::1") == "2001:db8:1:200::/56"
    assert client_ip("2001:db8:1:2ff:aaaa::1", ipv6_subnet=64) == "2001:db8:1:2ff::/64"
    assert client_ip("2001:db8::1", ipv6_subnet=None) == "2001:db8::1"
    assert client_ip("::ffff:203.0.113.7") == "203.0.113.7"


def test_forwarded_client_keys(sync_client: redis.Redis) -> None:
    from redis_ratelimit_client.flask import forwarded_client

    app = flask_app(
        RateLimiter(sync_client), "2/minute", key=forwarded_client(1), name="behind-proxy"
    )
    c = app.test_client()
    env = {"REMOTE_ADDR": "10.0.0.1"}
    for client in ("203.0.113.7", "203.0.113.8"):
        statuses = [
            c.get("/", headers={"X-Forwarded-For": f"1.2.3.4, {client}"}, environ_base=env)
            for _ in range(3)
        ]
        assert [r.status_code for r in statuses] == [200, 200, 429]
    assert sorted(sync_client.keys("rl:behind-proxy:*")) == [
        b"rl:behind-proxy:203.0.113.7",
        b"rl:behind-proxy:203.0.113.8",
    ]


def test_asgi_on_denied(server: RedisModuleServer) -> None:
    from starlette.responses import PlainTextResponse

    async def main() -> None:
        aclient = aioredis.Redis(host=server.host, port=server.port)
        await aclient.delete("rl:asgi-denied:127.0.0.1")
        mw = RateLimitMiddleware(
            _ok_app,
            AsyncRateLimiter(aclient),
            GCRA(1, 1, "10s"),
            name="asgi-denied",
            at=lambda sc: T,
            on_denied=lambda sc, result: PlainTextResponse("slow down", status_code=429),
        )
        await asgi_call(mw)
        status, h = await asgi_call(mw)
        assert status == 429 and h["content-type"].startswith("text/plain")
        assert h["retry-after"] == "10" and h["ratelimit"] == '"asgi-denied";r=0;t=10'
        await aclient.aclose()

    asyncio.run(main())


def test_flask_async_view(sync_client: redis.Redis) -> None:
    app = flask.Flask(__name__)

    @app.get("/")
    @rate_limit(RateLimiter(sync_client), "5/second", key=lambda req: "a")
    async def view() -> Any:
        await asyncio.sleep(0)
        return {"async": True}

    r = app.test_client().get("/")
    assert r.status_code == 200 and r.json == {"async": True} and "RateLimit" in r.headers


def test_fastapi_testclient_without_with(server: RedisModuleServer) -> None:
    sync = redis.Redis(host=server.host, port=server.port)
    sync.flushdb()
    dep = RateLimitDependency(
        AsyncRateLimiter(aioredis.Redis(host=server.host, port=server.port)), "100/minute"
    )
    api = FastAPI()

    @api.get("/", dependencies=[Depends(dep)])
    async def route() -> dict[str, bool]:
        return {"ok": True}

    client = TestClient(api)  # each request in its own event loop
    statuses = [client.get("/").status_code for _ in range(6)]
    assert statuses == [200] * 6
    assert sync.exists(f"rl:{dep.limit.name}:testclient") == 1
    sync.close()


def test_limiter_leaves_the_clients_replies_alone(sync_client: redis.Redis) -> None:
    before = sync_client.execute_command("RL.GCRA", "raw", 5, 5, "1s", "AT", T)
    RateLimiter(sync_client).gcra("typed", 5, 5, "1s", at=T)
    after = sync_client.execute_command("RL.GCRA", "raw", 5, 5, "1s", "AT", T)
    # The raw reply (a RESP3 map or a RESP2 array), not a parsed Result.
    assert type(before) is type(after) and type(after) in (dict, list)


def test_old_spellings_are_refused_with_a_hint(sync_client: redis.Redis) -> None:
    with pytest.raises(TypeError, match='fail="open"'):
        flask_app(RateLimiter(sync_client), "5/second", on_error="open")


def test_fastapi_problem_handler(server: RedisModuleServer) -> None:
    from redis_ratelimit_client.fastapi import RateLimitHTTPException, problem_exception_handler

    dep = RateLimitDependency(
        AsyncRateLimiter(aioredis.Redis(host=server.host, port=server.port)),
        GCRA(1, 1, "10s"),
        name="problem",
        key=lambda req: "p",
        at=lambda req: T,
    )
    api = FastAPI()
    api.add_exception_handler(RateLimitHTTPException, problem_exception_handler)

    @api.get("/", dependencies=[Depends(dep)])
    async def route() -> dict[str, bool]:
        return {"ok": True}

    with TestClient(api) as client:
        client.get("/")
        r = client.get("/")
    assert r.status_code == 429 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"] == QUOTA_EXCEEDED and r.headers["retry-after"] == "10"
    assert r.headers["ratelimit"] == '"problem";r=0;t=10'


# ASGI helpers.


async def _ok_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def asgi_call(app: Any) -> tuple[int, dict[str, str]]:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 5000),
        "server": ("test", 80),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
        "asgi": {"version": "3.0"},
    }
    out: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            out["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return out["status"], out["headers"]


def test_asgi_problem_body(server: RedisModuleServer) -> None:
    async def main() -> None:
        aclient = aioredis.Redis(host=server.host, port=server.port)
        mw = RateLimitMiddleware(
            _ok_app,
            AsyncRateLimiter(aclient),
            GCRA(1, 1, "10s"),
            name="asgi-problem",
            key=lambda sc: "z",
            at=lambda sc: T,
        )
        await aclient.delete("rl:asgi-problem:z")
        assert (await asgi_call(mw))[0] == 200
        status, h = await asgi_call(mw)
        assert status == 429 and h["content-type"] == "application/problem+json"
        assert h["retry-after"] == "10" and h["ratelimit"] == '"asgi-problem";r=0;t=10'
        await aclient.aclose()

    asyncio.run(main())
