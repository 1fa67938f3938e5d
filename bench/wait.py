#!/usr/bin/env python3
"""RL.ACQUIRE ... WAIT against polling: grants per second for a concurrency limit of 5 with 50
clients wanting a turn, in one run on one server.

    python3 bench/wait.py --module target/release/libredis_ratelimit.so [--seconds 5]
                          [--work-ms 5] [--lease-ms 50]

Each of 50 threads (one connection each) loops: take a lease on `wait:k` (limit 5), hold it for
`--work-ms` (the job), release it. The modes differ only in how a thread gets its turn:

- `wait`: `RL.ACQUIRE wait:k 5 <lease> ID <id> WAIT 30s`, which blocks until the lease fits;
  the server serves the waiters first come, first served.
- `poll`: `RL.ACQUIRE wait:k 5 <lease> ID <id>`; when denied, sleep `retry_after_ms` and try
  again (what a client does without WAIT). For a concurrency limiter `retry_after_ms` is the
  wait until enough leases *expire*; holders that release early are not seen, so the lease
  length matters (`--lease-ms`).
- `poll-1ms`: the same, sleeping 1 ms between tries (a busy client; its cost is the denied
  calls).

Reported per mode: grants per second, the calls made per grant, and the longest and the 99th
percentile wait for a turn (time from wanting a lease to holding it). Every grant is checked:
never more than 5 leases held at once (`held` of RL.INFO sampled during the run, and the replies).

Standard library only; starts its own redis-server on a free loopback port (bench.py's helpers)
and stops it by pid.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import ReplyError, Server  # noqa: E402

CLIENTS = 50
LIMIT = 5


def run_mode(server: Server, mode: str, seconds: float, work_ms: float, lease_ms: int) -> dict:
    key = f"wait:{mode}"
    stop = time.monotonic() + seconds
    grants = [0] * CLIENTS
    calls = [0] * CLIENTS
    waits: list[list[float]] = [[] for _ in range(CLIENTS)]
    errors: list[str] = []

    def worker(i: int) -> None:
        c = server.client(timeout=60)
        n = 0
        try:
            while time.monotonic() < stop:
                lease_id = f"{mode}-{i}-{n}"
                n += 1
                wanted = time.monotonic()
                while True:
                    args = ["RL.ACQUIRE", key, LIMIT, f"{lease_ms}ms", "ID", lease_id]
                    if mode == "wait":
                        args += ["WAIT", "30s"]
                    r = c.call(*args, check=False)
                    calls[i] += 1
                    if isinstance(r, ReplyError):
                        errors.append(str(r))
                        return
                    if r[0] == 1:
                        break
                    if mode == "wait":
                        errors.append(f"WAIT timed out: {r}")
                        return
                    if time.monotonic() >= stop:
                        return
                    pause = r[3] / 1000 if mode == "poll" else 0.001
                    time.sleep(max(pause, 0.0))
                waits[i].append(time.monotonic() - wanted)
                grants[i] += 1
                time.sleep(work_ms / 1000)
                c.call("RL.RELEASE", key, lease_id)
        finally:
            c.close()

    held_max = 0
    sampler = server.client(timeout=10)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(CLIENTS)]
    started = time.monotonic()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        info = sampler.call("RL.INFO", key)
        if isinstance(info, list):
            fields = dict(zip(info[0::2], info[1::2]))
            held_max = max(held_max, int(fields.get("held", 0)))
        time.sleep(0.01)
    elapsed = time.monotonic() - started
    sampler.close()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{mode}: {errors[:3]}")
    if held_max > LIMIT:
        raise RuntimeError(f"{mode}: {held_max} units held at once, limit {LIMIT}")
    all_waits = sorted(w for ws in waits for w in ws)
    total = sum(grants)
    return {
        "mode": mode,
        "grants_per_s": total / elapsed,
        "calls_per_grant": sum(calls) / max(total, 1),
        "wait_p99_ms": 1000 * all_waits[int(0.99 * (len(all_waits) - 1))] if all_waits else 0,
        "wait_max_ms": 1000 * all_waits[-1] if all_waits else 0,
        "wait_mean_ms": 1000 * statistics.fmean(all_waits) if all_waits else 0,
        "held_max": held_max,
        "starved": sum(1 for g in grants if g == 0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", required=True)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--work-ms", type=float, default=5.0)
    ap.add_argument("--lease-ms", type=int, default=50)
    a = ap.parse_args()
    ideal = LIMIT / (a.work_ms / 1000)
    with tempfile.TemporaryDirectory(prefix="rl-bench-wait-") as work:
        server = Server("wait", work, [os.path.abspath(a.module)], []).start()
        try:
            rows = [
                run_mode(server, mode, a.seconds, a.work_ms, a.lease_ms)
                for mode in ("wait", "poll", "poll-1ms")
            ]
        finally:
            server.stop()
    print(
        f"limit {LIMIT}, {CLIENTS} clients, job {a.work_ms:g} ms, lease {a.lease_ms} ms, "
        f"{a.seconds:g} s per mode (ceiling {ideal:.0f} grants/s)"
    )
    print(f"{'mode':<9} {'grants/s':>9} {'calls/grant':>12} {'wait mean':>10} "
          f"{'wait p99':>9} {'wait max':>9} {'held max':>9} {'starved':>8}")
    for r in rows:
        print(f"{r['mode']:<9} {r['grants_per_s']:>9.0f} {r['calls_per_grant']:>12.2f} "
              f"{r['wait_mean_ms']:>8.1f}ms {r['wait_p99_ms']:>7.1f}ms {r['wait_max_ms']:>7.1f}ms "
              f"{r['held_max']:>9} {r['starved']:>8}")


if __name__ == "__main__":
    main()
