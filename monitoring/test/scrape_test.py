#!/usr/bin/env python3
"""The module's metrics through the real tools: redis-server with the module under a short load,
the real redis_exporter running monitoring/redis-ratelimit.lua (--script), and a real Prometheus
scraping it with monitoring/prometheus/scrape.yml's relabelling and alerts.yml's rules.

Asserted, each against what the load implies (every call carries AT, so each grant, denial and
near-limit grant is known in advance; the expected numbers are computed here from the load):
  1. the exporter's redis_script_values series: one per counter of each command and policy
     (none per key), with the expected values, and redis_script_result 1; a second server
     without the module gives redis_script_result 0 and no such series;
  2. in Prometheus, the relabelled series (ratelimit_policy_denied_total{policy="free"}, ...)
     with their labels and values;
  3. every query of the Grafana dashboard and of README.md's Monitoring section returns data;
  4. every alert rule loads healthy, and each alert's expression, evaluated on the scraped
     series, returns exactly what the load should trigger (a policy denying 2 of 7, a shadow
     policy that would deny, waiters timing out, the server without the module) and nothing
     else.

usage: scrape_test.py --module SO --server REDIS_SERVER --exporter BIN --prometheus BIN
                      --queries QUERIES.json
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "monitoring", "redis-ratelimit.lua")
SCRAPE = os.path.join(ROOT, "monitoring", "prometheus", "scrape.yml")
ALERTS = os.path.join(ROOT, "monitoring", "prometheus", "alerts.yml")
COUNTERS = ["calls", "granted", "denied", "shadow_denied", "near_limit"]
NEAR_PERCENT = 20  # the module's default ratelimit.near-limit-percent

failures = []


def check(ok, what):
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        failures.append(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Redis:
    """A minimal RESP2 client: enough for the load."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.f = self.s.makefile("rb")

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))

    def read(self):
        line = self.f.readline().rstrip(b"\r\n")
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode()
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"bad reply {line!r}")

    def call(self, *args):
        self.send(*args)
        r = self.read()
        if isinstance(r, RuntimeError):
            raise r
        return r


