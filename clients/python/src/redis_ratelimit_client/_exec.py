"""Running an HTTP integration's limiter commands: once, within ``timeout_ms``, never late.

A command goes out on one connection of the client's pool with no retry of redis-py's around it,
and only while the request still waits for it: a call whose time ran out before it was sent is
never sent (a server that comes back later never sees it). The module check (``COMMAND INFO
rl.gcra``) travels with the first call, in the same round trip.

The asyncio side uses a pool of its own per event loop (made with the client's connection
settings): a connection belongs to the loop that opened it, and frameworks that run each request
in a new loop (FastAPI's ``TestClient`` without ``with``) would otherwise get one that cannot
work every other request. A client without a plain connection pool (``RedisCluster``) is called
through its own ``execute_command``, retries included.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio

from . import _commands as c
from ._backend import SCRIPT, as_eval, is_noscript
from ._http import Call, Decision, HttpLimit, LimiterTimeoutError
from ._types import Result

MODULE_CHECK: list[c.Arg] = ["COMMAND", "INFO", "rl.gcra"]

# Sync calls run here so that a request waits at most `timeout_ms` for Redis, whatever the
# client's own socket timeouts.
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="ratelimit")


class _Gate:
    """Sent, or abandoned by the request that waited for it: never both."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.abandoned = False
        self.sent = False

    def send(self) -> None:
        with self.lock:
            if self.abandoned:
                raise LimiterTimeoutError("the request was answered before the call was sent")
            self.sent = True


def _get_sync_connection(pool: Any) -> Any:
    try:
        return pool.get_connection()
    except TypeError:  # redis-py 5 asks for a command name
        return pool.get_connection("RL")


def _once_sync(client: Any, commands: Sequence[Sequence[c.Arg]], gate: _Gate) -> list[Any]:
    if gate.abandoned:  # waited in the queue past its request: not even a connection
        raise LimiterTimeoutError("the request was answered before the call was sent")
    pool = getattr(client, "connection_pool", None)
    if pool is None or getattr(client, "connection", None) is not None:
        out: list[Any] = []
        for args in commands:
            gate.send()
            try:
                out.append(client.execute_command(*args))
            except redis.ResponseError as e:
                out.append(e)
        return out
    conn = _get_sync_connection(pool)
    try:
        gate.send()
        conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as e:
                replies.append(e)
        return replies
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)


def run_sync(
    limit: HttpLimit,
    commands: Sequence[Sequence[c.Arg]],
    deadline: float,
    then: Callable[[list[Any]], Sequence[c.Arg] | None] | None = None,
) -> tuple[list[Any], Any]:
    """``commands`` in one round trip, then, on the same worker (one thread hand-off per
    request), the command ``then(replies)`` asks for (the read-only check for ``t``): its reply,
    or None when there is none in time. The replies of ``commands`` come back as soon as they are
    there, whatever the second command does."""
    gate = _Gate()
    first: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
    second: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def work() -> None:
        try:
            replies = _once_sync(limit.client, commands, gate)
        except BaseException as e:
            first.set_exception(e)
            second.set_result(None)
            return
        first.set_result(replies)
        more = None
        try:
            follow = then(replies) if then is not None else None
            if follow is not None and not gate.abandoned:
                more = _once_sync(limit.client, [follow], _Gate())[0]
        except Exception:
            more = None
        second.set_result(more)

    _POOL.submit(work)
    try:
        replies = first.result(timeout=max(deadline - time.monotonic(), 0))
    except concurrent.futures.TimeoutError:
        with gate.lock:
            gate.abandoned = True
        raise LimiterTimeoutError(f"no answer within {limit.timeout_ms} ms") from None
    try:
        more = second.result(timeout=max(deadline - time.monotonic(), 0))
    except concurrent.futures.TimeoutError:
        more = None
    return replies, more


_LOOP_POOLS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakKeyDictionary[Any, Any]
] = weakref.WeakKeyDictionary()


