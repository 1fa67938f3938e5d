"""The client's shared options are the module's: every keyword of ``options()`` emits a token that
COMMAND DOCS lists for the limiter commands, and every option COMMAND DOCS lists there has a
keyword; and they are the module's option table's: each method offers exactly the options its
command accepts, and ``options()`` refuses exactly the pairs RL.GCRA refuses."""

from __future__ import annotations

import inspect
import itertools
import json
from pathlib import Path
from typing import Any

import redis

from redis_ratelimit_client import RateLimiter
from redis_ratelimit_client._commands import options
from redis_ratelimit_client.asyncio import AsyncRateLimiter
from redis_ratelimit_client.testing import RedisModuleServer

# Each keyword of options() with a value that makes it emit its token.
KEYWORDS: dict[str, Any] = {
    "cost": 2,
    "peek": True,
    "best_effort": True,
    "dedup": "id",
    "block": 1000,
    "at": 1_700_000_000_000,
    "detail": True,
    "delay": 1000,
    "hold": 1000,
    "shadow": True,
}


def _pairs(items: list[Any]) -> dict[str, Any]:
    return {
        (k.decode() if isinstance(k, bytes) else k): v
        for k, v in zip(items[::2], items[1::2], strict=True)
    }


def _tokens(server: RedisModuleServer, command: str) -> set[str]:
    # The raw reply: redis-py's own callback for COMMAND DOCS expects the server's commands only.
    conn = redis.Connection(host=server.host, port=server.port, protocol=2)
    try:
        conn.send_command("COMMAND", "DOCS", command)
        reply = conn.read_response()
    finally:
        conn.disconnect()
    docs = _pairs(reply)
    doc = _pairs(next(iter(docs.values())))
    tokens = set()
    for arg in doc.get("arguments", []):
        token = _pairs(arg).get("token")
        if token is not None:
            tokens.add(token.decode() if isinstance(token, bytes) else str(token))
    return tokens


def _emitted(keyword: str) -> set[str]:
    kwargs = dict({keyword: KEYWORDS[keyword]})
    if keyword == "hold":
        kwargs["dedup"] = "id"
    out = {a for a in options(**kwargs) if isinstance(a, str) and a.isupper()}
    if keyword == "hold":
        out.discard("DEDUP")
    return out


def test_every_keyword_emits_a_documented_option(server: RedisModuleServer) -> None:
    # RL.GCRA takes every shared option and DELAY.
    documented = _tokens(server, "rl.gcra")
    for keyword in KEYWORDS:
        emitted = _emitted(keyword)
        assert len(emitted) == 1, (keyword, emitted)
        assert emitted <= documented, (keyword, emitted, documented)


def test_every_documented_shared_option_has_a_keyword(server: RedisModuleServer) -> None:
    documented = _tokens(server, "rl.gcra")
    # RL.GCRA's own arguments have no token; every token it documents is a shared option.
    covered = set().union(*(_emitted(k) for k in KEYWORDS))
    assert documented == covered, documented ^ covered


# The module's option table (docs/options.json, written from src/commands/call/options.rs and held
# equal to it by the module's unit tests).
TABLE_PATH = Path(__file__).resolve().parents[3] / "docs" / "options.json"

# Each client keyword and its token.
TOKENS = {
    "cost": "COST",
    "peek": "PEEK",
    "best_effort": "BESTEFFORT",
    "dedup": "DEDUP",
    "block": "BLOCK",
    "at": "AT",
    "detail": "DETAIL",
    "delay": "DELAY",
    "hold": "HOLD",
    "shadow": "SHADOW",
    "wait": "WAIT",
}

# The client's method for each command of the table.
METHODS = {
    "gcra": "RL.GCRA",
    "token_bucket": "RL.TOKENBUCKET",
    "leaky_bucket": "RL.LEAKYBUCKET",
    "fixed": "RL.FIXED",
    "sliding": "RL.SLIDING",
    "sliding_counter": "RL.SLIDINGCOUNTER",
    "all": "RL.ALL",
    "limit": "RL.LIMIT",
    "acquire": "RL.ACQUIRE",
    "check": "RL.CHECK",
    "check_all": "RL.CHECKALL",
    "refund": "RL.REFUND",
    "settle": "RL.SETTLE",
    "block": "RL.BLOCK",
}


def _table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(TABLE_PATH.read_text())
    return table


def _refused(rules: list[dict[str, Any]], given: set[str]) -> bool:
    return any(set(r["refused"]) <= given and r.get("without") not in given for r in rules)


def test_options_are_the_tables_shared_options() -> None:
    covered = set().union(*(_emitted(k) for k in KEYWORDS))
    assert covered == set(_table()["shared"])


def test_each_method_offers_exactly_what_its_command_accepts() -> None:
    commands = _table()["commands"]
    assert set(METHODS.values()) == set(commands), set(commands) ^ set(METHODS.values())
    for cls in (RateLimiter, AsyncRateLimiter):
        for method, command in METHODS.items():
            params = inspect.signature(getattr(cls, method)).parameters.values()
            offered = {
                TOKENS[p.name]
                for p in params
                if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name in TOKENS
            }
            assert offered == set(commands[command]["accepted"]), (cls.__name__, method)


def test_options_refuses_what_the_table_refuses_on_gcra() -> None:
    # options() checks the shared options alone, as RL.GCRA does: it refuses a pair of keywords
    # exactly when the table's RL.GCRA row refuses their tokens.
    rules = _table()["commands"]["RL.GCRA"]["rules"]
    for a, b in itertools.combinations_with_replacement(KEYWORDS, 2):
        given = {a: KEYWORDS[a], b: KEYWORDS[b]}
        tokens = {TOKENS[a], TOKENS[b]}
        try:
            options(**given)
            refused = False
        except ValueError:
            refused = True
        assert refused == _refused(rules, tokens), (a, b)
