"""Servers for the script backend's tests.

- `module`: RL_SERVER with the module (RL_MODULE) loaded, AT allowed at any distance from its
  clock (`at-max-ahead -1`, `at-max-behind -1`), so both sides can be driven at the same instant.
- `scripts`: one server without the module per entry of RL_LUA_SERVERS
  (`name=path[:ld_library_path]`, comma-separated; default: RL_SERVER alone), where the script is
  loaded twice: as it is (`sha`) and in test mode (`test_sha`: `local TEST_CLOCK = true`, which
  only makes it accept `AT t`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = (ROOT / "lua" / "ratelimit.lua").read_text()
TEST_LINE = "local TEST_CLOCK = false"
assert SCRIPT.count(TEST_LINE) == 1
TEST_SCRIPT = SCRIPT.replace(TEST_LINE, "local TEST_CLOCK = true")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A redis-server (or valkey-server) on a free loopback port, stopped by its own pid."""

    def __init__(self, binary: str, args: list[str], ld_path: str = "") -> None:
        self.binary, self.ld_path = binary, ld_path
        self.dir = tempfile.TemporaryDirectory(prefix="rl-lua-")
        env = dict(os.environ)
        if ld_path:
            env["LD_LIBRARY_PATH"] = ld_path
        for _ in range(5):
            self.port = _free_port()
            cmd = [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir.name,
                *args,
            ]
            with open(Path(self.dir.name) / "server.log", "w") as log:
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            deadline = time.time() + 10
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    redis.Redis(port=self.port, socket_timeout=1).ping()
                    return
                except redis.ConnectionError:
                    time.sleep(0.05)
            self.stop()
        raise RuntimeError(f"{binary} did not start: {(Path(self.dir.name) / 'server.log').read_text()}")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, protocol=2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class ScriptServer:
    name: str
    server: Server
    sha: str
    test_sha: str

    def client(self) -> redis.Redis:
        return self.server.client()


def _lua_servers() -> list[tuple[str, str, str]]:
    spec = os.environ.get("RL_LUA_SERVERS") or f"default={os.environ.get('RL_SERVER', 'redis-server')}"
    out = []
    for item in spec.split(","):
        name, _, rest = item.partition("=")
        path, _, ld = rest.partition(":")
        out.append((name, path, ld))
    return out


@pytest.fixture(scope="session")
def module() -> Iterator[redis.Redis]:
    so = os.environ.get("RL_MODULE")
    if not so:
        pytest.fail("RL_MODULE must name the module .so: the differential tests compare with it")
    s = Server(
        os.environ.get("RL_SERVER", "redis-server"),
        ["--loadmodule", so, "at-max-ahead", "-1", "at-max-behind", "-1"],
        os.environ.get("RL_LD_LIBRARY_PATH", ""),
    )
    c = s.client()
    assert any(m[b"name"] == b"ratelimit" for m in c.module_list())
    yield c
    c.close()
    s.stop()


@pytest.fixture(scope="session", params=_lua_servers(), ids=lambda p: p[0])
def scripts(request: pytest.FixtureRequest) -> Iterator[ScriptServer]:
    name, path, ld = request.param
    s = Server(path, [], ld)
    c = s.client()
    # No module here: the scripts are all there is.
    assert not any(m[b"name"] == b"ratelimit" for m in c.module_list())
    sha = c.script_load(SCRIPT)
    test_sha = c.script_load(TEST_SCRIPT)
    c.close()
    yield ScriptServer(name, s, sha, test_sha)
    s.stop()
