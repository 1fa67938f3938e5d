"""Every ```python block of the README, run against a server of its own (the snippets' clients,
``redis.Redis()`` and ``redis.asyncio.Redis()``, are pointed at it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from redis_ratelimit_client.testing import RedisModuleServer

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def blocks() -> list[str]:
    out = []
    for m in BLOCK.finditer(README.read_text()):
        indent = len(m.group(1))
        out.append("".join(line[indent:] for line in m.group(2).splitlines(keepends=True)))
    return out


def test_the_readme_has_python_blocks_and_absolute_links() -> None:
    assert len(blocks()) >= 4
    text = README.read_text()
    assert "](../" not in text and "](./" not in text  # PyPI renders no relative link


@pytest.fixture(scope="module")
def readme_server() -> Iterator[RedisModuleServer]:
    with RedisModuleServer() as s:
        yield s


@pytest.mark.parametrize("index", range(len(blocks())))
def test_readme_block(
    index: int, readme_server: RedisModuleServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for cls in (redis.Redis, redis.asyncio.Redis):
        original = cls.__init__

        def init(self: Any, *args: Any, __original: Any = original, **kw: Any) -> None:
            kw.setdefault("host", readme_server.host)
            kw.setdefault("port", readme_server.port)
            __original(self, *args, **kw)

        monkeypatch.setattr(cls, "__init__", init)
    redis.Redis(host=readme_server.host, port=readme_server.port).flushall()
    code = blocks()[index]
    exec(compile(code, f"README.md block {index + 1}", "exec"), {"__name__": "readme"})


def test_the_readme_table_spells_each_method_as_its_signature() -> None:
    import inspect

    from redis_ratelimit_client import RateLimiter

    text = README.read_text()
    row = re.search(r"^\| `throttle\(([^)]*)\)` \|", text, re.MULTILINE)
    assert row is not None
    written = [a.split("=")[0].strip() for a in row.group(1).split(",")]
    params = list(inspect.signature(RateLimiter.throttle).parameters)[1:]
    assert written == [p for p in params if p != "at"]
