"""Header fields against draft-ietf-httpapi-ratelimit-headers-11's examples, and the parsing of
reply shapes (five integers, RESP3 maps, the detailed reply the SPEC describes)."""

from __future__ import annotations

import pytest

from redis_ratelimit_client import (
    GCRA,
    Concurrency,
    Fixed,
    LimiterDetail,
    Result,
    TokenBucket,
    rate_limit_headers,
)
from redis_ratelimit_client._commands import parse_result
from redis_ratelimit_client.headers import ratelimit_policy, sf_string


def test_the_drafts_examples() -> None:
    # The draft: RateLimit-Policy: "default";q=100;w=10 and RateLimit: "default";r=50;t=30.
    # t is the effective window: the 30 s until the limiter has more than its 50 (a read-only
    # check of 51 units says when).
    r = Result(True, 1, 100, 50, 0, 30_000)
    h = rate_limit_headers(r, Fixed(100, "10s"), next_unit=Result(False, 0, 100, 50, 30_000, 0))
    assert h == {"RateLimit-Policy": '"default";q=100;w=10', "RateLimit": '"default";r=50;t=30'}


def test_retry_after_never_zero_and_absent_when_never() -> None:
    denied = Result(False, 0, 5, 0, 1, 1)
    assert rate_limit_headers(denied, GCRA(5, 5, "10s"))["Retry-After"] == "1"
    assert (
        rate_limit_headers(Result(False, 0, 5, 0, 1001, 1), GCRA(5, 5, "10s"))["Retry-After"] == "2"
    )
    never = Result(False, 0, 5, 5, -1, 0)
    h = rate_limit_headers(never, GCRA(5, 5, "10s"))
    assert "Retry-After" not in h and h["RateLimit"] == '"default";r=5;t=0'
    # A granted leaky-bucket call with a queue delay is allowed: no Retry-After.
    assert "Retry-After" not in rate_limit_headers(
        Result(True, 1, 5, 3, 500, 900), GCRA(5, 5, "1s")
    )


def test_readme_example() -> None:
    # RL.GCRA user:42 5 5 10s after five calls, the sixth: retry 2 s, fresh in 10 s.
    # The next unit is back in 2 s (the check of 1 unit says so): t=2.
    h = rate_limit_headers(
        Result(False, 0, 5, 0, 2000, 10_000),
        GCRA(5, 5, "10s"),
        next_unit=Result(False, 0, 5, 0, 2000, 10_000),
    )
    assert h == {
        "RateLimit-Policy": '"default";q=5;w=10',
        "RateLimit": '"default";r=0;t=2',
        "Retry-After": "2",
    }
    # Without the check t is left out (the draft makes it optional), never guessed.
    h = rate_limit_headers(Result(False, 0, 5, 0, 2000, 10_000), GCRA(5, 5, "10s"))
    assert h["RateLimit"] == '"default";r=0' and h["Retry-After"] == "2"


def test_several_policies() -> None:
    policies = {
        "burst": GCRA(10, 10, "1s"),
        "daily": Fixed(1000, "1d"),
        "inflight": Concurrency(5, "30s"),
    }
    assert ratelimit_policy(policies) == '"burst";q=10;w=1, "daily";q=1000;w=86400, "inflight";q=5'
    # A merged reply does not say which limiter its numbers are: several need a detailed one.
    with pytest.raises(ValueError, match="detailed reply"):
        rate_limit_headers(Result(True, 1, 1000, 10, 0, 86_000_000), policies)
    # w rounds up: 7 units at 3 per second refill in 2.33 s.
    assert ratelimit_policy({"t": TokenBucket(7, 3, "1s")}) == '"t";q=7;w=3'


def test_sf_string() -> None:
    assert sf_string('a"b\\c') == '"a\\"b\\\\c"'
    with pytest.raises(ValueError):
        sf_string("é")


