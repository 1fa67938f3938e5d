"""What the HTTP integrations share (the ASGI middleware, the FastAPI dependency, the Flask
decorator): the keys of a client, the limiter call, what to answer, the header fields, failing
open or closed and saying so.

The rules (shared with the Node and Go packages):

- Keys are ``{prefix}{name}:{client}`` for one limit and ``{prefix}{name}:{{client}}:{limit}``
  for several. ``name`` is derived from the limits' parameters when not given, so two different
  limits never share keys; two integrations of one process on the same key space of one server
  are refused unless both gave that same ``name``.
- A limiter failure calls ``on_error(error, request)`` and logs one line on the
  ``redis_ratelimit`` logger the first time it fails (again after it recovered). The first call
  checks the module is loaded. A key or cost function that raises is the app's error.
- A limiter command is sent at most once, and never after the request was answered: no retry,
  no queue (a request answered during an outage is never charged afterwards).
"""

from __future__ import annotations

import base64
import gc
import hashlib
import ipaddress
import logging
import math
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from . import _commands as c
from ._backend import Backend, ModuleRequiredError, evalsha
from ._limiters import GCRA, Concurrency, Duration, Limiter, Time, duration_arg, time_arg
from ._types import Result, ceil_seconds
from .headers import sf_string

FailMode = Literal["open", "closed"]
HeaderStyle = Literal["draft-11", "draft-7", "legacy", "none"]
HEADER_STYLES: tuple[str, ...] = ("draft-11", "draft-7", "legacy", "none")
LimitsArg = Limiter | str | Mapping[str, Limiter | str]

logger = logging.getLogger("redis_ratelimit")

#: draft-ietf-httpapi-ratelimit-headers-11, section 5.1.
QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"
MODULE_HINT = (
    "the redis-ratelimit module is not loaded on this server (no RL.GCRA command): load it with "
    "`loadmodule /path/to/libredis_ratelimit.so` in redis.conf, "
    "or `MODULE LOAD /path/to/libredis_ratelimit.so`"
)


