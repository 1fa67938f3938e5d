#!/usr/bin/env python3
"""Benchmark the ratelimit module against INCR, the Lua scripts it replaces and redis-cell.

Run it through bench/run.sh (or `make bench` / `make bench-quick`), which checks the
prerequisites first. Python standard library only.

Everything runs against redis-server processes started here on free loopback ports and
stopped by pid at the end. Throughput comes from redis-benchmark; memory from used_memory
deltas; replication/AOF cost from the growth of the AOF incr file.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import glob
import hashlib
import io
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Limits are huge so that every measured call is granted (a denial is cheaper and would
# flatter whoever is denied), and rates are slow so that a key lives at least a minute
# after one call: the benchmark exercises the update path of live keys, and the memory
# fill can count its keys.
BIG = "10000000"
LOG_WINDOW_MS = 1000  # sliding logs in the throughput matrix: 1 s window
LONG_WINDOW_MS = 3600000  # sliding logs in memory fills and the live-entries case
RAND_KEYS = 100000
CMD_DB = 9  # limiter keys live here (flushed between blocks); INCR keys stay in db 0


class ReplyError(Exception):
    pass


# ---------------------------------------------------------------------------------------
# A minimal RESP2 client.
# ---------------------------------------------------------------------------------------
class Client:
    def __init__(self, port: int, timeout: float | None = 120.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rf = self.sock.makefile("rb")

    def close(self):
        try:
            self.rf.close()
            self.sock.close()
        except OSError:
            pass

    @staticmethod
    def encode(args) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _read(self):
        line = self.rf.readline()
        if not line:
            raise ConnectionError("connection closed by server")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.rf.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise ConnectionError(f"bad reply line {line!r}")

    def pipeline(self, commands):
        self.sock.sendall(b"".join(self.encode(c) for c in commands))
        return [self._read() for _ in commands]

    def call(self, *args, check=True):
        r = self.pipeline([args])[0]
        if check and isinstance(r, ReplyError):
            raise r
        return r

    def info(self, section="") -> dict:
        text = self.call("INFO", section) if section else self.call("INFO")
        out = {}
        for line in text.splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out


# ---------------------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------------------
def cpu_times():
    """(busy, steal, total) jiffies over all CPUs, from /proc/stat; None when unavailable."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    steal = v[7] if len(v) > 7 else 0
    return (sum(v[:8]) - idle - steal, steal, sum(v[:8]))


def cpu_busy(seconds=1.0):
    """Share of all CPUs busy (steal excluded) over `seconds`, before anything of ours runs."""
    a = cpu_times()
    time.sleep(seconds)
    b = cpu_times()
    if not a or not b or b[2] == a[2]:
        return None
    return (b[0] - a[0]) / (b[2] - a[2])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, workdir, modules, cpu_prefix):
        self.name = name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.modules = modules
        self.cpu_prefix = cpu_prefix
        self.proc = None
        self.port = None
        self.pidfile = os.path.join(workdir, "pids", name + ".pid")

    def start(self):
        last_log = ""
        for _ in range(5):
            self.port = free_port()
            log = os.path.join(self.dir, "server.log")
            cmd = self.cpu_prefix + [
                "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--appendonly", "no",
                "--aof-use-rdb-preamble", "yes", "--auto-aof-rewrite-percentage", "0",
                "--logfile", log, "--daemonize", "no",
            ]
            for m in self.modules:
                cmd += ["--loadmodule", m]
            # Its own process group (setsid): a terminal's Ctrl-C reaches this script, which stops
            # the server by pid (run.sh's trap does it too if this script dies first).
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
            os.makedirs(os.path.dirname(self.pidfile), exist_ok=True)
            with open(self.pidfile, "w") as f:
                f.write(str(self.proc.pid))
            deadline = time.time() + 10
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    c = Client(self.port, timeout=2)
                    if c.call("PING") == "PONG":
                        c.close()
                        return self
                    c.close()
                except (OSError, ReplyError, ConnectionError):
                    pass
                time.sleep(0.02)
            last_log = open(log).read()[-3000:] if os.path.exists(log) else ""
            self.stop()
            if "Address already in use" not in last_log:
                break
        raise RuntimeError(f"redis-server '{self.name}' did not start; log tail:\n{last_log}")

    def client(self, timeout=120.0) -> Client:
        return Client(self.port, timeout=timeout)

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                c = Client(self.port, timeout=2)
                c.sock.sendall(Client.encode(["SHUTDOWN", "NOSAVE"]))
                c.close()
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        try:
            os.unlink(self.pidfile)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------
# What is measured
# ---------------------------------------------------------------------------------------
def key_for(cid: str, case: str) -> str:
    return f"rl:{cid}:hot" if case == "hot" else f"rl:{cid}:__rand_int__"


def is_granted_rl(reply):
    return isinstance(reply, list) and len(reply) >= 3 and isinstance(reply[0], int) and reply[0] > 0


def remaining_rl(reply):
    return reply[2] if isinstance(reply, list) and len(reply) >= 3 else None


class Cmd:
    """One measured command: how to build it, what it is compared with, how to read a reply."""

    def __init__(self, cid, label, kind, build, group=None, lua_ref=None, granted=is_granted_rl,
                 remaining=remaining_rl, script=None, keys_per_call=1, log=False, mem=True,
                 mem_build=None, info_name=None, note="", lua_keys=1):
        self.id = cid
        self.label = label
        self.kind = kind  # floor | module | lua | cell
        self.build = build  # key -> argv (for Lua, without the EVALSHA prefix)
        self.group = group  # "fixed" for fixed-size limiters (targets)
        self.lua_ref = lua_ref
        self.granted = granted
        self.remaining = remaining
        self.script = script
        self.keys_per_call = keys_per_call
        self.log = log
        self.mem = mem
        self.mem_build = mem_build or build
        self.info_name = info_name
        self.note = note
        self.sha = None
        self.skip = None  # reason, when not measurable
        self.lua_keys = lua_keys  # EVALSHA's numkeys

    def argv(self, key, mem=False):
        args = (self.mem_build if mem else self.build)(key)
        if self.kind == "lua":
            return ["EVALSHA", self.sha, str(self.lua_keys)] + args
        return args


