"""What a stock's methods accept: quantities, durations and their bounds, checked before
Redis is touched; and the server's epoch milliseconds as a datetime."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from ..names import validate_seconds

# Bounds that keep every count exact in Lua (doubles: integers up to 2^53).
MAX_UNITS = 10**12  # units in one set, add or reserve
MAX_TOTAL = 2**50  # units a stock may have in all
MAX_TTL = 30 * 86400.0  # seconds, for a reservation's ttl and for ``remember``
MAX_ID_LENGTH = 100


def units(value: Any, argument: str, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{argument} must be an int, not {type(value).__name__}.")
    if not minimum <= value <= MAX_UNITS:
        raise ValueError(f"{argument} must be between {minimum} and {MAX_UNITS}, not {value}.")
    return value


def milliseconds(value: Any, argument: str) -> int:
    seconds = validate_seconds(value, argument, allow_zero=False, allow_inf=False)
    if seconds > MAX_TTL:
        raise ValueError(f"{argument} must be at most {MAX_TTL:.0f} seconds, not {value!r}.")
    return max(1, math.ceil(seconds * 1000))


def epoch(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
