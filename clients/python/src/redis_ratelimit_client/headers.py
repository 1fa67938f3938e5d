"""HTTP header fields for a limiter reply: ``Retry-After`` and the ``RateLimit-Policy`` and
``RateLimit`` fields of draft-ietf-httpapi-ratelimit-headers-11 (RFC 8941 structured fields:
``RateLimit-Policy: "default";q=100;w=10`` and ``RateLimit: "default";r=50;t=30``)."""

from __future__ import annotations

from collections.abc import Mapping

from ._limiters import Limiter
from ._types import LimiterDetail, Result, ceil_seconds

Policies = Mapping[str, Limiter]


def sf_string(value: str) -> str:
    """An RFC 8941 sf-string: printable ASCII in quotes, ``\\`` and ``"`` escaped."""
    if not all(0x20 <= ord(ch) <= 0x7E for ch in value):
        raise ValueError(f"a policy name must be printable ASCII, not {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def policy_item(name: str, quota: int, window_s: int | None) -> str:
    """One item of ``RateLimit-Policy``: ``"name";q=quota;w=window``."""
    item = f"{sf_string(name)};q={quota}"
    return item + (f";w={window_s}" if window_s else "")


def limit_item(name: str, remaining: int, t: int | None) -> str:
    """One item of ``RateLimit``: ``"name";r=remaining;t=window`` (``t`` left out when None)."""
    return _item(name, remaining, t)


def ratelimit_policy(policies: Policies) -> str:
    """The ``RateLimit-Policy`` field value: one item per named limiter, ``w`` in whole seconds
    rounded up (omitted for a concurrency limiter, which has no window)."""
    return ", ".join(
        policy_item(name, spec.quota, ceil_seconds(spec.window_ms()))
        for name, spec in policies.items()
    )


def detailed_policy(result: Result) -> str:
    """The ``RateLimit-Policy`` field value of a detailed reply: one item per limiter, named as
    the reply names it (``NAME``, else its key), ``q`` its limit and ``w`` its ``window_ms`` in
    whole seconds rounded up (omitted for a concurrency limiter)."""
    return ", ".join(
        policy_item(d.name, d.limit, ceil_seconds(d.window_ms)) for d in result.limiters
    )


def effective_window(remaining: int, limit: int, next_unit: Result | None) -> int | None:
    """``t`` of draft-11 (the effective window): whole seconds (rounded up) within which the
    client can use no more than ``remaining``, i.e. until the limiter has one unit more than it
    has left. 0 when nothing is used; else from ``next_unit``, the reply of a read-only check
    of ``remaining + 1`` units (``rl.check(key, spec, cost=result.remaining + 1)``); None
    (``t`` left out, as the draft allows) without it."""
    if remaining >= limit:
        return 0
    if next_unit is None:
        return None
    return ceil_seconds(next_unit.retry_after_ms) if next_unit.retry_after_ms >= 0 else 0


def _t_of(d: LimiterDetail, wait: LimiterDetail | None) -> int | None:
    one = Result(True, 0, 0, 0, wait.retry_after_ms, 0) if wait is not None else None
    return effective_window(d.remaining, d.limit, one)


def _item(name: str, remaining: int, t: int | None) -> str:
    return f"{sf_string(name)};r={max(remaining, 0)}" + ("" if t is None else f";t={t}")


def ratelimit(result: Result, policies: Policies, next_unit: Result | None = None) -> str:
    """The ``RateLimit`` field value: one item per limiter of a detailed reply
    (``"burst";r=50;t=2, "daily";r=900;t=43200``; ``next_unit`` a detailed RL.CHECKALL with each
    limiter's ``CHARGE`` its remaining + 1), or the one item of a single limiter."""
    if result.limiters:
        waits = {d.name: d for d in (next_unit.limiters if next_unit is not None else ())}
        return ", ".join(
            _item(d.name, d.remaining, _t_of(d, waits.get(d.name))) for d in result.limiters
        )
    if len(policies) != 1:
        raise ValueError("several limits need a detailed reply (detail=True) to be named")
    (name,) = policies
    return _item(
        name, result.remaining, effective_window(result.remaining, result.limit, next_unit)
    )


def rate_limit_headers(
    result: Result, policies: Policies | Limiter, *, next_unit: Result | None = None
) -> dict[str, str]:
    """``RateLimit-Policy`` and ``RateLimit`` (draft-ietf-httpapi-ratelimit-headers-11) for
    ``result``, and ``Retry-After`` (whole seconds rounded up, never 0, never before the end of
    the effective window ``t``) when it was denied and can be retried; no ``Retry-After`` when
    it can never pass (``never``). A single limiter is named ``default``. Several limiters need
    a detailed result (``detail=True``), named by the reply. ``t`` needs ``next_unit`` (see
    :func:`effective_window`) unless nothing is used; the HTTP integrations make that check
    themselves."""
    named: Policies = {"default": policies} if isinstance(policies, Limiter) else policies
    policy = detailed_policy(result) if result.limiters else ratelimit_policy(named)
    field = ratelimit(result, named, next_unit)
    out = {"RateLimit-Policy": policy, "RateLimit": field}
    retry = result.retry_after_header
    if retry is not None:
        # Never before the end of the effective window of a limiter that denied the call.
        if result.limiters:
            waits = {d.name: d for d in (next_unit.limiters if next_unit is not None else ())}
            ts = [_t_of(d, waits.get(d.name)) for d in result.limiters if d.retry_after_ms != 0]
        else:
            ts = [effective_window(result.remaining, result.limit, next_unit)]
        ts_known = [t for t in ts if t is not None]
        out["Retry-After"] = str(max([retry, *ts_known]))
    return out