def wait_for(what, f, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if f():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise SystemExit(f"scrape_test: timed out waiting for {what}")


def http(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def at_one_instant(limit, calls):
    """Counters of `calls` GCRA calls of cost 1 at one instant on a fresh key of `limit`:
    granted leave remaining limit-1 .. 0; near is remaining·100 < limit·percent."""
    granted = min(calls, limit)
    near = sum(1 for r in range(limit - granted, limit) if r * 100 < limit * NEAR_PERCENT)
    return {"calls": calls, "granted": granted, "denied": calls - granted,
            "shadow_denied": 0, "near_limit": near}


def shadow_at_one_instant(limit, calls):
    """A SHADOW policy lets every call through: the ones beyond `limit` are shadow_denied, and
    near (remaining 0)."""
    c = at_one_instant(limit, calls)
    extra = c["denied"]
    return {"calls": calls, "granted": calls, "denied": 0, "shadow_denied": extra,
            "near_limit": c["near_limit"] + extra}


def add(a, b):
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


class Load:
    """Sends one round of load and keeps the expected counters."""

    FREE, CANARY, GCRA = 5, 2, 10

    def __init__(self, port):
        self.port = port
        self.r = Redis(port)
        self.expect = {"command": {}, "policy": {}, "wait": {"granted": 0, "timed_out": 0,
                                                            "dropped": 0}}
        self.min_waited = 0.0
        self.round = 0

    def count(self, kind, name, c):
        self.expect[kind][name] = add(self.expect[kind].get(name, {}), c)

    def send(self):
        self.round += 1
        n = self.round
        r = self.r
        if n == 1:
            r.call("RL.POLICY", "SET", "free", "GCRA", self.FREE, 1, "1m")
            r.call("RL.POLICY", "SET", "canary", "GCRA", self.CANARY, 1, "1m", "SHADOW")
        at = int(time.time() * 1000)
        # RL.GCRA: 12 calls at one instant on a limit of 10.
        for _ in range(12):
            r.call("RL.GCRA", f"user:{n}", self.GCRA, 1, "1m", "AT", at)
        self.count("command", "rl.gcra", at_one_instant(self.GCRA, 12))
        # RL.LIMIT under policy free (limit 5): 7 calls; under canary (limit 2, SHADOW): 4.
        for _ in range(7):
            r.call("RL.LIMIT", f"api:{n}", "free", "AT", at)
        for _ in range(4):
            r.call("RL.LIMIT", f"beta:{n}", "canary", "AT", at)
        free = at_one_instant(self.FREE, 7)
        canary = shadow_at_one_instant(self.CANARY, 4)
        self.count("policy", "free", free)
        self.count("policy", "canary", canary)
        self.count("command", "rl.limit", add(free, canary))
        # RL.ACQUIRE ... WAIT on a concurrency limit of 1: one waiter times out after 150 ms,
        # one is granted when the holder releases, 150 ms after it began to wait.
        key = f"jobs:{n}"
        r.call("RL.ACQUIRE", key, 1, "1m", "ID", "holder")
        late = Redis(self.port)
        late.call("RL.ACQUIRE", key, 1, "1m", "ID", "late", "WAIT", 150)
        nxt = Redis(self.port)
        nxt.send("RL.ACQUIRE", key, 1, "1m", "ID", "next", "WAIT", 10000)
        wait_for("the waiter", lambda: self.metrics()["ratelimit_wait_waiting"] == "1", 10)
        time.sleep(0.15)
        r.call("RL.RELEASE", key, "holder")
        got = nxt.read()
        assert isinstance(got, list) and got[0] == 1, got
        r.call("RL.RELEASE", key, "next")
        # holder and next granted, each taking the only unit (remaining 0: near); late denied.
        self.count("command", "rl.acquire", {"calls": 3, "granted": 2, "denied": 1,
                                             "shadow_denied": 0, "near_limit": 2})
        self.expect["wait"]["granted"] += 1
        self.expect["wait"]["timed_out"] += 1
        self.min_waited += 0.3
        # An error counts nowhere.
        try:
            r.call("RL.GCRA", f"user:{n}", "x", 1, "1m")
        except RuntimeError:
            pass

    def metrics(self):
        flat = self.r.call("RL.METRICS")
        return dict(zip(flat[::2], flat[1::2]))

    def series(self):
        """The expected name -> value of RL.METRICS (as the exporter's key label), for the
        counters the load determines."""
        out = {}
        for kind, label in (("command", "command"), ("policy", "policy")):
            for name, c in self.expect[kind].items():
                for k in COUNTERS:
                    out[f'ratelimit_{kind}_{k}_total{{{label}="{name}"}}'] = c.get(k, 0)
        for k, v in self.expect["wait"].items():
            out[f"ratelimit_wait_{k}_total"] = v
        out["ratelimit_wait_waiting"] = 0
        out["ratelimit_policies"] = 2
        out["ratelimit_near_limit_percent"] = NEAR_PERCENT
        return out


LABELS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """Prometheus text format -> [(name, {label: value}, float)]."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m:
            continue
        labels = {k: bytes(v, "utf-8").decode("unicode_escape") for k, v in LABELS.findall(m.group(3) or "")}
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def start(cmd, log):
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--queries", required=True)
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="rl-metrics-")
    log = open(os.path.join(work, "processes.log"), "w")
    procs = []
    try:
        # Two servers: one with the module, one without (RateLimitModuleMissing).
        p_mod, p_bare = free_port(), free_port()
        for port, extra in ((p_mod, ["--loadmodule", a.module]), (p_bare, [])):
            procs.append(start([a.server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", work, *extra], log))
        for port in (p_mod, p_bare):
            wait_for(f"redis-server on {port}", lambda port=port: Redis(port).call("PING") == "PONG")
        # One exporter per server, both running the module's script.
        e_mod, e_bare = free_port(), free_port()
        for port, eport in ((p_mod, e_mod), (p_bare, e_bare)):
            procs.append(start([a.exporter, f"--redis.addr=redis://127.0.0.1:{port}",
                                f"--web.listen-address=127.0.0.1:{eport}", f"--script={SCRIPT}"], log))
        for eport in (e_mod, e_bare):
            wait_for(f"redis_exporter on {eport}", lambda eport=eport: "redis_up" in http(f"http://127.0.0.1:{eport}/metrics"))

        load = Load(p_mod)
        load.send()

        print("scrape_test: 1. redis_exporter's series")
        want = load.series()
        got = parse_exposition(http(f"http://127.0.0.1:{e_mod}/metrics"))
        script = {l["key"]: v for n, l, v in got if n == "redis_script_values"}
        result = [v for n, l, v in got if n == "redis_script_result"]
        check(result == [1.0], f"redis_script_result is 1 with the module: {result}")
        for k, v in sorted(want.items()):
            check(script.get(k) == float(v), f"redis_script_values{{key={k!r}}} = {v} (got {script.get(k)})")
        waited = script.get("ratelimit_wait_waited_seconds_total", 0)
        check(waited >= load.min_waited, f"time waited {waited} s >= {load.min_waited} s")
        # Bounded: one series per counter of a command or a policy, never per key.
        keys = [k for k in script if re.search(r'"(user|api|beta|jobs):', k)]
        check(not keys, f"no series per key: {keys}")
        commands = {l["key"].split('"')[1] for n, l, v in got
                    if n == "redis_script_values" and l["key"].startswith("ratelimit_command_")}
        policies = {l["key"].split('"')[1] for n, l, v in got
                    if n == "redis_script_values" and l["key"].startswith("ratelimit_policy_")}
        check(policies == {"free", "canary"}, f"policies {sorted(policies)}")
        n_script = sum(1 for n, _, _ in got if n == "redis_script_values")
        check(n_script == 5 * (len(commands) + len(policies)) + 7,
              f"{n_script} series: 5 per command ({len(commands)}) and per policy (2), 7 others")
        bare = parse_exposition(http(f"http://127.0.0.1:{e_bare}/metrics"))
        check([v for n, l, v in bare if n == "redis_script_result"] == [0.0],
              "redis_script_result is 0 without the module")
        check(not any(n == "redis_script_values" for n, _, _ in bare), "no script values without the module")

        # Prometheus: scrape.yml's job (targets: both exporters) every second, alerts.yml's rules.
        scrape = open(SCRAPE).read()
        scrape = scrape.replace('targets: ["localhost:9121"]',
                                f'targets: ["127.0.0.1:{e_mod}", "127.0.0.1:{e_bare}"]')
        assert f"127.0.0.1:{e_mod}" in scrape, "scrape.yml's target line changed"
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
            f.write(f"rule_files:\n  - {json.dumps(ALERTS)}\n")
            f.write(scrape)
        pport = free_port()
        procs.append(start([a.prometheus, f"--config.file={config}",
                            f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
                            f"--web.listen-address=127.0.0.1:{pport}"], log))
        api = f"http://127.0.0.1:{pport}/api/v1"

        def query(q):
            r = json.loads(http(f"{api}/query?" + urllib.parse.urlencode({"query": q})))
            assert r["status"] == "success", r
            return r["data"]["result"]

        wait_for("Prometheus", lambda: http(f"http://127.0.0.1:{pport}/-/ready"))
        # Three scrapes before and after a second round of load: rates over the window move.
        wait_for("3 scrapes", lambda: float(query("min(count_over_time(redis_up[1m]))")[0]["value"][1]) >= 3)
        load.send()
        t = time.time()
        wait_for("3 more scrapes", lambda: float(query("min(count_over_time(redis_up[1m]))")[0]["value"][1]) >= 3 + 3 and time.time() > t + 3)

        print("scrape_test: 2. the relabelled series in Prometheus")
        want = load.series()
        for k, v in sorted(want.items()):
            name, _, label = k.partition("{")
            sel = name + "{" + (label if label else "}")
            res = query(sel)
            vals = [float(s["value"][1]) for s in res]
            check(vals == [float(v)], f"{sel} = {v} (got {vals})")
            if res:
                lab = res[0]["metric"]
                check("key" not in lab and "filename" not in lab and lab.get("job") == "redis",
                      f"{sel}: labels {sorted(lab)}")
        res = query('{__name__=~"ratelimit_.+", instance="127.0.0.1:%d"}' % e_bare)
        check(res == [], "no ratelimit_ series from the server without the module")

        print("scrape_test: 3. every dashboard query returns data")
        for q in json.load(open(a.queries)):
            res = query(q["expr"])
            check(len(res) > 0, f"{q['panel']} {q['refId']}: {len(res)} series")

        # And the queries README.md's Monitoring section shows.
        readme = open(os.path.join(ROOT, "README.md")).read()
        block = readme.split("Queries worth keeping at hand:", 1)[1].split("```", 2)[1]
        shown = [l for l in block.splitlines() if l.strip() and not l.startswith("#")]
        check(len(shown) >= 5, f"README's queries: {len(shown)}")
        for q in shown:
            res = query(q)
            check(len(res) > 0, f"README: {q[:70]}...: {len(res)} series")

        print("scrape_test: 4. the alert rules on the scraped series")
        rules = json.loads(http(f"{api}/rules"))["data"]["groups"]
        exprs = {}
        for g in rules:
            for rule in g["rules"]:
                check(rule.get("health") == "ok", f"rule {rule['name']} health {rule.get('health')}: {rule.get('lastError', '')}")
                exprs[rule["name"]] = rule["query"]
        check(len(exprs) == 5, f"5 alert rules loaded: {sorted(exprs)}")

        def fires(name):
            return sorted(tuple(sorted((k, v) for k, v in s["metric"].items() if k in ("policy", "instance")))
                          for s in query(exprs[name]))

        # free denies 2 of 7 in each round (> 10%); canary denies nothing (SHADOW).
        check(fires("RateLimitPolicyDenialRateHigh") == [(("policy", "free"),)],
              f"denial rate high: {fires('RateLimitPolicyDenialRateHigh')}")
        # Near: free 1 of 5 grants (20%, below 50%), canary 3 of 4.
        check(fires("RateLimitPolicyNearLimit") == [(("policy", "canary"),)],
              f"near limit: {fires('RateLimitPolicyNearLimit')}")
        check(fires("RateLimitShadowPolicyWouldDeny") == [(("policy", "canary"),)],
              f"shadow would deny: {fires('RateLimitShadowPolicyWouldDeny')}")
        check(fires("RateLimitWaitersTimingOut") == [(("instance", f"127.0.0.1:{e_mod}"),)],
              f"waiters timing out: {fires('RateLimitWaitersTimingOut')}")
        check(fires("RateLimitModuleMissing") == [(("instance", f"127.0.0.1:{e_bare}"),)],
              f"module missing: {fires('RateLimitModuleMissing')}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
        if failures:
            print(f"scrape_test: processes' log: {os.path.join(work, 'processes.log')}")
            print(open(os.path.join(work, "processes.log")).read()[-4000:])
    if failures:
        print(f"scrape_test: {len(failures)} failed")
        sys.exit(1)
    shutil.rmtree(work, ignore_errors=True)
    print("scrape_test: every check passed")


if __name__ == "__main__":
    main()
