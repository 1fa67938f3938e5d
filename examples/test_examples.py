"""Runs the example services against a real server with the module and checks their answers.

Started by scripts/examples.sh (which installs what the examples need). Environment:
  RL_MODULE  the module .so          RL_SERVER  the server binary (default redis-server)
  RL_LD_LIBRARY_PATH                 NODE       the node binary (default node)
Prints one line per check and ends with "N passed, N failed"; exits 1 on any failure.
"""

import json
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
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

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
    """Both services send draft-11's t (the seconds until the limiter has more than r: the next
    unit, back within one emission interval of the first request), not the time to a full reset."""
    # A fresh client: five requests pass, the sixth waits one emission interval.
    start = time.monotonic()
    for i in range(1, BURST + 1):
        status, h = get(port, "/hello", f"{name}-a")
        rl = ratelimit(h)
        elapsed = (time.monotonic() - start) * 1000
        lo, hi = seconds_between(EMISSION_MS - elapsed, EMISSION_MS)
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
    check(f"{name}: denied t in [{lo}, {hi}] and Retry-After >= t",
          lo <= ratelimit(h).get("t", -1) <= hi and retry is not None and retry.isdigit()
          and int(retry) >= ratelimit(h).get("t", 10**9), (h.get("RateLimit"), retry))
    if name == "node":
        check(f"{name}: the denial is application/problem+json",
              h.get("Content-Type", "").startswith("application/problem+json"),
              h.get("Content-Type"))
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


# The LLM gateway (examples/gateway): 10 requests and 10,000 tokens per minute, 50,000 tokens per
# billing month unless the customer's plan says otherwise; reservations held 30 s.
GW_RPM, GW_TPM, GW_BUDGET, GW_HOLD_MS = 10, 10_000, 50_000, 30_000
RPM_MS = 60_000 // GW_RPM  # one request comes back every 6 s
TOKEN_MS = 60_000 // GW_TPM  # one token comes back every 6 ms
PARIS, NEW_YORK = ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")
GW_CUSTOMERS = {
    # Billing months from the 15th, Paris time: April 15 to May 15, 30 days, no DST change.
    **{c: {"tz": "Europe/Paris", "billing_day": 15} for c in ("hdr", "tpm", "settle", "crash")},
    # A small plan billed on the 31st, New York time: April has 30 days, so the month that runs
    # on April 20 is Mar 31 to Apr 30 (the anchor clamps to the month's last day).
    "month": {"tz": "America/New_York", "billing_day": 31, "monthly_tokens": 5000},
}
# The test's clock, sent as X-Test-Now (the service's AT): April 20, 12:00 UTC, next year (ahead
# of the server's clock, which the harness lets AT be). Every fact below holds in any year: Paris
# changes its clocks in late March and October, New York in early March and November.
YEAR = datetime.now(timezone.utc).year + 1
T0 = datetime(YEAR, 4, 20, 12, tzinfo=timezone.utc)


def ms(t):
    return int(t.timestamp() * 1000)


def sf_list(value):
    """An RFC 8941 list of strings with integer parameters: {name: {param: int}}."""
    out = {}
    for item in (value or "").split(","):
        name, *params = item.strip().split(";")
        out[json.loads(name)] = {k: int(v) for k, _, v in (p.partition("=") for p in params)}
    return out


def gw_post(port, customer, estimated, used=None, now=None, crash=False):
    """POST /v1/completions; returns (status, headers, JSON body), (None, None, None) when the
    connection dies without an answer."""
    body = {"estimated_tokens": estimated}
    if used is not None:
        body["used_tokens"] = used
    headers = {"X-Customer-Id": customer, "Content-Type": "application/json"}
    if now is not None:
        headers["X-Test-Now"] = str(now)
    if crash:
        headers["X-Test-Crash"] = "after-reserve"
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.loads(e.read() or b"null")
    except (urllib.error.URLError, ConnectionError) as e:
        if crash:
            return None, None, None
        raise e


def limits_of(h, name, **expected):
    """Checks the RateLimit item `name` has the expected parameters."""
    got = sf_list(h.get("RateLimit")).get(name)
    return got == expected, (name, got, expected, h.get("RateLimit"))


