#!/usr/bin/env python3
"""RL.SLIDING memory and replication cost, measured on a real server.

Prints, for 100 and 1000 live entries per key (one granted call per millisecond):
  - MEMORY USAGE of the key, bytes per entry in all, and bytes per entry beyond the first;
  - the same timestamps in a sorted set (the usual Lua sliding-window log), for scale;
and the AOF bytes one granted call appends on a 1000-entry log (what replicas receive too).

Usage:
  bench/sliding_memory.py [--module PATH] [--server BIN]

The module defaults to $RL_MODULE, else target/release, else target/debug; the server to
$RL_SERVER, else redis-server. The script starts its own server on a free 127.0.0.1 port in a
temporary directory and stops it when done. Output lines are `name key=value ...`, one
measurement per line, so a benchmark driver can grep them. Only the standard library is used.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Conn:
    """A minimal RESP2 client: enough for integers, bulk strings, arrays and errors."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def recv(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.recv() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def cmd(self, *args):
        self.send(*args)
        return self.recv()

    def pipeline(self, commands):
        for c in commands:
            self.send(*c)
        return [self.recv() for _ in commands]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_module():
    env = os.environ.get("RL_MODULE")
    if env:
        return env
    for profile in ("release", "debug"):
        p = ROOT / "target" / profile / "libredis_ratelimit.so"
        if p.is_file():
            return str(p)
    sys.exit("no module found: build it (make release) or set RL_MODULE")


class Server:
    """redis-server with the module, on a free loopback port, in a temporary directory."""

    def __init__(self, server, module, extra=()):
        module = str(Path(module).resolve())
        self.dir = tempfile.mkdtemp(prefix="rl-bench-")
        self.port = free_port()
        args = [server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                "--save", "", "--logfile", "server.log", *extra, "--loadmodule", module,
                # AT times an hour ahead (base_ms) are refused by the default bound.
                "at-max-ahead", "-1"]
        self.proc = subprocess.Popen(args, cwd=self.dir, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                if Conn(self.port).cmd("PING") == "PONG":
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                sys.exit("redis-server did not start (%s)" % " ".join(args))
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            try:
                Conn(self.port).send("SHUTDOWN", "NOSAVE")
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def base_ms():
    # A whole second an hour ahead: keys written with AT near it do not expire meanwhile.
    return (int(time.time()) + 3600) * 1000


def fill(c, key, entries, limit=1_000_000, window="1h", spacing_ms=1, t=None):
    t = base_ms() if t is None else t
    replies = c.pipeline([("RL.SLIDING", key, limit, window, "AT", t + i * spacing_ms)
                          for i in range(entries)])
    assert all(r[0] == 1 for r in replies), "every call must be granted"
    return t


def memory(server, module):
    s = Server(server, module)
    try:
        c = Conn(s.port)
        fill(c, "rl:1", 1)
        one = c.cmd("MEMORY", "USAGE", "rl:1")
        for entries in (100, 1000):
            key = "rl:%d" % entries
            t = fill(c, key, entries)
            usage = c.cmd("MEMORY", "USAGE", key)
            print("sliding_memory entries=%d memory_usage=%d bytes_per_entry=%.2f "
                  "bytes_per_extra_entry=%.2f"
                  % (entries, usage, usage / entries, (usage - one) / (entries - 1)))
            zkey = "zset:%d" % entries
            c.pipeline([("ZADD", zkey, t + i, t + i) for i in range(entries)])
            zusage = c.cmd("MEMORY", "USAGE", zkey)
            print("sorted_set_memory entries=%d memory_usage=%d bytes_per_entry=%.2f"
                  % (entries, zusage, zusage / entries))
    finally:
        s.stop()


def aof_cost(server, module, entries=1000, calls=1000):
    s = Server(server, module, ["--appendonly", "yes", "--appendfsync", "no"])
    try:
        c = Conn(s.port)
        t = fill(c, "big", entries)
        incr = sorted(Path(s.dir, "appendonlydir").glob("*.incr.aof"))[-1]
        before = incr.stat().st_size
        # Distinct microseconds: every call is granted and logged as its own entry.
        c.pipeline([("RL.SLIDING", "big", 1_000_000, "1h", "AT",
                     "%d.%03d" % (t + entries + i, i % 1000)) for i in range(calls)])
        c.cmd("PING")
        deadline = time.time() + 5
        while incr.stat().st_size == before and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        per_call = (incr.stat().st_size - before) / calls
        print("sliding_aof entries=%d bytes_per_granted_call=%.1f" % (entries, per_call))
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", default=default_module())
    ap.add_argument("--server", default=os.environ.get("RL_SERVER") or "redis-server")
    a = ap.parse_args()
    memory(a.server, a.module)
    aof_cost(a.server, a.module)


if __name__ == "__main__":
    main()