def catalogue():
    lw, LW = str(LOG_WINDOW_MS), str(LONG_WINDOW_MS)
    C = []
    C.append(Cmd("set", "SET", "floor", lambda k: ["SET", k, "1"], granted=lambda r: r == "OK",
                 remaining=lambda r: None))
    # Module commands, with their nearest Lua script.
    C.append(Cmd("rl.gcra", "RL.GCRA", "module", lambda k: ["RL.GCRA", k, BIG, "1", "1m"],
                 group="fixed", lua_ref="lua.gcra"))
    # The same GCRA limiter as a named policy (`bench`, defined when the server starts): a call
    # looks the policy up by name, and should cost what RL.GCRA with the arguments costs.
    C.append(Cmd("rl.limit", "RL.LIMIT (one-limiter GCRA policy)", "module",
                 lambda k: ["RL.LIMIT", k, "bench"], group="fixed", lua_ref="lua.gcra"))
    C.append(Cmd("cl.throttle", "CL.THROTTLE (ours)", "module",
                 lambda k: ["CL.THROTTLE", k, str(int(BIG) - 1), "1", "60"], group="fixed",
                 lua_ref="lua.gcra", granted=lambda r: isinstance(r, list) and r[0] == 0,
                 info_name="cl.throttle"))
    C.append(Cmd("rl.tokenbucket", "RL.TOKENBUCKET", "module",
                 lambda k: ["RL.TOKENBUCKET", k, BIG, "1", "1m"], group="fixed",
                 lua_ref="lua.tokenbucket"))
    C.append(Cmd("rl.leakybucket", "RL.LEAKYBUCKET", "module",
                 lambda k: ["RL.LEAKYBUCKET", k, BIG, "1", "1m"], group="fixed",
                 lua_ref="lua.tokenbucket"))
    C.append(Cmd("rl.fixed", "RL.FIXED", "module", lambda k: ["RL.FIXED", k, BIG, "1m"],
                 group="fixed", lua_ref="lua.fixed"))
    C.append(Cmd("rl.fixed.month", "RL.FIXED month TZ Europe/Paris", "module",
                 lambda k: ["RL.FIXED", k, BIG, "month", "TZ", "Europe/Paris"], group="fixed",
                 lua_ref="lua.fixed", info_name="rl.fixed"))
    C.append(Cmd("rl.slidingcounter", "RL.SLIDINGCOUNTER", "module",
                 lambda k: ["RL.SLIDINGCOUNTER", k, BIG, "1m"], group="fixed", lua_ref="lua.fixed"))
    C.append(Cmd("rl.sliding", "RL.SLIDING", "module", lambda k: ["RL.SLIDING", k, BIG, lw],
                 lua_ref="lua.zset", log=True, mem_build=lambda k: ["RL.SLIDING", k, BIG, LW]))
    C.append(Cmd("rl.sliding.p", "RL.SLIDING PRECISION 100ms", "module",
                 lambda k: ["RL.SLIDING", k, BIG, lw, "PRECISION", "100"], lua_ref="lua.hash",
                 mem_build=lambda k: ["RL.SLIDING", k, BIG, LW, "PRECISION", "100"],
                 info_name="rl.sliding"))
    C.append(Cmd("rl.streamcount", "RL.STREAMCOUNT", "module",
                 lambda k: ["RL.STREAMCOUNT", k, lw, "LIMIT", BIG], lua_ref="lua.stream", log=True,
                 granted=lambda r: isinstance(r, int) and r >= 0, remaining=lambda r: None,
                 mem_build=lambda k: ["RL.STREAMCOUNT", k, LW, "LIMIT", BIG]))
    C.append(Cmd("rl.all", "RL.ALL (GCRA + FIXED)", "module",
                 lambda k: ["RL.ALL", "2", k + ":a", k + ":b", "GCRA", BIG, "1", "1m",
                            "FIXED", BIG, "1m"], keys_per_call=2))
    # Two dimensions (requests and tokens), each limiter charged its own units.
    C.append(Cmd("rl.all.charge", "RL.ALL (GCRA + TOKENBUCKET CHARGE 100)", "module",
                 lambda k: ["RL.ALL", "2", k + ":a", k + ":b", "GCRA", BIG, "1", "1m", "NAME",
                            "rpm", "TOKENBUCKET", BIG, "1", "1m", "CHARGE", "100", "NAME", "tpm"],
                 keys_per_call=2, info_name="rl.all"))
    # RL.ALL of one limiter (against RL.GCRA and the Lua GCRA script) and of three: the gateway
    # call (requests, tokens, a monthly budget) that replaces three Lua calls.
    C.append(Cmd("rl.all.one", "RL.ALL 1 key (GCRA)", "module",
                 lambda k: ["RL.ALL", "1", k, "GCRA", BIG, "1", "1m"], lua_ref="lua.gcra",
                 info_name="rl.all"))
    C.append(Cmd("rl.all.gateway", "RL.ALL 3 keys, the gateway (GCRA, TOKENBUCKET, FIXED month)",
                 "module",
                 lambda k: ["RL.ALL", "3", k + ":a", k + ":b", k + ":c", "GCRA", BIG, "1", "1m",
                            "NAME", "rpm", "TOKENBUCKET", BIG, "1", "1m", "CHARGE", "100", "NAME",
                            "tpm", "FIXED", str(int(BIG) * 10), "month", "TZ", "Europe/Paris",
                            "CHARGE", "100", "NAME", "budget"],
                 keys_per_call=3, info_name="rl.all"))
    # The Lua scripts of today (bench/lua/*.lua), run with EVALSHA.
    C.append(Cmd("lua.gcra", "Lua GCRA (redis_rate)", "lua", lambda k: [k, BIG, "1", "60"],
                 script="gcra", remaining=lambda r: r[1] if isinstance(r, list) else None))
    C.append(Cmd("lua.tokenbucket", "Lua token bucket (hash)", "lua",
                 lambda k: [k, BIG, "1", "60000"], script="token_bucket"))
    C.append(Cmd("lua.fixed", "Lua fixed window (INCRBY)", "lua", lambda k: [k, BIG, "60000"],
                 script="fixed_window"))
    C.append(Cmd("lua.zset", "Lua sorted-set log", "lua", lambda k: [k, BIG, lw],
                 script="sorted_set_log", log=True, mem_build=lambda k: [k, BIG, LW]))
    C.append(Cmd("lua.hash", "Lua hash log (100 ms fields)", "lua", lambda k: [k, BIG, lw, "100"],
                 script="hash_log", mem_build=lambda k: [k, BIG, LW, "100"]))
    C.append(Cmd("lua.stream", "Lua stream counter", "lua", lambda k: [k, lw, "1", BIG],
                 script="stream_counter", log=True,
                 granted=lambda r: isinstance(r, int) and r >= 0, remaining=lambda r: None,
                 mem_build=lambda k: [k, LW, "1", BIG]))
    # The script backend (lua/ratelimit.lua): the module's commands as one script, for servers
    # that cannot load the module. Same arguments as the module's rows above.
    for cid, label, args in [
        ("script.gcra", "script RL.GCRA", ["RL.GCRA", BIG, "1", "1m"]),
        ("script.tokenbucket", "script RL.TOKENBUCKET", ["RL.TOKENBUCKET", BIG, "1", "1m"]),
        ("script.fixed", "script RL.FIXED", ["RL.FIXED", BIG, "1m"]),
        ("script.slidingcounter", "script RL.SLIDINGCOUNTER", ["RL.SLIDINGCOUNTER", BIG, "1m"]),
    ]:
        C.append(Cmd(cid, label, "lua", lambda k, args=args: [k] + args, script="ratelimit"))
    C.append(Cmd("script.all", "script RL.ALL (GCRA + FIXED)", "lua",
                 lambda k: [k + ":a", k + ":b", "RL.ALL", "GCRA", BIG, "1", "1m", "FIXED", BIG,
                            "1m"], script="ratelimit", keys_per_call=2, lua_keys=2, mem=False))
    return C


def cell_cmd():
    return Cmd("redis-cell", "redis-cell CL.THROTTLE", "cell",
               lambda k: ["CL.THROTTLE", k, str(int(BIG) - 1), "1", "60"], group="fixed",
               lua_ref="lua.gcra", granted=lambda r: isinstance(r, list) and r[0] == 0)


