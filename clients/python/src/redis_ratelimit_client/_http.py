"""What the HTTP integrations share: one limit applied to a request, and what to answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._commands import Key
from ._limiters import Limiter
from ._types import Result
from .headers import rate_limit_headers

OnError = Literal["open", "closed"]


@dataclass(frozen=True, slots=True)
class Decision:
    """``status`` None lets the request through; else the status to answer. ``headers`` go on
    the answer either way. ``result`` is None when the limiter could not be asked."""

    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    result: Result | None = None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class HttpLimit:
    """The limit an HTTP integration applies.

    ``limits``: one limiter (named ``default`` in the headers) or names to limiters, applied
    together with RL.ALL (each under its own key, one hash tag per client so that it works in
    Redis Cluster). ``prefix`` starts every key. ``on_error``: ``"open"`` lets requests through
    when Redis cannot answer within ``timeout`` seconds (down, paused, unreachable),
    ``"closed"`` answers ``error_status`` (503). ``status`` (429) answers a denied request that
    may be retried, with ``Retry-After``; ``never_status`` (413) one that can never pass (its
    cost is above the limit), without ``Retry-After``. ``detail``: ask for a detailed reply
    (every limit through RL.ALL, each named by its name in ``limits``, a single one ``default``),
    so that the headers carry one item per limiter from the reply itself (``q``, ``w``, ``r``,
    ``t`` of each); names must then be valid limiter names (letters, digits, ``_-.:``).
    ``shadow``: every call with ``SHADOW`` (to roll a limit out before enforcing it): charged as
    enforced, never denied, the headers as the module replies (no ``Retry-After``); the module's
    ``shadow_denied`` counters say how many would have been denied.
    """

    limits: Limiter | Mapping[str, Limiter]
    prefix: str = "rl:"
    on_error: OnError = "closed"
    timeout: float = 0.5
    status: int = 429
    never_status: int = 413
    error_status: int = 503
    detail: bool = False
    shadow: bool = False

    def __post_init__(self) -> None:
        if self.detail:
            self._detailed_specs("")
        if self.on_error not in ("open", "closed"):
            raise ValueError('on_error must be "open" or "closed"')
        if not self.timeout > 0:
            raise ValueError("timeout must be a positive number of seconds")

    @property
    def named(self) -> Mapping[str, Limiter]:
        return {"default": self.limits} if isinstance(self.limits, Limiter) else self.limits

    def _detailed_specs(self, client_key: str) -> dict[Key, Limiter]:
        if isinstance(self.limits, Limiter):
            return {f"{self.prefix}{client_key}": self.limits.named("default")}
        return {
            f"{self.prefix}{{{client_key}}}:{name}": spec.named(name)
            for name, spec in self.limits.items()
        }

    def call(self, limiter: Any, client_key: str, cost: int) -> Any:
        """The limiter call for ``client_key``: a Result, or an awaitable of one."""
        if self.detail:
            return limiter.all(
                self._detailed_specs(client_key), cost=cost, detail=True, shadow=self.shadow
            )
        if isinstance(self.limits, Limiter):
            key = f"{self.prefix}{client_key}"
            return limiter.apply(key, self.limits, cost=cost, shadow=self.shadow)
        keys: dict[Key, Limiter] = {
            f"{self.prefix}{{{client_key}}}:{name}": spec for name, spec in self.limits.items()
        }
        return limiter.all(keys, cost=cost, shadow=self.shadow)

    def decide(self, result: Result) -> Decision:
        headers = rate_limit_headers(result, self.named)
        if result.allowed:
            return Decision(None, headers, result)
        return Decision(self.never_status if result.never else self.status, headers, result)

    def failed(self, error: BaseException) -> Decision:
        if self.on_error == "open":
            return Decision(None, {}, None, error)
        return Decision(self.error_status, {}, None, error)


KeyFunc = Callable[[Any], str]
CostFunc = Callable[[Any], int]
