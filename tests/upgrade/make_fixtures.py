#!/usr/bin/env python3
"""Write the upgrade fixtures of tests/upgrade.rs: every stored form older builds of the module
wrote, made by those builds on a real server.

For each build of BUILDS (the commit before each change of the stored forms, and the one that
added HOLD reservations and named policies), this script takes the commit's tree (git archive),
builds the module (cargo build --lib, in a scratch directory under /tmp), starts Debian's
redis-server 7.0 (the oldest server supported, whose RDB every later server reads) with it, and
runs one scenario twice, on keys `fx:*` before an AOF rewrite and `fxs:*` after it. Then, under
tests/upgrade/<build>/:

  dump.rdb           SAVE: the RDB (every key, the named policies in the aux data)
  appendonly.aof     the AOF without RDB preamble: the rewrite's base (RL._RESTORE payloads of
                     the fx:* keys) followed by the incremental file (the fxs:* calls as the build
                     propagated them: RL._SET payloads for granted calls of small limiters)
  preamble.aof       the AOF of a rewrite with aof-use-rdb-preamble yes (an RDB preamble)
  policies.bin       RL.POLICY DUMP (builds with named policies)
  keys.txt           the keys the scenario wrote, one per line (which commands the build had)
  downgrade.txt      what this build does with each newer build's RDB (a downgrade)

The scenario's parameters use a period of 36500 days per unit (3000 days for the keys *8, whose
values fit codec version 3's fixed-width words), so the state the tests expect (the limit minus
the units used) holds for years and no key expires. tests/upgrade.rs
asserts those states from the same parameters, not from anything written here.

usage: tests/upgrade/make_fixtures.py     (needs cargo and Debian's redis-server; about 5 min)
"""

import io
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "upgrade")
SCRATCH = "/tmp/rl-upgrade-fixtures"
SERVER = os.environ.get("RL_SERVER", "redis-server")

# name, commit, what changed after it
BUILDS = [
    ("v1-6e74f17", "6e74f17", "codec version 1 only: before blocks and settled ids (version 2)"),
    (
        "v2-9093493",
        "9093493",
        "codec version 2; RL._SET payloads in versions 1 and 2 (before version 3)",
    ),
    (
        "v3-0afd7a4",
        "0afd7a4",
        "codec versions 1-3: RL._SET in the fixed-width version 3; before HOLD (version 4)",
    ),
    (
        "v4-5f6520d",
        "5f6520d",
        "codec version 4 (HOLD reservations) and named policies (RDB aux data, RL.POLICY DUMP)",
    ),
]

Y = "36500d"  # one unit per century
# The longest period whose GCRA, token bucket and leaky bucket values fit the fixed-width words of
# codec version 3 (6 bytes of µs: 3257 days); their RL._SET payloads are version 3 from 0afd7a4 on.
Y8 = "3000d"