# Log layouts for bytes per entry and for the live-entries case: (cmd id, label, builder).
# builder(key, t) gives the call at time t (ms, a string), or at the server's time when t is
# None. Lua builders give the script's KEYS[1] and ARGV, without EVALSHA.
def entry_layouts():
    LW = str(LONG_WINDOW_MS)

    def at(t):
        return ["AT", t] if t is not None else []

    def arg(t):
        return [t] if t is not None else []

    # Filling a Lua layout by running its script once per entry would be quadratic (the hash
    # and stream scripts read every live entry on each call), so the fills make the script's
    # own writes directly: the same members, fields, IDs and expiry as the script creates.
    expire = f"redis.call('PEXPIRE', key, {LW})"
    return [
        ("rl.sliding", "RL.SLIDING", lambda k, t: ["RL.SLIDING", k, BIG, LW] + at(t), None),
        ("rl.streamcount", "RL.STREAMCOUNT",
         lambda k, t: ["RL.STREAMCOUNT", k, LW, "LIMIT", BIG] + at(t), None),
        ("lua.zset", "Lua sorted-set log", lambda k, t: [k, BIG, LW, "1"] + arg(t),
         ("redis.call('ZADD', key, tn, string.format('%d:%d', tn * 1000, j + 1))", expire)),
        ("lua.hash", "Lua hash log (1 ms fields)", lambda k, t: [k, BIG, LW, "1", "1"] + arg(t),
         ("redis.call('HINCRBY', key, tn, 1)", expire)),
        ("lua.stream", "Lua stream counter", lambda k, t: [k, LW, "1", BIG] + arg(t),
         (f"redis.call('XADD', key, 'MINID', '~', tn - {LW}, t .. '-*', 'count', 1)", expire)),
    ]


# ---------------------------------------------------------------------------------------
# Server-side fills: a Lua loop that makes the same call as a client would, key after key.
# For our Lua layouts the script body runs inside the loop as a local function.
# ---------------------------------------------------------------------------------------
def lua_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def filler_source(cmd: Cmd, scripts: dict, argv_builder, writes=None) -> str:
    """A script: ARGV = prefix, from, to, per_key, t0, step. Calls the target once per
    (key, entry) with key = prefix .. %012d and time t0 + j*step (ms). With `writes`
    (per-entry code, per-key code), those writes replace the call."""
    KEY, T = "\x00K\x00", "\x00T\x00"
    args = argv_builder(KEY, T)

    def lit(a):
        if a == T:
            return "t"
        if KEY in a:  # the key itself, or a key made from it ("key:a" for RL.ALL)
            return " .. ".join("key" if p == KEY else lua_str(p)
                               for p in a.replace(KEY, "\x01" + KEY + "\x01").split("\x01") if p)
        return lua_str(a)

    if cmd.kind == "lua":
        call = f"body({{{lit(args[0])}}}, {{{', '.join(lit(a) for a in args[1:])}}})"
        head = f"local function body(KEYS, ARGV)\n{scripts[cmd.script]}\nend\n"
    else:
        call = f"redis.call({', '.join(lit(a) for a in args)})"
        head = ""
    after = ""
    if writes:
        head, call, after = "", writes[0], writes[1]
    return head + f"""
local prefix, from, to = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local per_key, t0, step = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local last
for i = from, to - 1 do
  local key = prefix .. string.format('%012d', i)
  for j = 0, per_key - 1 do
    local tn = t0 + j * step
    local t = string.format('%d', tn)
    last = {call}
  end
  {after}
end
return 1
"""


