"""The script backend against the module: the same call sequences on both, every reply field
and every key's expiry compared.

Both sides are driven at the same instant: the module with `AT t`, the script in its test mode
(the one line `TEST_CLOCK = true`, which only makes it accept `AT t` in place of TIME). Times are
µs-exact on both sides (AT carries µs; TIME is µs), so the replies must be identical. The calls
without AT are compared in test_clock.py, with the bound stated there.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
import redis

from conftest import ScriptServer

SEEDS = [1, 2, 3, 4]
STEPS = 250

GCRA_PARAMS = [
    ("10", "5", "1s"),
    ("3", "3", "1s"),
    ("1", "1", "250ms"),
    ("5", "7", "1s"),
    ("12", "1000", "1s"),
    ("4", "1000000", "1s"),
    ("6", "1", "1m"),
    ("2", "3", "7ms"),
    ("20", "9", "3s"),
]
FIXED_PARAMS = [
    ("5", "1s"),
    ("3", "100ms"),
    ("10", "1m"),
    ("4", "7s", "OFFSET", "3s"),
    ("4", "7s", "OFFSET", "250ms"),
    ("2", "1h", "OFFSET", "90m"),
    ("6", "1s", "OFFSET", "0"),
]
SC_PARAMS = [("5", "1s"), ("3", "100ms"), ("10", "1m"), ("7", "3s"), ("1", "10ms"), ("9", "777ms")]

ALGOS = {
    "RL.GCRA": GCRA_PARAMS,
    "RL.TOKENBUCKET": GCRA_PARAMS,
    "RL.FIXED": FIXED_PARAMS,
    "RL.SLIDINGCOUNTER": SC_PARAMS,
}


def at_arg(us: int) -> str:
    return f"{us // 1000}.{us % 1000:03d}"


def start_us() -> int:
    # Ahead of both servers' clocks: the module's expiry rules for times behind its clock do
    # not apply, so expiries are comparable exactly.
    return (int(time.time()) + 600) * 1_000_000


def limit_of(params: tuple[str, ...]) -> int:
    return int(params[0])


def call_both(
    module: redis.Redis,
    scripts: ScriptServer,
    sc: redis.Redis,
    keys: list[str],
    cmd: str,
    args: list[str],
    at: int,
) -> tuple[Any, Any]:
    if cmd in ("RL.ALL", "RL.CHECKALL"):
        m = module.execute_command(cmd, len(keys), *keys, *args, "AT", at_arg(at))
    else:
        m = module.execute_command(cmd, *keys, *args, "AT", at_arg(at))
    s = sc.evalsha(scripts.test_sha, len(keys), *keys, cmd, *args, "AT", at_arg(at))
    return m, s


def expiries(c: redis.Redis, keys: list[str]) -> list[int]:
    return [int(c.execute_command("PEXPIRETIME", k)) for k in keys]


def options(rng: random.Random, cost_max: int) -> list[str]:
    out: list[str] = []
    if rng.random() < 0.85:
        out += ["COST", str(rng.randint(0, cost_max))]
    if rng.random() < 0.2:
        out.append("PEEK")
    if rng.random() < 0.25:
        out.append("BESTEFFORT")
    if rng.random() < 0.3:
        out.append("DETAIL")
    return out


def advance(rng: random.Random, now: int) -> int:
    r = rng.random()
    if r < 0.15:
        return now
    if r < 0.3:
        return now + rng.choice([1, 2, 333, 999, 1000, 1001])
    if r < 0.9:
        return now + rng.randint(1, 400_000)
    return now + rng.randint(400_000, 90_000_000)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("cmd", list(ALGOS))
def test_single_limiter_sequences(module: redis.Redis, scripts: ScriptServer, cmd: str, seed: int) -> None:
    rng = random.Random(f"{cmd}-{seed}")
    sc = scripts.client()
    module.flushall()
    sc.flushall()
    pool = ALGOS[cmd]
    params = rng.choice(pool)
    now = start_us()
    key = f"k:{cmd}:{seed}"
    for step in range(STEPS):
        if rng.random() < 0.08:
            params = rng.choice(pool)  # a parameter change keeps the units used, as the module
        now = advance(rng, now)
        at = now - rng.randint(1, 5_000_000) if rng.random() < 0.05 else now  # a clock step back
        args = [*params, *options(rng, limit_of(params) + 2)]
        call = cmd
        if rng.random() < 0.15:  # RL.CHECK: the reply of the call with PEEK, read-only
            call = "RL.CHECK"
            args = [cmd.removeprefix("RL."), *[a for a in args if a != "PEEK"]]
        m, s = call_both(module, scripts, sc, [key], call, args, at)
        assert s == m, f"step {step}: {call} {key} {' '.join(args)} AT {at_arg(at)}"
        assert expiries(sc, [key]) == expiries(module, [key]), f"expiry after step {step}: {args}"
    sc.close()


def limiter_args(rng: random.Random) -> tuple[list[str], int]:
    name = rng.choice(["GCRA", "TOKENBUCKET", "FIXED", "SLIDINGCOUNTER"])
    params = rng.choice(ALGOS["RL." + name])
    return [name, *params], limit_of(params)


@pytest.mark.parametrize("seed", SEEDS)
def test_all_sequences(module: redis.Redis, scripts: ScriptServer, seed: int) -> None:
    rng = random.Random(f"all-{seed}")
    sc = scripts.client()
    module.flushall()
    sc.flushall()
    now = start_us()
    for round_ in range(6):
        n = rng.randint(1, 3)
        keys = [f"{{u{seed}:{round_}}}:{i}" for i in range(n)]
        limiters = [limiter_args(rng) for _ in keys]
        for step in range(STEPS // 5):
            now = advance(rng, now)
            args: list[str] = []
            charges = rng.random() < 0.3
            for spec, limit in limiters:
                args += spec
                if charges and rng.random() < 0.6:
                    args += ["CHARGE", str(rng.randint(0, limit + 1))]
                if rng.random() < 0.2:
                    args += ["NAME", f"n{len(args)}"]
            opts = options(rng, max(limit for _, limit in limiters) + 1)
            if charges:
                opts = [o for o in opts if o != "BESTEFFORT"]
            args += opts
            call = "RL.ALL"
            if rng.random() < 0.2:  # RL.CHECKALL: RL.ALL with PEEK, read-only
                call = "RL.CHECKALL"
                args = [a for a in args if a not in ("PEEK", "BESTEFFORT")]
            m, s = call_both(module, scripts, sc, keys, call, args, now)
            assert s == m, f"round {round_} step {step}: {call} {keys} {' '.join(args)} AT {at_arg(now)}"
            assert expiries(sc, keys) == expiries(module, keys), f"expiry, step {step}: {args}"
    sc.close()


ERRORS = [
    ["RL.GCRA", "k", "0", "1", "1s"],
    ["RL.GCRA", "k", "x", "1", "1s"],
    ["RL.GCRA", "k", "1", "1", "1x"],
    ["RL.GCRA", "k", "1", "1", "0"],
    ["RL.GCRA", "k", "1", "1", "1s", "COST"],
    ["RL.GCRA", "k", "1", "1", "1s", "COST", "-1"],
    ["RL.GCRA", "k", "1", "1", "1s", "FOO"],
    ["RL.GCRA", "k", "1", "1", "\xf0\x9f\x98\x80"],
    ["RL.TOKENBUCKET", "k", "1", "0", "1s"],
    ["RL.FIXED", "k", "5", "1s", "OFFSET", "-1"],
    ["RL.FIXED", "k", "5", "abc"],
    ["RL.SLIDINGCOUNTER", "k", "0", "1s"],
    ["RL.ALL", "1", "k", "nope", "1"],
    ["RL.ALL", "1", "k", "GCRA", "1", "1"],
    ["RL.ALL", "2", "k", "k", "GCRA", "1", "1", "1s", "GCRA", "1", "1", "1s"],
    ["RL.ALL", "2", "{a}1", "{a}2", "GCRA", "5", "1", "1s", "CHARGE", "2", "FIXED", "5", "1s", "BESTEFFORT"],
]


@pytest.mark.parametrize("call", ERRORS, ids=lambda c: " ".join(c))
def test_errors_are_the_modules(module: redis.Redis, scripts: ScriptServer, call: list[str]) -> None:
    """Bad input gets the module's error text, and changes nothing."""
    sc = scripts.client()
    sc.flushall()
    module.flushall()
    cmd = call[0]
    if cmd == "RL.ALL":
        n = int(call[1])
        keys, rest = call[2 : 2 + n], call[2 + n :]
    else:
        keys, rest = call[1:2], call[2:]
    with pytest.raises(redis.ResponseError) as m:
        module.execute_command(*call)
    with pytest.raises(redis.ResponseError) as s:
        sc.evalsha(scripts.sha, len(keys), *keys, cmd, *rest)
    assert str(s.value) == str(m.value)
    assert sc.dbsize() == 0
    sc.close()


