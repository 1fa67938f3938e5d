"""The backend of a limiter: the module's commands, or the script backend (``ratelimit.lua``, a
copy of the repository's ``lua/ratelimit.lua``, checked byte for byte by the tests) on servers
that cannot load the module.

``backend="auto"`` (the default) asks the server once (``COMMAND INFO rl.gcra``) and uses the
module when it is there, else the script; the choice is logged on the ``redis_ratelimit``
logger. ``"module"`` and ``"lua"`` force one. Under the script, the limiter commands go out as
``EVALSHA`` on keys of their own (``<key>:lua``: the module's keys and the script's are never the
same key, and the suffix keeps a key's hash tag); everything the script cannot do raises
:class:`ModuleRequiredError`, naming the module.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Literal

import redis

BackendName = Literal["module", "lua", "auto"]
BACKENDS: tuple[str, ...] = ("module", "lua", "auto")

logger = logging.getLogger("redis_ratelimit")

SCRIPT: bytes = resources.files(__package__).joinpath("ratelimit.lua").read_bytes()
SHA: str = hashlib.sha1(SCRIPT).hexdigest()
#: What a script key adds to the module's key.
KEY_SUFFIX = ":lua"

_ONE_KEY = ("RL.GCRA", "RL.TOKENBUCKET", "RL.FIXED", "RL.SLIDINGCOUNTER", "RL.CHECK")
_NUMKEYS = ("RL.ALL", "RL.CHECKALL")
MODULE_CHECK: list[Any] = ["COMMAND", "INFO", "rl.gcra"]


class ModuleRequiredError(redis.ResponseError):
    """What the script backend cannot do: it needs the redis-ratelimit module."""

    def __init__(self, what: str, message: str | None = None) -> None:
        super().__init__(
            message
            or f"{what} needs the redis-ratelimit module (loadmodule "
            "/path/to/libredis_ratelimit.so); this limiter uses the script backend "
            "(backend='lua', or 'auto' on a server without the module), which does not support it"
        )


def _named_error(e: redis.ResponseError) -> redis.ResponseError:
    """The script's own refusal (an option only the module has) as :class:`ModuleRequiredError`."""
    text = str(e)
    if "redis-ratelimit module" in text:
        return ModuleRequiredError("", text)
    return e


def _name(v: Any) -> str:
    return (v.decode() if isinstance(v, bytes) else str(v)).upper()


def script_key(key: Any) -> Any:
    if isinstance(key, bytes):
        return key + KEY_SUFFIX.encode()
    return f"{key}{KEY_SUFFIX}"


def script_call(args: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """The module command ``args`` as the script's keys and arguments (after ``EVALSHA sha
    numkeys``), or :class:`ModuleRequiredError`."""
    cmd = _name(args[0])
    if cmd in _ONE_KEY and len(args) >= 2:
        return [script_key(args[1])], [cmd, *args[2:]]
    if cmd in _NUMKEYS and len(args) >= 2:
        n = int(args[1])
        keys = [script_key(k) for k in args[2 : 2 + n]]
        return keys, [cmd, *args[2 + n :]]
    if cmd == "RL.POLICY" or cmd == "RL.LIMIT":
        raise ModuleRequiredError("policies (RL.POLICY, RL.LIMIT)")
    raise ModuleRequiredError(cmd)


def evalsha(args: Sequence[Any]) -> list[Any]:
    keys, argv = script_call(args)
    return ["EVALSHA", SHA, len(keys), *keys, *argv]


def as_eval(command: Sequence[Any]) -> list[Any]:
    """An ``EVALSHA`` of the script as ``EVAL`` with its text (after NOSCRIPT: EVAL caches it)."""
    return ["EVAL", SCRIPT, *command[2:]]


def is_noscript(e: object) -> bool:
    return isinstance(e, redis.exceptions.NoScriptError) or (
        isinstance(e, redis.ResponseError) and str(e).startswith("NOSCRIPT")
    )


def module_present(reply: Any) -> bool:
    """The reply of ``COMMAND INFO rl.gcra``: whether the module is loaded."""
    entries = list(reply.values()) if isinstance(reply, Mapping) else reply
    return isinstance(entries, (list, tuple)) and bool(entries) and entries[0] not in (None, [])


class Backend:
    """One limiter's backend choice, resolved once (``auto``) and shared by its integrations."""

    def __init__(self, choice: str) -> None:
        if choice not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {choice!r}")
        self.choice = choice
        self.resolved: str | None = None if choice == "auto" else choice
        self._lock = threading.Lock()

    def resolve(self, info_reply: Any) -> str:
        """Settle ``auto`` from the reply of ``COMMAND INFO rl.gcra`` (logged once)."""
        with self._lock:
            if self.resolved is None:
                self.resolved = "module" if module_present(info_reply) else "lua"
                if self.resolved == "module":
                    logger.info("redis_ratelimit: backend auto: the module is loaded, using it")
                else:
                    logger.info(
                        "redis_ratelimit: backend auto: no redis-ratelimit module on this "
                        "server, using the script backend (lua/ratelimit.lua): RL.GCRA, "
                        "RL.TOKENBUCKET, RL.FIXED, RL.SLIDINGCOUNTER, RL.ALL only"
                    )
            return self.resolved


class RoutedClient:
    """A redis-py client seen through a backend: ``execute_command`` of a module command runs
    it, or its script form (EVALSHA, EVAL once after NOSCRIPT)."""

    def __init__(self, client: Any, backend: Backend) -> None:
        self.client = client
        self.backend = backend

    def _backend(self) -> str:
        if self.backend.resolved is None:
            try:
                reply = self.client.execute_command(*MODULE_CHECK)
            except TypeError:  # redis-py's COMMAND parser fails on the nil of a missing command
                reply = [None]
            self.backend.resolve(reply)
        assert self.backend.resolved is not None
        return self.backend.resolved

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if self._backend() == "module":
            return self.client.execute_command(*args, **options)
        command = evalsha(args)
        options.pop("NEVER_DECODE", None)
        try:
            try:
                return self.client.execute_command(*command, **options)
            except redis.ResponseError as e:
                if not is_noscript(e):
                    raise
                return self.client.execute_command(*as_eval(command), **options)
        except redis.ResponseError as e:
            raise _named_error(e) from None


class AsyncRoutedClient(RoutedClient):
    """:class:`RoutedClient` for ``redis.asyncio`` clients."""

    async def _abackend(self) -> str:
        if self.backend.resolved is None:
            try:
                reply = await self.client.execute_command(*MODULE_CHECK)
            except TypeError:  # redis-py's COMMAND parser fails on the nil of a missing command
                reply = [None]
            self.backend.resolve(reply)
        assert self.backend.resolved is not None
        return self.backend.resolved

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if await self._abackend() == "module":
            return await self.client.execute_command(*args, **options)
        command = evalsha(args)
        options.pop("NEVER_DECODE", None)
        try:
            try:
                return await self.client.execute_command(*command, **options)
            except redis.ResponseError as e:
                if not is_noscript(e):
                    raise
                return await self.client.execute_command(*as_eval(command), **options)
        except redis.ResponseError as e:
            raise _named_error(e) from None