def _loop_pool(client: Any) -> Any:
    pool: Any = getattr(client, "connection_pool", None)
    if type(pool) not in (redis.asyncio.ConnectionPool, redis.asyncio.BlockingConnectionPool):
        return None
    if getattr(client, "connection", None) is not None:
        return None
    loop = asyncio.get_running_loop()
    pools = _LOOP_POOLS.setdefault(loop, weakref.WeakKeyDictionary())
    own = pools.get(pool)
    if own is None:
        own = redis.asyncio.ConnectionPool(
            connection_class=pool.connection_class, **pool.connection_kwargs
        )
        pools[pool] = own
    return own


async def _once_async(client: Any, commands: Sequence[Sequence[c.Arg]]) -> list[Any]:
    pool = _loop_pool(client)
    if pool is None:
        out: list[Any] = []
        for args in commands:
            try:
                out.append(await client.execute_command(*args))
            except redis.ResponseError as e:
                out.append(e)
        return out
    conn = await pool.get_connection()
    try:
        await conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await conn.read_response())
            except redis.ResponseError as e:
                replies.append(e)
        return replies
    except BaseException:
        with contextlib.suppress(Exception):  # the connection is dropped either way
            await conn.disconnect(nowait=True)
        raise
    finally:
        await pool.release(conn)


async def run_async(
    limit: HttpLimit, commands: Sequence[Sequence[c.Arg]], deadline: float
) -> list[Any]:
    remaining = max(deadline - time.monotonic(), 0)
    try:
        return await asyncio.wait_for(_once_async(limit.client, commands), remaining)
    except asyncio.TimeoutError:
        raise LimiterTimeoutError(f"no answer within {limit.timeout_ms} ms") from None


def _first_call(limit: HttpLimit, call: Call) -> list[list[Any]]:
    if limit.backend.resolved == "lua":
        # The script is loaded with the first call (SCRIPT LOAD, in the same round trip).
        cmds: list[list[Any]] = [] if limit.script_loaded else [["SCRIPT", "LOAD", SCRIPT]]
        return [*cmds, limit.wire(limit.command(call))]
    cmds = [] if limit.module_checked else [MODULE_CHECK]
    return [*cmds, limit.command(call)]


def _needs_probe(limit: HttpLimit) -> bool:
    """``backend="auto"`` not yet decided: one ``COMMAND INFO rl.gcra`` round trip first."""
    return limit.backend.resolved is None


def _probed(limit: HttpLimit, replies: list[Any]) -> None:
    if isinstance(replies[0], BaseException):
        raise replies[0]
    limit.backend.resolve(replies[0])


def _noscript(replies: list[Any]) -> bool:
    return bool(replies) and is_noscript(replies[-1])


def _result(limit: HttpLimit, call: Call, replies: list[Any]) -> Result:
    if len(replies) == 2:
        if isinstance(replies[0], BaseException):
            raise replies[0]
        if limit.backend.resolved == "lua":
            limit.script_loaded = True
        else:
            limit.check_module_reply(replies[0])
    reply = replies[-1]
    if isinstance(reply, BaseException):
        raise reply
    return limit.parse(call, reply)


def replies_command(limit: HttpLimit, call: Call) -> list[Any]:
    """The call's command as it went out (its script form)."""
    limit.script_loaded = False
    return limit.wire(limit.command(call))


def _check(limit: HttpLimit, call: Call, replies: list[Any]) -> Result | None:
    reply = replies[0]
    return None if isinstance(reply, BaseException) else c.parse_result(reply)


# Sync (Flask).


def inputs_sync(limit: HttpLimit, request: Any) -> Call | None:
    """The request's call, or None when it is skipped or allowlisted. A key or cost function
    that raises propagates: it is the app's error, not the limiter's."""
    if limit.skip is not None and limit.skip(request):
        return None
    client = str(limit.key(request))
    if client in limit.allowlist:
        return None
    units = {n: (f(request) if f else 1) for n, f in limit.cost_functions().items()}
    return limit.make_call(request, client, units)


