"""The scalars of what Redis replies to the queue's commands and scripts, read as Python
values: ``text`` (bytes or str), ``number`` (an integer, its digits, or absent)."""

from __future__ import annotations

from typing import Any

_DIGITS = (bytes, str)
_EXACT = 2**53  # integers a float holds exactly


def text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def number(value: Any, default: int = 0) -> int:
    """A number field as read from Redis; ``default`` when absent or not a number."""
    if type(value) is int and -_EXACT < value < _EXACT:  # a script's integer reply
        return value  # (exact through a float too)
    if type(value) in _DIGITS and 0 < len(value) <= 15:  # the usual: an integer's digits
        try:  # (up to 15 characters, int() and int(float()) agree: no rounding)
            return int(value)
        except ValueError:
            pass
    try:
        return int(float(text(value))) if value not in (None, b"", "") else default
    except (TypeError, ValueError, OverflowError):
        return default
