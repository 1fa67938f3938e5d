"""Arguments and reply parsers shared by the sync and asyncio clients (and the response callbacks
they register on redis-py clients)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeAlias, cast

from ._limiters import Duration, Limiter, Time, duration_arg, time_arg
from ._types import Info, LimiterDetail, PolicyDefinition, Result, StreamCount, ThrottleResult

#: A key: str or bytes, as redis-py takes them.
Key: TypeAlias = str | bytes
Arg: TypeAlias = str | bytes | int
#: The limiters of RL.ALL: key to limiter in order, or (key, limiter) pairs.
Limiters: TypeAlias = (
    Mapping[str, Limiter] | Mapping[bytes, Limiter] | Iterable[tuple[str | bytes, Limiter]]
)
#: The keys of RL.ALL / RL.CHECKALL under ``POLICY name``: one per limiter of the policy, in order.
Keys: TypeAlias = Sequence[str] | Sequence[bytes]
#: The option redis-py hands through ``execute_command`` to the response callback: the cost
#: the caller asked for, so that ``allowed`` means "the whole request was granted".
COST_HINT = "rl_cost"
#: The option that makes redis-py hand a reply back undecoded (RL.POLICY DUMP's binary payload,
#: whatever ``decode_responses`` says).
NEVER_DECODE = "NEVER_DECODE"

LIMITER_COMMANDS = (
    "RL.GCRA",
    "RL.TOKENBUCKET",
    "RL.LEAKYBUCKET",
    "RL.FIXED",
    "RL.SLIDING",
    "RL.SLIDINGCOUNTER",
    "RL.ALL",
    "RL.CHECK",
    "RL.CHECKALL",
    "RL.ACQUIRE",
    "RL.REFUND",
    "RL.LIMIT",
)
_FIELDS = ("granted", "limit", "remaining", "retry_after_ms", "reset_after_ms")
_DETAIL = (
    "name",
    "key",
    "cost",
    "granted",
    "limit",
    "remaining",
    "retry_after_ms",
    "reset_after_ms",
    "window_ms",
    "policy",
)


def _text(v: object) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _opt_text(v: object) -> str | None:
    return None if v is None else _text(v)


def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer in the reply, got {v!r}")
    return v


def _named(reply: Mapping[Any, Any]) -> dict[str, Any]:
    return {_text(k): v for k, v in reply.items()}


def _detail(entry: Any) -> LimiterDetail:
    if isinstance(entry, Mapping):
        d = _named(entry)
        vals = [d.get(n) for n in _DETAIL]
    else:
        vals = list(entry) + [None] * (len(_DETAIL) - len(entry))
    return LimiterDetail(
        name=_text(vals[0]),
        key=_text(vals[1]),
        cost=_int(vals[2]),
        granted=_int(vals[3]),
        limit=_int(vals[4]),
        remaining=_int(vals[5]),
        retry_after_ms=_int(vals[6]),
        reset_after_ms=_int(vals[7]),
        window_ms=_int(vals[8]),
        policy=_opt_text(vals[9]),
    )


def parse_result(reply: Any, cost: int | None = None) -> Result:
    """A limiter reply: a RESP2 array of five integers (eight with ``DETAIL``) or a RESP3 map.

    ``cost`` is the cost asked for: with it ``allowed`` is ``granted >= cost``; without it
    (a raw ``execute_command``), ``retry_after_ms == 0``, which is the same except for a granted
    leaky-bucket request that must wait its queue delay.
    """
    denied_by: str | None = None
    reason: str | None = None
    limiters: tuple[LimiterDetail, ...] = ()
    if isinstance(reply, Mapping):
        d = _named(reply)
        vals = [_int(d[n]) for n in _FIELDS]
        if "reason" in d:
            denied_by, reason = _opt_text(d.get("denied_by")), _opt_text(d.get("reason"))
            limiters = tuple(_detail(e) for e in d.get("limiters") or ())
    elif isinstance(reply, (list, tuple)) and len(reply) in (5, 8):
        vals = [_int(v) for v in reply[:5]]
        if len(reply) == 8:
            denied_by, reason = _opt_text(reply[5]), _opt_text(reply[6])
            limiters = tuple(_detail(e) for e in reply[7] or ())
    else:
        raise TypeError(f"not a limiter reply: {reply!r}")
    granted, limit, remaining, retry, reset = vals
    allowed = granted >= cost if cost is not None else retry == 0
    return Result(allowed, granted, limit, remaining, retry, reset, denied_by, reason, limiters)


def parse_optional_result(reply: Any, cost: int | None = None) -> Result | None:
    return None if reply is None else parse_result(reply, cost)


def parse_settle(reply: Any) -> list[Result | None]:
    """RL.SETTLE: one limiter reply per key (nil for a missing key). ``granted`` is what the id
    is charged on that key after the settle; ``allowed`` means one unit could be granted now."""
    if not isinstance(reply, (list, tuple)):
        raise TypeError(f"not an RL.SETTLE reply: {reply!r}")
    return [parse_optional_result(r) for r in reply]


def settle_args(keys: Sequence[Key], id: str | bytes, units: Sequence[int]) -> list[Arg]:
    """``numkeys key [key ...] id units [units ...]`` of RL.SETTLE."""
    if isinstance(keys, (str, bytes)) or isinstance(units, (str, bytes)):
        raise TypeError("keys and units are sequences, one units per key")
    if not keys:
        raise ValueError("RL.SETTLE needs at least one key")
    if len(units) != len(keys):
        raise ValueError(f"one units per key: {len(keys)} keys, {len(units)} units")
    for u in units:
        if isinstance(u, bool) or not isinstance(u, int) or u < 0:
            raise ValueError(f"units must be integers >= 0, not {u!r}")
    return [len(keys), *keys, id, *units]


def parse_info(reply: Any) -> Info | None:
    """RL.INFO: nil, a RESP2 flat array of names and values, or a RESP3 map."""
    if reply is None:
        return None
    if isinstance(reply, Mapping):
        items = list(reply.items())
    else:
        items = list(zip(reply[::2], reply[1::2], strict=True))
    fields: dict[str, int | str] = {
        _text(k): v if isinstance(v, int) else _text(v) for k, v in items
    }
    return Info(str(fields.get("algorithm", "")), fields)


# The limiters of a policy's definition as RL.ALL writes them: the algorithm word and its
# positional arguments, then options of one value each (RL.POLICY GET is read with these).
_ARITY = {
    "GCRA": 3,
    "TOKENBUCKET": 3,
    "LEAKYBUCKET": 3,
    "FIXED": 2,
    "SLIDING": 2,
    "SLIDINGCOUNTER": 2,
    "CONCURRENCY": 2,
}
_LIMITER_OPTIONS = frozenset({"CHARGE", "NAME", "OFFSET", "TZ", "ANCHOR", "PRECISION"})


def parse_policy(name: str | bytes, reply: Any) -> PolicyDefinition | None:
    """RL.POLICY GET: nil for an unknown policy, else the arguments of the SET that made it,
    read limiter by limiter (a limiter's ``NAME`` may be spelled ``SHADOW`` or ``DESC``) for
    ``SHADOW`` and ``DESC text``."""
    if reply is None:
        return None
    if not isinstance(reply, (list, tuple)):
        raise TypeError(f"not an RL.POLICY GET reply: {reply!r}")
    args = tuple(_text(a) for a in reply)
    shadow, desc, i = False, None, 0
    while i < len(args):
        word = args[i].upper()
        if word == "SHADOW":
            shadow, i = True, i + 1
        elif word == "DESC" and i + 1 < len(args):
            desc, i = args[i + 1], i + 2
        elif word in _ARITY:
            i += 1 + _ARITY[word]
            while i + 1 < len(args) and args[i].upper() in _LIMITER_OPTIONS:
                i += 2
        else:
            break
    return PolicyDefinition(_text(name), args, shadow, desc)


def parse_policy_list(reply: Any) -> dict[str, int]:
    """RL.POLICY LIST: every policy's name and version (RESP2 flat pairs, RESP3 a map)."""
    if isinstance(reply, Mapping):
        return {_text(k): _int(v) for k, v in reply.items()}
    if not isinstance(reply, (list, tuple)) or len(reply) % 2:
        raise TypeError(f"not an RL.POLICY LIST reply: {reply!r}")
    return {_text(k): _int(v) for k, v in zip(reply[::2], reply[1::2], strict=True)}


def policy_set_args(
    name: str, limiters: Limiter | Sequence[Limiter], shadow: bool, desc: str | None
) -> list[Arg]:
    """``RL.POLICY SET name limiter [limiter ...] [SHADOW] [DESC text]``."""
    specs = [limiters] if isinstance(limiters, Limiter) else list(limiters)
    if not specs:
        raise ValueError("a policy needs at least one limiter")
    if not all(isinstance(s, Limiter) for s in specs):
        raise TypeError("a policy's limiters are Limiter specifications (GCRA(...), Fixed(...))")
    out: list[Arg] = ["RL.POLICY", "SET", name]
    for spec in specs:
        out += spec.spec()
    if shadow:
        out.append("SHADOW")
    if desc is not None:
        out += ["DESC", desc]
    return out


def parse_throttle(reply: Any) -> ThrottleResult:
    v = [_int(x) for x in reply]
    return ThrottleResult(v[0] == 1, v[1], v[2], v[3], v[4])


def parse_stream_count(reply: Any) -> StreamCount:
    total = _int(reply)
    return StreamCount(total >= 0, total if total >= 0 else None)


def parse_block(reply: Any) -> timedelta:
    return timedelta(milliseconds=_int(reply))


def parse_bool(reply: Any) -> bool:
    return bool(_int(reply))


def _result_callback(response: Any, **options: Any) -> Any:
    if isinstance(response, Exception):
        return response
    return parse_optional_result(response, options.get(COST_HINT))


def _wrap(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    def callback(response: Any, **options: Any) -> Any:
        return response if isinstance(response, Exception) else fn(response)

    return callback


#: The module's response callbacks, for :func:`install_response_callbacks`.
CALLBACKS: dict[str, Callable[..., Any]] = {
    **{name: _result_callback for name in LIMITER_COMMANDS},
    "RL.INFO": _wrap(parse_info),
    "CL.THROTTLE": _wrap(parse_throttle),
    "RL.STREAMCOUNT": _wrap(parse_stream_count),
    "RL.BLOCK": _wrap(parse_block),
    "RL.UNBLOCK": _wrap(parse_bool),
    "RL.SETTLE": _wrap(parse_settle),
}


def options(
    *,
    cost: int = 1,
    peek: bool = False,
    best_effort: bool = False,
    dedup: str | bytes | None = None,
    block: Duration | None = None,
    at: Time | None = None,
    detail: bool = False,
    delay: Duration | None = None,
    hold: Duration | None = None,
    shadow: bool = False,
) -> list[Arg]:
    """The shared options of the limiter commands, in the module's words."""
    if isinstance(cost, bool) or not isinstance(cost, int) or cost < 0:
        raise ValueError(f"cost must be an integer >= 0, not {cost!r}")
    if hold is not None and dedup is None:
        raise ValueError("hold needs dedup: a reservation is settled by its id")
    out: list[Arg] = []
    if cost != 1:
        out += ["COST", cost]
    if peek:
        out.append("PEEK")
    if shadow:
        out.append("SHADOW")
    if best_effort:
        out.append("BESTEFFORT")
    if dedup is not None:
        out += ["DEDUP", dedup]
    if hold is not None:
        out += ["HOLD", duration_arg(hold)]
    if block is not None:
        out += ["BLOCK", duration_arg(block)]
    if delay is not None:
        out += ["DELAY", duration_arg(delay)]
    if detail:
        out.append("DETAIL")
    if at is not None:
        out += ["AT", time_arg(at)]
    return out


def at_option(at: Time | None) -> list[Arg]:
    return [] if at is None else ["AT", time_arg(at)]


def all_or_policy_args(limiters: Limiters | Keys, policy: str | None) -> list[Arg]:
    """``numkeys key [key ...]`` then the limiters, or ``POLICY name`` (one key per limiter of
    the policy, in order)."""
    if policy is None:
        if isinstance(limiters, Mapping):
            return all_args(limiters)
        pairs = list(limiters)
        if any(isinstance(p, (str, bytes)) for p in pairs):
            raise TypeError("pass the limiters (key -> Limiter), or the keys with policy=")
        return all_args(cast(Limiters, pairs))
    if isinstance(limiters, (str, bytes, Mapping)):
        raise TypeError("with policy=, pass the keys: a sequence, one key per limiter")
    keys = list(limiters)
    if not keys:
        raise ValueError("RL.ALL needs at least one key")
    if not all(isinstance(k, (str, bytes)) for k in keys):
        raise TypeError("with policy=, pass the keys (str or bytes), not limiters")
    return [len(keys), *cast(list[Key], keys), "POLICY", policy]


def all_args(limiters: Limiters) -> list[Arg]:
    """``numkeys key [key ...] limiter [limiter ...]`` of RL.ALL and RL.CHECKALL."""
    pairs: Sequence[tuple[Key, Limiter]] = (
        list(limiters.items()) if isinstance(limiters, Mapping) else list(limiters)
    )
    if not pairs:
        raise ValueError("RL.ALL needs at least one limiter")
    out: list[Arg] = [len(pairs)]
    out += [k for k, _ in pairs]
    for _, spec in pairs:
        out += spec.spec()
    return out


def install_response_callbacks(client: Any) -> None:
    """Register the module's reply parsers on ``client`` (a redis-py client of your own), as
    redis-py's module wrappers do: ``client.execute_command("RL.GCRA", ...)`` and pipelines then
    return typed results (pass ``rl_cost=n`` to say what was asked). This changes what the
    client returns for those commands everywhere it is used; :class:`RateLimiter` never does it."""
    for name, callback in CALLBACKS.items():
        client.set_response_callback(name, callback)
