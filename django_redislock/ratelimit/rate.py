"""A rate as written in code (``"5/m"``, ``"10/5m"``), parsed once into whole microseconds so
that the limiter's arithmetic on the Redis server is exact."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
RATE_RE = re.compile(r"([0-9]+)/([0-9]*)([smhd])")
# The limiter keeps one 16-byte slot per unit of the count, per key: a count above this
# would make each key large (use a shorter period with a smaller count instead).
MAX_COUNT = 10_000
MAX_PERIOD = 366 * 86400
# The script's arithmetic is exact in integers while 2 x count x period (microseconds) stays
# below 2**53, the largest whole number a Lua number holds exactly.
MAX_COUNT_TIMES_PERIOD_US = 2**52


@dataclass(frozen=True)
class Rate:
    """At most ``count`` hits per ``period_us`` microseconds."""

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
    how many of them (``"10/5m"``: ten per five minutes). A ``Rate`` is returned as it is."""
    if isinstance(rate, Rate):
        return rate
    if not isinstance(rate, str):
        raise TypeError(f"rate must be a str such as '5/m', not {type(rate).__name__}.")
    match = RATE_RE.fullmatch(rate)
    if match is None:
        raise ValueError(
            f"rate {rate!r} is not a rate: write '<count>/<period>' with a period of s, m, h "
            "or d, optionally with a multiple, e.g. '5/s', '100/h' or '10/5m'."
        )
    count, multiple, unit = int(match[1]), int(match[2] or 1), match[3]
    if not 1 <= count <= MAX_COUNT:
        raise ValueError(f"rate {rate!r}: the count must be from 1 to {MAX_COUNT}.")
    period = multiple * UNITS[unit]
    if not 1 <= period <= MAX_PERIOD:
        raise ValueError(f"rate {rate!r}: the period must be from 1 s to 366 days.")
    if count * period * 1_000_000 > MAX_COUNT_TIMES_PERIOD_US:
        raise ValueError(
            f"rate {rate!r} is too large: count x period must stay under "
            f"{MAX_COUNT_TIMES_PERIOD_US // 1_000_000} seconds; use a smaller count."
        )
    return Rate(count, period * 1_000_000, rate)


def validate_burst(burst: Any, rate: Rate) -> int:
    """How many hits may pass at once: 1 to the rate's count; None is the count."""
    if burst is None:
        return rate.count
    if not isinstance(burst, int) or isinstance(burst, bool):
        raise TypeError(f"burst must be a whole number, not {type(burst).__name__}.")
    if not 1 <= burst <= rate.count:
        raise ValueError(
            f"burst must be from 1 to the rate's count ({rate.count} for {rate.text!r}), "
            f"not {burst}."
        )
    return burst
