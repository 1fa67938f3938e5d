"""Client-side rate-limiting metrics, named after OpenTelemetry's rate-limiting conventions
(``aspnetcore.rate_limiting.*``, as ``ratelimit.*``), for prometheus_client or OpenTelemetry.

The module counts on the server (``RL.METRICS``, exported by redis_exporter); this counts the
same decisions where the application makes them, labelled by command and named policy (never by
key, to bound cardinality)::

    import redis
    from prometheus_client import CollectorRegistry
    from redis_ratelimit_client import RateLimiter
    from redis_ratelimit_client.metrics import PrometheusRecorder, instrument

    registry = CollectorRegistry()
    rl = instrument(RateLimiter(redis.Redis()), PrometheusRecorder(registry))
    rl.limit("user:42", "free")   # counted: ratelimit_requests_total{command="rl.limit",
                                  #          policy="free", result="acquired"} 1

Instruments (OpenTelemetry name / Prometheus name):

- ``ratelimit.requests`` / ``ratelimit_requests_total``: calls decided, attributes
  ``ratelimit.command`` (``rl.gcra``), ``ratelimit.policy`` (``""`` without one) and
  ``ratelimit.result`` (``acquired`` or ``limited``, as ASP.NET Core's
  ``aspnetcore.rate_limiting.result``);
- ``ratelimit.near_limit_requests`` / ``ratelimit_near_limit_requests_total``: granted calls
  that left less than ``near_limit_percent`` (20, the module's ``ratelimit.near-limit-percent``
  default) of the limit;
- ``ratelimit.queued_requests`` / ``ratelimit_queued_requests``: ``acquire(..., wait=...)`` calls
  waiting now;
- ``ratelimit.request.time_in_queue`` / ``ratelimit_request_time_in_queue_seconds``: how long an
  ``acquire(..., wait=...)`` call took (its wait plus a round trip), attribute
  ``ratelimit.result``.

A recorder that fails never fails the call it counts: the error goes to the ``on_error`` hook
(by default a warning on the ``redis_ratelimit_client.metrics`` logger).
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

__all__ = [
    "OpenTelemetryRecorder",
    "PrometheusRecorder",
    "Recorder",
    "instrument",
    "near_limit",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The command each limiter method of ``RateLimiter`` / ``AsyncRateLimiter`` sends.
COMMANDS: dict[str, str] = {
    "gcra": "rl.gcra",
    "token_bucket": "rl.tokenbucket",
    "leaky_bucket": "rl.leakybucket",
    "fixed": "rl.fixed",
    "sliding": "rl.sliding",
    "sliding_counter": "rl.slidingcounter",
    "all": "rl.all",
    "limit": "rl.limit",
    "check": "rl.check",
    "check_all": "rl.checkall",
    "acquire": "rl.acquire",
    "throttle": "cl.throttle",
}


def near_limit(remaining: int, limit: int, percent: int) -> bool:
    """A grant leaving ``remaining`` below ``percent``% of ``limit`` (the module's rule)."""
    return remaining * 100 < limit * percent


class Recorder(Protocol):
    """Where :func:`instrument` sends what it counts."""

    def request(self, command: str, policy: str, acquired: bool, near: bool) -> None: ...

    def queued(self, delta: int) -> None: ...

    def time_in_queue(self, seconds: float, acquired: bool) -> None: ...


def _result(acquired: bool) -> str:
    return "acquired" if acquired else "limited"


class PrometheusRecorder:
    """The instruments as prometheus_client metrics, registered in ``registry`` (the default
    registry when ``None``)."""

    def __init__(self, registry: Any = None, *, buckets: tuple[float, ...] | None = None) -> None:
        from prometheus_client import REGISTRY, Counter, Gauge, Histogram

        reg = REGISTRY if registry is None else registry
        self.requests = Counter(
            "ratelimit_requests",
            "Rate-limiting calls decided, by command, named policy and result.",
            ["command", "policy", "result"],
            registry=reg,
        )
        self.near = Counter(
            "ratelimit_near_limit_requests",
            "Granted calls that left less than the near-limit share of the limit.",
            ["command", "policy"],
            registry=reg,
        )
        self.queue = Gauge(
            "ratelimit_queued_requests",
            "RL.ACQUIRE ... WAIT calls waiting now.",
            registry=reg,
        )
        kw: dict[str, Any] = {} if buckets is None else {"buckets": buckets}
        self.waited = Histogram(
            "ratelimit_request_time_in_queue_seconds",
            "Time an RL.ACQUIRE ... WAIT call took, by result.",
            ["result"],
            registry=reg,
            **kw,
        )

    def request(self, command: str, policy: str, acquired: bool, near: bool) -> None:
        self.requests.labels(command, policy, _result(acquired)).inc()
        if near:
            self.near.labels(command, policy).inc()

    def queued(self, delta: int) -> None:
        self.queue.inc(delta)

    def time_in_queue(self, seconds: float, acquired: bool) -> None:
        self.waited.labels(_result(acquired)).observe(seconds)


class OpenTelemetryRecorder:
    """The instruments on an OpenTelemetry ``Meter`` (``opentelemetry.metrics.get_meter(...)``)."""

    def __init__(self, meter: Any) -> None:
        self.requests = meter.create_counter(
            "ratelimit.requests", unit="{request}", description="Rate-limiting calls decided."
        )
        self.near = meter.create_counter(
            "ratelimit.near_limit_requests",
            unit="{request}",
            description="Granted calls that left less than the near-limit share of the limit.",
        )
        self.queue = meter.create_up_down_counter(
            "ratelimit.queued_requests",
            unit="{request}",
            description="RL.ACQUIRE ... WAIT calls waiting now.",
        )
        self.waited = meter.create_histogram(
            "ratelimit.request.time_in_queue",
            unit="s",
            description="Time an RL.ACQUIRE ... WAIT call took.",
        )

    def request(self, command: str, policy: str, acquired: bool, near: bool) -> None:
        attrs = {"ratelimit.command": command, "ratelimit.policy": policy}
        self.requests.add(1, {**attrs, "ratelimit.result": _result(acquired)})
        if near:
            self.near.add(1, attrs)

    def queued(self, delta: int) -> None:
        self.queue.add(delta)

    def time_in_queue(self, seconds: float, acquired: bool) -> None:
        self.waited.record(seconds, {"ratelimit.result": _result(acquired)})


def _warn(e: Exception) -> None:
    log.warning("redis_ratelimit_client.metrics: recording failed: %r", e)


class _Instrumented:
    """A RateLimiter / AsyncRateLimiter whose limiter calls are counted; every other attribute
    is the limiter's own."""

    def __init__(
        self,
        limiter: Any,
        recorder: Recorder,
        near_limit_percent: int,
        on_error: Callable[[Exception], None],
    ) -> None:
        self._limiter = limiter
        self._recorder = recorder
        self._percent = near_limit_percent
        self._on_error = on_error

    def _safely(self, f: Callable[[], None]) -> None:
        try:
            f()
        except Exception as e:
            self._on_error(e)

    def _count(self, command: str, policy: str, result: Any) -> None:
        if not hasattr(result, "allowed"):
            return  # not a limiter reply (a call returning something else)
        acquired = bool(result.allowed)
        near = acquired and near_limit(int(result.remaining), int(result.limit), self._percent)
        self._safely(lambda: self._recorder.request(command, policy, acquired, near))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._limiter, name)
        command = COMMANDS.get(name)
        if command is None or not callable(attr):
            return attr

        def policy_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
            p = kwargs.get("policy")
            if p is None and name == "limit" and len(args) >= 2:
                p = args[1]
            return "" if p is None else str(p)

        def waits(kwargs: dict[str, Any]) -> bool:
            return name == "acquire" and kwargs.get("wait") is not None

        if inspect.iscoroutinefunction(attr):

            @functools.wraps(attr)
            async def acall(*args: Any, **kwargs: Any) -> Any:
                queued = waits(kwargs)
                if queued:
                    self._safely(lambda: self._recorder.queued(1))
                t0 = time.monotonic()
                try:
                    result = await attr(*args, **kwargs)
                finally:
                    if queued:
                        self._safely(lambda: self._recorder.queued(-1))
                self._after(command, policy_of(args, kwargs), result, queued, t0)
                return result

            return acall

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            queued = waits(kwargs)
            if queued:
                self._safely(lambda: self._recorder.queued(1))
            t0 = time.monotonic()
            try:
                result = attr(*args, **kwargs)
            finally:
                if queued:
                    self._safely(lambda: self._recorder.queued(-1))
            self._after(command, policy_of(args, kwargs), result, queued, t0)
            return result

        return call

    def _after(self, command: str, policy: str, result: Any, queued: bool, t0: float) -> None:
        self._count(command, policy, result)
        if queued and hasattr(result, "allowed"):
            took = time.monotonic() - t0
            acquired = bool(result.allowed)
            self._safely(lambda: self._recorder.time_in_queue(took, acquired))


def instrument(
    limiter: T,
    recorder: Recorder,
    *,
    near_limit_percent: int = 20,
    on_error: Callable[[Exception], None] = _warn,
) -> T:
    """``limiter`` (a :class:`~redis_ratelimit_client.RateLimiter` or
    :class:`~redis_ratelimit_client.AsyncRateLimiter`) with every limiter call counted in
    ``recorder``: the same methods, replies and errors. ``near_limit_percent`` should match
    the server's ``ratelimit.near-limit-percent``. A call that raises is not counted."""
    if not 0 <= near_limit_percent <= 100:
        raise ValueError("near_limit_percent must be 0 to 100")
    return cast(T, _Instrumented(limiter, recorder, near_limit_percent, on_error))
