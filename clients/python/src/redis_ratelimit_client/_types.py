"""The typed results of the module's replies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta


def ceil_seconds(ms: int) -> int:
    """Whole seconds for ``ms`` milliseconds, rounded up (a client that waits them is not early)."""
    return -(-ms // 1000)


@dataclass(frozen=True, slots=True)
class LimiterDetail:
    """One limiter of a detailed reply (``DETAIL``): its ``name`` (``NAME``, else its key), the
    units asked of it (``cost``), its own limiter reply, the time over which ``limit`` applies
    (``window_ms``; 0 for a concurrency limiter) and the policy it came from, if any."""

    name: str
    key: str
    cost: int
    granted: int
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    window_ms: int
    policy: str | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """The limiter reply of every ``RL.*`` limiter command, RESP2 or RESP3 alike.

    ``allowed`` is true when the whole request was granted. ``retry_after_ms`` is ``-1`` when the
    request can never be granted (its cost is above the limit): then ``never`` is true,
    ``retry_after`` is ``None`` and an HTTP answer must carry no ``Retry-After``.
    A result is truthy when allowed.
    """

    allowed: bool
    granted: int
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    #: Filled by a detailed reply only (``detail=True``); ``None`` / empty otherwise. ``reason``
    #: is ``granted``, ``limit``, ``blocked``, ``never`` or ``shadow``; ``denied_by`` the name
    #: of the limiter that denied the call.
    denied_by: str | None = None
    reason: str | None = None
    limiters: tuple[LimiterDetail, ...] = field(default=())

    def __bool__(self) -> bool:
        return self.allowed

    @property
    def detailed(self) -> bool:
        """The reply was a detailed one (``detail=True``): ``reason`` and ``limiters`` are set."""
        return self.reason is not None

    @property
    def never(self) -> bool:
        """The request can never be granted: its cost is above the limit (``retry_after_ms`` -1)."""
        return self.retry_after_ms == -1

    @property
    def retry_after(self) -> float | None:
        """Seconds (a float) until the same request would be granted; ``None`` when it never
        can. The same number as the Node package's ``retryAfter``; ``retry_after_ms`` is the
        integer of the reply."""
        return None if self.never else self.retry_after_ms / 1000

    @property
    def retry_after_seconds(self) -> float | None:
        """The same as :attr:`retry_after`."""
        return self.retry_after

    @property
    def retry_after_delta(self) -> timedelta | None:
        """:attr:`retry_after` as a :class:`datetime.timedelta`; ``None`` when never."""
        return None if self.never else timedelta(milliseconds=self.retry_after_ms)

    @property
    def reset_after(self) -> float:
        """Seconds (a float) until the limiter is back to its fresh state (Node's
        ``resetAfter``)."""
        return self.reset_after_ms / 1000

    @property
    def reset_after_seconds(self) -> float:
        """The same as :attr:`reset_after`."""
        return self.reset_after

    @property
    def reset_after_delta(self) -> timedelta:
        return timedelta(milliseconds=self.reset_after_ms)

    @property
    def retry_after_header(self) -> int | None:
        """The value of an HTTP ``Retry-After`` for this result, in whole seconds rounded up and
        at least 1, or ``None`` when there must be none (allowed, or never)."""
        if self.allowed or self.never:
            return None
        return max(1, ceil_seconds(self.retry_after_ms))


@dataclass(frozen=True, slots=True)
class ThrottleResult:
    """The reply of ``CL.THROTTLE`` (redis-cell's shape: seconds, ``retry_after_s`` -1 when
    allowed, ``limit`` = max_burst + 1)."""

    limited: bool
    limit: int
    remaining: int
    retry_after_s: int
    reset_after_s: int

    @property
    def allowed(self) -> bool:
        return not self.limited

    def __bool__(self) -> bool:
        return not self.limited


@dataclass(frozen=True, slots=True)
class StreamCount:
    """The reply of ``RL.STREAMCOUNT``: the window's total after the call, ``None`` when denied."""

    allowed: bool
    total: int | None

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True, slots=True)
class Info:
    """The reply of ``RL.INFO``: ``algorithm`` (``none`` for a key holding only a block) and every
    other field by name (parameters such as ``burst`` or ``window_ms``, the limiter reply at this
    moment, ``blocked_ms``, ``dedup_ids``, ``ttl_ms``, ...)."""

    algorithm: str
    fields: Mapping[str, int | str]

    def __getitem__(self, name: str) -> int | str:
        return self.fields[name]

    def get(self, name: str) -> int | str | None:
        return self.fields.get(name)

    @property
    def blocked_ms(self) -> int:
        v = self.fields.get("blocked_ms", 0)
        return v if isinstance(v, int) else 0

    @property
    def ttl_ms(self) -> int:
        v = self.fields.get("ttl_ms", -1)
        return v if isinstance(v, int) else -1

    @property
    def result(self) -> Result | None:
        """The limiter reply at this moment (as ``PEEK COST 0``); ``None`` for a block-only key."""
        f = self.fields
        names = ("limit", "remaining", "retry_after_ms", "reset_after_ms")
        if not all(isinstance(f.get(n), int) for n in names):
            return None
        vals = [int(f[n]) for n in names]
        return Result(True, 0, vals[0], vals[1], vals[2], vals[3])


@dataclass(frozen=True, slots=True)
class PolicyDefinition:
    """A named policy as ``RL.POLICY GET`` replies it: ``args``, the arguments of the
    ``RL.POLICY SET`` that made it (after the name), as given; ``shadow`` (``SHADOW``: its calls
    are never denied) and ``desc`` (``DESC text``) read from them."""

    name: str
    args: tuple[str, ...]
    shadow: bool = False
    desc: str | None = None


class RateLimitExceeded(Exception):
    """Raised by the lease context manager (and available to applications) when a request is
    denied; carries the :class:`Result`."""

    def __init__(self, result: Result) -> None:
        self.result = result
        if result.never:
            text = "never: the cost is above the limit"
        else:
            text = f"retry after {result.retry_after_ms} ms"
        super().__init__(f"rate limit exceeded ({text})")