def scenario(p):
    """(command name, arguments) of the scenario on keys with prefix p."""
    return [
        ("rl.gcra", ["RL.GCRA", p + "gcra", "10", "1", Y, "COST", "4"]),
        ("rl.tokenbucket", ["RL.TOKENBUCKET", p + "tb", "10", "1", Y, "COST", "3"]),
        ("rl.leakybucket", ["RL.LEAKYBUCKET", p + "lb", "10", "1", Y, "COST", "2"]),
        ("rl.gcra", ["RL.GCRA", p + "gcra8", "10", "1", Y8, "COST", "4"]),
        ("rl.tokenbucket", ["RL.TOKENBUCKET", p + "tb8", "10", "1", Y8, "COST", "3"]),
        ("rl.leakybucket", ["RL.LEAKYBUCKET", p + "lb8", "10", "1", Y8, "COST", "2"]),
        ("rl.fixed", ["RL.FIXED", p + "fixed", "10", Y, "COST", "5"]),
        ("rl.sliding", ["RL.SLIDING", p + "sliding", "10", Y]),
        ("rl.sliding", ["RL.SLIDING", p + "sliding", "10", Y]),
        ("rl.sliding", ["RL.SLIDING", p + "sliding", "10", Y]),
        ("rl.slidingcounter", ["RL.SLIDINGCOUNTER", p + "sc", "10", Y, "COST", "6"]),
        ("cl.throttle", ["CL.THROTTLE", p + "cell", "9", "1", "3153600000", "3"]),
        ("rl.gcra", ["RL.GCRA", p + "dedup", "10", "1", Y, "COST", "2", "DEDUP", "req-1"]),
        ("rl.acquire", ["RL.ACQUIRE", p + "conc", "5", Y, "ID", "lease-a", "COST", "2"]),
        ("rl.block", ["RL.GCRA", p + "blocked", "10", "1", Y]),
        ("rl.block", ["RL.BLOCK", p + "blocked", Y]),
        ("rl.refund", ["RL.GCRA", p + "refund", "10", "1", Y, "COST", "3", "DEDUP", "r1"]),
        ("rl.refund", ["RL.REFUND", p + "refund", "2", "DEDUP", "r1"]),
        (
            "rl.settle",
            ["RL.GCRA", p + "hold", "10", "1", Y, "COST", "3", "DEDUP", "job-1", "HOLD", Y],
        ),
        ("rl.limit", ["RL.LIMIT", p + "pol", "fxpol", "COST", "2"]),
    ]


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(so, d, *extra):
    port = free_port()
    proc = subprocess.Popen(
        [
            SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            d,
            "--save",
            "",
            "--logfile",
            "server.log",
            *extra,
            "--loadmodule",
            so,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=d,
    )
    for _ in range(300):
        if proc.poll() is not None:
            return proc, None
        try:
            c = Conn(port)
            if c.cmd("PING") == "PONG":
                return proc, c
        except (OSError, RuntimeError):
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not start")


def stop(proc, c):
    if c is not None:
        try:
            c.cmd("SHUTDOWN", "NOSAVE")
        except (OSError, RuntimeError):
            pass
    proc.wait(timeout=30)


def info(c, field):
    text = c.cmd("INFO", "persistence").decode()
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None


def rewrite(c):
    c.cmd("BGREWRITEAOF")
    while info(c, "aof_rewrite_in_progress") != "0" or info(c, "aof_rewrite_scheduled") != "0":
        time.sleep(0.05)
    time.sleep(0.2)


def aof_parts(d):
    """The AOF files in manifest order (base first)."""
    adir = os.path.join(d, "appendonlydir")
    manifest = [f for f in os.listdir(adir) if f.endswith(".manifest")][0]
    files = []
    for line in open(os.path.join(adir, manifest)):
        fields = line.split()
        name, kind = fields[fields.index("file") + 1], fields[fields.index("type") + 1]
        files.append((0 if kind == "b" else 1, name))
    return [os.path.join(adir, n) for _, n in sorted(files, key=lambda f: f[0])]


def build(commit):
    src = os.path.join(SCRATCH, "src-" + commit)
    so = os.path.join(SCRATCH, commit + ".so")
    if os.path.exists(so):
        return so
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    tree = subprocess.run(
        ["git", "-C", ROOT, "archive", commit], check=True, capture_output=True
    ).stdout
    tarfile.open(fileobj=io.BytesIO(tree)).extractall(src)
    # git archive dates every file at the commit's time: older than the scratch target's last
    # build, which cargo would then reuse. Date them now.
    now = time.time()
    for dirpath, _, files in os.walk(src):
        for f in files:
            os.utime(os.path.join(dirpath, f), (now, now))
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(SCRATCH, "target"))
    subprocess.run(["cargo", "build", "--lib", "--quiet"], cwd=src, env=env, check=True)
    shutil.copy(os.path.join(SCRATCH, "target", "debug", "libredis_ratelimit.so"), so)
    return so


