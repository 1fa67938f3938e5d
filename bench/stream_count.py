#!/usr/bin/env python3
"""RL.STREAMCOUNT against a big window: per-call server time and hot-key throughput.

    python3 bench/stream_count.py --module target/release/libredis_ratelimit.so [--quick]

1. Per-call latency: a stream is prefilled (XADD, one entry per ms, `count 1`) with 2k, 20k and
   200k entries inside a one-hour window, then RL.STREAMCOUNT is called on it in a loop, one call
   at a time, alternately writing (`ADD 1`) and reading (`ADD 0`), each call with an `AT` 1 ms
   later than the previous one so the window slides. The figure is the server's own time per
   call (`usec_per_call` of `INFO commandstats`), so the client and the network are not in it.
   The first call on the prefilled stream (which has no running total yet, so it reads the
   window once) is shown apart.
2. Two windows on one stream ("100 a minute and 1,000 an hour"): the same 200k-entry prefill
   (about 3.3 minutes of entries), then calls alternating `RL.STREAMCOUNT k 1m ADD 0` (the
   minute's check) and `RL.STREAMCOUNT k 1h ADD 1` (the hour's count), AT 1 ms apart; every
   reply is checked against a sum of the entries the bench made.
3. Hot-key throughput at pipeline 16 (50 connections, redis-benchmark): `RL.STREAMCOUNT hot 1h`
   against `INCR hot`, each run followed by an INCR run on the same server.

Standard library only; starts its own redis-server on a free loopback port (bench.py's
helpers) and stops it by pid.
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import Server  # noqa: E402

WINDOW = "1h"
HOUR_MS = 3_600_000


def usec_per_call(c, name: str) -> float:
    info = c.info("commandstats")
    v = info.get(f"cmdstat_{name}", "")
    m = re.search(r"usec_per_call=([0-9.]+)", v)
    return float(m.group(1)) if m else float("nan")


def prefill(c, key: str, n: int, t0: int):
    batch = 1000
    for start in range(0, n, batch):
        c.pipeline([["XADD", key, f"{t0 + i}-0", "count", "1"]
                    for i in range(start, min(n, start + batch))])


def latency(c, n: int, calls: int) -> float:
    c.call("FLUSHALL")
    now = int(time.time() * 1000)
    t0 = now - n - 10
    key = f"win{n}"
    prefill(c, key, n, t0)
    # The first call finds no running total for a stream another writer filled and reads the
    # whole window once; it is timed apart.
    c.call("CONFIG", "RESETSTAT")
    at = now
    expect = n
    if c.call("RL.STREAMCOUNT", key, WINDOW, "ADD", 0, "AT", at) != expect:
        raise RuntimeError("first call")
    first = usec_per_call(c, "rl.streamcount")
    c.call("CONFIG", "RESETSTAT")
    # One call per round trip, like a client would; AT moves 1 ms per call, so entries leave the
    # window only after an hour: the window keeps its n entries (plus the ones added).
    for i in range(calls):
        add = i % 2
        at += 1
        r = c.call("RL.STREAMCOUNT", key, WINDOW, "ADD", add, "AT", at)
        expect += add
        if r != expect:
            raise RuntimeError(f"RL.STREAMCOUNT replied {r}, expected {expect}")
    return first, usec_per_call(c, "rl.streamcount")


def two_windows(c, n: int, calls: int) -> float:
    """µs per call alternating a 1-minute and a 1-hour window on one stream of n entries."""
    c.call("FLUSHALL")
    now = int(time.time() * 1000)
    t0 = now - n - 10
    key = f"two{n}"
    prefill(c, key, n, t0)
    times = [t0 + i for i in range(n)]  # the entries' ms, sorted; every count is 1
    at = now
    # Each window's first call reads its window once; they are left out of the figure.
    for window, ms in (("1m", 60_000), ("1h", HOUR_MS)):
        want = len(times) - bisect.bisect_left(times, at - ms)
        if c.call("RL.STREAMCOUNT", key, window, "ADD", 0, "AT", at) != want:
            raise RuntimeError(f"first {window} call")
    c.call("CONFIG", "RESETSTAT")
    for i in range(calls):
        at += 1
        window, ms, add = ("1m", 60_000, 0) if i % 2 == 0 else ("1h", HOUR_MS, 1)
        want = len(times) - bisect.bisect_left(times, at - ms) + add
        r = c.call("RL.STREAMCOUNT", key, window, "ADD", add, "AT", at)
        if r != want:
            raise RuntimeError(f"RL.STREAMCOUNT {window} replied {r}, expected {want}")
        if add:
            times.append(at)
    return usec_per_call(c, "rl.streamcount")


def benchmark(port: int, args: list[str], n: int) -> float:
    cmd = ["redis-benchmark", "-p", str(port), "-c", "50", "-P", "16", "-n", str(n), "-q",
           "--csv"] + args
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    lines = [ln for ln in out.splitlines() if ln and not ln.startswith('"test"')]
    return float(lines[-1].split(",")[1].strip('"'))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer calls and runs")
    ap.add_argument("--sizes", default="2000,20000,200000")
    ap.add_argument("--requests", type=int, help="requests per redis-benchmark run")
    a = ap.parse_args()
    module = os.path.abspath(a.module)
    calls = 200 if a.quick else 1000
    runs = 1 if a.quick else 3
    bench_n = a.requests or (200_000 if a.quick else 1_000_000)
    work = tempfile.mkdtemp(prefix="rl-stream-bench.")
    taskset = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    s = Server("stream", work, [module], taskset)
    try:
        s.start()
        c = s.client(timeout=600)
        print(f"# RL.STREAMCOUNT, window {WINDOW}, module {module}")
        print(f"# server: {c.info('server').get('redis_version')}; {calls} calls per size")
        print("| entries in window | server µs per call | first call (µs) |")
        print("|---:|---:|---:|")
        for n in [int(x) for x in a.sizes.split(",")]:
            first, per_call = latency(c, n, calls)
            print(f"| {n:,} | {per_call:.1f} | {first:.0f} |", flush=True)
        print()
        n = max(int(x) for x in a.sizes.split(","))
        print("| two windows on one stream | server µs per call |")
        print("|---|---:|")
        per_call = two_windows(c, n, calls)
        print(f"| {n:,} entries, alternating 1m ADD 0 and 1h ADD 1 | {per_call:.1f} |", flush=True)
        print()
        print("| hot key, P16, 50 conns | req/s | INCR req/s | ratio |")
        print("|---|---:|---:|---:|")
        rates, incrs = [], []
        for _ in range(runs):
            c.call("FLUSHALL")
            rates.append(benchmark(s.port, ["RL.STREAMCOUNT", "hot", WINDOW], bench_n))
            incrs.append(benchmark(s.port, ["INCR", "hot:incr"], bench_n))
        r, i = statistics.median(rates), statistics.median(incrs)
        print(f"| RL.STREAMCOUNT hot {WINDOW} | {r:,.0f} | {i:,.0f} | {r / i:.3f} |")
        c.close()
    finally:
        s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
