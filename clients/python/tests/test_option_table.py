"""The client's shared options are the module's: every keyword of ``options()`` emits a token that
COMMAND DOCS lists for the limiter commands, and every option COMMAND DOCS lists there has a
keyword."""

from __future__ import annotations

from typing import Any

import redis

from redis_ratelimit_client._commands import options
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