def test_parse_shapes() -> None:
    assert parse_result([1, 10, 9, 0, 200], 1) == Result(True, 1, 10, 9, 0, 200)
    m = {b"granted": 0, b"limit": 10, b"remaining": 0, b"retry_after_ms": -1, b"reset_after_ms": 5}
    assert parse_result(m, 11).never
    # The detailed reply of SPEC.md (DETAIL): RESP2 an array of 8, RESP3 a map.
    entry = [b"rpm", b"{t}:rpm", 1, 0, 60, 0, 1000, 60000, 60000, None]
    r = parse_result([0, 60, 0, 1000, 60000, b"rpm", b"limit", [entry]], 1)
    assert (r.denied_by, r.reason, r.limiters[0].name, r.limiters[0].window_ms) == (
        "rpm",
        "limit",
        "rpm",
        60000,
    )
    names = [
        "name",
        "key",
        "cost",
        "granted",
        "limit",
        "remaining",
        "retry_after_ms",
        "reset_after_ms",
        "window_ms",
        "policy",
    ]
    m3 = {
        "granted": 1,
        "limit": 60,
        "remaining": 59,
        "retry_after_ms": 0,
        "reset_after_ms": 1000,
        "denied_by": None,
        "reason": "granted",
        "limiters": [dict(zip(names, entry, strict=True))],
    }
    r3 = parse_result(m3, 1)
    assert r3.allowed and r3.reason == "granted" and r3.limiters[0].key == "{t}:rpm"
    h = rate_limit_headers(r, {"rpm": GCRA(60, 60, "1m")}, next_unit=r)
    assert h["RateLimit"] == '"rpm";r=0;t=1' and h["Retry-After"] == "1"
    with pytest.raises(TypeError):
        parse_result([1, 2, 3], 1)


def test_detailed_result_one_item_per_limiter() -> None:
    # As the draft's example "burst";q=100;w=60,"daily";q=1000;w=86400: one item per named
    # limiter, q its limit, w its window_ms in seconds rounded up (none for a concurrency
    # limiter), r its remaining, t its effective window (from the check of remaining + 1 of
    # each) in seconds rounded up; items joined by ", " (RFC 8941).
    limiters = (
        LimiterDetail("burst", "{u}:b", 1, 1, 100, 50, 0, 30_000, 60_000),
        LimiterDetail("daily", "{u}:d", 1, 1, 1000, 900, 0, 43_199_001, 86_400_000),
        LimiterDetail("tpm", "{u}:t", 3000, 3000, 9000, 6000, 0, 2000, 1500),
        LimiterDetail("inflight", "{u}:c", 1, 1, 5, 4, 0, 30_000, 0),
    )
    r = Result(True, 1, 9000, 6000, 0, 43_199_001, None, "granted", limiters)
    check = Result(
        False,
        0,
        0,
        0,
        1,
        0,
        "burst",
        "limit",
        (
            LimiterDetail("burst", "{u}:b", 51, 0, 100, 50, 600, 30_000, 60_000),
            LimiterDetail("daily", "{u}:d", 901, 0, 1000, 900, 43_199_001, 0, 86_400_000),
            LimiterDetail("tpm", "{u}:t", 6001, 0, 9000, 6000, 1, 2000, 1500),
            LimiterDetail("inflight", "{u}:c", 5, 0, 5, 4, 30_000, 30_000, 0),
        ),
    )
    # the reply alone names the items
    h = rate_limit_headers(r, GCRA(1, 1, "1s"), next_unit=check)
    assert h == {
        "RateLimit-Policy": '"burst";q=100;w=60, "daily";q=1000;w=86400, "tpm";q=9000;w=2, '
        '"inflight";q=5',
        "RateLimit": '"burst";r=50;t=1, "daily";r=900;t=43200, "tpm";r=6000;t=1, '
        '"inflight";r=4;t=30',
    }
    # Denied by one of them: Retry-After from the merged reply, never 0.
    denied = Result(False, 0, 100, 0, 1, 30_000, "burst", "limit", limiters[:1])
    assert rate_limit_headers(denied, {}) == {
        "RateLimit-Policy": '"burst";q=100;w=60',
        "RateLimit": '"burst";r=50',
        "Retry-After": "1",
    }
