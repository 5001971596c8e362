"""A rate as written in code (``"5/m"``, ``"10/5m"``, ``"100/10s"``, django-ratelimit's
unitless ``"100/10"``: per ten seconds), parsed once into whole microseconds so that the
limiter's arithmetic on the Redis server is exact. ``"0/m"`` is a rate that lets nothing
through."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# A period is a multiple, a unit or both; a bare multiple counts seconds (django-ratelimit's
# "100/10"), a bare unit one of it ("5/m").
RATE_RE = re.compile(r"([0-9]+)/(?=[0-9smhd])([0-9]*)([smhd]?)")
# The limiter keeps one 16-byte slot per unit of the count, per key: a count above this
# would make each key large (use a shorter period with a smaller count instead).
MAX_COUNT = 10_000
MAX_PERIOD = 366 * 86400
# The script's arithmetic is exact in integers while 2 x count x period (microseconds) stays
# below 2**53, the largest whole number a Lua number holds exactly.
MAX_COUNT_TIMES_PERIOD_US = 2**52


@dataclass(frozen=True)
class Rate:
    """At most ``count`` hits per ``period_us`` microseconds; a count of 0 lets none pass."""

    count: int
    period_us: int
    text: str

    @property
    def period(self) -> float:
        """The period in seconds."""
        return self.period_us / 1_000_000

    def __str__(self) -> str:
        return self.text


def parse_rate(rate: Any) -> Rate:
    """``"<count>/<period>"``: a period is ``s``, ``m``, ``h`` or ``d``, optionally preceded by
    how many of them (``"10/5m"``: ten per five minutes), or a number of seconds alone
    (``"100/10"``). A ``Rate`` is returned as it is; django-ratelimit's ``(count, seconds)``
    tuple is accepted too."""
    if isinstance(rate, Rate):
        return rate
    if isinstance(rate, tuple):
        return _parse_pair(rate)
    if not isinstance(rate, str):
        raise TypeError(f"rate must be a str such as '5/m', not {type(rate).__name__}.")
    return _parse_text(rate)


@functools.lru_cache(maxsize=256)  # a rate callable's answer is parsed once per text
def _parse_text(rate: str) -> Rate:
    match = RATE_RE.fullmatch(rate)
    if match is None:
        raise ValueError(
            f"rate {rate!r} is not a rate: write '<count>/<period>' with a period of s, m, h "
            "or d, optionally with a multiple, or a number of seconds, e.g. '5/s', '100/h', "
            "'10/5m' or '100/10'."
        )
    count, multiple, unit = int(match[1]), int(match[2] or 1), match[3] or "s"
    return _checked(count, multiple * UNITS[unit], rate)


def _parse_pair(rate: tuple[Any, ...]) -> Rate:
    if len(rate) != 2 or not all(type(part) is int for part in rate):
        raise TypeError(f"rate {rate!r}: a tuple must be (count, period in seconds), two ints.")
    count, period = rate
    return _checked(count, period, f"{count}/{period}s")


def _checked(count: int, period: int, text: str) -> Rate:
    if not 0 <= count <= MAX_COUNT:
        raise ValueError(f"rate {text!r}: the count must be from 0 to {MAX_COUNT}.")
    if not 1 <= period <= MAX_PERIOD:
        raise ValueError(f"rate {text!r}: the period must be from 1 s to 366 days.")
    if count * period * 1_000_000 > MAX_COUNT_TIMES_PERIOD_US:
        raise ValueError(
            f"rate {text!r} is too large: count x period must stay under "
            f"{MAX_COUNT_TIMES_PERIOD_US // 1_000_000} seconds; use a smaller count."
        )
    return Rate(count, period * 1_000_000, text)


def validate_burst(burst: Any, rate: Rate) -> int:
    """How many hits may pass at once: 1 to the rate's count; None is the count (0 for a
    rate of 0, which lets none pass)."""
    if burst is None:
        return rate.count
    if not isinstance(burst, int) or isinstance(burst, bool):
        raise TypeError(f"burst must be a whole number, not {type(burst).__name__}.")
    if burst == rate.count == 0:
        return 0
    if not 1 <= burst <= rate.count:
        raise ValueError(
            f"burst must be from 1 to the rate's count ({rate.count} for {rate.text!r}), "
            f"not {burst}."
        )
    return burst
