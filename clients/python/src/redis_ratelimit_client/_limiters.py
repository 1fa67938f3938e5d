"""Limiter specifications (the ``limiter`` words of RL.ALL and RL.CHECK), durations and times."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, ClassVar, Literal, get_args

#: A duration: milliseconds as an int, a string with a unit (``"1500ms"``, ``"30s"``, ``"1m"``,
#: ``"24h"``, ``"1d"``) or a :class:`datetime.timedelta` of whole milliseconds.
Duration = int | str | timedelta
#: A time for ``AT``: Unix milliseconds (fractions down to µs) or an aware datetime.
Time = int | float | Decimal | datetime

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_UNITS = {"": 1, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"([0-9]+)(ms|s|m|h|d)?")
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

#: A calendar window of RL.FIXED: a period in the time zone ``tz``.
Calendar = Literal["day", "week", "month", "quarter", "year"]
CALENDAR: tuple[str, ...] = get_args(Calendar)


def duration_arg(d: Duration) -> str:
    """The command argument for a duration, checked: a positive whole number of ms or units."""
    if isinstance(d, timedelta):
        us = d // timedelta(microseconds=1)
        if us <= 0 or us % 1000:
            raise ValueError(f"a duration must be a positive whole number of ms, not {d!r}")
        return f"{us // 1000}ms"
    if isinstance(d, bool) or not isinstance(d, (int, str)):
        raise TypeError(f"a duration is an int (ms), a str or a timedelta, not {type(d).__name__}")
    text = str(d)
    duration_ms(text)
    return text


def duration_ms(d: Duration) -> int:
    """A duration in milliseconds (``"1m"`` is 60000)."""
    if isinstance(d, timedelta):
        return int(duration_arg(d)[:-2])
    if isinstance(d, bool):
        raise TypeError("a duration is not a bool")
    m = _DURATION.fullmatch(str(d))
    if not m or int(m.group(1)) <= 0:
        raise ValueError(f"invalid duration {d!r}: a positive integer of ms, or with ms/s/m/h/d")
    return int(m.group(1)) * _UNITS[m.group(2) or ""]


def time_arg(t: Time) -> str:
    """The ``AT`` argument: Unix ms with at most three decimals (µs)."""
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise ValueError("AT needs an aware datetime (with tzinfo)")
        t = Decimal((t - _EPOCH) // timedelta(microseconds=1)) / 1000
    if isinstance(t, bool):
        raise TypeError("AT is not a bool")
    if isinstance(t, int):
        return str(t)
    q = Decimal(str(t)).quantize(Decimal("0.001"))
    text = format(q, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _count(v: int, what: str, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, not {v!r}")
    return v


def _check_all_options(charge: int | None, name: str | None) -> None:
    if charge is not None:
        _count(charge, "charge", 0)
    if name is not None and not (isinstance(name, str) and _NAME.fullmatch(name)):
        raise ValueError(f"a limiter name is 1-64 of letters, digits, _ - . :, not {name!r}")


def _all_options(charge: int | None, name: str | None) -> list[str | int]:
    out: list[str | int] = []
    if charge is not None:
        out += ["CHARGE", charge]
    if name is not None:
        out += ["NAME", name]
    return out


class Limiter:
    """Base of the limiter specifications: one limiter as RL.ALL and RL.CHECK write it."""

    __slots__ = ()
    #: The command for one key (``RL.GCRA``) and the algorithm word of RL.ALL (``GCRA``).
    command: ClassVar[str]
    word: ClassVar[str]

    @property
    def quota(self) -> int:
        """The limit (``q`` of the RateLimit-Policy header field)."""
        raise NotImplementedError

    def window_ms(self) -> int:
        """The time over which ``quota`` applies (``w``): the window, or the time a fully used
        limiter takes to become fresh again. 0 for a concurrency limiter."""
        raise NotImplementedError

    def params(self) -> list[str | int]:
        """The positional arguments after the key, with the limiter's own options."""
        raise NotImplementedError

    def named(self, name: str) -> Limiter:
        """A copy of this limiter named ``name`` in detailed replies (``NAME``)."""
        copy: Limiter = replace(self._as_dataclass(), name=name)
        return copy

    def _as_dataclass(self) -> Any:
        return self

    def spec(self) -> list[str | int]:
        """The limiter as written in RL.ALL and RL.CHECK: the algorithm word, :meth:`params` and,
        when given, ``CHARGE n`` (units asked of this limiter instead of the call's cost) and
        ``NAME name`` (its name in a detailed reply; the key by default)."""
        charge: int | None = getattr(self, "charge", None)
        name: str | None = getattr(self, "name", None)
        return [self.word, *self.params(), *_all_options(charge, name)]


