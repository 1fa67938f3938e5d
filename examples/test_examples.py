"""Runs the example services against a real server with the module and checks their answers.

Started by scripts/examples.sh (which installs what the examples need). Environment:
  RL_MODULE  the module .so          RL_SERVER  the server binary (default redis-server)
  RL_LD_LIBRARY_PATH                 NODE       the node binary (default node)
Prints one line per check and ends with "N passed, N failed"; exits 1 on any failure.
"""

import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
# The policy the services are started with: bursts of 5, 5 per 10 s sustained, so one unit comes
# back every 2 s and an exhausted client is full again after 10 s.
BURST, RATE, PERIOD_S = 5, 5, 10
EMISSION_MS = PERIOD_S * 1000 // RATE
WINDOW_S = math.ceil(BURST * PERIOD_S / RATE)
POLICY = f'"default";q={BURST};w={WINDOW_S}'

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_line(proc, what, deadline=20):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if line.startswith("listening"):
            return
        if not line and proc.poll() is not None:
            break
    raise RuntimeError(f"{what} did not start (exit {proc.poll()})")


def get(port, path, key):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"X-Api-Key": key})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers


def ratelimit(headers):
    """The r and t parameters of the RateLimit field, as integers."""
    value = headers.get("RateLimit", "")
    item, *params = value.split(";")
    out = {"policy": item}
    for p in params:
        k, _, v = p.partition("=")
        out[k] = int(v)
    return out


def seconds_between(lo_ms, hi_ms):
    """Whole seconds (rounded up) for a time known to lie in [lo_ms, hi_ms]."""
    return math.ceil(max(lo_ms, 0) / 1000), math.ceil(hi_ms / 1000)


def run_checks(name, port):
    # A fresh client: five requests pass, the sixth waits one emission interval.
    start = time.monotonic()
    for i in range(1, BURST + 1):
        status, h = get(port, "/hello", f"{name}-a")
        rl = ratelimit(h)
        elapsed = (time.monotonic() - start) * 1000
        lo, hi = seconds_between(i * EMISSION_MS - elapsed, i * EMISSION_MS)
        check(f"{name}: request {i} granted", status == 200, status)
        check(f"{name}: request {i} RateLimit-Policy", h.get("RateLimit-Policy") == POLICY,
              h.get("RateLimit-Policy"))
        check(f"{name}: request {i} RateLimit r={BURST - i}, t in [{lo}, {hi}]",
              rl.get("policy") == '"default"' and rl.get("r") == BURST - i
              and lo <= rl.get("t", -1) <= hi, h.get("RateLimit"))
        check(f"{name}: request {i} has no Retry-After", h.get("Retry-After") is None)
    status, h = get(port, "/hello", f"{name}-a")
    elapsed = (time.monotonic() - start) * 1000
    lo, hi = seconds_between(EMISSION_MS - elapsed, EMISSION_MS)
    check(f"{name}: request 6 is 429", status == 429, status)
    retry = h.get("Retry-After")
    check(f"{name}: Retry-After in [{max(lo, 1)}, {hi}]",
          retry is not None and retry.isdigit() and max(lo, 1) <= int(retry) <= hi, retry)
    check(f"{name}: denied RateLimit r=0", ratelimit(h).get("r") == 0, h.get("RateLimit"))
    # Waiting Retry-After is enough.
    if retry is not None and retry.isdigit():
        time.sleep(int(retry))
        status, h = get(port, "/hello", f"{name}-a")
        check(f"{name}: granted again after Retry-After", status == 200, status)

    # More than the limit can ever grant: retry_after_ms is -1, so no Retry-After, and no 429.
    status, h = get(port, f"/batch?items={BURST + 1}", f"{name}-b")
    check(f"{name}: a batch above the limit is 413", status == 413, status)
    check(f"{name}: ... without Retry-After", h.get("Retry-After") is None, h.get("Retry-After"))
    check(f"{name}: ... charging nothing (r={BURST})", ratelimit(h).get("r") == BURST,
          h.get("RateLimit"))
    check(f"{name}: ... with the policy", h.get("RateLimit-Policy") == POLICY)

    # A batch of the whole burst passes, then the next request waits.
    status, h = get(port, f"/batch?items={BURST}", f"{name}-c")
    check(f"{name}: a batch of {BURST} is granted, r=0",
          status == 200 and ratelimit(h).get("r") == 0, (status, h.get("RateLimit")))
    status, h = get(port, "/hello", f"{name}-c")
    check(f"{name}: after it, 429 with Retry-After",
          status == 429 and h.get("Retry-After", "").isdigit(), (status, h.get("Retry-After")))

    # Clients are limited apart; bad input is refused before the limiter.
    status, h = get(port, "/hello", f"{name}-d")
    check(f"{name}: another client is not limited (r={BURST - 1})",
          status == 200 and ratelimit(h).get("r") == BURST - 1, (status, h.get("RateLimit")))
    status, _ = get(port, "/batch?items=abc", f"{name}-d")
    check(f"{name}: items=abc is 400", status == 400, status)


def main():
    module = os.environ.get("RL_MODULE")
    if not module or not os.path.isfile(module):
        sys.exit(f"RL_MODULE must name the module .so (got {module!r})")
    server = os.environ.get("RL_SERVER") or "redis-server"
    node = os.environ.get("NODE") or "node"
    env = dict(os.environ)
    if os.environ.get("RL_LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["RL_LD_LIBRARY_PATH"]
    tmp = tempfile.mkdtemp(prefix="rl-examples-")
    rport = free_port()
    procs = []
    try:
        redis_proc = subprocess.Popen(
            [server, "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", tmp, "--loadmodule", module],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(redis_proc)
        end = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", rport), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > end or redis_proc.poll() is not None:
                    sys.exit(f"{server} did not start on port {rport}")
                time.sleep(0.05)
        services = {
            "python": [sys.executable, os.path.join(HERE, "python", "app.py")],
            "node": [node, os.path.join(HERE, "node", "app.js")],
        }
        ports = {}
        for name, cmd in services.items():
            port = free_port()
            senv = dict(os.environ, REDIS_URL=f"redis://127.0.0.1:{rport}", PORT=str(port),
                        RL_BURST=str(BURST), RL_RATE=str(RATE), RL_PERIOD_S=str(PERIOD_S))
            p = subprocess.Popen(cmd, env=senv, stdout=subprocess.PIPE, text=True,
                                 cwd=os.path.dirname(cmd[1]))
            procs.append(p)
            wait_line(p, name)
            ports[name] = port
        for name, port in ports.items():
            run_checks(name, port)
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"examples: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
