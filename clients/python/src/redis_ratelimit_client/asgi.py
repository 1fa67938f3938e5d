"""ASGI middleware (Starlette, FastAPI, any ASGI app) on :class:`AsyncRateLimiter`."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from ._http import Decision, HttpLimit, OnError
from ._limiters import Limiter
from .asyncio import AsyncRateLimiter

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def client_address(scope: Scope) -> str:
    """The default key: the peer's address."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def decide(
    limit: HttpLimit, limiter: AsyncRateLimiter, client_key: str, cost: int
) -> Decision:
    """Ask the limiter within ``limit.timeout`` seconds; fail open or closed past it."""
    try:
        result = await asyncio.wait_for(limit.call(limiter, client_key, cost), limit.timeout)
    except Exception as e:  # Redis down, paused or unreachable: a timeout, never a hang
        return limit.failed(e)
    return limit.decide(result)


class RateLimitMiddleware:
    """Limits every HTTP request of ``app``.

    ``key(scope)`` names the client (default: its address), ``cost(scope)`` the units a request
    costs (default 1); either may be async. A denied request gets 429 with ``Retry-After`` (413
    when it can never pass), a JSON body and the RateLimit headers; a granted one goes on, its
    answer carrying the RateLimit headers.
    """

    def __init__(
        self,
        app: ASGIApp,
        limiter: AsyncRateLimiter,
        limits: Limiter | Mapping[str, Limiter],
        *,
        key: Callable[[Scope], Any] = client_address,
        cost: Callable[[Scope], Any] | None = None,
        on_error: OnError = "closed",
        timeout: float = 0.5,
        prefix: str = "rl:",
        detail: bool = False,
        shadow: bool = False,
    ) -> None:
        self.app = app
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client_key = str(await _maybe_await(self.key(scope)))
        cost = int(await _maybe_await(self.cost(scope))) if self.cost else 1
        decision = await decide(self.limit, self.limiter, client_key, cost)
        if decision.status is not None:
            await send_json(send, decision, cost)
            return
        extra = [(k.lower().encode(), v.encode()) for k, v in decision.headers.items()]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and extra:
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def error_body(decision: Decision, cost: int) -> dict[str, Any]:
    if decision.result is None:
        return {"error": "rate limiter unavailable"}
    if decision.result.never:
        return {"error": f"a request of {cost} units exceeds the limit of {decision.result.limit}"}
    return {"error": "too many requests", "retry_after_ms": decision.result.retry_after_ms}


async def send_json(send: Send, decision: Decision, cost: int) -> None:
    body = json.dumps(error_body(decision, cost)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in decision.headers.items()]
    await send({"type": "http.response.start", "status": decision.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