MODULE_ONLY = [
    (["RL.GCRA", "k", "5", "1", "1s", "DEDUP", "x"], "DEDUP"),
    (["RL.GCRA", "k", "5", "1", "1s", "DEDUP", "x", "HOLD", "30s"], "DEDUP"),
    (["RL.GCRA", "k", "5", "1", "1s", "DELAY", "1s"], "DELAY"),
    (["RL.GCRA", "k", "5", "1", "1s", "SHADOW"], "SHADOW"),
    (["RL.GCRA", "k", "5", "1", "1s", "BLOCK", "1m"], "BLOCK"),
    (["RL.GCRA", "k", "5", "1", "1s", "AT", "1700000000000"], "AT"),
    (["RL.FIXED", "k", "5", "day"], "calendar windows"),
    (["RL.FIXED", "k", "5", "1d", "TZ", "Europe/Paris"], "TZ"),
    (["RL.LEAKYBUCKET", "k", "5", "1", "1s"], "RL.LEAKYBUCKET"),
    (["RL.SLIDING", "k", "5", "1s"], "RL.SLIDING"),
    (["RL.STREAMCOUNT", "k", "1m"], "RL.STREAMCOUNT"),
    (["RL.SETTLE", "k", "id", "3"], "RL.SETTLE"),
    (["RL.BLOCK", "k", "1m"], "RL.BLOCK"),
    (["RL.ACQUIRE", "k", "5", "1m", "ID", "x"], "RL.ACQUIRE"),
    (["RL.LIMIT", "k", "free"], "RL.LIMIT"),
    (["RL.ALL", "1", "k", "POLICY", "free"], "POLICY"),
    (["RL.ALL", "1", "k", "SLIDING", "5", "1s"], "SLIDING"),
    (["RL.GCRA", "k", "3000000", "1", "1h"], "burst * period"),
    (["RL.SLIDINGCOUNTER", "k", "2000000", "1d"], "limit * window"),
    (["RL.GCRA", "k", "1125899906842625", "1", "1ms"], "burst"),
]


