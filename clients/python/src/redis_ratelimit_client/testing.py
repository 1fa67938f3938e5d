"""Start ``redis-server --loadmodule`` (one server, or a small Redis Cluster) on free loopback
ports, for tests. The pytest fixtures built on these live in :mod:`.pytest_plugin`."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import redis


def free_port() -> int:
    """A TCP port nothing listens on right now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def module_path() -> str:
    """The module from ``RL_MODULE``."""
    path = os.environ.get("RL_MODULE", "")
    if not path or not os.path.isfile(path):
        raise RuntimeError(f"RL_MODULE must name the module .so (got {path!r})")
    return os.path.abspath(path)


class RedisModuleServer:
    """``redis-server`` with the module loaded on a free 127.0.0.1 port, in a temporary dir.

    ``server`` defaults to ``RL_SERVER`` or ``redis-server``; ``module_args`` follow the module
    on its ``--loadmodule`` line (``["at-max-ahead", "-1"]``); ``args`` are extra server
    arguments. Use as a context manager, or ``start()``/``stop()``.
    """

    def __init__(
        self,
        module: str | None = None,
        *,
        server: str | None = None,
        module_args: Sequence[str] = (),
        args: Sequence[str] = (),
        port: int | None = None,
    ) -> None:
        self.module = module or module_path()
        self.server = server or os.environ.get("RL_SERVER") or "redis-server"
        self.module_args = list(module_args)
        self.args = list(args)
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.dir = ""
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}"

    def command(self) -> list[str]:
        return [
            self.server,
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.dir,
            "--enable-debug-command",
            "local",
            "--loadmodule",
            self.module,
            *self.module_args,
            *self.args,
        ]

    def start(self, timeout: float = 10.0) -> RedisModuleServer:
        self.dir = tempfile.mkdtemp(prefix="rl-client-")
        env = dict(os.environ)
        if os.environ.get("RL_LD_LIBRARY_PATH"):
            env["LD_LIBRARY_PATH"] = os.environ["RL_LD_LIBRARY_PATH"]
        log = open(os.path.join(self.dir, "server.log"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(self.command(), env=env, stdout=log, stderr=log)
        log.close()
        client = redis.Redis(host=self.host, port=self.port, socket_timeout=1)
        end = time.monotonic() + timeout
        try:
            while True:
                try:
                    if client.ping():
                        return self
                except redis.ConnectionError:
                    pass
                if self.proc.poll() is not None or time.monotonic() > end:
                    with open(os.path.join(self.dir, "server.log"), "rb") as f:
                        tail = f.read()[-2000:].decode(errors="replace")
                    self.stop()
                    raise RuntimeError(f"{self.server} did not start on {self.port}:\n{tail}")
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""

    def __enter__(self) -> RedisModuleServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class RedisModuleCluster:
    """A Redis Cluster of ``masters`` nodes (no replicas) on free loopback ports, the module
    loaded on each, the 16384 slots split evenly. ``startup_nodes`` is what
    ``redis.RedisCluster`` takes."""

    def __init__(
        self,
        module: str | None = None,
        *,
        masters: int = 3,
        server: str | None = None,
        module_args: Sequence[str] = (),
    ) -> None:
        self.bus_ports = [free_port() for _ in range(masters)]
        self.nodes = [
            RedisModuleServer(
                module,
                server=server,
                module_args=module_args,
                args=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    str(bus),
                    "--cluster-node-timeout",
                    "5000",
                ],
            )
            for bus in self.bus_ports
        ]

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return self.nodes[0].port

    def start(self, timeout: float = 20.0) -> RedisModuleCluster:
        try:
            for node in self.nodes:
                node.start()
            clients = [redis.Redis(host=n.host, port=n.port) for n in self.nodes]
            per = 16384 // len(self.nodes)
            for i, cl in enumerate(clients):
                last = 16383 if i == len(clients) - 1 else (i + 1) * per - 1
                _exec(cl, "CLUSTER ADDSLOTSRANGE", i * per, last)
            for cl in clients[1:]:
                _exec(cl, "CLUSTER MEET", self.host, self.nodes[0].port, self.bus_ports[0])
            end = time.monotonic() + timeout
            while not all(_ready(cl, len(self.nodes)) for cl in clients):
                if time.monotonic() > end:
                    raise RuntimeError("the cluster did not reach cluster_state:ok")
                time.sleep(0.05)
            for cl in clients:
                cl.close()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisModuleCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _exec(client: redis.Redis, *args: object) -> Any:
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def _ready(client: redis.Redis, nodes: int) -> bool:
    """Is the cluster state ok and every node known, as this node sees it?"""
    info = _exec(client, "CLUSTER INFO")  # parsed by redis-py into a dict
    if isinstance(info, bytes):
        info = dict(line.split(":", 1) for line in info.decode().splitlines() if ":" in line)
    state, known = info.get("cluster_state"), info.get("cluster_known_nodes")
    return str(state) == "ok" and str(known) == str(nodes)