def generate(name, so):
    d = os.path.join(SCRATCH, "run-" + name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    proc, c = start(
        so, d, "--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--appendfsync", "always"
    )
    try:
        have = {}

        def exists(cmd):
            if cmd not in have:
                reply = c.cmd("COMMAND", "INFO", cmd)
                have[cmd] = bool(reply and reply[0] is not None)
            return have[cmd]

        written = []
        if exists("rl.policy"):
            c.cmd("RL.POLICY", "SET", "fxpol", "GCRA", "10", "1", Y)
        for prefix in ("fx:", "fxs:"):
            for needs, args in scenario(prefix):
                if not exists(needs):
                    continue
                c.cmd(*args)
                if args[1] not in written:
                    written.append(args[1])
            if prefix == "fx:":
                rewrite(c)
        c.cmd("SAVE")
        out = os.path.join(OUT, name)
        os.makedirs(out, exist_ok=True)
        shutil.copy(os.path.join(d, "dump.rdb"), os.path.join(out, "dump.rdb"))
        with open(os.path.join(out, "appendonly.aof"), "wb") as f:
            for part in aof_parts(d):
                f.write(open(part, "rb").read())
        c.cmd("CONFIG", "SET", "aof-use-rdb-preamble", "yes")
        rewrite(c)
        base = aof_parts(d)[0]
        assert open(base, "rb").read(5) == b"REDIS", base
        shutil.copy(base, os.path.join(out, "preamble.aof"))
        if exists("rl.policy"):
            with open(os.path.join(out, "policies.bin"), "wb") as f:
                f.write(c.cmd("RL.POLICY", "DUMP"))
        with open(os.path.join(out, "keys.txt"), "w") as f:
            f.write("".join(k + "\n" for k in sorted(written)))
    finally:
        stop(proc, c)


def downgrade(name, so, newer):
    """Start this build on a newer build's RDB: what does a downgrade do?"""
    d = os.path.join(SCRATCH, "down-%s-%s" % (name, newer))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(os.path.join(OUT, newer, "dump.rdb"), os.path.join(d, "dump.rdb"))
    proc, c = start(so, d)
    if c is None:
        log = open(os.path.join(d, "server.log")).read().splitlines()
        why = [line.split(" ", 4)[-1] for line in log if "RDB" in line or "module" in line.lower()][
            -1:
        ]
        result = "refused: the server exits without loading it\n" + "".join(
            "  log: " + line + "\n" for line in why
        )
    else:
        keys = c.cmd("KEYS", "*")
        result = "loaded, %d keys\n" % len(keys)
        stop(proc, c)
    return "%s/dump.rdb: %s" % (newer, result)


def info_field(c, section, field):
    for line in c.cmd("INFO", section).decode().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None


def replicate(master_so, master_rdb, replica_so):
    """A master of one build (on an RDB) and a replica of another: does the replica follow?"""
    dm, dr = (os.path.join(SCRATCH, "repl-" + x) for x in ("master", "replica"))
    for d in (dm, dr):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    shutil.copy(master_rdb, os.path.join(dm, "dump.rdb"))
    pm, cm = start(master_so, dm, "--enable-debug-command", "yes")
    port = cm.s.getpeername()[1]
    pr, cr = start(
        replica_so,
        dr,
        "--enable-debug-command",
        "yes",
        "--replicaof",
        "127.0.0.1",
        str(port),
        "--repl-diskless-load",
        "disabled",
    )
    try:

        def link():
            try:
                return info_field(cr, "replication", "master_link_status")
            except (OSError, RuntimeError):
                return "gone"

        deadline = time.time() + 10
        while link() not in ("up", "gone") and time.time() < deadline:
            time.sleep(0.1)
        if pr.poll() is not None:
            log = open(os.path.join(dr, "server.log")).read().splitlines()
            why = [
                line.split(" ", 4)[-1] for line in log if "RDB" in line or "module" in line.lower()
            ][-1:]
            return "the replica exits: it cannot load the master's RDB\n" + "".join(
                "  replica log: " + line + "\n" for line in why
            )
        if link() != "up":
            log = open(os.path.join(dr, "server.log")).read().splitlines()
            why = [
                line.split(" ", 4)[-1] for line in log if "RDB" in line or "module" in line.lower()
            ][-1:]
            return "the replica does not sync (it retries the full sync forever)\n" + "".join(
                "  replica log: " + line + "\n" for line in why
            )
        # Calls after the sync reach the replica as the master propagates them (RL._SET, ...).
        cm.cmd("RL.GCRA", "fx:gcra", "10", "1", Y)
        cm.cmd("RL.GCRA", "fx:dedup", "10", "1", Y, "DEDUP", "req-2")
        cm.cmd("RL.SLIDING", "fx:sliding", "10", Y)
        deadline = time.time() + 10
        while (
            info_field(cr, "replication", "master_repl_offset")
            != info_field(cm, "replication", "master_repl_offset")
        ) and time.time() < deadline:
            time.sleep(0.1)
        keys = sorted(k.decode() for k in cm.cmd("KEYS", "*"))
        differ = [
            k
            for k in keys
            if cm.cmd("DEBUG", "DIGEST-VALUE", k) != cr.cmd("DEBUG", "DIGEST-VALUE", k)
        ]
        if differ:
            return "the replica differs from the master on %s\n" % ", ".join(differ)
        return "the replica follows: %d keys, DEBUG DIGEST-VALUE equal on both\n" % len(keys)
    finally:
        stop(pr, cr)
        stop(pm, cm)


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    sos = [(name, build(commit)) for name, commit, _ in BUILDS]
    for name, so in sos:
        print("fixtures of", name, file=sys.stderr)
        generate(name, so)
    for i, (name, so) in enumerate(sos[:-1]):
        with open(os.path.join(OUT, name, "downgrade.txt"), "w") as f:
            f.write("This build started on the RDB of a newer build:\n")
            for newer, _ in sos[i + 1 :]:
                f.write(downgrade(name, so, newer))
    newest, newest_so = sos[-1]
    with open(os.path.join(OUT, "replication.txt"), "w") as f:
        f.write("Replication across builds (Redis 7.0, master started on its build's dump.rdb):\n")
        for name, so in sos[:-1]:
            f.write(
                "master %s, replica %s: %s"
                % (name, newest, replicate(so, os.path.join(OUT, name, "dump.rdb"), newest_so))
            )
            f.write(
                "master %s, replica %s: %s"
                % (newest, name, replicate(newest_so, os.path.join(OUT, newest, "dump.rdb"), so))
            )
    with open(os.path.join(OUT, "BUILDS.txt"), "w") as f:
        for name, commit, what in BUILDS:
            f.write("%s  commit %s  %s\n" % (name, commit, what))


if __name__ == "__main__":
    main()
