"""HTTP header fields for a limiter reply: ``Retry-After`` and the ``RateLimit-Policy`` and
``RateLimit`` fields of draft-ietf-httpapi-ratelimit-headers-11 (RFC 8941 structured fields:
``RateLimit-Policy: "default";q=100;w=10`` and ``RateLimit: "default";r=50;t=30``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._limiters import Limiter
from ._types import Result, ceil_seconds

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


def limit_item(name: str, remaining: int, reset_s: int) -> str:
    """One item of ``RateLimit``: ``"name";r=remaining;t=reset``."""
    return f"{sf_string(name)};r={max(remaining, 0)};t={max(reset_s, 0)}"


def ratelimit_policy(policies: Policies) -> str:
    """The ``RateLimit-Policy`` field value: one item per named limiter, ``w`` in whole seconds
    rounded up (omitted for a concurrency limiter, which has no window)."""
    return ", ".join(
        policy_item(name, spec.quota, ceil_seconds(spec.window_ms()))
        for name, spec in policies.items()
    )


def _binding(result: Result, names: Iterable[tuple[str, Limiter]]) -> str:
    pairs = list(names)
    for name, spec in pairs:
        if spec.quota == result.limit:
            return name
    return pairs[0][0] if pairs else "default"


def detailed_policy(result: Result) -> str:
    """The ``RateLimit-Policy`` field value of a detailed reply: one item per limiter, named as
    the reply names it (``NAME``, else its key), ``q`` its limit and ``w`` its ``window_ms`` in
    whole seconds rounded up (omitted for a concurrency limiter), items joined by ``,`` as in the
    draft's examples (``"burst";q=100;w=60,"daily";q=1000;w=86400``)."""
    return ",".join(
        policy_item(d.name, d.limit, ceil_seconds(d.window_ms)) for d in result.limiters
    )


def ratelimit(result: Result, policies: Policies) -> str:
    """The ``RateLimit`` field value. With a detailed reply, one item per limiter (named as the
    reply names them: ``"burst";r=50;t=30,"daily";r=900;t=43200``); otherwise one item for the
    limiter the reply's ``limit`` belongs to (the one closest to limiting, for RL.ALL)."""
    if result.limiters:
        return ",".join(
            limit_item(d.name, d.remaining, ceil_seconds(d.reset_after_ms)) for d in result.limiters
        )
    name = _binding(result, policies.items())
    return limit_item(name, result.remaining, ceil_seconds(result.reset_after_ms))


def rate_limit_headers(result: Result, policies: Policies | Limiter) -> dict[str, str]:
    """``RateLimit-Policy`` and ``RateLimit`` for ``result``, and ``Retry-After`` (whole seconds
    rounded up, never 0) when it was denied and can be retried; no ``Retry-After`` when it can
    never pass (``never``). A single limiter is named ``default``. A detailed result (``DETAIL``)
    gives one item per limiter of the reply, from the reply alone (``policies`` unused)."""
    named: Policies = {"default": policies} if isinstance(policies, Limiter) else policies
    policy = detailed_policy(result) if result.limiters else ratelimit_policy(named)
    out = {"RateLimit-Policy": policy, "RateLimit": ratelimit(result, named)}
    retry = result.retry_after_header
    if retry is not None:
        out["Retry-After"] = str(retry)
    return out
