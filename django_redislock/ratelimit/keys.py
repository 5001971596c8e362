"""The Redis key of a rate limiter, and its validation. Nothing else builds it.

One string per limiter: ``<prefix>:{R:<name>}:<count>/<period us>:<burst>``. The hash tag is
the name, so every limiter of one name (a per-second and a per-day limit stacked on one
view, say) lives on one Cluster slot; the rate and burst are in the key, so two limits on
one name never share a state, and changing a limit starts it afresh.

Layout of the string (decimal digits, fixed widths; ``scripts.HIT`` reads and writes it):

    [0, 16)    the GCRA's theoretical arrival time, whole microseconds (only when burst <
               count: spaces the hits out)
    [16, 24)   its fraction, in 1/count of a microsecond (keeps the arithmetic exact)
    [24, 32)   the ring's next slot: the oldest of the last ``count`` passes
    [32, ...)  the ring: ``count`` slots of 16 digits, each the server time (microseconds)
               of one pass; a slot never written reads as 0
"""

from __future__ import annotations

from typing import Any

from ..conf import conf
from ..names import validate_name
from .rate import Rate


def validate_key(name: Any) -> str:
    """The same rules as a lock name (non-empty, at most 200 characters, no braces, no
    whitespace or control characters), named for what it is here."""
    try:
        return validate_name(name)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("Lock name", "Rate limit key", 1)) from None


def limiter_key(name: str, rate: Rate, burst: int) -> str:
    return f"{conf.KEY_PREFIX}:{{R:{name}}}:{rate.count}/{rate.period_us}:{burst}"