def run_gateway_checks(port, restart):
    t = ms(T0)
    paris_end = ms(datetime(YEAR, 5, 15, tzinfo=PARIS))
    policy = (f'"rpm";q={GW_RPM};w=60, "tpm";q={GW_TPM};w=60, '
              f'"budget";q={GW_BUDGET};w={30 * 86400}')

    # Granted: one item per limiter, remaining and reset from the limits and what was used.
    status, h, body = gw_post(port, "hdr", 3000, now=t)
    check("gateway: 3000 tokens granted", status == 200 and body["tokens"]["used"] == 3000,
          (status, body))
    check("gateway: RateLimit-Policy, one item per limiter", h.get("RateLimit-Policy") == policy,
          h.get("RateLimit-Policy"))
    # t, the effective window: the next request back in 6 s, the next token in 6 ms, the
    # budget's next tokens at the billing month's end.
    want = (f'"rpm";r={GW_RPM - 1};t={RPM_MS // 1000}, "tpm";r={GW_TPM - 3000};'
            f't=1, "budget";r={GW_BUDGET - 3000};'
            f't={math.ceil((paris_end - t) / 1000)}')
    check("gateway: RateLimit after 1 request of 3000 tokens", h.get("RateLimit") == want,
          (h.get("RateLimit"), want))
    check("gateway: no Retry-After when granted", h.get("Retry-After") is None)
    rid = h.get("X-Request-Id") or ""
    check("gateway: X-Request-Id", len(rid) == 32 and rid == body["id"], rid)
    status, h, _ = gw_post(port, "hdr", 1000, now=t)
    check("gateway: second request, rpm r=8 t=6", *limits_of(h, "rpm", r=8, t=6))
    check("gateway: ... tpm r=6000 t=1", *limits_of(h, "tpm", r=6000, t=1))
    check("gateway: ... budget r=46000",
          *limits_of(h, "budget", r=46_000, t=math.ceil((paris_end - t) / 1000)))
    status, _, _ = gw_post(port, "nobody", 10, now=t)
    check("gateway: an unknown customer is 401", status == 401, status)
    status, _, _ = gw_post(port, "hdr", 0, now=t)
    check("gateway: estimated_tokens 0 is 400", status == 400, status)
    status, h, body = gw_post(port, "hdr", GW_TPM + 1, now=t)
    check("gateway: an estimate above the tokens per minute is 413 without Retry-After",
          status == 413 and h.get("Retry-After") is None and body["violated-policies"] == ["tpm"],
          (status, h.get("Retry-After"), body))
    check("gateway: ... charging nothing", *limits_of(h, "rpm", r=8, t=6))

    # Tokens per minute: 8000 of 10,000 used; 3000 more wait until 1000 came back (6 s).
    gw_post(port, "tpm", 8000, now=t)
    status, h, body = gw_post(port, "tpm", 3000, now=t)
    check("gateway: tpm denial is 429", status == 429, status)
    check("gateway: ... naming tpm in the body", body.get("violated-policies") == ["tpm"]
          and body.get("type", "").endswith("#quota-exceeded"), body)
    check("gateway: ... Retry-After 6", h.get("Retry-After") == str(1000 * TOKEN_MS // 1000),
          h.get("Retry-After"))
    check("gateway: ... RateLimit tpm r=2000 t=1", *limits_of(h, "tpm", r=2000, t=1))
    check("gateway: ... the denied request charged no request", *limits_of(h, "rpm", r=9, t=6))

    # Settle: below the estimate gives the difference back, above it charges the debt.
    status, h, _ = gw_post(port, "settle", 4000, used=1000, now=t)
    check("gateway: 4000 reserved, 1000 used: tpm r=9000", status == 200
          and sf_list(h.get("RateLimit"))["tpm"]["r"] == 9000, h.get("RateLimit"))
    status, h, _ = gw_post(port, "settle", 500, used=500, now=t)
    # Had the 3000 not come back, 10,000 - 4000 - 500 = 5500.
    check("gateway: the next request sees the 3000 back (tpm r=8500, budget r=48500)",
          sf_list(h.get("RateLimit"))["tpm"]["r"] == 8500
          and sf_list(h.get("RateLimit"))["budget"]["r"] == 48_500, h.get("RateLimit"))
    gw_post(port, "settle", 500, used=3000, now=t)
    status, h, _ = gw_post(port, "settle", 1, used=1, now=t)
    # 500 reserved, 3000 used: 2500 more charged, 8500 - 3000 - 1.
    check("gateway: 2500 above the estimate are charged (tpm r=5499)",
          *limits_of(h, "tpm", r=5499, t=1))
    # 100 reserved, 20,000 used: tokens at 5499 - 20,000 = -14,501, a debt.
    status, h, _ = gw_post(port, "settle", 100, used=20_000, now=t)
    # t: the first token after the debt, 14,502 tokens away.
    check("gateway: a debt shows tpm r=0",
          *limits_of(h, "tpm", r=0, t=math.ceil(14_502 * TOKEN_MS / 1000)))
    status, h, body = gw_post(port, "settle", 1, now=t)
    check("gateway: in debt, 429 until 14,502 tokens came back (Retry-After 88)",
          status == 429 and h.get("Retry-After") == str(math.ceil(14_502 * TOKEN_MS / 1000))
          and body.get("violated-policies") == ["tpm"], (status, h.get("Retry-After"), body))

    # The monthly budget (5000, New York, billed on the 31st) runs out until Apr 30 00:00 EDT.
    month_end = ms(datetime(YEAR, 4, 30, tzinfo=NEW_YORK))
    next_end = ms(datetime(YEAR, 5, 31, tzinfo=NEW_YORK))
    status, h, _ = gw_post(port, "month", 3000, now=t)
    check("gateway: month budget r=2000, t to Apr 30 00:00 New York", status == 200 and
          limits_of(h, "budget", r=2000, t=math.ceil((month_end - t) / 1000))[0],
          h.get("RateLimit"))
    check("gateway: ... its policy q=5000", '"budget";q=5000;w=' in h.get("RateLimit-Policy", ""),
          h.get("RateLimit-Policy"))
    gw_post(port, "month", 2000, now=t + 1000)
    status, h, body = gw_post(port, "month", 1, now=t + 2000)
    retry = math.ceil((month_end - t - 2000) / 1000)
    check(f"gateway: budget spent: 429, Retry-After {retry} (the month's end in New York)",
          status == 429 and h.get("Retry-After") == str(retry), (status, h.get("Retry-After")))
    check("gateway: ... naming budget", body.get("violated-policies") == ["budget"], body)
    check("gateway: ... RateLimit budget r=0", *limits_of(h, "budget", r=0, t=retry))
    status, h, _ = gw_post(port, "month", 1, now=month_end - 1)
    check("gateway: 1 ms before the month's end, 429 with Retry-After 1",
          status == 429 and h.get("Retry-After") == "1", (status, h.get("Retry-After")))
    status, h, _ = gw_post(port, "month", 1, now=month_end)
    check("gateway: at the month's end the budget is new (r=4999, t to May 31 New York)",
          status == 200 and limits_of(h, "budget", r=4999,
                                      t=math.ceil((next_end - month_end) / 1000))[0],
          (status, h.get("RateLimit")))

    # A gateway that dies between reserve and settle: the reservation comes back at its ttl.
    status, _, _ = gw_post(port, "crash", 4000, now=t, crash=True)
    check("gateway: died after reserving (no answer)", status is None, status)
    port, code = restart()
    check("gateway: ... exit status 70, the test hook's", code == 70, code)
    status, h, _ = gw_post(port, "crash", 1, now=t + GW_HOLD_MS - 1)
    check("gateway: the 4000 are held until the ttl (budget r=45999)", status == 200
          and sf_list(h.get("RateLimit"))["budget"]["r"] == GW_BUDGET - 4000 - 1,
          (status, h.get("RateLimit")))
    status, h, _ = gw_post(port, "crash", 1, now=t + GW_HOLD_MS)
    check("gateway: at the ttl they are back (budget r=49998)", status == 200
          and sf_list(h.get("RateLimit"))["budget"]["r"] == GW_BUDGET - 2,
          (status, h.get("RateLimit")))


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
             "no", "--dir", tmp, "--loadmodule", module,
             # The gateway's checks run on a test clock (AT) ahead of the server's.
             "at-max-ahead", "-1"],
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

        gateway = [sys.executable, os.path.join(HERE, "gateway", "app.py")]
        genv = dict(os.environ, REDIS_URL=f"redis://127.0.0.1:{rport}", GATEWAY_RPM=str(GW_RPM),
                    GATEWAY_TPM=str(GW_TPM), GATEWAY_BUDGET=str(GW_BUDGET),
                    GATEWAY_HOLD=f"{GW_HOLD_MS}ms", GATEWAY_CUSTOMERS=json.dumps(GW_CUSTOMERS),
                    GATEWAY_TEST_HOOKS="1")

        def start_gateway():
            port = free_port()
            p = subprocess.Popen(gateway, env=dict(genv, PORT=str(port)), stdout=subprocess.PIPE,
                                 text=True, cwd=os.path.dirname(gateway[1]))
            procs.append(p)
            wait_line(p, "gateway")
            return p, port

        current = [start_gateway()]

        def restart():
            """Waits for the gateway to exit; starts a new one. Returns (port, exit status)."""
            try:
                code = current[0][0].wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            current[0] = start_gateway()
            return current[0][1], code

        run_gateway_checks(current[0][1], restart)
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
