"""Detailed replies (DETAIL), RL.ALL's CHARGE and NAME, RL.CHECKALL, DELAY and calendar windows
against the real module, RESP2 and RESP3; expectations computed from each call's parameters."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
import redis
import redis.asyncio as aioredis

from redis_ratelimit_client import (
    GCRA,
    AsyncRateLimiter,
    Concurrency,
    Fixed,
    LimiterDetail,
    RateLimiter,
    Result,
    TokenBucket,
    install_response_callbacks,
)
from redis_ratelimit_client.testing import RedisModuleServer


def five(r: Result) -> tuple[int, int, int, int, int]:
    return (r.granted, r.limit, r.remaining, r.retry_after_ms, r.reset_after_ms)


def test_detail_on_a_limiter_command(rl: RateLimiter, now: int) -> None:
    # GCRA 5 per 10 s: one unit is 2 s; a fully used limiter is fresh after 5 * 10 s / 5.
    r = rl.gcra("g", 5, 5, "10s", at=now, detail=True)
    assert five(r) == (1, 5, 4, 0, 2000) and r.allowed and r.detailed
    assert (r.denied_by, r.reason) == (None, "granted")
    assert r.limiters == (LimiterDetail("g", "g", 1, 1, 5, 4, 0, 2000, 10_000, None),)
    # Without DETAIL the reply is the plain one.
    plain = rl.gcra("g", 5, 5, "10s", at=now)
    assert five(plain) == (1, 5, 3, 0, 4000) and not plain.detailed and plain.limiters == ()
    never = rl.gcra("g", 5, 5, "10s", cost=6, at=now, detail=True)
    assert never.never and (never.denied_by, never.reason) == ("g", "never")
    # A concurrency limiter has no window.
    a = rl.acquire("c", 3, "10s", "x", at=now, detail=True)
    assert a.limiters == (LimiterDetail("c", "c", 1, 1, 3, 2, 0, 10_000, 0, None),)


def test_fixed_and_sliding_detail(rl: RateLimiter, now: int) -> None:
    # now is on a whole second: the 1 min window ends at the next multiple of 60 s.
    reset = 60_000 - now % 60_000
    f = rl.fixed("f", 10, "1m", cost=3, at=now, detail=True)
    assert f.limiters == (LimiterDetail("f", "f", 3, 3, 10, 7, 0, reset, 60_000, None),)
    s = rl.sliding_counter("s", 10, "30s", at=now, detail=True)
    assert s.limiters[0].window_ms == 30_000 and s.limiters[0].remaining == 9


RPM = GCRA(60, 60, "1m", name="rpm")
TPM = TokenBucket(9000, 1500, "1s", name="tpm", charge=3000)


def test_all_with_charge_name_detail(rl: RateLimiter, now: int) -> None:
    limits = {"{t}:rpm": RPM, "{t}:tpm": TPM}
    # RL.CHECKALL charges nothing, whatever it is asked.
    for _ in range(2):
        chk = rl.check_all(limits, cost=2, at=now, detail=True)
        assert chk.allowed and [d.remaining for d in chk.limiters] == [58, 6000]
    # rpm: 1 of 60 (1 s to refill one, 60 s for 60); tpm: 3000 of 9000 at 1500/s.
    expected_rpm = LimiterDetail("rpm", "{t}:rpm", 1, 1, 60, 59, 0, 1000, 60_000, None)
    expected_tpm = LimiterDetail("tpm", "{t}:tpm", 3000, 3000, 9000, 6000, 0, 2000, 6000, None)
    r = rl.all(limits, at=now, detail=True)
    # limit/remaining from the limiter allowing the fewest more calls: tpm (6000 / 3000 = 2).
    assert five(r) == (1, 9000, 6000, 0, 2000)
    assert r.limiters == (expected_rpm, expected_tpm) and r.reason == "granted"
    rl.all(limits, at=now)
    rl.all(limits, at=now)
    denied = rl.all(limits, at=now, detail=True)
    # tpm is empty: 3000 tokens come back in 2 s; nothing was charged to rpm.
    assert not denied.allowed and (denied.denied_by, denied.reason) == ("tpm", "limit")
    assert denied.retry_after_ms == 2000 and denied.limiters[0].remaining == 57
    # DELAY 2s: a wait of exactly 2 s is granted now, the caller waits it.
    assert not rl.all(limits, at=now, delay="1999ms").allowed
    delayed = rl.all(limits, at=now, delay="2s")
    assert delayed.allowed and delayed.granted == 1 and delayed.retry_after_ms == 2000


@pytest.mark.parametrize("method", ["gcra", "token_bucket", "leaky_bucket"])
def test_delay_on_the_gcra_family(rl: RateLimiter, now: int, method: str) -> None:
    call = getattr(rl, method)
    # 2 units, 1 per second: the third unit is 1 s away.
    assert call("d", 2, 1, "1s", cost=2, at=now).allowed
    assert not call("d", 2, 1, "1s", at=now, delay="999ms").allowed
    r = call("d", 2, 1, "1s", at=now, delay="1s")
    # The wait is the delay, except for the leaky bucket: its queue delay, behind the 2 queued
    # units that leave at 1 per second.
    wait = 2000 if method == "leaky_bucket" else 1000
    assert r.allowed and r.granted == 1 and r.retry_after_ms == wait


def test_check_names_and_charge(rl: RateLimiter, now: int) -> None:
    r = rl.check("k", Fixed(10, "1m", name="quota", charge=4), at=now, detail=True)
    assert r.limiters[0].name == "quota" and r.limiters[0].cost == 4
    assert r.limiters[0].remaining == 6 and rl.info("k") is None


def ms(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)


def test_calendar_windows(rl: RateLimiter) -> None:
    # 2031-01-20 12:00 UTC; a month anchored on the 15th in Paris runs Jan 15 to Feb 15 local.
    t = datetime(2031, 1, 20, 12, tzinfo=timezone.utc)
    paris = ZoneInfo("Europe/Paris")
    end = datetime(2031, 2, 15, tzinfo=paris)
    r = rl.fixed("m", 10, "month", tz="Europe/Paris", anchor=15, cost=2, at=ms(t))
    assert five(r) == (2, 10, 8, 0, ms(end) - ms(t))
    # A week starting on Sunday at UTC+05:30: 2031-01-20 is a Monday, the week ends on Sunday 26.
    week_end = datetime(2031, 1, 26, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    w = rl.fixed("w", 5, "week", tz="+05:30", anchor="sun", at=ms(t), detail=True)
    assert five(w) == (1, 5, 4, 0, ms(week_end) - ms(t)) and w.limiters[0].cost == 1
    # A year anchored on April 15 (UTC): 2030-04-15 to 2031-04-15.
    y = rl.check("y", Fixed(100, "year", anchor="04-15"), at=ms(t))
    assert five(y) == (1, 100, 99, 0, ms(datetime(2031, 4, 15, tzinfo=timezone.utc)) - ms(t))
    # In RL.ALL, next to another limiter.
    day_end = datetime(2031, 1, 21, tzinfo=paris)
    a = rl.all({"{d}:day": Fixed(3, "day", tz="Europe/Paris")}, at=ms(t))
    assert five(a) == (1, 3, 2, 0, ms(day_end) - ms(t))


def test_spec_validation() -> None:
    with pytest.raises(ValueError):
        Fixed(10, "1m", tz="UTC")
    with pytest.raises(ValueError):
        GCRA(1, 1, "1s", name="a b")
    with pytest.raises(ValueError):
        GCRA(1, 1, "1s", charge=-1)
    assert Fixed(5, "day", tz="UTC", anchor=1, charge=0, name="d").spec() == [
        "FIXED",
        5,
        "day",
        "TZ",
        "UTC",
        "ANCHOR",
        1,
        "CHARGE",
        0,
        "NAME",
        "d",
    ]
    assert Concurrency(2, "1s").named("c").spec() == ["CONCURRENCY", 2, "1s", "NAME", "c"]


def test_callbacks_parse_checkall(client: redis.Redis, now: int) -> None:
    install_response_callbacks(client)
    r = client.execute_command("RL.CHECKALL", 1, "x", "GCRA", 5, 5, "1s", "DETAIL", "AT", now)
    assert isinstance(r, Result) and r.detailed and r.limiters[0].window_ms == 1000


@pytest.mark.parametrize("protocol", [2, 3])
def test_async_detail(server: RedisModuleServer, now: int, protocol: int) -> None:
    async def main() -> None:
        client = aioredis.Redis(host=server.host, port=server.port, protocol=protocol)
        await client.flushdb()
        rl = AsyncRateLimiter(client)
        limits = {"{a}:rpm": RPM, "{a}:tpm": TPM}
        c = await rl.check_all(limits, at=now, detail=True)
        assert [d.name for d in c.limiters] == ["rpm", "tpm"]
        r = await rl.all(limits, at=now, detail=True, delay="1s")
        assert five(r) == (1, 9000, 6000, 0, 2000) and r.limiters[1].cost == 3000
        g = await rl.gcra("g", 1, 1, "1s", at=now, detail=True)
        assert g.limiters[0].window_ms == 1000
        f = await rl.fixed("f", 2, "day", tz="UTC", at=now, detail=True)
        assert f.reset_after_ms == 86_400_000 - now % 86_400_000
        await client.aclose()

    asyncio.run(main())
