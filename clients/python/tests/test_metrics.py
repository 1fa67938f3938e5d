"""redis_ratelimit_client.metrics against a real server: the client-side counts (prometheus_client
and the OpenTelemetry SDK) equal what the calls imply and what the module itself counted
(RL.METRICS, the numbers redis_exporter exports)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

from redis_ratelimit_client import AsyncRateLimiter, RateLimiter
from redis_ratelimit_client.metrics import (
    OpenTelemetryRecorder,
    PrometheusRecorder,
    instrument,
    near_limit,
)
from redis_ratelimit_client.testing import RedisModuleServer


def server_metrics(client: redis.Redis) -> dict[str, float]:
    flat = client.execute_command("RL.METRICS")
    text = [x.decode() if isinstance(x, bytes) else str(x) for x in flat]
    return {k: float(v) for k, v in zip(text[::2], text[1::2], strict=True)}


def command_delta(before: dict[str, float], after: dict[str, float], counter: str, cmd: str) -> int:
    k = f'ratelimit_command_{counter}_total{{command="{cmd}"}}'
    return int(after[k] - before[k])


def test_near_limit_is_the_modules_rule() -> None:
    assert near_limit(1, 10, 20) and not near_limit(2, 10, 20)
    assert near_limit(0, 1, 20) and not near_limit(0, 1, 0)


def test_prometheus_counts_match_the_calls_and_the_server(
    rl: RateLimiter, client: redis.Redis, now: int
) -> None:
    registry = CollectorRegistry()
    irl = instrument(rl, PrometheusRecorder(registry))
    client.execute_command("RL.POLICY", "SET", "free", "GCRA", "5", "1", "1m")
    before = server_metrics(client)
    # A limit of 10, 12 calls at one instant: 10 acquired (remaining 9..0, the last two below
    # 20% of 10: near), 2 limited.
    for _ in range(12):
        irl.gcra("g", burst=10, rate=1, period="1m", at=now)
    # Policy free (limit 5): 7 calls, 5 acquired (remaining 0 near), 2 limited.
    for _ in range(7):
        irl.limit("f", "free", at=now)
    after = server_metrics(client)

    def sample(name: str, **labels: str) -> float:
        v = registry.get_sample_value(name, labels)
        return 0.0 if v is None else v

    req = "ratelimit_requests_total"
    assert sample(req, command="rl.gcra", policy="", result="acquired") == 10
    assert sample(req, command="rl.gcra", policy="", result="limited") == 2
    assert sample("ratelimit_near_limit_requests_total", command="rl.gcra", policy="") == 2
    assert sample(req, command="rl.limit", policy="free", result="acquired") == 5
    assert sample(req, command="rl.limit", policy="free", result="limited") == 2
    assert sample("ratelimit_near_limit_requests_total", command="rl.limit", policy="free") == 1
    # The server counted the same calls the same way.
    for cmd in ("rl.gcra", "rl.limit"):
        for counter, result in (("granted", "acquired"), ("denied", "limited")):
            assert command_delta(before, after, counter, cmd) == sample(
                req, command=cmd, policy="free" if cmd == "rl.limit" else "", result=result
            )
        assert command_delta(before, after, "near_limit", cmd) == sample(
            "ratelimit_near_limit_requests_total",
            command=cmd,
            policy="free" if cmd == "rl.limit" else "",
        )
    # Other methods and attributes are the limiter's own, uncounted.
    assert irl.client is rl.client
    assert irl.policy_get("free") is not None


def test_opentelemetry_counts_and_waits(rl: RateLimiter, client: redis.Redis, now: int) -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    irl = instrument(rl, OpenTelemetryRecorder(meter))
    for _ in range(3):
        irl.fixed("x", limit=2, window="1m", at=now)
    # A lease of 1 held; a WAIT of 100 ms times out, then one is granted after a release.
    irl.acquire("c", 1, "1m", "holder")
    late = irl.acquire("c", 1, "1m", "late", wait="100ms")
    assert not late.allowed
    waiter: dict[str, Any] = {}

    def wait_for_turn() -> None:
        waiter["result"] = irl.acquire("c", 1, "1m", "next", wait="10s")

    t = threading.Thread(target=wait_for_turn)
    t.start()
    deadline = time.monotonic() + 10
    while server_metrics(client)["ratelimit_wait_waiting"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.1)
    rl.release("c", "holder")
    t.join(10)
    assert waiter["result"].allowed

    points: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    points[(m.name, tuple(sorted((p.attributes or {}).items())))] = p

    def count(name: str, **attrs: str) -> Any:
        key = (name, tuple(sorted({f"ratelimit.{k}": v for k, v in attrs.items()}.items())))
        return points[key]

    fixed = {"command": "rl.fixed", "policy": ""}
    assert count("ratelimit.requests", **fixed, result="acquired").value == 2
    assert count("ratelimit.requests", **fixed, result="limited").value == 1
    # remaining 1 (of 2: 50%, not near), then 0 (near).
    assert count("ratelimit.near_limit_requests", **fixed).value == 1
    acq = {"command": "rl.acquire", "policy": ""}
    assert count("ratelimit.requests", **acq, result="acquired").value == 2
    assert count("ratelimit.requests", **acq, result="limited").value == 1
    assert count("ratelimit.queued_requests").value == 0
    timed_out = count("ratelimit.request.time_in_queue", result="limited")
    granted = count("ratelimit.request.time_in_queue", result="acquired")
    assert timed_out.count == 1 and timed_out.sum >= 0.1
    assert granted.count == 1 and granted.sum >= 0.1


def test_a_failing_recorder_never_fails_the_call(rl: RateLimiter, now: int) -> None:
    class Broken:
        def request(self, command: str, policy: str, acquired: bool, near: bool) -> None:
            raise RuntimeError("down")

        def queued(self, delta: int) -> None:
            raise RuntimeError("down")

        def time_in_queue(self, seconds: float, acquired: bool) -> None:
            raise RuntimeError("down")

    errors: list[Exception] = []
    irl = instrument(rl, Broken(), on_error=errors.append)
    assert irl.gcra("k", burst=1, rate=1, period="1s", at=now).allowed
    assert [str(e) for e in errors] == ["down"]
    with pytest.raises(ValueError):
        instrument(rl, Broken(), near_limit_percent=101)


def test_an_async_limiter_is_counted(server: RedisModuleServer, now: int) -> None:
    import asyncio

    import redis.asyncio as aioredis

    registry = CollectorRegistry()

    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port)
        arl = instrument(AsyncRateLimiter(client), PrometheusRecorder(registry))
        for _ in range(3):
            await arl.gcra("a", burst=2, rate=1, period="1m", at=now)
        await client.aclose()

    asyncio.run(main())
    v = registry.get_sample_value
    labels = {"command": "rl.gcra", "policy": ""}
    assert v("ratelimit_requests_total", {**labels, "result": "acquired"}) == 2
    assert v("ratelimit_requests_total", {**labels, "result": "limited"}) == 1
