"""A Flask decorator on :class:`RateLimiter` (the `flask` extra)."""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from flask import jsonify, make_response, request

from ._http import Decision, HttpLimit, OnError
from ._limiters import Limiter
from .asgi import error_body
from .client import RateLimiter

F = TypeVar("F", bound=Callable[..., Any])

# The limiter calls run here so that a request waits at most `timeout` for Redis, whatever the
# client's own socket timeouts (set them too: a call past its timeout keeps its worker until
# the socket gives up).
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="ratelimit")


def _client() -> str:
    return request.remote_addr or "unknown"


def decide(limit: HttpLimit, limiter: RateLimiter, client_key: str, cost: int) -> Decision:
    """Ask the limiter within ``limit.timeout`` seconds; fail open or closed past it."""
    future = _POOL.submit(limit.call, limiter, client_key, cost)
    try:
        result = future.result(timeout=limit.timeout)
    except Exception as e:  # Redis down, paused or unreachable: a timeout, never a hang
        future.cancel()
        return limit.failed(e)
    return limit.decide(result)


def rate_limit(
    limiter: RateLimiter,
    limits: Limiter | Mapping[str, Limiter],
    *,
    key: Callable[[], str] = _client,
    cost: Callable[[], int] | None = None,
    on_error: OnError = "closed",
    timeout: float = 0.5,
    prefix: str = "rl:",
    detail: bool = False,
    shadow: bool = False,
) -> Callable[[F], F]:
    """Limit a view: ``@rate_limit(limiter, GCRA(10, 5, "1s"))`` under ``@app.route``.

    ``key()`` and ``cost()`` read Flask's ``request``. A denied request is answered 429 with
    ``Retry-After`` (413 when it can never pass) and the RateLimit headers; a granted one runs
    the view, its response carrying the RateLimit headers.
    """
    limit = HttpLimit(
        limits, prefix=prefix, on_error=on_error, timeout=timeout, detail=detail, shadow=shadow
    )

    def decorator(view: F) -> F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            units = cost() if cost else 1
            decision = decide(limit, limiter, key(), units)
            if decision.status is not None:
                response = jsonify(error_body(decision, units))
                response.status_code = decision.status
                response.headers.update(decision.headers)
                return response
            response = make_response(view(*args, **kwargs))
            response.headers.update(decision.headers)
            return response

        return cast(F, wrapper)

    return decorator