def _refill_ms(amount: int, period: Duration, per: int) -> int:
    """ceil(amount * period / per) in ms: the time to refill ``amount`` at ``per`` a period."""
    return -(-amount * duration_ms(period) // per)


@dataclass(frozen=True, slots=True)
class GCRA(Limiter):
    """``RL.GCRA``: ``burst`` requests at once, ``rate`` per ``period`` sustained."""

    burst: int
    rate: int
    period: Duration
    charge: int | None = field(default=None, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    command: ClassVar[str] = "RL.GCRA"
    word: ClassVar[str] = "GCRA"

    def __post_init__(self) -> None:
        _check_all_options(self.charge, self.name)
        _count(self.burst, "burst")
        _count(self.rate, "rate")
        duration_arg(self.period)

    @property
    def quota(self) -> int:
        return self.burst

    def window_ms(self) -> int:
        return _refill_ms(self.burst, self.period, self.rate)

    def params(self) -> list[str | int]:
        return [self.burst, self.rate, duration_arg(self.period)]


@dataclass(frozen=True, slots=True)
class TokenBucket(Limiter):
    """``RL.TOKENBUCKET``: ``capacity`` tokens, ``refill`` more per ``period``."""

    capacity: int
    refill: int
    period: Duration
    charge: int | None = field(default=None, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    command: ClassVar[str] = "RL.TOKENBUCKET"
    word: ClassVar[str] = "TOKENBUCKET"

    def __post_init__(self) -> None:
        _check_all_options(self.charge, self.name)
        _count(self.capacity, "capacity")
        _count(self.refill, "refill")
        duration_arg(self.period)

    @property
    def quota(self) -> int:
        return self.capacity

    def window_ms(self) -> int:
        return _refill_ms(self.capacity, self.period, self.refill)

    def params(self) -> list[str | int]:
        return [self.capacity, self.refill, duration_arg(self.period)]


@dataclass(frozen=True, slots=True)
class LeakyBucket(Limiter):
    """``RL.LEAKYBUCKET``: a queue of ``capacity`` units draining ``rate`` per ``period``."""

    capacity: int
    rate: int
    period: Duration
    charge: int | None = field(default=None, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    command: ClassVar[str] = "RL.LEAKYBUCKET"
    word: ClassVar[str] = "LEAKYBUCKET"

    def __post_init__(self) -> None:
        _check_all_options(self.charge, self.name)
        _count(self.capacity, "capacity")
        _count(self.rate, "rate")
        duration_arg(self.period)

    @property
    def quota(self) -> int:
        return self.capacity

    def window_ms(self) -> int:
        return _refill_ms(self.capacity, self.period, self.rate)

    def params(self) -> list[str | int]:
        return [self.capacity, self.rate, duration_arg(self.period)]


@dataclass(frozen=True, slots=True)
class Fixed(Limiter):
    """``RL.FIXED``: at most ``limit`` per epoch-aligned ``window`` (shifted by ``offset``), or
    per calendar period (``window`` one of ``day``, ``week``, ``month``, ``quarter``, ``year``)
    in the time zone ``tz`` (an IANA name or ``+05:30``; UTC by default) starting at ``anchor``
    (``mon``..``sun`` for a week, the day of the month, or ``"04-15"`` for a year or quarter)."""

    limit: int
    window: Duration | Calendar
    offset: Duration | None = None
    tz: str | None = field(default=None, kw_only=True)
    anchor: str | int | None = field(default=None, kw_only=True)
    charge: int | None = field(default=None, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    command: ClassVar[str] = "RL.FIXED"
    word: ClassVar[str] = "FIXED"

    def __post_init__(self) -> None:
        _check_all_options(self.charge, self.name)
        _count(self.limit, "limit")
        if self.calendar:
            if self.tz is not None and not (isinstance(self.tz, str) and self.tz.isprintable()):
                raise ValueError(f"tz must be a time zone name or offset, not {self.tz!r}")
            if self.anchor is not None and (
                isinstance(self.anchor, bool) or not isinstance(self.anchor, (str, int))
            ):
                raise ValueError(f"anchor must be a str or an int, not {self.anchor!r}")
        else:
            duration_arg(self.window)
            if self.tz is not None or self.anchor is not None:
                raise ValueError(f"tz and anchor need a calendar window ({', '.join(CALENDAR)})")
        if self.offset is not None and self.offset not in (0, "0"):
            duration_arg(self.offset)

    @property
    def calendar(self) -> bool:
        """The window is a calendar period (``day`` ... ``year``)."""
        return isinstance(self.window, str) and self.window in CALENDAR

    @property
    def quota(self) -> int:
        return self.limit

    def window_ms(self) -> int:
        """The window in ms; 0 for a calendar window, whose length varies (a detailed reply's
        ``window_ms`` gives the current one)."""
        return 0 if self.calendar else duration_ms(self.window)

    def params(self) -> list[str | int]:
        window = str(self.window) if self.calendar else duration_arg(self.window)
        out: list[str | int] = [self.limit, window]
        if self.offset is not None:
            out += ["OFFSET", "0" if self.offset in (0, "0") else duration_arg(self.offset)]
        if self.tz is not None:
            out += ["TZ", self.tz]
        if self.anchor is not None:
            out += ["ANCHOR", self.anchor]
        return out


@dataclass(frozen=True, slots=True)
class Sliding(Limiter):
    """``RL.SLIDING``: an exact sliding-window log, ``precision`` merging entries into buckets."""

    limit: int
    window: Duration
    precision: Duration | None = None
    charge: int | None = field(default=None, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    command: ClassVar[str] = "RL.SLIDING"
    word: ClassVar[str] = "SLIDING"

    def __post_init__(self) -> None:
        _check_all_options(self.charge, self.name)
        _count(self.limit, "limit")
        duration_arg(self.window)
        if self.precision is not None:
            duration_arg(self.precision)

    @property
    def quota(self) -> int:
        return self.limit

    def window_ms(self) -> int:
        return duration_ms(self.window)

    def params(self) -> list[str | int]:
        out: list[str | int] = [self.limit, duration_arg(self.window)]
        if self.precision is not None:
            out += ["PRECISION", duration_arg(self.precision)]
        return out


@dataclass(frozen=True, slots=True)
class SlidingCounter(Limiter):
    """``RL.SLIDINGCOUNTER``: the weighted two-window estimate."""

    limit: int
    window: Duration
    charge: int | None = field(default=None, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    command: ClassVar[str] = "RL.SLIDINGCOUNTER"
    word: ClassVar[str] = "SLIDINGCOUNTER"

    def __post_init__(self) -> None:
        _check_all_options(self.charge, self.name)
        _count(self.limit, "limit")
        duration_arg(self.window)

    @property
    def quota(self) -> int:
        return self.limit

    def window_ms(self) -> int:
        return duration_ms(self.window)

    def params(self) -> list[str | int]:
        return [self.limit, duration_arg(self.window)]


@dataclass(frozen=True, slots=True)
class Concurrency(Limiter):
    """A concurrency limiter (``RL.ACQUIRE``): at most ``limit`` units in flight, leases of
    ``lease``. In RL.ALL the lease id is the call's ``dedup`` id."""

    limit: int
    lease: Duration
    charge: int | None = field(default=None, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    command: ClassVar[str] = "RL.ACQUIRE"
    word: ClassVar[str] = "CONCURRENCY"

    def __post_init__(self) -> None:
        _check_all_options(self.charge, self.name)
        _count(self.limit, "limit")
        duration_arg(self.lease)

    @property
    def quota(self) -> int:
        return self.limit

    def window_ms(self) -> int:
        return 0

    def params(self) -> list[str | int]:
        return [self.limit, duration_arg(self.lease)]
