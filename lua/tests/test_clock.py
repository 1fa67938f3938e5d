"""The script as shipped (no AT: the server's TIME) against the module without AT.

Two servers read their clocks at different instants, so durations cannot match to the µs.
Parameters are chosen so that no decision depends on when the calls land (refills of one unit
per hour, a fixed window whose end is 30 minutes away), so `granted`, `limit` and `remaining`
must be identical. `retry_after_ms` and `reset_after_ms` are a stored time (set by an earlier
call on the key) minus this call's time, and each of those times is read on each server at most
one call's wall time apart: so they may differ by at most the longest wall time between a
module call and its script call so far on the key plus this call's, in ms rounded up, plus 1 ms
for the rounding of each side (the bound the README states).
"""

from __future__ import annotations

import math
import time

import redis

from conftest import ScriptServer


def calls(
    module: redis.Redis,
    scripts: ScriptServer,
    sc: redis.Redis,
    cmd: str,
    key: str,
    args: list[str],
    worst: list[float],
) -> None:
    t0 = time.monotonic()
    m = module.execute_command(cmd, key, *args)
    s = sc.evalsha(scripts.sha, 1, key, cmd, *args)
    apart = (time.monotonic() - t0) * 1000
    bound = math.ceil(worst[0] + apart) + 1
    worst[0] = max(worst[0], apart)
    assert s[:3] == m[:3], f"{cmd} {args}: {s} vs {m}"
    for i in (3, 4):
        if m[i] <= 0 or s[i] <= 0:
            assert s[i] == m[i], f"{cmd} {args}: {s} vs {m}"
        else:
            assert abs(s[i] - m[i]) <= bound, f"{cmd} {args}: {s} vs {m}, bound {bound} ms"


def test_server_clock_without_at(module: redis.Redis, scripts: ScriptServer) -> None:
    sc = scripts.client()
    module.flushall()
    sc.flushall()
    now_ms = int(time.time() * 1000)
    offset = (now_ms + 1_800_000) % 3_600_000
    cases = [
        ("RL.GCRA", ["5", "1", "1h"]),
        ("RL.TOKENBUCKET", ["5", "1", "1h"]),
        ("RL.FIXED", ["5", "1h", "OFFSET", f"{offset}ms"]),
    ]
    for cmd, params in cases:
        key = "clock:" + cmd
        worst = [0.0]
        for cost in ["1", "2", "0", "3", "1", "7", "2"]:
            for extra in ([], ["PEEK"], ["BESTEFFORT"]):
                calls(module, scripts, sc, cmd, key, [*params, "COST", cost, *extra], worst)
        # The key expires when the limiter is fresh again, from each server's own clock.
        m_ttl, s_ttl = module.pttl(key), sc.pttl(key)
        assert m_ttl > 0 and abs(m_ttl - s_ttl) <= 1000, (m_ttl, s_ttl)
    # The script reads the server's clock: its last update is within the calls' wall time.
    t = sc.time()
    value = sc.get("clock:RL.GCRA").decode()
    assert value.startswith("rl1 gcra "), value
    lu = int(value.split()[2])
    server_us = t[0] * 1_000_000 + t[1]
    assert 0 <= server_us - lu < 10_000_000
    sc.close()
