"""A Flask decorator on :class:`RateLimiter` (the `flask` extra)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar, cast

from flask import Request, Response, current_app, make_response, request

from ._exec import decide_sync, settle_sync
from ._http import Decision, FailMode, HeaderStyle, HttpLimit, LimitsArg, Reserve, client_ip
from ._limiters import Duration, Time
from ._types import Result
from .client import RateLimiter

F = TypeVar("F", bound=Callable[..., Any])


def client_address(req: Request) -> str:
    """The default key: ``request.remote_addr`` (an IPv6 one by its /56). Behind a proxy that is
    the proxy: use :func:`forwarded_client`, or Werkzeug's ``ProxyFix`` (which rewrites
    ``remote_addr``)."""
    return client_ip(req.remote_addr)


def forwarded_client(
    trust_proxy: int = 1, *, ipv6_subnet: int | None = 56
) -> Callable[[Request], str]:
    """A key for an app behind ``trust_proxy`` proxies: the client's address from
    ``X-Forwarded-For`` (the entry the nearest trusted proxy added), IPv6 by its /56."""

    def key(req: Request) -> str:
        header = ",".join(req.headers.getlist("X-Forwarded-For")) or None
        return client_ip(req.remote_addr, header, trust_proxy=trust_proxy, ipv6_subnet=ipv6_subnet)

    return key


def _problem(decision: Decision) -> Response:
    response = Response(json.dumps(decision.body or {}), status=decision.status)
    response.content_type = "application/problem+json"
    response.headers.update(decision.headers)
    return response


def rate_limit(
    limiter: RateLimiter,
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
) -> Callable[[F], F]:
    """Limit a view: ``@rate_limit(limiter, "5/minute")`` under ``@app.route``.

    ``key``, ``cost``, ``costs``' functions, ``skip`` and ``at`` take Flask's ``request``. A
    denied request is answered 429 with ``Retry-After`` (413 when it can never pass), an
    ``application/problem+json`` body and the RateLimit header fields (``on_denied(request,
    result)`` returns another response); a granted one runs the view (``async def`` views
    too, with ``flask[async]``), its response carrying the RateLimit fields. With
    ``reserve=Reserve(hold, usage)``, ``usage(request, response)`` gets the view's response.
    """
    limit = HttpLimit(
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

    def decorator(view: F) -> F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            req = cast(Request, request._get_current_object())  # type: ignore[attr-defined]
            decision = decide_sync(limit, req)
            if decision is not None and decision.status is not None:
                if limit.on_denied is not None and decision.result is not None:
                    denied = make_response(limit.on_denied(req, decision.result))
                    for name, value in decision.headers.items():
                        denied.headers.setdefault(name, value)
                    return denied
                return _problem(decision)
            response = make_response(current_app.ensure_sync(view)(*args, **kwargs))
            if decision is not None:
                response.headers.update(decision.headers)
                settle_sync(limit, decision, req, response)
            return response

        wrapper.rate_limit = limit  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorator
