"""The script backend (``backend="lua"``, or ``"auto"`` on a server without the module): the
package's copy of the script is the repository's, the limiters work on a server without the
module, everything the script cannot do raises an error naming the module, and the HTTP
integrations limit there too."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
import redis
import redis.asyncio as aioredis

from redis_ratelimit_client import (
    GCRA,
    SCRIPT,
    AsyncRateLimiter,
    Fixed,
    ModuleRequiredError,
    RateLimiter,
    Reserve,
    SlidingCounter,
    TokenBucket,
)
from redis_ratelimit_client.asgi import RateLimitMiddleware
from redis_ratelimit_client.flask import rate_limit
from redis_ratelimit_client.testing import RedisModuleServer, free_port

REPO_SCRIPT = Path(__file__).resolve().parents[3] / "lua" / "ratelimit.lua"


def test_the_packaged_script_is_the_repositorys() -> None:
    """No fork: the package ships lua/ratelimit.lua byte for byte (scripts/sync-lua.sh copies
    it)."""
    assert REPO_SCRIPT.read_bytes() == SCRIPT


@pytest.fixture(scope="module")
def plain() -> Iterator[tuple[str, int]]:
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
    for _ in range(250):
        try:
            c.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.02)
    c.close()
    yield "127.0.0.1", port
    proc.terminate()
    proc.wait()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def client(request: pytest.FixtureRequest, plain: tuple[str, int]) -> Iterator[redis.Redis]:
    c = redis.Redis(host=plain[0], port=plain[1], protocol=request.param)
    c.flushall()
    c.script_flush()
    yield c
    c.close()


def test_auto_uses_the_script_where_the_module_is_missing(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    rl = RateLimiter(client)
    with caplog.at_level(logging.INFO, logger="redis_ratelimit"):
        got = [rl.gcra("u", burst=3, rate=1, period="1h") for _ in range(4)]
        rl.gcra("u", burst=3, rate=1, period="1h", peek=True)
    assert rl.backend.resolved == "lua"
    assert [r.allowed for r in got] == [True, True, True, False]
    assert [r.remaining for r in got] == [2, 1, 0, 0]
    assert got[3].retry_after_ms > 3_590_000 and got[3].reset_after_ms > 10_790_000
    # Decided once, and said so.
    lines = [r.getMessage() for r in caplog.records if r.name == "redis_ratelimit"]
    assert len(lines) == 1 and "script backend" in lines[0], lines
    # The script's own key, a string (never the module's key).
    assert client.keys("*") == [b"u:lua"]
    value = client.get("u:lua")
    assert isinstance(value, bytes) and value.startswith(b"rl1 gcra ")


def test_every_script_limiter(client: redis.Redis) -> None:
    rl = RateLimiter(client, backend="lua")
    assert rl.token_bucket("t", capacity=5, refill=1, period="1m", cost=5).remaining == 0
    assert not rl.token_bucket("t", capacity=5, refill=1, period="1m").allowed
    assert rl.fixed("f", limit=2, window="1h", offset="30m", cost=2).allowed
    assert rl.fixed("f", limit=2, window="1h", offset="30m").retry_after_ms > 0
    r = rl.sliding_counter("s", limit=4, window="1m", cost=3)
    assert (r.granted, r.remaining) == (3, 1)
    r = rl.sliding_counter("s", limit=4, window="1m", cost=3, best_effort=True)
    assert (r.granted, r.remaining) == (1, 0)
    r = rl.all({"{a}:1": GCRA(10, 1, "1m"), "{a}:2": Fixed(3, "1m")}, cost=2, detail=True)
    assert (
        r.allowed
        and r.remaining == 1
        and [d.name for d in r.limiters] == ["{a}:1:lua", "{a}:2:lua"]
    )
    r = rl.all({"{a}:1": GCRA(10, 1, "1m"), "{a}:2": Fixed(3, "1m")}, cost=2, detail=True)
    assert not r.allowed and r.denied_by == "{a}:2:lua" and r.reason == "limit"
    assert rl.check("t", TokenBucket(5, 1, "1m")).remaining == 0
    r = rl.check_all({"{a}:1": GCRA(10, 1, "1m"), "{a}:2": Fixed(3, "1m")})
    assert r.allowed and r.remaining == 0
    assert not rl.gcra("never", burst=2, rate=1, period="1s", cost=3).allowed


@pytest.mark.parametrize(
    "call,what",
    [
        (lambda rl: rl.gcra("k", burst=5, rate=1, period="1s", dedup="id-1"), "DEDUP"),
        (lambda rl: rl.gcra("k", burst=5, rate=1, period="1s", shadow=True), "SHADOW"),
        (lambda rl: rl.gcra("k", burst=5, rate=1, period="1s", block="1m"), "BLOCK"),
        (lambda rl: rl.gcra("k", burst=5, rate=1, period="1s", delay="1s"), "DELAY"),
        (lambda rl: rl.gcra("k", burst=5, rate=1, period="1s", at=time.time() * 1000), "AT"),
        (lambda rl: rl.fixed("k", limit=5, window="month"), "calendar windows"),
        (lambda rl: rl.leaky_bucket("k", capacity=5, rate=1, period="1s"), "RL.LEAKYBUCKET"),
        (lambda rl: rl.sliding("k", limit=5, window="1s"), "RL.SLIDING"),
        (lambda rl: rl.acquire("k", 5, "1m", "lease-1"), "RL.ACQUIRE"),
        (lambda rl: rl.settle(["k"], "id", [1]), "RL.SETTLE"),
        (lambda rl: rl.block("k", "1m"), "RL.BLOCK"),
        (lambda rl: rl.refund("k", 1), "RL.REFUND"),
        (lambda rl: rl.info("k"), "RL.INFO"),
        (lambda rl: rl.stream_count("k", "1m"), "RL.STREAMCOUNT"),
        (lambda rl: rl.throttle("k", 5, 1, 60), "CL.THROTTLE"),
        (lambda rl: rl.policy_list(), "policies"),
        (lambda rl: rl.limit("k", "free"), "policies"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_what_the_script_cannot_do_names_the_module(
    client: redis.Redis, call: Any, what: str
) -> None:
    rl = RateLimiter(client, backend="lua")
    with pytest.raises(ModuleRequiredError) as e:
        call(rl)
    assert what in str(e.value) and "redis-ratelimit module" in str(e.value), str(e.value)
    assert client.dbsize() == 0


def test_the_script_comes_back_after_a_flush(client: redis.Redis) -> None:
    rl = RateLimiter(client, backend="lua")
    assert rl.gcra("k", burst=2, rate=1, period="1m").allowed
    client.script_flush()
    assert rl.gcra("k", burst=2, rate=1, period="1m").remaining == 0


def test_async(plain: tuple[str, int]) -> None:
    async def main() -> list[int]:
        c = aioredis.Redis(host=plain[0], port=plain[1])
        await c.flushall()
        rl = AsyncRateLimiter(c)
        out = [(await rl.gcra("a", burst=2, rate=1, period="1h")).remaining for _ in range(3)]
        with pytest.raises(ModuleRequiredError, match=r"RL\.SETTLE"):
            await rl.settle(["a"], "id", [1])
        assert rl.backend.resolved == "lua"
        await c.aclose()
        return out

    assert asyncio.run(main()) == [1, 0, 0]


def test_flask_on_the_script(plain: tuple[str, int]) -> None:
    c = redis.Redis(host=plain[0], port=plain[1])
    c.flushall()
    app = flask.Flask(__name__)

    @app.get("/")
    @rate_limit(
        RateLimiter(c),
        {"burst": GCRA(2, 1, "1m"), "day": SlidingCounter(100, "1d")},
        key=lambda req: "ip1",
        name="script-flask",
    )
    def view() -> Any:
        return {"ok": True}

    answers = [app.test_client().get("/") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].headers["RateLimit-Policy"] == '"burst";q=2;w=120, "day";q=100;w=86400'
    assert answers[1].headers["RateLimit"].startswith('"burst";r=0;t=60, "day";r=98;t=')
    assert int(answers[2].headers["Retry-After"]) == 60
    assert sorted(c.keys("*")) == [
        b"rl:script-flask:{ip1}:burst:lua",
        b"rl:script-flask:{ip1}:day:lua",
    ]
    c.close()


def test_asgi_on_the_script(plain: tuple[str, int]) -> None:
    async def ok(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    async def send(m: Any) -> None:
        sent.append(m)

    async def main() -> list[int]:
        c = aioredis.Redis(host=plain[0], port=plain[1])
        await c.flushall()
        rl = AsyncRateLimiter(c, backend="lua")
        mw = RateLimitMiddleware(ok, rl, "2/minute", name="asgi-lua")
        statuses = []
        for _ in range(3):
            sent.clear()
            scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
            await mw({**scope, "client": ("1.2.3.4", 1)}, receive, send)
            statuses.append(sent[0]["status"])
        await c.aclose()
        return statuses

    assert asyncio.run(main()) == [200, 200, 429]


def test_integrations_refuse_what_the_script_cannot_do(plain: tuple[str, int]) -> None:
    c = redis.Redis(host=plain[0], port=plain[1])
    rl = RateLimiter(c, backend="lua")
    with pytest.raises(ModuleRequiredError, match="reserve"):
        rate_limit(rl, "5/minute", reserve=Reserve(hold="30s"), name="r1")
    with pytest.raises(ModuleRequiredError, match="calendar"):
        rate_limit(rl, Fixed(5, "day"), name="r2")
    c.close()


def test_auto_uses_the_module_where_it_is_loaded(server: RedisModuleServer) -> None:
    c = redis.Redis(host=server.host, port=server.port)
    c.flushall()
    rl = RateLimiter(c)
    assert rl.gcra("m", burst=2, rate=1, period="1m").remaining == 1
    assert rl.backend.resolved == "module"
    assert c.type("m") != b"string"
    # The same limiter forced onto the script keeps its own keys beside the module's.
    lua = RateLimiter(c, backend="lua")
    assert lua.gcra("m", burst=2, rate=1, period="1m").remaining == 1
    assert sorted(c.keys("*")) == [b"m", b"m:lua"]
    c.close()
