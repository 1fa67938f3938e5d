"""ASGI middleware (Starlette, FastAPI, any ASGI app) on :class:`AsyncRateLimiter`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from typing import Any

from ._exec import decide_async, maybe_await, settle_async
from ._http import Decision, FailMode, HeaderStyle, HttpLimit, LimitsArg, Reserve, client_ip
from ._limiters import Duration, Time
from ._types import Result
from .asyncio import AsyncRateLimiter

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def client_address(scope: Scope) -> str:
    """The default key: the peer's address (an IPv6 one by its /56). Behind a proxy, the peer
    is the proxy: use :func:`forwarded_client` (or uvicorn's ``--proxy-headers`` with
    ``--forwarded-allow-ips``, which rewrites the peer)."""
    client = scope.get("client")
    return client_ip(str(client[0]) if client else None)


def forwarded_client(
    trust_proxy: int = 1, *, ipv6_subnet: int | None = 56
) -> Callable[[Scope], str]:
    """A key function for an app behind ``trust_proxy`` proxies: the client's address from
    ``X-Forwarded-For`` (the entry the nearest trusted proxy added), IPv6 by its
    ``/ipv6_subnet``. Only use it when every request comes through those proxies."""

    def key(scope: Scope) -> str:
        client = scope.get("client")
        forwarded = [v for k, v in scope.get("headers", []) if k.lower() == b"x-forwarded-for"]
        header = b",".join(forwarded).decode("latin-1") if forwarded else None
        peer = str(client[0]) if client else None
        return client_ip(peer, header, trust_proxy=trust_proxy, ipv6_subnet=ipv6_subnet)

    return key


def _raw_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode()) for k, v in headers.items()]


class RateLimitMiddleware:
    """Limits every HTTP request of ``app`` (the options are the README's table).

    ``key(scope)`` names the client (default: its address), ``cost(scope)`` the units a request
    costs (default 1), ``costs`` a cost function per named limit; any of them may be async. A
    denied request gets 429 with ``Retry-After`` (413 when it can never pass), an
    ``application/problem+json`` body and the RateLimit header fields; a granted one goes on,
    its answer carrying them. ``on_denied(scope, result)`` returns an ASGI app (a Starlette
    ``Response``) to answer a denial instead. With ``reserve=Reserve(hold, usage)``,
    ``usage(scope, start)`` gets the app's ``http.response.start`` message.
    """

    def __init__(
        self,
        app: ASGIApp,
        limiter: AsyncRateLimiter,
        limits: LimitsArg,
        *,
        key: Callable[[Scope], Any] = client_address,
        name: str | None = None,
        prefix: str = "rl:",
        cost: Callable[[Scope], Any] | None = None,
        costs: Mapping[str, Callable[[Scope], Any]] | None = None,
        fail: FailMode = "closed",
        on_error: Callable[[BaseException, Scope], Any] | None = None,
        timeout_ms: int = 500,
        headers: HeaderStyle = "draft-11",
        partition_key: bool = False,
        skip: Callable[[Scope], Any] | None = None,
        allowlist: Collection[str] = (),
        status: int = 429,
        never_status: int = 413,
        error_status: int = 503,
        on_denied: Callable[[Scope, Result], Any] | None = None,
        block: Duration | None = None,
        reserve: Reserve | None = None,
        shadow: bool = False,
        at: Callable[[Scope], Time] | None = None,
    ) -> None:
        self.app = app
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        decision = await decide_async(self.limit, scope)
        if decision is not None and decision.status is not None:
            await self._deny(scope, receive, send, decision)
            return
        extra = _raw_headers(decision.headers) if decision else []
        start: dict[str, Any] = {}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                if extra:
                    message = dict(message)
                    message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)
        await settle_async(self.limit, decision, scope, start)

    async def _deny(self, scope: Scope, receive: Receive, send: Send, decision: Decision) -> None:
        if self.limit.on_denied is not None and decision.result is not None:
            answer = await maybe_await(self.limit.on_denied(scope, decision.result))
            extra = _raw_headers(decision.headers)

            async def send_with_headers(message: Message) -> None:
                if message["type"] == "http.response.start":
                    have = {k.lower() for k, _ in message.get("headers", [])}
                    message = dict(message)
                    message["headers"] = [
                        *message.get("headers", []),
                        *((k, v) for k, v in extra if k not in have),
                    ]
                await send(message)

            await answer(scope, receive, send_with_headers)
            return
        await send_problem(send, decision)


def problem_body(decision: Decision) -> bytes:
    return json.dumps(decision.body or {}).encode()


async def send_problem(send: Send, decision: Decision) -> None:
    """The default denied (and failed-closed) answer: ``application/problem+json`` (RFC 9457)."""
    body = problem_body(decision)
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
        *_raw_headers(decision.headers),
    ]
    await send({"type": "http.response.start", "status": decision.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
