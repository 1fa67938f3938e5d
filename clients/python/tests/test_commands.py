"""Every command through RateLimiter against the real module, over RESP2 and RESP3 (with and
without decode_responses). Times are pinned with AT; every expected value is worked out from the
parameters (see each test's comments), never read back from the module."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import redis

from redis_ratelimit_client import (
    GCRA,
    Concurrency,
    Fixed,
    RateLimiter,
    RateLimitExceeded,
    Result,
    Sliding,
    SlidingCounter,
    StreamCount,
    ThrottleResult,
    TokenBucket,
    install_response_callbacks,
)
from redis_ratelimit_client.testing import RedisModuleServer


def five(r: Result) -> tuple[int, int, int, int, int]:
    return (r.granted, r.limit, r.remaining, r.retry_after_ms, r.reset_after_ms)


def test_gcra(rl: RateLimiter, now: int) -> None:
    # burst 10, 5 per second: T = 200 ms. One call: TAT = now + T.
    r = rl.gcra("g", 10, 5, "1s", at=now)
    assert five(r) == (1, 10, 9, 0, 200) and r.allowed and r and not r.never
    assert r.retry_after == 0 and r.reset_after == 0.2
    assert r.retry_after_delta == timedelta(0) and r.reset_after_delta == timedelta(
        milliseconds=200
    )
    # Nine more: TAT = now + 10 T, nothing remains.
    assert five(rl.gcra("g", 10, 5, "1s", cost=9, at=now)) == (9, 10, 0, 0, 2000)
    # The next waits one emission interval.
    r = rl.gcra("g", 10, 5, "1s", at=now)
    assert five(r) == (0, 10, 0, 200, 2000) and not r.allowed and not r
    assert r.retry_after == 0.2 and r.retry_after_seconds == 0.2
    assert r.retry_after_delta == timedelta(milliseconds=200)
    assert r.retry_after_header == 1
    # 11 > burst: never. No retry time, no Retry-After.
    r = rl.gcra("g", 10, 5, "1s", cost=11, at=now)
    assert r.never and not r.allowed and r.retry_after_ms == -1
    assert r.retry_after is None and r.retry_after_seconds is None and r.retry_after_header is None
    assert r.retry_after_delta is None
    # PEEK one emission interval later: granted, charges nothing.
    r = rl.gcra("g", 10, 5, "1s", peek=True, at=now + 200)
    assert five(r) == (1, 10, 0, 0, 2000)
    # BESTEFFORT of 3 at now + 400: two units came back, two are granted.
    r = rl.gcra("g", 10, 5, "1s", cost=3, best_effort=True, at=now + 400)
    assert r.granted == 2 and not r.allowed and r.remaining == 0


def test_token_bucket(rl: RateLimiter, now: int) -> None:
    # 100 tokens, 10 per second: 30 taken leave 70, full again in 3 s.
    assert five(rl.token_bucket("t", 100, 10, "1s", cost=30, at=now)) == (30, 100, 70, 0, 3000)
    # 80 more: 10 missing, back in 1 s.
    r = rl.token_bucket("t", 100, 10, "1s", cost=80, at=now)
    assert five(r) == (0, 100, 70, 1000, 3000) and r.retry_after_header == 1


def test_leaky_bucket_queue_delay_is_allowed(rl: RateLimiter, now: int) -> None:
    # capacity 10 draining 2 per second: each unit leaves 500 ms after the one before.
    assert five(rl.leaky_bucket("l", 10, 2, "1s", at=now)) == (1, 10, 9, 0, 500)
    r = rl.leaky_bucket("l", 10, 2, "1s", at=now)
    # Granted, with a queue delay of 500 ms: allowed, no Retry-After.
    assert five(r) == (1, 10, 8, 500, 1000) and r.allowed and r.retry_after_header is None


def test_fixed(rl: RateLimiter, now: int) -> None:
    # Windows of a minute aligned to the epoch; call 10 s into the next minute.
    t = (now // 60000 + 1) * 60000 + 10000
    assert five(rl.fixed("f", 5, "1m", cost=4, at=t)) == (4, 5, 1, 0, 50000)
    r = rl.fixed("f", 5, "1m", cost=2, at=t)
    assert five(r) == (0, 5, 1, 50000, 50000) and r.retry_after_header == 50
    # OFFSET 10s: this call starts a new window here, a minute long (the key is reset first).
    rl.client.delete("f")
    assert five(rl.fixed("f", 5, "1m", offset="10s", at=t)) == (1, 5, 4, 0, 60000)


def test_sliding(rl: RateLimiter, now: int) -> None:
    assert five(rl.sliding("s", 5, "1m", at=now)) == (1, 5, 4, 0, 60000)
    assert five(rl.sliding("s", 5, "1m", cost=4, at=now + 1000)) == (4, 5, 0, 0, 60000)
    # At now + 2 s the oldest unit leaves at now + 60 s; the newest at now + 61 s.
    assert five(rl.sliding("s", 5, "1m", at=now + 2000)) == (0, 5, 0, 58000, 59000)
    # PRECISION is passed on: buckets of 10 s.
    assert rl.sliding("p", 5, "1m", precision="10s", at=now).granted == 1


def test_sliding_counter(rl: RateLimiter, now: int) -> None:
    w = 100_000
    k = now // w + 1
    # 88 units at the start of window k: reset when both windows have passed, 2 w.
    assert five(rl.sliding_counter("c", 100, "100s", cost=88, at=k * w)) == (88, 100, 12, 0, 2 * w)
    # A quarter into window k+1 the estimate is 88 * 3/4 = 66: 12 more leave 22.
    t = (k + 1) * w + w // 4
    assert rl.sliding_counter("c", 100, "100s", cost=12, at=t).remaining == 22
    # 30 more must wait until 88 * (1 - e/w) <= 58: e = 30/88 w, 9090.9.. ms from now.
    r = rl.sliding_counter("c", 100, "100s", cost=30, at=t)
    assert (r.granted, r.remaining, r.retry_after_ms) == (0, 22, 9091)


def test_all_and_check(rl: RateLimiter, now: int) -> None:
    limits = {"{u7}:s": GCRA(10, 10, "1s"), "{u7}:h": GCRA(1000, 1000, "1h")}
    # 10/s leaves 9 of 10 (fresh in 100 ms); 1000/h 999 of 1000 (fresh in 3.6 s).
    assert five(rl.all(limits, at=now)) == (1, 10, 9, 0, 3600)
    r = rl.all(limits, cost=11, at=now)
    assert r.never and r.granted == 0
    # The order of a list of pairs is kept.
    r = rl.all([("{u7}:h", GCRA(1000, 1000, "1h")), ("{u7}:s", GCRA(10, 10, "1s"))], at=now)
    assert five(r) == (1, 10, 8, 0, 7200)
    # RL.CHECK: the PEEK reply (as if a third unit were taken: TAT now + 300 ms), nothing
    # charged, so twice the same.
    assert five(rl.check("{u7}:s", GCRA(10, 10, "1s"), at=now)) == (1, 10, 7, 0, 300)
    assert five(rl.check("{u7}:s", GCRA(10, 10, "1s"), at=now)) == (1, 10, 7, 0, 300)
    assert rl.check("{u7}:s", GCRA(10, 10, "1s"), cost=20, at=now).never
    assert rl.check("fresh", Fixed(3, "1m"), at=now).remaining == 2
    assert rl.check("fresh2", Sliding(3, "1m"), cost=3, at=now).allowed
    assert rl.check("fresh3", SlidingCounter(3, "1m"), cost=4, at=now).never


def test_refund(rl: RateLimiter, now: int) -> None:
    r = rl.token_bucket("llm", 1000, 1000, "1m", cost=100, dedup="req-1", at=now)
    assert five(r) == (100, 1000, 900, 0, 6000)
    # 70 back: 970 left, full again in 30 tokens' time, 1.8 s.
    assert five(rl.refund("llm", 70, dedup="req-1", at=now)) == (70, 1000, 970, 0, 1800)  # type: ignore[arg-type]
    refund = rl.refund("llm", 70, dedup="req-1", at=now)
    assert refund is not None and refund.granted == 0
    assert rl.refund("missing", 1) is None


def test_block_unblock(rl: RateLimiter, now: int) -> None:
    assert rl.block("b", "1h", at=now) == timedelta(hours=1)
    r = rl.gcra("b", 10, 5, "1s", at=now)
    assert five(r) == (0, 10, 0, 3_600_000, 3_600_000) and r.retry_after_header == 3600
    assert rl.unblock("b") is True
    assert rl.unblock("b") is False
    assert rl.gcra("b", 10, 5, "1s", at=now).allowed
    # The BLOCK option blocks a key whose call is denied.
    rl.fixed("b2", 1, "1m", at=now)
    r = rl.fixed("b2", 1, "1m", block="10m", at=now)
    assert not r.allowed
    info = rl.info("b2")
    assert info is not None and info.blocked_ms > 60_000


def test_acquire_release_lease(rl: RateLimiter, now: int) -> None:
    assert five(rl.acquire("c", 2, "10s", "a", at=now)) == (1, 2, 1, 0, 10000)
    assert five(rl.acquire("c", 2, "10s", "b", at=now + 1000)) == (1, 2, 0, 0, 10000)
    # Full: the first lease ends 9 s after now + 1 s.
    assert five(rl.acquire("c", 2, "10s", "x", at=now + 1000)) == (0, 2, 0, 9000, 10000)
    assert rl.release("c", "a") == 1
    assert rl.release("c", "a") == 0
    rl.client.delete("c")
    with rl.lease("c", 2, "10s", cost=2) as lease:
        assert lease.result.granted == 2 and lease.result.remaining == 0
        with pytest.raises(RateLimitExceeded) as e, rl.lease("c", 2, "10s"):
            pass
        assert e.value.result.granted == 0 and not e.value.result.never
        assert lease.renew().allowed
        info = rl.info("c")
        assert info is not None and info["held"] == 2
    # Released on exit.
    assert rl.acquire("c", 2, "10s", "y", cost=2).allowed
    with pytest.raises(RateLimitExceeded) as e, rl.lease("c2", 2, "10s", cost=3):
        pass
    assert e.value.result.never
    with pytest.raises(TypeError):
        rl.apply("c3", Concurrency(2, "10s"))


def test_apply(rl: RateLimiter, now: int) -> None:
    assert five(rl.apply("a", TokenBucket(100, 10, "1s"), cost=30, at=now)) == (
        30,
        100,
        70,
        0,
        3000,
    )


def test_stream_count(rl: RateLimiter, now: int) -> None:
    assert rl.stream_count("x", "1m", add=3, limit=100, at=now) == StreamCount(True, 3)
    assert rl.stream_count("x", "1m", add=0, at=now) == StreamCount(True, 3)
    denied = rl.stream_count("x", "1m", add=2, limit=4, at=now)
    assert denied == StreamCount(False, None) and not denied


def test_throttle(rl: RateLimiter) -> None:
    # redis-cell's reply: limit = max_burst + 1, retry -1 when allowed, seconds.
    assert rl.throttle("cl", 15, 30, 60) == ThrottleResult(False, 16, 15, -1, 2)


def test_info(rl: RateLimiter, now: int) -> None:
    assert rl.info("nothing") is None
    rl.gcra("i", 10, 5, "1h", cost=4, at=now)
    info = rl.info("i")
    assert info is not None and info.algorithm == "gcra"
    assert (info["burst"], info["rate"], info["period_ms"]) == (10, 5, 3_600_000)
    assert info.result is not None and info.result.remaining == 6 and info.blocked_ms == 0
    rl.block("bo", "1m")
    block_only = rl.info("bo")
    assert block_only is not None and block_only.algorithm == "none" and block_only.result is None


def test_callbacks_on_the_client_and_pipelines(client: redis.Redis, now: int) -> None:
    RateLimiter(client)
    # A limiter registers nothing: the client's replies stay raw.
    assert not isinstance(client.execute_command("RL.GCRA", "other", 10, 5, "1s"), Result)
    install_response_callbacks(client)
    raw = client.execute_command("RL.GCRA", "raw", 10, 5, "1s", "AT", now)
    assert isinstance(raw, Result) and raw.remaining == 9 and raw.allowed
    # Without the cost hint a granted leaky-bucket call with a queue delay reads as not allowed;
    # the hint says what was asked.
    client.execute_command("RL.LEAKYBUCKET", "lb", 10, 2, "1s", "AT", now)
    hinted = client.execute_command("RL.LEAKYBUCKET", "lb", 10, 2, "1s", "AT", now, rl_cost=1)
    assert hinted.allowed and hinted.retry_after_ms == 500
    pipe = client.pipeline()
    pipe.execute_command("RL.GCRA", "raw", 10, 5, "1s", "AT", now)
    pipe.execute_command("RL.INFO", "raw")
    res, info = pipe.execute()
    assert isinstance(res, Result) and res.remaining == 8
    assert info.algorithm == "gcra"


def test_errors_pass_through(rl: RateLimiter) -> None:
    rl.client.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        rl.gcra("str", 10, 5, "1s")
    with pytest.raises(ValueError):
        rl.gcra("k", 0, 5, "1s")
    with pytest.raises(ValueError):
        rl.gcra("k", 1, 5, "1 s")
    with pytest.raises(ValueError):
        rl.gcra("k", 1, 5, "1s", cost=-1)


def test_acquire_waits_for_its_turn(rl: RateLimiter, server: RedisModuleServer) -> None:
    # One unit, held by "a": a waiter is granted when "a" is released, and a wait with nobody
    # releasing ends denied once its timeout has passed.
    assert rl.acquire("w", 1, "10s", "a").allowed
    other = redis.Redis(host=server.host, port=server.port)
    timer = threading.Timer(0.2, lambda: other.execute_command("RL.RELEASE", "w", "a"))
    started = time.monotonic()
    timer.start()
    try:
        r = rl.acquire("w", 1, "10s", "b", wait="5s")
    finally:
        timer.join()
        other.close()
    assert five(r) == (1, 1, 0, 0, 10000)
    assert 0.19 <= time.monotonic() - started < 4
    started = time.monotonic()
    r = rl.acquire("w", 1, "10s", "c", wait="300ms")
    assert r.granted == 0 and r.limit == 1 and r.remaining == 0
    assert 0 < r.retry_after_ms <= 10000
    assert 0.29 <= time.monotonic() - started < 4
    with pytest.raises(redis.ResponseError, match="WAIT cannot be combined with PEEK"):
        rl.acquire("w", 1, "10s", "c", wait="1s", peek=True)
