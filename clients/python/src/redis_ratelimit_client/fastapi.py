"""A FastAPI dependency on :class:`AsyncRateLimiter` (the `fastapi` extra)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import HTTPException, Request, Response

from ._http import HttpLimit, OnError
from ._limiters import Limiter
from ._types import Result
from .asgi import decide, error_body
from .asyncio import AsyncRateLimiter


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


class RateLimitDependency:
    """``Depends(RateLimitDependency(limiter, GCRA(10, 5, "1s")))`` on a route or a router.

    A denied request raises ``HTTPException`` 429 with ``Retry-After`` (413 when it can never
    pass) and the RateLimit headers; a granted one gets the RateLimit headers on its response,
    and the dependency's value is the :class:`Result` (``None`` when failing open).
    """

    def __init__(
        self,
        limiter: AsyncRateLimiter,
        limits: Limiter | Mapping[str, Limiter],
        *,
        key: Callable[[Request], Any] = _client,
        cost: Callable[[Request], Any] | None = None,
        on_error: OnError = "closed",
        timeout: float = 0.5,
        prefix: str = "rl:",
        detail: bool = False,
        shadow: bool = False,
    ) -> None:
        self.limiter = limiter
        self.limit = HttpLimit(
            limits,
            prefix=prefix,
            on_error=on_error,
            timeout=timeout,
            detail=detail,
            shadow=shadow,
        )
        self.key = key
        self.cost = cost

    async def __call__(self, request: Request, response: Response) -> Result | None:
        client_key = self.key(request)
        if inspect.isawaitable(client_key):
            client_key = await client_key
        cost: Any = self.cost(request) if self.cost else 1
        if inspect.isawaitable(cost):
            cost = await cost
        decision = await decide(self.limit, self.limiter, str(client_key), int(cost))
        if decision.status is not None:
            raise HTTPException(
                decision.status, error_body(decision, int(cost)), headers=decision.headers
            )
        response.headers.update(decision.headers)
        return decision.result