def decide_sync(limit: HttpLimit, request: Any) -> Decision | None:
    call = inputs_sync(limit, request)
    if call is None:
        return None
    deadline = time.monotonic() + limit.timeout_ms / 1000

    def then(replies: list[Any]) -> Sequence[c.Arg] | None:
        check = limit.check_command(call, _result(limit, call, replies))
        return None if check is None else limit.wire(check)

    try:
        if _needs_probe(limit):
            _probed(limit, run_sync(limit, [MODULE_CHECK], deadline)[0])
        replies, more = run_sync(limit, _first_call(limit, call), deadline, then)
        if _noscript(replies):  # the server lost its script cache: EVAL loads it again
            replies, more = run_sync(limit, [as_eval(replies_command(limit, call))], deadline, then)
        result = _result(limit, call, replies)
    except Exception as e:
        return limit.failed(call, request, e)
    limit.succeeded()
    check = None if more is None else _check(limit, call, [more])
    return limit.decide(call, result, check)


def settle_sync(limit: HttpLimit, decision: Decision | None, request: Any, response: Any) -> None:
    """After the handler: settle the reservation with the real usage (failures reported, the
    answer unchanged)."""
    call = decision.call if decision else None
    if limit.reserve is None or call is None or decision is None or decision.result is None:
        return
    if limit.reserve.usage is None or not decision.result.allowed:
        return
    usage = limit.reserve.usage(request, response)
    deadline = time.monotonic() + limit.timeout_ms / 1000
    try:
        reply = run_sync(limit, [limit.wire(limit.settle_command(call, usage))], deadline)[0][0]
        if isinstance(reply, BaseException):
            raise reply
    except Exception as e:
        limit.report(e, request)


# Async (ASGI, FastAPI).


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def inputs_async(limit: HttpLimit, request: Any) -> Call | None:
    if limit.skip is not None and await maybe_await(limit.skip(request)):
        return None
    client = str(await maybe_await(limit.key(request)))
    if client in limit.allowlist:
        return None
    units = {}
    for n, f in limit.cost_functions().items():
        units[n] = await maybe_await(f(request)) if f else 1
    return limit.make_call(request, client, units)


async def decide_async(limit: HttpLimit, request: Any) -> Decision | None:
    call = await inputs_async(limit, request)
    if call is None:
        return None
    deadline = time.monotonic() + limit.timeout_ms / 1000
    try:
        if _needs_probe(limit):
            _probed(limit, await run_async(limit, [MODULE_CHECK], deadline))
        replies = await run_async(limit, _first_call(limit, call), deadline)
        if _noscript(replies):  # the server lost its script cache: EVAL loads it again
            replies = await run_async(limit, [as_eval(replies_command(limit, call))], deadline)
        result = _result(limit, call, replies)
    except Exception as e:
        return limit.failed(call, request, e)
    limit.succeeded()
    check = None
    check_args = limit.check_command(call, result)
    if check_args is not None:
        try:
            wired = limit.wire(check_args)
            check = _check(limit, call, await run_async(limit, [wired], deadline))
        except Exception:
            check = None  # t is left out
    return limit.decide(call, result, check)


async def settle_async(
    limit: HttpLimit, decision: Decision | None, request: Any, response: Any
) -> None:
    call = decision.call if decision else None
    if limit.reserve is None or call is None or decision is None or decision.result is None:
        return
    if limit.reserve.usage is None or not decision.result.allowed:
        return
    usage = await maybe_await(limit.reserve.usage(request, response))
    deadline = time.monotonic() + limit.timeout_ms / 1000
    try:
        settle = limit.wire(limit.settle_command(call, usage))
        reply = (await run_async(limit, [settle], deadline))[0]
        if isinstance(reply, BaseException):
            raise reply
    except Exception as e:
        limit.report(e, request)
