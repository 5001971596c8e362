"""The key layout of one stock: the only place its Redis keys are named.

Stocks are spread over ``SHARDS`` hash tags, ``{S<shard>}`` (shard = CRC-32 of the name
modulo ``SHARDS``). Every key of a stock and its shard's listing share that tag, so every
script runs on Redis Cluster, and ``set``/``add`` list the stock in the same script
(``base`` = ``<prefix>:{S<shard>}:``):

    base s:<name>  hash  the counters: available, reserved, confirmed, total (everything
                         set and added), fence (the last fence handed out)
    base r:<name>  hash  reservation id -> "<state>|<quantity>|<fence>|<expires ms>", state
                         p (pending), c (confirmed), r (released) or x (expired)
    base d:<name>  zset  reservation id -> when the scripts must next look at it (epoch ms,
                         server clock): a pending one's expiry (its units then go back), a
                         finished one's end of remembrance (its record is then dropped)
    base a:<name>  zset  request id of an ``add`` applied -> when it is forgotten (epoch
                         ms): a resent ``add`` is applied once; the key expires with its
                         last entry
    base names     zset  the names of the shard's stocks (score 0: ordered by name), set
                         or added and not deleted since: the listing, read without KEYS/SCAN

The scripts only ever touch these keys, and no other code builds them.
"""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

from ..conf import conf
from ..locks.keys import text
from ..names import validate_name


def validate_stock_name(name: Any) -> str:
    """A stock's name follows the rules of a lock's name (``names.validate_name``)."""
    return validate_name(name, "Stock")


# A constant, not a setting: a stock's counters live until it is deleted, and another count
# would move every stock to keys nobody reads (locks can be resharded: theirs expire).
SHARDS = 16


class StockKeys(NamedTuple):
    """The keys of one stock: every script takes ``state, records, due`` (``counters``),
    the script of ``set``/``add`` and that of ``delete`` all five."""

    state: str
    records: str
    due: str
    adds: str
    names: str

    @property
    def counters(self) -> tuple[str, str, str]:
        return self.state, self.records, self.due


def shard_base(shard: int) -> str:
    return f"{conf.KEY_PREFIX}:{{S{shard}}}:"


def stock_keys(name: str) -> StockKeys:
    base = shard_base(zlib.crc32(name.encode()) % SHARDS)
    return StockKeys(
        f"{base}s:{name}", f"{base}r:{name}", f"{base}d:{name}", f"{base}a:{name}", f"{base}names"
    )


def names_keys() -> list[str]:
    """Every shard's listing (zsets of stock names), for ``listing``."""
    return [f"{shard_base(shard)}names" for shard in range(SHARDS)]


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
