"""A FastAPI dependency on :class:`AsyncRateLimiter` (the `fastapi` extra)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.responses import JSONResponse

from ._exec import decide_async, maybe_await
from ._http import FailMode, HeaderStyle, HttpLimit, LimitsArg, Reserve, client_ip
from ._limiters import Duration, Time
from ._types import Result
from .asyncio import AsyncRateLimiter


def client_address(request: Request) -> str:
    """The default key: the peer's address (an IPv6 one by its /56)."""
    return client_ip(request.client.host if request.client else None)


def forwarded_client(
    trust_proxy: int = 1, *, ipv6_subnet: int | None = 56
) -> Callable[[Request], str]:
    """A key for an app behind ``trust_proxy`` proxies (see :func:`.asgi.forwarded_client`)."""

    def key(request: Request) -> str:
        peer = request.client.host if request.client else None
        header = ",".join(request.headers.getlist("x-forwarded-for")) or None
        return client_ip(peer, header, trust_proxy=trust_proxy, ipv6_subnet=ipv6_subnet)

    return key


class RateLimitHTTPException(HTTPException):
    """The denial (or the failed-closed answer) of :class:`RateLimitDependency`: an
    ``HTTPException`` whose ``detail`` is the RFC 9457 problem. FastAPI answers it as
    ``{"detail": problem}``; with :func:`problem_exception_handler` installed
    (``app.add_exception_handler(RateLimitHTTPException, problem_exception_handler)``) the body
    is the problem itself, ``application/problem+json``, as the ASGI middleware answers."""


async def problem_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return JSONResponse(
        exc.detail,
        status_code=exc.status_code,
        headers=exc.headers,
        media_type="application/problem+json",
    )


class RateLimitDependency:
    """``Depends(RateLimitDependency(limiter, "5/minute"))`` on a route or a router.

    A denied request raises ``HTTPException`` 429 with ``Retry-After`` (413 when it can never
    pass), the RateLimit header fields and a problem body (``detail``); a granted one gets the
    RateLimit fields on its response, and the dependency's value is the :class:`Result` (``None``
    when failing open, skipped or allowlisted). ``on_denied(request, result)`` returns the
    exception to raise instead. The reservation flow needs the response: use
    :class:`~redis_ratelimit_client.asgi.RateLimitMiddleware` with ``reserve=``.
    """

    def __init__(
        self,
        limiter: AsyncRateLimiter,
        limits: LimitsArg,
        *,
        key: Callable[[Request], Any] = client_address,
        name: str | None = None,
        prefix: str = "rl:",
        cost: Callable[[Request], Any] | None = None,
        costs: Mapping[str, Callable[[Request], Any]] | None = None,
        fail: FailMode = "closed",
        on_error: Callable[[BaseException, Request], Any] | None = None,
        timeout_ms: int = 500,
        headers: HeaderStyle = "draft-11",
        partition_key: bool = False,
        skip: Callable[[Request], Any] | None = None,
        allowlist: Collection[str] = (),
        status: int = 429,
        never_status: int = 413,
        error_status: int = 503,
        on_denied: Callable[[Request, Result], Any] | None = None,
        block: Duration | None = None,
        reserve: Reserve | None = None,
        shadow: bool = False,
        at: Callable[[Request], Time] | None = None,
    ) -> None:
        if reserve is not None:
            raise ValueError("reserve= needs the response: use asgi.RateLimitMiddleware")
        self.limiter = limiter
        self.limit = HttpLimit(
            limiter.client,
            limits,
            name=name,
            prefix=prefix,
            key=key,
            cost=cost,
            costs=costs,
            fail=fail,
            on_error=on_error,
            timeout_ms=timeout_ms,
            headers=headers,
            partition_key=partition_key,
            skip=skip,
            allowlist=allowlist,
            status=status,
            never_status=never_status,
            error_status=error_status,
            on_denied=on_denied,
            block=block,
            reserve=reserve,
            shadow=shadow,
            at=at,
            backend=getattr(limiter, "backend", None),
        )

    async def __call__(self, request: Request, response: Response) -> Result | None:
        decision = await decide_async(self.limit, request)
        if decision is None:
            return None
        if decision.status is not None:
            if self.limit.on_denied is not None and decision.result is not None:
                error = await maybe_await(self.limit.on_denied(request, decision.result))
                if isinstance(error, HTTPException):
                    error.headers = {**decision.headers, **(error.headers or {})}
                raise error
            raise RateLimitHTTPException(decision.status, decision.body, headers=decision.headers)
        response.headers.update(decision.headers)
        return decision.result
