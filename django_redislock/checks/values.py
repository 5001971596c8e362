"""What the system checks share: how a value is shown in a message, and the sane bounds of
the number settings."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

QUEUE_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Durations beyond a year are a typo (or milliseconds written as seconds); a year of
# seconds is also far inside what Redis accepts as an expiry.
YEAR = 365 * 86400.0


@dataclass(frozen=True)
class Bounds:
    """The sane range of a number setting; ``minimum`` is excluded when ``above``."""

    minimum: float
    maximum: float = YEAR
    above: bool = False
    allow_inf: bool = False
    whole: bool = False

    def describe(self) -> str:
        low = f"{'>' if self.above else '>='} {self.minimum:g}"
        high = " or inf" if self.allow_inf else ""
        kind = "a whole number" if self.whole else "a number"
        top = "31536000 (a year)" if self.maximum == YEAR else f"{self.maximum:g}"
        return f"{kind} {low} and <= {top}{high}"

    def is_number(self, value: Any) -> bool:
        """A real number (not a bool, not NaN), whole when ``whole``."""
        if not is_number(value) or (self.whole and not isinstance(value, int)):
            return False
        return isinstance(value, int) or not math.isnan(value)

    def contains(self, value: Any) -> bool:
        """``value`` (a real number) lies in range. An int too large for a float is out:
        the code that reads the setting would overflow converting it."""
        try:
            number = float(value)
        except OverflowError:
            return False
        if math.isinf(number) and number > 0 and self.allow_inf:
            return True
        low_ok = number > self.minimum if self.above else number >= self.minimum
        return low_ok and number <= self.maximum