class ModuleNotLoadedError(RuntimeError):
    """The server answering the limiter has no redis-ratelimit module."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(MODULE_HINT + (f" ({detail})" if detail else ""))


class LimiterTimeoutError(TimeoutError):
    """The limiter did not answer within ``timeout_ms``."""


# Limit strings: "5/minute", "5/m", "5 per minute".
_UNIT = {
    "s": "1s",
    "sec": "1s",
    "second": "1s",
    "m": "1m",
    "min": "1m",
    "minute": "1m",
    "h": "1h",
    "hour": "1h",
    "d": "1d",
    "day": "1d",
}
_LIMIT = re.compile(r"\s*([0-9]+)\s*(?:/|\s+per\s+)\s*([a-z]+?)s?\s*", re.IGNORECASE)


def parse_limit(text: str) -> GCRA:
    """A limit string as GCRA, exactly: ``"N/second|minute|hour|day"`` (also ``N/s``, ``N/m``,
    ``N/h``, ``N/d`` and ``N per minute``) is ``GCRA(N, N, "1<unit>")``: N requests at once,
    then N per unit."""
    m = _LIMIT.fullmatch(text)
    unit = _UNIT.get(m.group(2).lower()) if m else None
    if not m or unit is None or int(m.group(1)) < 1:
        raise ValueError(
            f"invalid limit {text!r}: write N/second, N/minute, N/hour or N/day "
            "(or N/s, N/m, N/h, N/d, N per minute) with N >= 1"
        )
    n = int(m.group(1))
    return GCRA(n, n, unit)


def _limiter(spec: Limiter | str) -> Limiter:
    if isinstance(spec, str):
        return parse_limit(spec)
    if not isinstance(spec, Limiter):
        raise TypeError(f"a limit is a Limiter (GCRA(...), Fixed(...)) or a str, not {spec!r}")
    if isinstance(spec, Concurrency):
        raise TypeError("a concurrency limiter needs a lease id: use RateLimiter.lease()")
    return spec


def derived_name(limits: Mapping[str, Limiter], single: bool) -> str:
    """The name of a key space made from the limits' algorithms and parameters:
    ``gcra-10-5-1s`` (several: ``burst.gcra-5-5-10s+daily.fixed-1000-1d``)."""

    def one(spec: Limiter) -> str:
        words = [spec.word.lower(), *(str(p) for p in spec.params())]
        return "-".join(words).replace(" ", "_").replace("{", "(").replace("}", ")")

    if single:
        return one(next(iter(limits.values())))
    return "+".join(f"{n}.{one(s)}" for n, s in limits.items())


# Key spaces in use in this process: (server, prefix, name) -> its integration (weakly held).
_KEY_SPACES: weakref.WeakValueDictionary[tuple[str, str, str], HttpLimit] = (
    weakref.WeakValueDictionary()
)
_KEY_SPACES_LOCK = threading.Lock()


def _server_of(client: Any) -> str:
    pool = getattr(client, "connection_pool", None)
    kw = getattr(pool, "connection_kwargs", None)
    if isinstance(kw, Mapping):
        where = kw.get("path") or f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}"
        return f"{where}/{kw.get('db', 0)}"
    return f"client-{id(client)}"


@dataclass(frozen=True, slots=True)
class Reserve:
    """The reservation flow: the limiter call holds the units (``HOLD hold`` under a fresh
    ``DEDUP`` id) before the handler, and ``RL.SETTLE`` charges the real usage after it.

    ``usage(request, response)`` returns the units really used: an int for every limit, or a
    mapping of limit name to units (a limit it does not name is settled at what was held).
    Without ``usage`` the held units are kept as they are. A reservation the app never settles
    (it crashed) comes back by itself after ``hold``.
    """

    hold: Duration = "30s"
    usage: Callable[[Any, Any], int | Mapping[str, int]] | None = None

    def __post_init__(self) -> None:
        duration_arg(self.hold)


@dataclass(frozen=True, slots=True)
class Call:
    """One request's limiter call: the client's key, the keys and units per limit, and the
    command (and the read-only check that gives ``t`` when quota runs short)."""

    request: Any
    client: str
    keys: dict[str, str]
    units: dict[str, int]
    cost: int
    at: Time | None
    reservation: str | None


@dataclass(frozen=True, slots=True)
class Decision:
    """``status`` None lets the request through; else the status to answer with ``body``
    (problem+json). ``headers`` go on the answer either way. ``result`` is None when the limiter
    could not be asked (or was not: skipped, allowlisted)."""

    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    result: Result | None = None
    error: BaseException | None = None
    body: dict[str, Any] | None = None
    call: Call | None = None


def _is_unknown_command(e: BaseException) -> bool:
    text = str(e).lower()
    return "unknown command" in text and "rl." in text


class HttpLimit:
    """The limit of one HTTP integration (the names and defaults of the shared contract; see
    the README's option table)."""

    def __init__(
        self,
        client: Any,
        limits: LimitsArg,
        *,
        name: str | None = None,
        prefix: str = "rl:",
        key: Callable[[Any], Any],
        cost: Callable[[Any], Any] | None = None,
        costs: Mapping[str, Callable[[Any], Any]] | None = None,
        fail: FailMode = "closed",
        on_error: Callable[[BaseException, Any], Any] | None = None,
        timeout_ms: int = 500,
        headers: HeaderStyle = "draft-11",
        partition_key: bool = False,
        skip: Callable[[Any], Any] | None = None,
        allowlist: Collection[str] = (),
        status: int = 429,
        never_status: int = 413,
        error_status: int = 503,
        on_denied: Callable[[Any, Result], Any] | None = None,
        block: Duration | None = None,
        reserve: Reserve | None = None,
        shadow: bool = False,
        at: Callable[[Any], Time] | None = None,
        backend: Backend | None = None,
    ) -> None:
        if isinstance(on_error, str):
            raise TypeError(
                f'on_error is the hook called with (error, request); write fail="{on_error}" '
                "for the fail mode"
            )
        if fail not in ("open", "closed"):
            raise ValueError('fail must be "open" or "closed"')
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be a positive int of ms, not {timeout_ms!r}")
        if headers not in HEADER_STYLES:
            raise ValueError(f"headers must be one of {', '.join(HEADER_STYLES)}")
        if isinstance(allowlist, str):
            raise TypeError("allowlist is a collection of client keys, not one str")
        if block is not None:
            duration_arg(block)
        self.single = not isinstance(limits, Mapping)
        if isinstance(limits, Mapping):
            if not limits:
                raise ValueError("limits must name at least one limit")
            self.limits: dict[str, Limiter] = {n: _limiter(s).named(n) for n, s in limits.items()}
        else:
            self.limits = {"default": _limiter(limits)}
        if costs is not None:
            unknown = set(costs) - set(self.limits)
            if unknown:
                raise ValueError(f"costs names limits that do not exist: {sorted(unknown)}")
        if name is not None and not (
            name and name.isprintable() and "{" not in name and "}" not in name
        ):
            raise ValueError(f"name must be printable, without braces, not {name!r}")
        self.client = client
        self.explicit_name = name
        self.name = name if name is not None else derived_name(self.limits, self.single)
        self.prefix = prefix
        self.key = key
        self.cost = cost
        self.costs = dict(costs or {})
        self.fail = fail
        self.on_error = on_error
        self.timeout_ms = timeout_ms
        self.headers = headers
        self.partition_key = partition_key
        self.skip = skip
        self.allowlist = frozenset(allowlist)
        self.status = status
        self.never_status = never_status
        self.error_status = error_status
        self.on_denied = on_denied
        self.block = block
        self.reserve = reserve
        self.shadow = shadow
        self.at = at
        self._module_checked = False
        #: The limiter's backend (its RateLimiter's); under the script, the commands go out as
        #: EVALSHA (after SCRIPT LOAD on the first call).
        self.backend = backend if backend is not None else Backend("module")
        self.script_loaded = False
        if self.backend.choice == "lua":
            self._check_script_can(self.limits)
        self._failing = False
        self._state_lock = threading.Lock()
        self._claim()

    def _check_script_can(self, limits: Mapping[str, Limiter]) -> None:
        """Refuse at construction what the script backend cannot do (backend="lua")."""
        what = [
            w
            for w, used in (
                ("reserve (HOLD, RL.SETTLE)", self.reserve is not None),
                ("block (RL.BLOCK)", self.block is not None),
                ("shadow (SHADOW)", self.shadow),
                ("at (AT)", self.at is not None),
            )
            if used
        ]
        for n, spec in limits.items():
            if spec.command not in ("RL.GCRA", "RL.TOKENBUCKET", "RL.FIXED", "RL.SLIDINGCOUNTER"):
                what.append(f"the limit {n!r} ({spec.command})")
            elif getattr(spec, "calendar", False):
                what.append(f"the limit {n!r} (a calendar window)")
        if what:
            raise ModuleRequiredError(", ".join(what))

    def wire(self, args: list[c.Arg]) -> list[Any]:
        """``args`` as they go out: the module command, or its script form."""
        return evalsha(args) if self.backend.resolved == "lua" else args

    # Keys.

    def _claim(self) -> None:
        space = (_server_of(self.client), self.prefix, self.name)
        with _KEY_SPACES_LOCK:
            other = _KEY_SPACES.get(space)
            if other is not None:
                gc.collect()  # an integration of an app that is gone may still wait for gc
                other = _KEY_SPACES.get(space)
            if other is not None and not (
                self.explicit_name is not None and other.explicit_name == self.explicit_name
            ):
                raise ValueError(
                    f"two rate limits would share the keys {self.prefix}{self.name}:* on "
                    f"{space[0]}: give each its own name= (or the same explicit name= to both "
                    "to share one budget on purpose)"
                )
            _KEY_SPACES[space] = self

    def keys_for(self, client: str) -> dict[str, str]:
        if self.single:
            return {"default": f"{self.prefix}{self.name}:{client}"}
        return {n: f"{self.prefix}{self.name}:{{{client}}}:{n}" for n in self.limits}

    @property
    def header_names(self) -> list[str]:
        if self.single:
            return [self.explicit_name or "default"]
        return list(self.limits)

    # The request's inputs. The adapters compute key/cost (sync or awaited), then call these.

    def make_call(self, request: Any, client: str, units: Mapping[str, int]) -> Call:
        for n, u in units.items():
            if isinstance(u, bool) or not isinstance(u, int) or u < 0:
                raise ValueError(f"the cost of {n!r} must be an int >= 0, not {u!r}")
        cost = next(iter(units.values())) if self.single else 1
        at = self.at(request) if self.at else None
        reservation = uuid.uuid4().hex if self.reserve else None
        return Call(request, client, self.keys_for(client), dict(units), cost, at, reservation)

    def cost_functions(self) -> dict[str, Callable[[Any], Any] | None]:
        """The function giving each limit's units (None: 1)."""
        return {n: self.costs.get(n, self.cost) for n in self.limits}

    # The commands.

    def command(self, call: Call) -> list[c.Arg]:
        hold = self.reserve.hold if self.reserve else None
        opts = c.options(
            cost=call.cost,
            shadow=self.shadow,
            dedup=call.reservation,
            hold=hold,
            block=self.block,
            detail=not self.single,
            at=call.at,
        )
        if self.single:
            spec = self.limits["default"]
            return [spec.command, call.keys["default"], *spec.params(), *opts]
        return ["RL.ALL", *c.all_args(self._charged(call)), *opts]

    def check_command(self, call: Call, result: Result) -> list[c.Arg] | None:
        """The read-only call that gives ``t``: when will each limit have one unit more than it
        has left (RL.CHECK / RL.CHECKALL with ``COST``/``CHARGE`` remaining + 1, enforced, never
        SHADOW)? None when no limit has used anything (nothing to come back: ``t`` is 0) or no
        RateLimit field is sent."""
        if self.headers == "none":
            return None
        at = c.at_option(call.at)
        if self.single:
            spec = self.limits["default"]
            if result.remaining >= result.limit:
                return None
            cost = max(result.remaining, 0) + 1
            return ["RL.CHECK", call.keys["default"], *spec.spec(), *c.options(cost=cost), *at]
        if all(d.remaining >= d.limit for d in result.limiters):
            return None
        remaining = {d.name: d.remaining for d in result.limiters}
        specs = {
            call.keys[n]: replace(spec, charge=max(remaining.get(n, 0), 0) + 1)  # type: ignore[type-var]
            for n, spec in self.limits.items()
        }
        return ["RL.CHECKALL", *c.all_args(specs), *c.options(detail=True), *at]

    def _charged(self, call: Call) -> dict[str, Limiter]:
        return {
            call.keys[n]: replace(spec, charge=call.units[n])  # type: ignore[type-var]
            for n, spec in self.limits.items()
        }

    def settle_command(self, call: Call, usage: int | Mapping[str, int]) -> list[c.Arg]:
        assert call.reservation is not None
        names = list(self.limits)
        if isinstance(usage, Mapping):
            units = [int(usage.get(n, call.units[n])) for n in names]
        else:
            units = [int(usage) for _ in names]
        keys = [call.keys[n] for n in names]
        return ["RL.SETTLE", *c.settle_args(keys, call.reservation, units), *c.at_option(call.at)]

    # Answers.

    def parse(self, call: Call, reply: Any) -> Result:
        return c.parse_result(reply, call.cost)

    def decide(self, call: Call, result: Result, check: Result | None) -> Decision:
        items = self._items(call, result, check)
        headers = self._headers(call, result, items)
        if result.allowed:
            return Decision(None, headers, result, call=call)
        status = self.never_status if result.never else self.status
        return Decision(
            status, headers, result, body=self._problem(call, result, status), call=call
        )

    def _items(
        self, call: Call, result: Result, check: Result | None
    ) -> list[tuple[str, int, int, int, int | None, int]]:
        """Per limit: (name, quota, window s, remaining, t s or None when unknown, reset s)."""
        if self.single:
            spec = self.limits["default"]
            t = _t(
                result.remaining, result.limit, check.retry_after_ms if check is not None else None
            )
            return [
                (
                    self.header_names[0],
                    spec.quota,
                    ceil_seconds(spec.window_ms()),
                    max(result.remaining, 0),
                    t,
                    ceil_seconds(result.reset_after_ms),
                )
            ]
        checks = {d.name: d.retry_after_ms for d in (check.limiters if check is not None else ())}
        return [
            (
                d.name,
                d.limit,
                ceil_seconds(d.window_ms),
                max(d.remaining, 0),
                _t(d.remaining, d.limit, checks.get(d.name)),
                ceil_seconds(d.reset_after_ms),
            )
            for d in result.limiters
        ]

    def _headers(
        self, call: Call, result: Result, items: list[tuple[str, int, int, int, int | None, int]]
    ) -> dict[str, str]:
        out: dict[str, str] = {}
        retry = result.retry_after_header
        if retry is not None:
            # Never before the end of the effective window of a limit that denied the call.
            denied = (
                {d.name for d in result.limiters if d.retry_after_ms != 0}
                if result.limiters
                else {i[0] for i in items}
            )
            retry = max([retry, *(i[4] or 0 for i in items if i[0] in denied)])
        if self.headers == "draft-11":
            pk = f";pk=:{_pk(call.client)}:" if self.partition_key else ""
            out["RateLimit-Policy"] = ", ".join(
                f"{sf_string(n)};q={q}" + (f";w={w}" if w else "") + pk for n, q, w, *_ in items
            )
            out["RateLimit"] = ", ".join(
                f"{sf_string(n)};r={r}" + ("" if t is None else f";t={t}") + pk
                for n, _, _, r, t, _ in items
            )
        elif self.headers in ("draft-7", "legacy"):
            _, q, _, r, _, reset = _most_restrictive(items, result)
            if self.headers == "draft-7":
                out["RateLimit-Limit"] = str(q)
                out["RateLimit-Remaining"] = str(r)
                out["RateLimit-Reset"] = str(reset)
                out["RateLimit-Policy"] = ", ".join(
                    f"{q_};w={w_}" if w_ else str(q_) for _, q_, w_, *_ in items
                )
            else:
                now_ms = _at_ms(call.at) if call.at is not None else time.time() * 1000
                out["X-RateLimit-Limit"] = str(q)
                out["X-RateLimit-Remaining"] = str(r)
                out["X-RateLimit-Reset"] = str(math.ceil(now_ms / 1000) + reset)
        if retry is not None:
            out["Retry-After"] = str(retry)
        return out

    def _problem(self, call: Call, result: Result, status: int) -> dict[str, Any]:
        denied = result.denied_by or self.header_names[0]
        if result.never:
            detail = (
                f"a request of {call.units.get(denied, call.cost)} units exceeds the limit "
                f"{denied!r}, which allows {result.limit}: it can never pass"
            )
            return {
                "type": QUOTA_EXCEEDED,
                "title": "Request exceeds the limit",
                "status": status,
                "detail": detail,
            }
        return {
            "type": QUOTA_EXCEEDED,
            "title": "Too Many Requests",
            "status": status,
            "detail": f"the limit {denied!r} is exhausted; retry after {result.retry_after}s",
            "retry_after": result.retry_after,
        }

    # Failures.

    def check_module_reply(self, reply: Any) -> None:
        """The reply of ``COMMAND INFO rl.gcra``: the module is loaded, or an error saying how
        to load it."""
        entries = list(reply.values()) if isinstance(reply, Mapping) else reply
        if not isinstance(entries, (list, tuple)) or not entries or entries[0] in (None, []):
            raise ModuleNotLoadedError()
        self._module_checked = True

    @property
    def module_checked(self) -> bool:
        return self._module_checked

    def failed(self, call: Call | None, request: Any, error: BaseException) -> Decision:
        if _is_unknown_command(error):
            error = ModuleNotLoadedError(str(error))
        with self._state_lock:
            first = not self._failing
            self._failing = True
        if first:
            logger.warning(
                "rate limit %s%s: the limiter failed, failing %s (%s: %s)",
                self.prefix,
                self.name,
                self.fail,
                type(error).__name__,
                error,
            )
        self.report(error, request)
        if self.fail == "open":
            return Decision(None, {}, None, error, call=call)
        body = {
            "type": "about:blank",
            "title": "Service Unavailable",
            "status": self.error_status,
            "detail": "rate limiter unavailable",
        }
        return Decision(self.error_status, {}, None, error, body, call=call)

    def succeeded(self) -> None:
        if self._failing:
            with self._state_lock:
                was, self._failing = self._failing, False
            if was:
                logger.warning("rate limit %s%s: the limiter answers again", self.prefix, self.name)

    def report(self, error: BaseException, request: Any) -> None:
        """Call ``on_error``; a hook that raises is logged, never the request's answer."""
        if self.on_error is None:
            return
        try:
            self.on_error(error, request)
        except Exception:
            logger.exception("rate limit %s%s: on_error raised", self.prefix, self.name)


def _t(remaining: int, limit: int, check_ms: int | None) -> int | None:
    """``t`` of draft-11, the effective window: whole seconds (rounded up) within which the
    client can use no more than ``remaining``, i.e. until the limit has one unit more than it
    has left (the read-only check's wait for remaining + 1). 0 when it has used nothing (no unit
    to come back); None when the check could not be made (``t`` is then left out)."""
    if remaining >= limit:
        return 0
    if check_ms is None:
        return None
    return ceil_seconds(check_ms) if check_ms >= 0 else 0


def _most_restrictive(
    items: list[tuple[str, int, int, int, int | None, int]], result: Result
) -> tuple[str, int, int, int, int | None, int]:
    if result.denied_by:
        for i in items:
            if i[0] == result.denied_by:
                return i
    return min(items, key=lambda i: (i[3], -(i[4] or 0), -i[5]))


def _pk(client: str) -> str:
    digest = hashlib.sha256(client.encode("utf-8", "surrogateescape")).digest()[:12]
    return base64.b64encode(digest).decode()


def _at_ms(at: Time) -> float:
    return float(time_arg(at))


# Client-address helpers.


def client_ip(
    peer: str | None,
    forwarded_for: str | None = None,
    *,
    trust_proxy: int = 0,
    ipv6_subnet: int | None = 56,
) -> str:
    """The client's address as a key.

    ``peer`` is the address the connection came from. Behind proxies, ``trust_proxy`` is how
    many of them to trust (hops): the address is then taken from ``X-Forwarded-For`` that many
    entries from its right end (the entry your nearest trusted proxy added), never by default,
    as anyone can send that header. An IPv6 address is keyed by its ``/ipv6_subnet`` network
    (56 by default, as express-rate-limit 8: one customer usually holds a whole /56 or /64);
    ``None`` keys the full address."""
    address = peer or ""
    if trust_proxy > 0 and forwarded_for:
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        chain = [*hops, address] if address else hops
        address = chain[max(len(chain) - 1 - trust_proxy, 0)]
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        if ipv6_subnet is not None:
            return str(ipaddress.IPv6Network((ip, ipv6_subnet), strict=False))
    return str(ip)


def usage_of(reserve: Reserve, request: Any, response: Any) -> int | Mapping[str, int] | None:
    return None if reserve.usage is None else reserve.usage(request, response)
