"""Reading stocks for the admin and operators: the names of the stocks, and a stock's
pending reservations that expire soonest. Plain reads (the listing of every shard in one
pipeline), no script, no KEYS/SCAN."""

from __future__ import annotations

import heapq
from itertools import islice
from typing import Any

from ..redis.clients import call, get_redis
from .arguments import epoch
from .keys import names_keys, parse_record
from .stock import Reservation, Stock

# How many due entries ``expiring`` reads per reservation asked for: finished ones (kept for
# ``remember``) may come between pending ones when ``remember`` is shorter than their TTLs.
LOOK_AHEAD = 10


def stock_names(
    prefix: str = "", offset: int = 0, limit: int = 100, using: str | None = None
) -> list[str]:
    """The names of the stocks set so far (by ``set`` or ``add``, not deleted since), in
    order, those starting with ``prefix`` only."""
    start, end = _bounds(prefix)
    # Each shard's first offset + limit names, merged: one pipelined read per shard.
    pipe = get_redis(using).pipeline(transaction=False)
    for key in names_keys():
        pipe.execute_command("ZRANGEBYLEX", key, start, end, "LIMIT", 0, offset + limit)
    shards = [[_text(n) for n in found] for found in pipe.execute()]
    return list(islice(heapq.merge(*shards), offset, offset + limit))


def count_stocks(prefix: str = "", using: str | None = None) -> int:
    """How many stock names ``stock_names`` has (those starting with ``prefix``)."""
    start, end = _bounds(prefix)
    pipe = get_redis(using).pipeline(transaction=False)
    for key in names_keys():
        pipe.execute_command("ZLEXCOUNT", key, start, end)
    return sum(int(n) for n in pipe.execute())


def _text(name: Any) -> str:
    # A name planted in the listing that is no UTF-8 reads with U+FFFD (shown as such).
    return name.decode(errors="replace") if isinstance(name, bytes) else str(name)


def _bounds(prefix: str) -> tuple[str, str]:
    return (f"[{prefix}", f"[{prefix}\xff") if prefix else ("-", "+")


def expiring(stock: Stock, count: int = 10) -> list[Reservation]:
    """Up to ``count`` pending reservations of ``stock``, soonest expiry first (those past
    their expiry but not yet given back included: the next call on the stock does that)."""
    client = get_redis(stock.using)
    ids = call(
        client, "ZRANGEBYSCORE", stock.keys.due, "-inf", "+inf", "LIMIT", 0, count * LOOK_AHEAD
    )
    if not ids:
        return []
    found = []
    for raw_id, value in zip(ids, call(client, "HMGET", stock.keys.records, *ids), strict=True):
        record = parse_record(value)
        if record is not None and record.state == "p":
            reservation_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            found.append(
                Reservation(
                    stock.name,
                    reservation_id,
                    record.quantity,
                    record.fence,
                    epoch(record.expires_ms),
                )
            )
    return found[:count]