@pytest.mark.parametrize("call,what", MODULE_ONLY, ids=lambda c: " ".join(c) if isinstance(c, list) else c)
def test_what_scripts_cannot_do_names_the_module(scripts: ScriptServer, call: list[str], what: str) -> None:
    sc = scripts.client()
    sc.flushall()
    cmd = call[0]
    if cmd == "RL.ALL":
        n = int(call[1])
        keys, rest = call[2 : 2 + n], call[2 + n :]
    else:
        keys, rest = call[1:2], call[2:]
    with pytest.raises(redis.ResponseError) as e:
        sc.evalsha(scripts.sha, len(keys), *keys, cmd, *rest)
    msg = str(e.value)
    assert what in msg and "redis-ratelimit module" in msg and "loadmodule" in msg, msg
    assert sc.dbsize() == 0
    sc.close()


def test_large_values_stay_exact(module: redis.Redis, scripts: ScriptServer) -> None:
    """Near the bounds (burst * period just below 2^53 µs, a window of years, a million per
    second): the same replies as the module."""
    sc = scripts.client()
    now = start_us()
    cases = [
        ("RL.GCRA", ["100000", "7", "1d"]),
        ("RL.TOKENBUCKET", ["104249", "1000003", "1d"]),
        ("RL.GCRA", ["1", "1", "13000d"]),
        ("RL.FIXED", ["1125899906842624", "1d", "OFFSET", "13h"]),
        ("RL.SLIDINGCOUNTER", ["104249", "1d"]),
        ("RL.SLIDINGCOUNTER", ["3", "13000d"]),
    ]
    for cmd, params in cases:
        module.flushall()
        sc.flushall()
        t = now
        for cost in ["1", "99999", "3", "0", "104249", "50000", "7"]:
            for extra in ([], ["BESTEFFORT"], ["PEEK"]):
                args = [*params, "COST", cost, *extra]
                m, s = call_both(module, scripts, sc, ["big"], cmd, args, t)
                assert s == m, f"{cmd} {' '.join(args)} AT {at_arg(t)}"
                assert expiries(sc, ["big"]) == expiries(module, ["big"])
            t += 12_345_679
    sc.close()


def test_key_layout(scripts: ScriptServer) -> None:
    """One string per limiter key, `rl1 <algorithm> <last update µs> <fields...>`, expiring when
    the limiter is fresh again; another value at the key is refused and left as it is."""
    sc = scripts.client()
    sc.flushall()
    at = start_us()
    sc.evalsha(scripts.test_sha, 1, "g", "RL.GCRA", "10", "3", "1s", "COST", "2", "AT", at_arg(at))
    # TAT = at + 2/3 s = at + 666666 µs + 2 ticks of 1/3 µs.
    assert sc.get("g") == f"rl1 gcra {at} 10 3 1000000 {at + 666_666} 2".encode()
    assert sc.execute_command("PEXPIRETIME", "g") == (at + 666_667 + 999) // 1000
    sc.evalsha(scripts.test_sha, 1, "f", "RL.FIXED", "10", "1m", "OFFSET", "90s", "AT", at_arg(at))
    end = at + 60_000_000 - (at - 30_000_000) % 60_000_000
    assert sc.get("f") == f"rl1 fixed {at} 10 60000000 30000000 {end} 1".encode()
    sc.evalsha(scripts.test_sha, 1, "s", "RL.SLIDINGCOUNTER", "10", "1m", "AT", at_arg(at))
    start = at - at % 60_000_000
    assert sc.get("s") == f"rl1 slidingcounter {at} 10 60000000 {start} 0 1".encode()
    sc.set("plain", "hello")
    sc.hset("hash", "a", "1")
    for key, want in [
        ("plain", "holds a string that is not a limiter"),
        ("hash", "WRONGTYPE"),
        ("g", "holds a RL.GCRA limiter, not RL.FIXED"),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            sc.evalsha(scripts.sha, 1, key, "RL.FIXED", "5", "1s")
        assert want in str(e.value), str(e.value)
    assert sc.get("plain") == b"hello"
    sc.close()
