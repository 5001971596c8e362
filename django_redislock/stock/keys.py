"""The key layout of one stock: the only place its Redis keys are named.

Every key of a stock shares the hash tag ``{S:<name>}``, so every script runs on Redis
Cluster and stocks spread over its masters (``base`` = ``<prefix>:{S:<name>}:``):

    base state    hash  the counters: available, reserved, confirmed, total (everything set
                        and added), fence (the last fence handed out)
    base records  hash  reservation id -> "<state>|<quantity>|<fence>|<expires ms>", state
                        p (pending), c (confirmed), r (released) or x (expired)
    base due      zset  reservation id -> when the scripts must next look at it (epoch ms,
                        server clock): a pending one's expiry (its units then go back), a
                        finished one's end of remembrance (its record is then dropped)

The scripts only ever touch these three keys, and no other code builds them. Apart, and
shared by every stock: ``<prefix>:{S}:names`` (zset), the names of the stocks set so far.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..conf import conf
from ..locks.keys import text, validate_name


def validate_stock_name(name: Any) -> str:
    """A stock's name follows the rules of a lock's name (``locks.keys.validate_name``)."""
    return validate_name(name, "Stock")


class StockKeys(NamedTuple):
    """The keys of one stock, in the order every stock script takes them."""

    state: str
    records: str
    due: str


def stock_keys(name: str) -> StockKeys:
    base = f"{conf.KEY_PREFIX}:{{S:{name}}}:"
    return StockKeys(f"{base}state", f"{base}records", f"{base}due")


def names_key() -> str:
    """The zset of every stock's name (score 0: ordered by name), for listing stocks without
    KEYS/SCAN. Not under a stock's hash tag: written by a plain command after ``set``/``add``,
    never by a script."""
    return f"{conf.KEY_PREFIX}:{{S}}:names"


class Record(NamedTuple):
    """A reservation's record, ``<state>|<quantity>|<fence>|<expires ms>`` (written by the
    scripts)."""

    state: str
    quantity: int
    fence: int
    expires_ms: int


def parse_record(value: Any) -> Record | None:
    """The record ``value`` (bytes or str), or None when it is missing or not ours."""
    if value is None:
        return None
    try:
        state, quantity, fence, expires = text(value).split("|")
        return Record(state, int(quantity), int(fence), int(expires))
    except ValueError:
        return None
