"""The asyncio client: :class:`AsyncRateLimiter` over a ``redis.asyncio.Redis`` or
``redis.asyncio.RedisCluster``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from . import _commands as c
from ._backend import AsyncRoutedClient, Backend, BackendName
from ._commands import Key
from ._limiters import (
    GCRA,
    Calendar,
    Concurrency,
    Duration,
    Fixed,
    LeakyBucket,
    Limiter,
    Sliding,
    SlidingCounter,
    Time,
    TokenBucket,
    duration_arg,
)
from ._types import (
    Info,
    PolicyDefinition,
    RateLimitExceeded,
    Result,
    StreamCount,
    ThrottleResult,
)


@dataclass(frozen=True, slots=True)
class AsyncLease:
    """A lease held by :meth:`AsyncRateLimiter.lease`; ``renew()`` extends it by its length."""

    limiter: AsyncRateLimiter
    key: Key
    spec: Concurrency
    id: str
    cost: int
    result: Result

    async def renew(self) -> Result:
        return await self.limiter.acquire(
            self.key, self.spec.limit, self.spec.lease, self.id, cost=self.cost
        )


class AsyncRateLimiter:
    """The module's commands on a redis-py client, with typed results.

    ``client`` is a ``redis.asyncio.Redis`` (RESP2 or RESP3, ``decode_responses`` either way)
    or a ``redis.asyncio.RedisCluster``. Each reply is parsed by the method that asked for it:
    the client is left as it was (see :func:`install_response_callbacks`).

    The limiter methods, :meth:`all`, :meth:`check`, :meth:`check_all` and :meth:`acquire` take
    ``shadow=True`` (``SHADOW``): the call is evaluated and charged as an enforced one (a call
    enforcement would deny charges nothing) but never denied; with ``detail=True`` its
    ``reason`` is ``"shadow"`` and ``denied_by`` the limiter that would have denied it.

    ``backend``: ``"auto"`` (default) uses the module when ``COMMAND INFO`` finds it on the
    server, else the script backend (``lua/ratelimit.lua``: RL.GCRA, RL.TOKENBUCKET, RL.FIXED
    epoch windows, RL.SLIDINGCOUNTER, RL.ALL, RL.CHECK, RL.CHECKALL with ``cost``, ``peek``,
    ``best_effort``, ``detail``), decided once and logged; ``"module"`` or ``"lua"`` force one.
    Under the script, anything else raises :class:`ModuleRequiredError` naming the module.
    """

    def __init__(self, client: Any, backend: BackendName = "auto") -> None:
        self.client = client
        #: The backend: ``backend.resolved`` is "module" or "lua" once known.
        self.backend = Backend(backend)
        self._rc = AsyncRoutedClient(client, self.backend)

    async def _result(self, args: list[c.Arg], cost: int | None) -> Result:
        reply = await self._rc.execute_command(*args, **{c.COST_HINT: cost})
        return reply if isinstance(reply, Result) else c.parse_result(reply, cost)

    async def _limiter(
        self,
        key: Key,
        spec: Limiter,
        cost: int,
        peek: bool,
        best_effort: bool,
        dedup: str | bytes | None,
        block: Duration | None,
        at: Time | None,
        detail: bool = False,
        delay: Duration | None = None,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        opts = c.options(
            cost=cost,
            peek=peek,
            best_effort=best_effort,
            dedup=dedup,
            block=block,
            at=at,
            detail=detail,
            delay=delay,
            hold=hold,
            shadow=shadow,
        )
        return await self._result([spec.command, key, *spec.params(), *opts], cost)

    async def apply(
        self,
        key: Key,
        spec: Limiter,
        *,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        delay: Duration | None = None,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """Call the command of ``spec`` (a :class:`GCRA`, :class:`Fixed`, ...) on ``key``."""
        if isinstance(spec, Concurrency):
            raise TypeError("a concurrency limiter takes a lease id: use acquire() or lease()")
        return await self._limiter(
            key, spec, cost, peek, best_effort, dedup, block, at, detail, delay, hold, shadow
        )

    async def gcra(
        self,
        key: Key,
        burst: int,
        rate: int,
        period: Duration,
        *,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        delay: Duration | None = None,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """``RL.GCRA key burst rate period``."""
        spec = GCRA(burst, rate, period)
        return await self._limiter(
            key, spec, cost, peek, best_effort, dedup, block, at, detail, delay, hold, shadow
        )

    async def token_bucket(
        self,
        key: Key,
        capacity: int,
        refill: int,
        period: Duration,
        *,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        delay: Duration | None = None,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """``RL.TOKENBUCKET key capacity refill period``."""
        spec = TokenBucket(capacity, refill, period)
        return await self._limiter(
            key, spec, cost, peek, best_effort, dedup, block, at, detail, delay, hold, shadow
        )

    async def leaky_bucket(
        self,
        key: Key,
        capacity: int,
        rate: int,
        period: Duration,
        *,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        delay: Duration | None = None,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """``RL.LEAKYBUCKET key capacity rate period``. A granted request's ``retry_after_ms``
        is its queue delay (``allowed`` is still true)."""
        spec = LeakyBucket(capacity, rate, period)
        return await self._limiter(
            key, spec, cost, peek, best_effort, dedup, block, at, detail, delay, hold, shadow
        )

    async def fixed(
        self,
        key: Key,
        limit: int,
        window: Duration | Calendar,
        *,
        offset: Duration | None = None,
        tz: str | None = None,
        anchor: str | int | None = None,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """``RL.FIXED key limit window [OFFSET d] [TZ zone] [ANCHOR a]``: ``window`` a duration
        or a calendar period (``"day"``, ``"week"``, ``"month"``, ``"quarter"``, ``"year"``)."""
        spec = Fixed(limit, window, offset, tz=tz, anchor=anchor)
        return await self._limiter(
            key, spec, cost, peek, best_effort, dedup, block, at, detail, None, hold, shadow
        )

    async def sliding(
        self,
        key: Key,
        limit: int,
        window: Duration,
        *,
        precision: Duration | None = None,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """``RL.SLIDING key limit window [PRECISION d]``."""
        spec = Sliding(limit, window, precision)
        return await self._limiter(
            key, spec, cost, peek, best_effort, dedup, block, at, detail, None, hold, shadow
        )

    async def sliding_counter(
        self,
        key: Key,
        limit: int,
        window: Duration,
        *,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """``RL.SLIDINGCOUNTER key limit window``."""
        spec = SlidingCounter(limit, window)
        return await self._limiter(
            key, spec, cost, peek, best_effort, dedup, block, at, detail, None, hold, shadow
        )

    async def all(
        self,
        limiters: c.Limiters | c.Keys,
        *,
        policy: str | None = None,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        delay: Duration | None = None,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """``RL.ALL``: every limiter (key → spec, in order) grants, or none is charged. In Redis
        Cluster the keys must share a slot: use a hash tag (``{user:42}:s``, ``{user:42}:h``).
        With ``policy=name``, ``limiters`` are the keys, one per limiter of the named policy in
        order (``POLICY name``)."""
        opts = c.options(
            cost=cost,
            peek=peek,
            best_effort=best_effort,
            dedup=dedup,
            block=block,
            at=at,
            detail=detail,
            delay=delay,
            hold=hold,
            shadow=shadow,
        )
        return await self._result(["RL.ALL", *c.all_or_policy_args(limiters, policy), *opts], cost)

    async def check(
        self,
        key: Key,
        spec: Limiter,
        *,
        cost: int = 1,
        best_effort: bool = False,
        at: Time | None = None,
        detail: bool = False,
        shadow: bool = False,
    ) -> Result:
        """``RL.CHECK``: the reply the call would give with PEEK, from a read-only command
        (it runs on replicas)."""
        opts = c.options(cost=cost, best_effort=best_effort, at=at, detail=detail, shadow=shadow)
        return await self._result(["RL.CHECK", key, *spec.spec(), *opts], cost)

    async def check_all(
        self,
        limiters: c.Limiters | c.Keys,
        *,
        policy: str | None = None,
        cost: int = 1,
        at: Time | None = None,
        detail: bool = False,
        shadow: bool = False,
    ) -> Result:
        """``RL.CHECKALL``: the reply :meth:`all` would give with PEEK, from a read-only command
        (it runs on replicas): would this request pass every limit? ``policy=`` as in
        :meth:`all`."""
        opts = c.options(cost=cost, at=at, detail=detail, shadow=shadow)
        return await self._result(
            ["RL.CHECKALL", *c.all_or_policy_args(limiters, policy), *opts], cost
        )

    async def limit(
        self,
        key: Key,
        policy: str,
        *,
        cost: int = 1,
        peek: bool = False,
        best_effort: bool = False,
        dedup: str | bytes | None = None,
        block: Duration | None = None,
        at: Time | None = None,
        detail: bool = False,
        delay: Duration | None = None,
        hold: Duration | None = None,
        shadow: bool = False,
    ) -> Result:
        """``RL.LIMIT key policy``: the named one-limiter policy (:meth:`policy_set`) on ``key``,
        with the options and the reply of its limiter's own command (under ``detail=True`` the
        limiter's ``policy`` is the name). A policy of several limiters goes through
        :meth:`all` with ``policy=``. An unknown policy is an error naming it."""
        opts = c.options(
            cost=cost,
            peek=peek,
            best_effort=best_effort,
            dedup=dedup,
            block=block,
            at=at,
            detail=detail,
            delay=delay,
            hold=hold,
            shadow=shadow,
        )
        return await self._result(["RL.LIMIT", key, policy, *opts], cost)

    async def policy_set(
        self,
        name: str,
        limiters: Limiter | Sequence[Limiter],
        *,
        shadow: bool = False,
        desc: str | None = None,
    ) -> int:
        """``RL.POLICY SET name limiter [limiter ...] [SHADOW] [DESC text]``: define or replace
        the policy ``name`` (1-64 of ``a-z``, ``0-9``, ``_``); returns its version. Keys under
        a replaced policy keep the units they used. With ``shadow=True`` no call under it is
        denied (each is charged as enforced, and counted as ``shadow_denied`` when it would have
        been)."""
        args = c.policy_set_args(name, limiters, shadow, desc)
        return int(await self._rc.execute_command(*args))

    async def policy_get(self, name: str) -> PolicyDefinition | None:
        """``RL.POLICY GET``: the policy's definition; ``None`` for an unknown name."""
        return c.parse_policy(name, await self._rc.execute_command("RL.POLICY", "GET", name))

    async def policy_del(self, name: str) -> bool:
        """``RL.POLICY DEL``: true if the policy existed. Later calls under it fail naming it."""
        return bool(await self._rc.execute_command("RL.POLICY", "DEL", name))

    async def policy_list(self) -> dict[str, int]:
        """``RL.POLICY LIST``: every policy's name and version (a number that grows with each
        change)."""
        return c.parse_policy_list(await self._rc.execute_command("RL.POLICY", "LIST"))

    async def policy_dump(self) -> bytes:
        """``RL.POLICY DUMP``: every policy as one binary payload, for :meth:`policy_restore`
        on another server (each shard of a cluster holds its own copy)."""
        reply = await self._rc.execute_command("RL.POLICY", "DUMP", **{c.NEVER_DECODE: []})
        return reply if isinstance(reply, bytes) else str(reply).encode()

    async def policy_restore(self, payload: bytes, *, merge: bool = False) -> None:
        """``RL.POLICY RESTORE payload [MERGE]``: replace every policy with the payload's
        (versions included), or with ``merge=True`` add or replace only the payload's, each
        policy added or changed taking this server's next version."""
        await self._rc.execute_command(
            "RL.POLICY", "RESTORE", payload, *(["MERGE"] if merge else [])
        )

    async def refund(
        self, key: Key, units: int, *, dedup: str | bytes | None = None, at: Time | None = None
    ) -> Result | None:
        """``RL.REFUND``: give back up to ``units``; ``granted`` is what was given back. ``None``
        for a missing key."""
        args: list[c.Arg] = ["RL.REFUND", key, units]
        if dedup is not None:
            args += ["DEDUP", dedup]
        reply = await self._rc.execute_command(*args, *c.at_option(at), **{c.COST_HINT: 0})
        return reply if reply is None or isinstance(reply, Result) else c.parse_result(reply, 0)

    async def settle(
        self,
        keys: Sequence[Key],
        id: str | bytes,
        units: Sequence[int],
        *,
        at: Time | None = None,
    ) -> list[Result | None]:
        """``RL.SETTLE``: settle the reservation ``id`` (made with ``hold=`` and ``dedup=id``)
        with the units really used, one per key: below the held units the difference is given
        back, above them the extra is charged (the limiter may go into debt). One result per
        key (``None`` for a missing key): ``granted`` is what the id is charged there after the
        settle; ``allowed`` means one unit could be granted now, else ``retry_after_ms`` is the
        wait. A retried settle, an unknown id or an expired reservation settles nothing more."""
        args = ["RL.SETTLE", *c.settle_args(keys, id, units), *c.at_option(at)]
        reply = await self._rc.execute_command(*args)
        if isinstance(reply, list) and all(r is None or isinstance(r, Result) for r in reply):
            return reply
        return c.parse_settle(reply)

    async def block(self, key: Key, duration: Duration, *, at: Time | None = None) -> timedelta:
        """``RL.BLOCK``: block the key for ``duration``; returns the block's remaining time."""
        reply = await self._rc.execute_command(
            "RL.BLOCK", key, duration_arg(duration), *c.at_option(at)
        )
        return reply if isinstance(reply, timedelta) else c.parse_block(reply)

    async def unblock(self, key: Key) -> bool:
        """``RL.UNBLOCK``: true if a block was removed."""
        reply = await self._rc.execute_command("RL.UNBLOCK", key)
        return bool(reply)

    async def acquire(
        self,
        key: Key,
        limit: int,
        lease: Duration,
        id: str | bytes,
        *,
        cost: int = 1,
        peek: bool = False,
        block: Duration | None = None,
        at: Time | None = None,
        wait: Duration | None = None,
        detail: bool = False,
        shadow: bool = False,
    ) -> Result:
        """``RL.ACQUIRE key limit lease ID id``: take ``cost`` units under the lease ``id`` (a
        renewal when ``id`` already holds them). With ``wait``, a lease that does not fit waits
        for its turn (first come, first served) up to that long (``WAIT``; the client's socket
        timeout must be longer)."""
        spec = Concurrency(limit, lease)
        opts = c.options(cost=cost, peek=peek, block=block, at=at, detail=detail, shadow=shadow)
        if wait is not None:
            opts += ["WAIT", duration_arg(wait)]
        return await self._result(["RL.ACQUIRE", key, *spec.params(), "ID", id, *opts], cost)

    async def release(self, key: Key, id: str | bytes, *, at: Time | None = None) -> int:
        """``RL.RELEASE``: free the lease's units; returns their number (0 if it held none)."""
        return int(await self._rc.execute_command("RL.RELEASE", key, id, *c.at_option(at)))

    @asynccontextmanager
    async def lease(
        self,
        key: Key,
        limit: int,
        lease: Duration,
        *,
        id: str | None = None,
        cost: int = 1,
    ) -> AsyncIterator[AsyncLease]:
        """Hold ``cost`` units of a concurrency limiter for the ``async with`` block; raises
        :class:`RateLimitExceeded` when they do not fit, releases them on exit."""
        spec = Concurrency(limit, lease)
        lease_id = id if id is not None else uuid.uuid4().hex
        result = await self.acquire(key, limit, lease, lease_id, cost=cost)
        if not result.allowed:
            raise RateLimitExceeded(result)
        try:
            yield AsyncLease(self, key, spec, lease_id, cost, result)
        finally:
            await self.release(key, lease_id)

    async def stream_count(
        self,
        key: Key,
        window: Duration,
        *,
        add: int = 1,
        limit: int | None = None,
        at: Time | None = None,
    ) -> StreamCount:
        """``RL.STREAMCOUNT key window [ADD n] [LIMIT l]``: the window's total after the call."""
        args: list[c.Arg] = ["RL.STREAMCOUNT", key, duration_arg(window)]
        if add != 1:
            args += ["ADD", add]
        if limit is not None:
            args += ["LIMIT", limit]
        reply = await self._rc.execute_command(*args, *c.at_option(at))
        return reply if isinstance(reply, StreamCount) else c.parse_stream_count(reply)

    async def throttle(
        self,
        key: Key,
        max_burst: int,
        count_per_period: int,
        period_s: int,
        quantity: int = 1,
        *,
        at: Time | None = None,
    ) -> ThrottleResult:
        """``CL.THROTTLE`` (redis-cell's arguments and reply: periods and times in seconds)."""
        reply = await self._rc.execute_command(
            "CL.THROTTLE", key, max_burst, count_per_period, period_s, quantity, *c.at_option(at)
        )
        return reply if isinstance(reply, ThrottleResult) else c.parse_throttle(reply)

    async def info(self, key: Key) -> Info | None:
        """``RL.INFO``: the key's algorithm, parameters and state; ``None`` for a missing key."""
        reply = await self._rc.execute_command("RL.INFO", key)
        return reply if reply is None or isinstance(reply, Info) else c.parse_info(reply)