# ---------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------
class Bench:
    def __init__(self, opts):
        self.o = opts
        self.quick = opts.quick
        self.runs = opts.runs or (1 if self.quick else 3)
        self.target_s = 0.2 if self.quick else 1.0
        self.warm_s = 0 if self.quick else 0.25
        self.workdir = opts.workdir
        self.servers = []
        self.pin = None
        self.results = {"throughput": [], "live": [], "memory_key": [], "memory_entry": [],
                        "aof": [], "notes": [], "skipped": []}
        self.scripts = {}
        self.t_start = time.time()

    # ----- output helpers
    def say(self, msg):
        print(msg, file=sys.stderr, flush=True)

    def skip(self, what, why):
        line = f"skipped: {what}: {why}"
        self.say(line)
        self.results["skipped"].append(line)

    # ----- environment
    def setup_pinning(self):
        n = os.cpu_count() or 1
        if shutil.which("taskset") and n >= 2 and not self.o.no_pin:
            self.server_cpu = ["taskset", "-c", "0"]
            self.client_cpu = ["taskset", "-c", "1"]
            self.pin = "redis-server on CPU 0, redis-benchmark on CPU 1 (taskset)"
        else:
            self.server_cpu, self.client_cpu = [], []
            self.pin = "not pinned (" + ("taskset missing" if not shutil.which("taskset")
                                         else f"{n} CPU") + ")"

    def machine(self):
        cpu = "unknown"
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        mem = ""
        try:
            for line in open("/proc/meminfo"):
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) // 1024 // 1024} GiB"
        except OSError:
            pass

        def out(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                return ""

        commit = out(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]) or "no commit"
        dirty = out(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])
        so = self.o.module
        so_desc = "not loaded"
        if so and os.path.exists(so):
            h = hashlib.sha256(open(so, "rb").read()).hexdigest()[:12]
            mtime = dt.datetime.fromtimestamp(os.path.getmtime(so)).strftime("%Y-%m-%d %H:%M")
            shown = os.path.relpath(so, ROOT) if so.startswith(ROOT + os.sep) else so
            so_desc = f"{shown} (sha256 {h}…, built {mtime})"
        return {
            "host": socket.gethostname(),
            "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S %Z").strip(),
            "nproc": os.cpu_count(),
            "cpu": cpu,
            "memory": mem,
            "kernel": platform.release(),
            "loadavg_at_start": os.getloadavg()[0],
            "cpu_busy_at_start": cpu_busy(),
            "redis_server": out(["redis-server", "--version"]),
            "redis_benchmark": out(["redis-benchmark", "--version"]),
            "commit": commit + (" (with uncommitted changes)" if dirty else ""),
            "module": so_desc,
            "pinning": self.pin,
            "mode": "quick" if self.quick else "full",
            "runs": self.runs,
            "seconds_per_run": self.target_s,
        }

    # ----- redis-benchmark
    def rb(self, server, argv, n, pipeline, rand, db=CMD_DB, expect_s=None):
        cmd = self.client_cpu + ["redis-benchmark", "-h", "127.0.0.1", "-p", str(server.port),
                                 "-c", "50", "-n", str(int(n)), "-P", str(pipeline), "--csv",
                                 "--dbnum", str(db)]
        if rand:
            cmd += ["-r", str(rand)]
        cmd += argv
        timeout = 20 + 5 * (expect_s or 5)
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s for {n} calls"}
        wall = time.time() - t0
        if "Error from server" in p.stderr or "Error from server" in p.stdout:
            err = [ln for ln in (p.stderr + p.stdout).splitlines() if "Error from server" in ln][0]
            return {"error": err.strip()}
        rows = list(csv.reader(io.StringIO(p.stdout)))
        rows = [r for r in rows if r and r[0] != "test"]
        if p.returncode != 0 or not rows:
            return {"error": f"redis-benchmark exit {p.returncode}: {p.stderr.strip()[:300]}"}
        r = rows[-1]
        return {"rps": float(r[1]), "avg": float(r[2]), "p50": float(r[4]), "p95": float(r[5]),
                "p99": float(r[6]), "max": float(r[7]), "n": int(n), "wall": round(wall, 3)}

    def n_for(self, rps, seconds, pipeline):
        lo = 1000 if pipeline == 1 else 2000
        return int(min(max(rps * seconds, lo), 5_000_000))

    # ----- INFO ratelimit counters
    @staticmethod
    def norm(name):
        s = name.lower().replace("ratelimit", "")
        s = "".join(ch for ch in s if ch.isalnum())
        for p in ("cmdstat", "rl"):
            if s.startswith(p) and len(s) > len(p):
                s = s[len(p):]
        return s

    def rl_counters(self, cli):
        """{normalized command name: {calls, granted, denied}} from INFO ratelimit, if any."""
        try:
            text = cli.call("INFO", "ratelimit")
        except ReplyError:
            return {}
        out = {}
        for line in text.splitlines():
            if ":" not in line or line.startswith("#"):
                continue
            name, val = line.split(":", 1)
            if "=" in val:
                fields = dict(kv.split("=", 1) for kv in val.split(",") if "=" in kv)
                out[self.norm(name)] = {k: float(v) for k, v in fields.items()
                                        if v.replace(".", "", 1).lstrip("-").isdigit()}
            else:
                for suffix in ("calls", "granted", "denied"):
                    if name.lower().endswith(suffix):
                        base = self.norm(name[: -len(suffix)])
                        try:
                            out.setdefault(base, {})[suffix] = float(val)
                        except ValueError:
                            pass
        return {k: v for k, v in out.items() if "granted" in v}

    def counter_delta(self, before, after, cmd):
        name = self.norm(cmd.info_name or cmd.label.split()[0])
        if name not in before or name not in after:
            return None
        g = after[name].get("granted", 0) - before[name].get("granted", 0)
        d = after[name].get("denied", 0) - before[name].get("denied", 0)
        return (g, d)

    # ----- checks
    def probe(self, cli, cmd, key, db=CMD_DB):
        cli.call("SELECT", db)
        r = cli.call(*cmd.argv(key), check=False)
        cli.call("SELECT", 0)
        return r

    def check_available(self, server, cmds):
        cli = server.client()
        for c in cmds:
            if c.skip:
                continue
            r = self.probe(cli, c, f"rl:probe:{c.id}")
            if isinstance(r, ReplyError):
                msg = str(r)
                if "unknown command" in msg.lower():
                    c.skip = f"{c.label} is not available on this server ({msg.split(',')[0]})"
                else:
                    c.skip = f"{c.label} replied an error: {msg}"
                self.skip(c.label, c.skip)
            elif not c.granted(r):
                c.skip = f"{c.label} denied its first call (reply {r!r}); parameters need fixing"
                self.skip(c.label, c.skip)
        cli.call("SELECT", CMD_DB)
        cli.call("FLUSHDB")
        cli.close()

    # ----- throughput
    def measure_block(self, server, cli, cmd, case, pipeline, incr_state, rand_override=None,
                      prepare=None, max_n=None):
        rand = rand_override or (RAND_KEYS if case == "random" else None)
        key = key_for(cmd.id, case) if not rand_override else f"rl:live:{cmd.id}:__rand_int__"
        argv = cmd.argv(key)
        incr_argv = ["INCR", "rl:incr:hot" if case == "hot" else "rl:incr:__rand_int__"]
        cli.call("SELECT", CMD_DB)
        cli.call("FLUSHDB")
        cli.call("SELECT", 0)
        if prepare:
            prepare()
        counters0 = self.rl_counters(cli)
        cal = self.rb(server, argv, 1000 if pipeline == 1 else 2000, pipeline, rand,
                      expect_s=2)
        if "error" in cal:
            return {"error": cal["error"]}
        est = cal["rps"]
        if self.warm_s and max_n is None:
            warm = self.rb(server, argv, self.n_for(est, self.warm_s, pipeline), pipeline,
                           rand, expect_s=self.warm_s * 4)
            if "error" in warm:
                return {"error": warm["error"]}
            est = warm["rps"]
        runs, incrs = [], [incr_state["last"]]
        for _ in range(self.runs):
            n = self.n_for(est, self.target_s, pipeline)
            if max_n:
                n = min(n, max_n)
            r = self.rb(server, argv, n, pipeline, rand, expect_s=n / (est or 20000))
            if "error" in r:
                return {"error": r["error"], "runs": runs}
            runs.append(r)
            est = r["rps"]
            ni = self.n_for(incr_state["rps"], self.target_s, pipeline)
            ir = self.rb(server, incr_argv, ni, pipeline, RAND_KEYS if case == "random" else None,
                         db=0, expect_s=self.target_s)
            if "error" in ir:
                return {"error": "INCR: " + ir["error"], "runs": runs}
            incrs.append(ir)
            incr_state["last"] = ir
            incr_state["rps"] = ir["rps"]
        counters1 = self.rl_counters(cli)
        # Granted check: INFO counters when the module has them, else one more call.
        delta = self.counter_delta(counters0, counters1, cmd) if cmd.kind == "module" else None
        probe_key = (f"rl:{cmd.id}:hot" if case == "hot" and not rand_override
                     else (key.replace("__rand_int__", "000000000042")))
        pr = self.probe(cli, cmd, probe_key)
        granted = {"probe_granted": bool(cmd.granted(pr)), "probe_remaining": cmd.remaining(pr)
                   if not isinstance(pr, ReplyError) else None}
        if delta is not None:
            g, d = delta
            granted["counted_granted"] = g
            granted["counted_denied"] = d
            granted["fraction"] = g / (g + d) if g + d else None
        rps = [r["rps"] for r in runs]
        incr_rps = [i["rps"] for i in incrs]
        med = statistics.median(rps)
        incr_med = statistics.median(incr_rps)
        i0, i1 = incr_rps[0], incr_rps[-1]
        best = runs[rps.index(sorted(rps)[len(rps) // 2])]
        return {
            "rps": med, "rps_runs": rps, "p50": best["p50"], "p99": best["p99"],
            "p50_runs": [r["p50"] for r in runs], "p99_runs": [r["p99"] for r in runs],
            "n_runs": [r["n"] for r in runs],
            "incr_rps": incr_rps, "incr_median": incr_med, "ratio": med / incr_med,
            "incr_drift": abs(i1 - i0) / min(i0, i1),
            "incr_flag": abs(i1 - i0) / min(i0, i1) > 0.20,
            "granted": granted,
        }

    def incr_start(self, server, case, pipeline):
        argv = ["INCR", "rl:incr:hot" if case == "hot" else "rl:incr:__rand_int__"]
        rand = RAND_KEYS if case == "random" else None
        cal = self.rb(server, argv, 20000, pipeline, rand, db=0, expect_s=2)
        cal = self.rb(server, argv, self.n_for(cal["rps"], self.target_s, pipeline), pipeline,
                      rand, db=0, expect_s=self.target_s)
        r = self.rb(server, argv, self.n_for(cal["rps"], self.target_s, pipeline), pipeline, rand,
                    db=0, expect_s=self.target_s)
        return {"last": r, "rps": r["rps"]}

    def throughput(self, server, cmds, where):
        cli = server.client()
        # Create the 100k INCR keys once, so INCR always updates existing keys.
        self.rb(server, ["INCR", "rl:incr:__rand_int__"], 400000, 16, RAND_KEYS, db=0, expect_s=3)
        for case, pipeline in (("hot", 1), ("hot", 16), ("random", 1), ("random", 16)):
            incr_state = self.incr_start(server, case, pipeline)
            self.say(f"[{self.elapsed()}] {where}: {case} key, pipeline {pipeline}")
            for c in cmds:
                if c.skip:
                    continue
                res = self.measure_block(server, cli, c, case, pipeline, incr_state)
                row = {"id": c.id, "label": c.label, "kind": c.kind, "case": case,
                       "pipeline": pipeline, "server": where, **res}
                self.results["throughput"].append(row)
                if "error" in res:
                    self.say(f"    {c.label:30s} ERROR {res['error']}")
                else:
                    g = res["granted"]
                    gtxt = (f"granted {g['fraction'] * 100:.1f}%" if g.get("fraction") is not None
                            else ("probe granted" if g["probe_granted"] else "PROBE DENIED"))
                    self.say(f"    {c.label:30s} {res['rps']:>11,.0f} rps  ×INCR {res['ratio']:.2f}"
                             f"  p50 {res['p50']:.3f}  p99 {res['p99']:.3f}  {gtxt}"
                             + ("  INCR drift!" if res["incr_flag"] else ""))
        cli.close()

    # ----- the "100 live entries per key" case for the sliding logs
    def live_entries(self, server, cmds):
        K = 2000 if self.quick else 10000
        # Each run makes at most `add` calls per key, so keys hold per_key .. per_key + add*runs.
        per_key = 100
        add = 10  # calls per key per run
        byid = {c.id: c for c in cmds}
        layouts = [lay for lay in entry_layouts() if lay[0] in byid and not byid[lay[0]].skip]
        if not layouts:
            return
        self.say(f"[{self.elapsed()}] live entries: {K} keys × {per_key} entries, pipeline 16")
        cli = server.client(timeout=600)
        incr_state = self.incr_start(server, "random", 16)
        now = int(time.time() * 1000)
        for cid, label, builder, writes in layouts:
            cmd = byid[cid]
            # Throughput calls use the long window so the prefilled entries stay live.
            live_cmd = Cmd(cmd.id, cmd.label, cmd.kind, lambda k, b=builder: b(k, None),
                           granted=cmd.granted,
                           remaining=cmd.remaining, script=cmd.script, info_name=cmd.info_name)
            live_cmd.sha = cmd.sha
            src = filler_source(cmd, self.scripts, builder, writes)

            def prepare(src=src, cid=cid):
                cli.call("SELECT", CMD_DB)
                sha = cli.call("SCRIPT", "LOAD", src)
                step = K // 10
                for a in range(0, K, step):
                    cli.call("EVALSHA", sha, "0", f"rl:live:{cid}:", a, min(a + step, K), per_key,
                             now - 20 * 60 * 1000, 1000)
                cli.call("SELECT", 0)

            res = self.measure_block(server, cli, live_cmd, "random", 16, incr_state,
                                     rand_override=K, prepare=prepare, max_n=K * add)
            row = {"id": cid, "label": label, "keys": K, "entries_start": per_key,
                   "entries_end": per_key + round((2000 + sum(res.get("n_runs", []))) / K),
                   **res}
            self.results["live"].append(row)
            if "error" in res:
                self.say(f"    {label:30s} ERROR {res['error']}")
            else:
                self.say(f"    {label:30s} {res['rps']:>11,.0f} rps  ×INCR {res['ratio']:.2f}")
        cli.close()

    # ----- memory
    def used_memory(self, server):
        time.sleep(0.15 if self.quick else 0.3)  # let the keyspace's incremental rehash finish
        c = server.client()
        m = int(c.info("memory")["used_memory"])
        c.close()
        return m

    def fill(self, server, cmd, builder, prefix, nkeys, per_key, t0, step, chunk, writes=None):
        src = filler_source(cmd, self.scripts, builder, writes)
        c = server.client(timeout=600)
        sha = c.call("SCRIPT", "LOAD", src)
        c.close()
        m0 = self.used_memory(server)
        c = server.client(timeout=600)
        for a in range(0, nkeys, chunk):
            r = c.call("EVALSHA", sha, "0", prefix, a, min(a + chunk, nkeys), per_key, t0, step,
                       check=False)
            if isinstance(r, ReplyError):
                c.close()
                return None, str(r)
        keys = c.call("DBSIZE")
        c.close()
        m1 = self.used_memory(server)
        return (m0, m1, keys), None

    def memory_per_key(self, server, cmds, incr_too=True):
        N = RAND_KEYS
        self.say(f"[{self.elapsed()}] memory: {N} keys, one call each")
        todo = []
        if incr_too:
            todo.append(Cmd("incr", "INCR", "floor", lambda k: ["INCR", k]))
        todo += [c for c in cmds if not c.skip and c.mem]
        for c in todo:
            cli = server.client()
            cli.call("FLUSHALL")
            cli.close()
            builder = (lambda k, t, c=c: c.mem_build(k))
            # A stream key costs ~4.4 KB (its first node is preallocated): 10k keys give the
            # same figure as 100k at a tenth of the 440 MB.
            n = N // 10 if c.id in ("rl.streamcount", "lua.stream") else N
            got, err = self.fill(server, c, builder, "k:", n, 1, 0, 0, 10000)
            if err:
                self.say(f"    {c.label:30s} ERROR {err}")
                self.results["memory_key"].append({"id": c.id, "label": c.label, "error": err})
                continue
            m0, m1, keys = got
            cli = server.client()
            sample = "k:000000000042" + (":a" if c.id.startswith("rl.all") else "")
            usage = cli.call("MEMORY", "USAGE", sample, check=False)
            ttl = cli.call("PTTL", sample, check=False)
            enc = cli.call("OBJECT", "ENCODING", sample, check=False)
            cli.close()
            expect = n * c.keys_per_call
            row = {"id": c.id, "label": c.label, "kind": c.kind, "calls": n, "keys": keys,
                   "keys_expected": expect, "bytes_per_call": (m1 - m0) / n,
                   "bytes_per_key": (m1 - m0) / max(keys, 1), "memory_usage_sample": usage,
                   "ttl_ms_sample": ttl, "encoding": enc if isinstance(enc, str) else None}
            self.results["memory_key"].append(row)
            warn = "" if keys == expect else f"  (only {keys} of {expect} keys alive!)"
            self.say(f"    {c.label:30s} {row['bytes_per_call']:7.1f} B per call"
                     f"  MEMORY USAGE {usage}{warn}")

    def memory_per_entry(self, server, cmds):
        K = 200 if self.quick else 1000
        byid = {c.id: c for c in cmds}
        self.say(f"[{self.elapsed()}] memory: bytes per log entry, {K} keys × 100 / 1000 entries")
        now = int(time.time() * 1000)
        for cid, label, builder, writes in entry_layouts():
            c = byid.get(cid)
            if c is None or c.skip:
                continue
            # RL.STREAMCOUNT scans its window on every call, so filling it is quadratic in the
            # entries per key: a tenth of the keys still gives 100k entries at 1000 per key.
            keys = K // 10 if cid == "rl.streamcount" else K
            for per_key in (100, 1000):
                cli = server.client()
                cli.call("FLUSHALL")
                cli.close()
                got, err = self.fill(server, c, builder, "e:", keys, per_key,
                                     now - 30 * 60 * 1000, 1, max(1, 100000 // per_key), writes)
                row = {"id": cid, "label": label, "keys": keys, "entries_per_key": per_key}
                if err:
                    row["error"] = err
                    self.say(f"    {label:30s} {per_key:5d}/key ERROR {err}")
                else:
                    m0, m1, alive = got
                    cli = server.client()
                    sample = "e:%012d" % min(42, keys - 1)
                    enc = cli.call("OBJECT", "ENCODING", sample, check=False)
                    t = cli.call("TYPE", sample, check=False)
                    cnt = {"zset": "ZCARD", "hash": "HLEN", "stream": "XLEN"}.get(t)
                    n_entries = cli.call(cnt, sample, check=False) if cnt else None
                    cli.close()
                    row.update({"bytes_per_entry": (m1 - m0) / (keys * per_key),
                                "keys_alive": alive,
                                "encoding": enc if isinstance(enc, str) else t,
                                "entries_in_sample": n_entries})
                    self.say(f"    {label:30s} {per_key:5d}/key {row['bytes_per_entry']:7.1f} B"
                             f" per entry ({row['encoding']})")
                self.results["memory_entry"].append(row)

    # ----- replication / AOF
    def aof_size(self, server):
        files = glob.glob(os.path.join(server.dir, "appendonlydir", "*.incr.aof"))
        return sum(os.path.getsize(f) for f in files)

    def aof(self, server, cmds):
        N = 3000 if self.quick else 20000
        cli = server.client()
        cli.call("FLUSHALL")
        cli.call("CONFIG", "SET", "appendonly", "yes")
        deadline = time.time() + 60
        while time.time() < deadline:
            p = cli.info("persistence")
            if (p.get("aof_enabled") == "1" and p.get("aof_rewrite_in_progress") == "0"
                    and p.get("aof_rewrite_scheduled") == "0"):
                break
            time.sleep(0.1)
        self.say(f"[{self.elapsed()}] AOF/replication bytes per granted call ({N} calls)")
        for c in [x for x in cmds if not x.skip]:
            row = {"id": c.id, "label": c.label, "kind": c.kind, "calls": N}
            for case in ("random", "hot"):
                key = key_for(c.id, case)
                before = self.rl_counters(cli)
                s0 = self.aof_size(server)
                r = self.rb(server, c.argv(key), N, 16, RAND_KEYS if case == "random" else None,
                            db=0, expect_s=5)
                if "error" in r:
                    row[case] = {"error": r["error"]}
                    continue
                cli.call("PING")
                time.sleep(0.05)
                s1 = self.aof_size(server)
                after = self.rl_counters(cli)
                delta = self.counter_delta(before, after, c) if c.kind == "module" else None
                granted = delta[0] if delta else N
                pr = self.probe(cli, c, key.replace("__rand_int__", "000000000042"), db=0)
                cli.call("SELECT", 0)
                row[case] = {"bytes": s1 - s0, "granted": granted,
                             "granted_source": "INFO counters" if delta else "assumed (probe)",
                             "probe_granted": bool(c.granted(pr)),
                             "bytes_per_call": (s1 - s0) / granted if granted else None}
            self.results["aof"].append(row)
            txt = "  ".join(f"{k} {row[k]['bytes_per_call']:.0f} B" for k in ("random", "hot")
                            if k in row and row[k].get("bytes_per_call") is not None)
            self.say(f"    {c.label:30s} {txt}")
        cli.call("CONFIG", "SET", "appendonly", "no")
        cli.close()

    def elapsed(self):
        return f"{time.time() - self.t_start:5.0f}s"

    # ----- redis-cell
    def cell_so(self):
        if self.o.no_cell:
            self.skip("redis-cell", "disabled (--no-cell / RL_BENCH_NO_CELL=1)")
            return None
        if self.o.cell_so:
            if os.path.exists(self.o.cell_so):
                return self.o.cell_so
            self.skip("redis-cell", f"REDIS_CELL_SO={self.o.cell_so} does not exist")
            return None
        cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                             "redis-ratelimit", "redis-cell")
        version = "0.2.2"
        so = os.path.join(cache, "target", "release", "libredis_cell.so")
        if os.path.exists(so):
            return so
        if not shutil.which("cargo"):
            self.skip("redis-cell", "cargo is not installed, so its module cannot be built")
            return None
        self.say(f"redis-cell: building crate redis-cell {version} from crates.io into {cache} "
                 "(once; --no-cell skips it)")
        log = os.path.join(cache, "build.log")
        os.makedirs(cache, exist_ok=True)
        try:
            fetch = os.path.join(cache, "fetch")
            os.makedirs(os.path.join(fetch, "src"), exist_ok=True)
            with open(os.path.join(fetch, "Cargo.toml"), "w") as f:
                f.write('[package]\nname = "fetch-redis-cell"\nversion = "0.0.0"\nedition = "2021"\n'
                        f'[dependencies]\nredis-cell = "={version}"\n[workspace]\n')
            open(os.path.join(fetch, "src", "lib.rs"), "w").close()
            with open(log, "w") as lf:
                mf = os.path.join(fetch, "Cargo.toml")
                subprocess.run(["cargo", "fetch", "--manifest-path", mf], stdout=lf,
                               stderr=subprocess.STDOUT, check=True, timeout=300)
                meta = json.loads(subprocess.run(
                    ["cargo", "metadata", "--format-version", "1", "--manifest-path", mf],
                    capture_output=True, text=True, check=True, timeout=120).stdout)
                pkg = [p for p in meta["packages"] if p["name"] == "redis-cell"][0]
                src = os.path.join(cache, "src")
                shutil.rmtree(src, ignore_errors=True)
                shutil.copytree(os.path.dirname(pkg["manifest_path"]), src)
                with open(os.path.join(src, "Cargo.toml"), "a") as f:
                    f.write("\n[workspace]\n")
                subprocess.run(["nice", "cargo", "build", "--release", "--manifest-path",
                                os.path.join(src, "Cargo.toml"), "--target-dir",
                                os.path.join(cache, "target")], stdout=lf,
                               stderr=subprocess.STDOUT, check=True, timeout=900)
        except (subprocess.SubprocessError, OSError, IndexError, ValueError) as e:
            self.skip("redis-cell", f"its module could not be built ({e.__class__.__name__}; "
                      f"see {log})")
            return None
        if not os.path.exists(so):
            self.skip("redis-cell", f"the build produced no {so} (see {log})")
            return None
        return so

    # ----- main
    def run(self):
        self.setup_pinning()
        mods = [self.o.module] if self.o.module else []
        info = self.machine()
        self.results["machine"] = info
        self.cpu0 = cpu_times()
        busy = info["cpu_busy_at_start"]
        if busy is not None and busy > 0.15:
            self.say(f"warning: the CPUs were {busy * 100:.0f}% busy before the start: something "
                     "else is running, so figures will be noisier than usual")
        self.scripts = {os.path.splitext(os.path.basename(p))[0]: open(p).read()
                        for p in sorted(glob.glob(os.path.join(HERE, "lua", "*.lua")))}
        # The script backend, from its one copy in the repository.
        self.scripts["ratelimit"] = open(os.path.join(HERE, "..", "lua", "ratelimit.lua")).read()
        cmds = catalogue()
        if self.o.only:
            want = [w.strip().lower() for w in self.o.only.split(",")]
            cmds = [c for c in cmds if any(w in c.id or w in c.label.lower() for w in want)]
        if not self.o.module:
            for c in cmds:
                if c.kind == "module":
                    c.skip = f"{c.label}: module not loaded (RL_BENCH_NO_MODULE=1)"
                    self.skip(c.label, "module not loaded (RL_BENCH_NO_MODULE=1)")

        main = Server("main", self.workdir, mods, self.server_cpu).start()
        self.servers.append(main)
        cli = main.client()
        if self.o.module:
            # The memory fills write entries up to half an hour back (AT), beyond the default
            # ratelimit.at-max-behind.
            cli.call("CONFIG", "SET", "ratelimit.at-max-behind", "-1")
            # RL.LIMIT's policy: RL.GCRA's arguments.
            cli.call("RL.POLICY", "SET", "bench", "GCRA", BIG, "1", "1m")
        for c in cmds:
            if c.kind == "lua":
                c.sha = cli.call("SCRIPT", "LOAD", self.scripts[c.script])
        cli.close()
        self.check_available(main, cmds)

        if not self.o.skip_throughput:
            self.throughput(main, cmds, "main")
            self.live_entries(main, cmds)
        self.memory_per_key(main, cmds)
        self.memory_per_entry(main, cmds)
        self.aof(main, cmds)
        main.stop()

        # redis-cell in a server of its own (its command name collides with ours).
        so = None if self.o.only and "cell" not in self.o.only else self.cell_so()
        if so:
            cell = Server("cell", self.workdir, [so], self.server_cpu)
            try:
                cell.start()
                self.servers.append(cell)
            except RuntimeError as e:
                self.skip("redis-cell", f"its module did not load: {str(e).splitlines()[-1]}")
                cell = None
            if cell:
                cc = cell_cmd()
                self.check_available(cell, [cc])
                if not cc.skip:
                    if not self.o.skip_throughput:
                        self.throughput(cell, [cc], "cell")
                    self.memory_per_key(cell, [cc], incr_too=False)
                    self.aof(cell, [cc])
                cell.stop()
        self.results["seconds_total"] = round(time.time() - self.t_start, 1)
        cpu1 = cpu_times()
        if self.cpu0 and cpu1 and cpu1[2] > self.cpu0[2]:
            self.results["machine"]["cpu_steal_during_run"] = (
                (cpu1[1] - self.cpu0[1]) / (cpu1[2] - self.cpu0[2]))

    def stop_all(self):
        for s in self.servers:
            try:
                s.stop()
            except Exception:  # noqa: BLE001 - best effort on the way out
                if s.proc:
                    s.proc.kill()


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------
def fmt_rps(x):
    return f"{x:,.0f}" if x is not None else "–"


def render(res, argv_line):
    m = res["machine"]
    L = []
    L.append(f"# redis-ratelimit benchmark — {m['date']}")
    L.append("")
    busy = m.get("cpu_busy_at_start")
    steal = m.get("cpu_steal_during_run")
    L.append(f"- Machine: `{m['host']}`, {m['nproc']} CPU ({m['cpu']}), {m['memory']} RAM, "
             f"Linux {m['kernel']}"
             + (f"; CPUs {busy * 100:.0f}% busy before the start" if busy is not None else
                f"; load average at start {m['loadavg_at_start']:.2f}")
             + (f"; CPU steal during the run {steal * 100:.1f}%" if steal is not None else ""))
    L.append(f"- Server: {m['redis_server']}")
    L.append(f"- Client: {m['redis_benchmark']}, 50 connections; {m['pinning']}")
    L.append(f"- Module: {m['module']}; commit {m['commit']}")
    L.append(f"- Mode: {m['mode']} — {m['runs']} run(s) of ~{m['seconds_per_run']} s per figure, "
             "median reported; total time " f"{res.get('seconds_total', 0):.0f} s")
    L.append(f"- Reproduce: `{argv_line}`")
    L.append("")
    L.append("Parameters: limits of 10,000,000 with slow rates (GCRA/buckets: 1 per minute, "
             "windows of 1 minute; sliding logs: 1 s window), so every call is granted and keys "
             "stay alive. `×INCR` is the command's median requests/s divided by the median INCR "
             "requests/s measured around it on the same server (INCR before and after each run). "
             "`vs Lua` is the command's requests/s over its Lua script's. Latencies are ms, from "
             "redis-benchmark, for the median run.")
    notes = list(res.get("notes", []))
    busy = m.get("cpu_busy_at_start")
    if busy is not None and busy > 0.15:
        notes.append(f"the CPUs were {busy * 100:.0f}% busy in the second before the start: "
                     "something else was running, so figures are noisier than usual")
    steal = m.get("cpu_steal_during_run")
    if steal is not None and steal > 0.02:
        notes.append(f"the hypervisor took {steal * 100:.1f}% of CPU time during the run (steal): "
                     "expect extra noise")
    if notes:
        L.append("")
        for n in notes:
            L.append(f"> Note: {n}")
    if res["skipped"]:
        L.append("")
        for s in res["skipped"]:
            L.append(f"- {s}")

    tp = res["throughput"]
    by = {(r["id"], r["case"], r["pipeline"]): r for r in tp if "error" not in r}
    for case, pipeline in (("random", 16), ("hot", 16), ("random", 1), ("hot", 1)):
        rows = [r for r in tp if r["case"] == case and r["pipeline"] == pipeline]
        if not rows:
            continue
        what = "random keys (100k)" if case == "random" else "one hot key"
        L.append("")
        L.append(f"## Throughput: {what}, pipeline {pipeline}")
        L.append("")
        L.append("| command | req/s | ×INCR | vs Lua | p50 ms | p99 ms | granted | INCR req/s (around) |")
        L.append("|---|--:|--:|--:|--:|--:|---|---|")
        for r in rows:
            if "error" in r:
                L.append(f"| {r['label']} | error: {r['error'][:80]} | | | | | | |")
                continue
            vs = "–"
            ref = CATALOGUE_REF.get(r["id"])
            if ref and (ref, case, pipeline) in by:
                vs = f"{r['rps'] / by[(ref, case, pipeline)]['rps']:.1f}×"
            g = r["granted"]
            if g.get("fraction") is not None:
                gt = f"{g['fraction'] * 100:.1f}%"
            else:
                gt = "yes (probe)" if g["probe_granted"] else "**NO** (probe denied)"
            incr = "/".join(f"{x / 1000:.0f}k" for x in r["incr_rps"])
            flag = " ⚠ >20% drift" if r["incr_flag"] else ""
            srv = " ¹" if r["server"] == "cell" else ""
            L.append(f"| {r['label']}{srv} | {fmt_rps(r['rps'])} | {r['ratio']:.2f} | {vs} | "
                     f"{r['p50']:.3f} | {r['p99']:.3f} | {gt} | {incr}{flag} |")
    if any(r["server"] == "cell" for r in tp):
        L.append("")
        L.append("¹ redis-cell runs in a server of its own (same config and pinning); its ×INCR "
                 "uses INCR measured on that server.")

    if res["live"]:
        L.append("")
        r0 = res["live"][0]
        L.append(f"## Sliding logs with live entries: {r0['keys']} keys holding "
                 f"{r0['entries_start']}–{r0['entries_end']} entries each, pipeline 16")
        L.append("")
        L.append("| layout | req/s | ×INCR | p50 ms | p99 ms | granted |")
        L.append("|---|--:|--:|--:|--:|---|")
        for r in res["live"]:
            if "error" in r:
                L.append(f"| {r['label']} | error: {r['error'][:80]} | | | | |")
                continue
            g = r["granted"]
            gt = (f"{g['fraction'] * 100:.1f}%" if g.get("fraction") is not None else
                  ("yes (probe)" if g["probe_granted"] else "**NO**"))
            L.append(f"| {r['label']} | {fmt_rps(r['rps'])} | {r['ratio']:.2f} | {r['p50']:.3f} | "
                     f"{r['p99']:.3f} | {gt} |")

    if res["memory_key"]:
        L.append("")
        L.append("## Memory per key (100k keys, one call each; used_memory delta / keys)")
        L.append("")
        L.append("Stream layouts are measured on 10k keys: each stream key costs about 4.4 KB.")
        L.append("")
        L.append("| layout | bytes per key | MEMORY USAGE (one key) | encoding | keys alive |")
        L.append("|---|--:|--:|---|--:|")
        for r in res["memory_key"]:
            if "error" in r:
                L.append(f"| {r['label']} | error: {r['error'][:80]} | | | |")
                continue
            per = f"{r['bytes_per_key']:.0f}"
            if r["keys_expected"] != r["calls"]:
                per += f" ({r['bytes_per_call']:.0f} per call)"
            L.append(f"| {r['label']} | {per} | {r['memory_usage_sample']} | "
                     f"{r['encoding'] or ''} | {r['keys']:,} of {r['keys_expected']:,} |")

    if res["memory_entry"]:
        L.append("")
        L.append("## Memory per log entry (used_memory delta / entries, entries at distinct ms)")
        L.append("")
        L.append("Each row fills its keys with 100 entries each, then (after FLUSHALL) with 1000.")
        L.append("")
        L.append("| layout | B/entry at 100 per key | B/entry at 1000 per key | encodings |")
        L.append("|---|--:|--:|---|")
        seen = []
        for r in res["memory_entry"]:
            if r["id"] not in seen:
                seen.append(r["id"])
        for cid in seen:
            rows = {r["entries_per_key"]: r for r in res["memory_entry"] if r["id"] == cid}
            cells, encs = [], []
            for n in (100, 1000):
                r = rows.get(n)
                if not r:
                    cells.append("–")
                elif "error" in r:
                    cells.append("error")
                else:
                    cells.append(f"{r['bytes_per_entry']:.1f}")
                    encs.append(str(r.get("encoding")))
            first = next(iter(rows.values()))
            label = first["label"] + f" ({first['keys']:,} keys)"
            L.append(f"| {label} | {cells[0]} | {cells[1]} | {' / '.join(encs)} |")

    if res["aof"]:
        L.append("")
        L.append("## AOF / replication bytes per granted call (AOF incr file growth)")
        L.append("")
        L.append("| command | random keys | hot key |")
        L.append("|---|--:|--:|")
        for r in res["aof"]:
            cells = []
            for case in ("random", "hot"):
                c = r.get(case, {})
                if "error" in c:
                    cells.append("error")
                elif c.get("bytes_per_call") is None:
                    cells.append("–")
                elif c["bytes_per_call"] == 0:
                    cells.append("0 (propagates nothing)")
                else:
                    cells.append(f"{c['bytes_per_call']:.0f}" +
                                 ("" if c.get("probe_granted", True) else " (denied!)"))
            L.append(f"| {r['label']} | {cells[0]} | {cells[1]} |")

    tg = targets(res)
    if tg:
        L.append("")
        L.append("## Targets")
        L.append("")
        L.append("| target | figure | met |")
        L.append("|---|---|---|")
        for t, fig, ok in tg:
            L.append(f"| {t} | {fig} | {'yes' if ok else ('no' if ok is False else '?')} |")
    L.append("")
    return "\n".join(L)


CATALOGUE_REF = {c.id: c.lua_ref for c in catalogue() + [cell_cmd()] if c.lua_ref}


def targets(res):
    out = []
    by = {(r["id"], r["case"], r["pipeline"]): r for r in res["throughput"] if "error" not in r}
    fixed = [c for c in catalogue() + [cell_cmd()] if c.group == "fixed" and c.kind == "module"]
    for c in fixed:
        for case in ("random", "hot"):
            r = by.get((c.id, case, 16))
            if r:
                out.append((f"{c.label} ≥ 0.85× INCR, P16 {case}", f"{r['ratio']:.2f}×",
                            r["ratio"] >= 0.85))
    for r in res["live"]:
        if r["id"] == "rl.sliding" and "error" not in r:
            out.append((f"RL.SLIDING ≥ 0.8× INCR with ~100 live entries per key",
                        f"{r['ratio']:.2f}×", r["ratio"] >= 0.8))
    for c in catalogue():
        if c.kind != "module" or not c.lua_ref:
            continue
        for case in ("random", "hot"):
            r, l = by.get((c.id, case, 16)), by.get((c.lua_ref, case, 16))
            if r and l:
                out.append((f"{c.label} ≥ 3× its Lua ({CATALOGUE_LABEL[c.lua_ref]}), P16 {case}",
                            f"{r['rps'] / l['rps']:.1f}×", r["rps"] / l["rps"] >= 3))
    mk = {r["id"]: r for r in res["memory_key"] if "error" not in r}
    for c in fixed:
        if c.id in mk:
            b = mk[c.id]["bytes_per_key"]
            out.append((f"{c.label} ≤ 140 B per key (100k keys)", f"{b:.0f} B", b <= 140))
    for r in res["memory_entry"]:
        if r["id"] == "rl.sliding" and r["entries_per_key"] == 1000 and "error" not in r:
            out.append(("RL.SLIDING ≤ 4 B per live entry at 1000 per key",
                        f"{r['bytes_per_entry']:.1f} B", r["bytes_per_entry"] <= 4))
    return out


CATALOGUE_LABEL = {c.id: c.label for c in catalogue()}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="1 run of ~0.3 s per figure (<2 min)")
    ap.add_argument("--runs", type=int, help="runs per figure (default 3, quick 1)")
    ap.add_argument("--module", default=os.environ.get("RL_MODULE"),
                    help="path of libredis_ratelimit.so (empty: run without the module)")
    ap.add_argument("--cell-so", default=os.environ.get("REDIS_CELL_SO"),
                    help="a prebuilt redis-cell module to use instead of building one")
    ap.add_argument("--no-cell", action="store_true",
                    default=os.environ.get("RL_BENCH_NO_CELL") == "1")
    ap.add_argument("--no-pin", action="store_true", help="do not pin with taskset")
    ap.add_argument("--only", help="comma-separated substrings of command ids to run (debugging)")
    ap.add_argument("--skip-throughput", action="store_true", help="memory and AOF only")
    ap.add_argument("--render", metavar="JSON",
                    help="print the Markdown report of an earlier run's .json and exit")
    ap.add_argument("--workdir", help="scratch directory (made by run.sh)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--cmdline", default="bench/run.sh", help="the command shown as 'Reproduce'")
    opts = ap.parse_args()
    if opts.render:
        with open(opts.render) as f:
            res = json.load(f)
        print(render(res, res.get("cmdline", opts.cmdline)))
        return
    if not opts.workdir:
        ap.error("--workdir is required (bench/run.sh makes one)")
    if opts.module == "":
        opts.module = None

    b = Bench(opts)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        b.run()
    except KeyboardInterrupt:
        b.say("interrupted: stopping the servers")
        b.stop_all()
        sys.exit(130)
    finally:
        b.stop_all()

    b.results["cmdline"] = opts.cmdline
    md = render(b.results, opts.cmdline)
    os.makedirs(opts.out, exist_ok=True)
    m = b.results["machine"]
    stem = dt.datetime.now().strftime("%Y-%m-%d") + "-" + m["host"] + ("-quick" if opts.quick else "")
    with open(os.path.join(opts.out, stem + ".md"), "w") as f:
        f.write(md)
    with open(os.path.join(opts.out, stem + ".json"), "w") as f:
        json.dump(b.results, f, indent=1, default=str)
    print(md)
    b.say(f"wrote {os.path.relpath(os.path.join(opts.out, stem), os.getcwd())}.md and .json "
          f"in {b.results.get('seconds_total', 0):.0f} s")


if __name__ == "__main__":
    main()
