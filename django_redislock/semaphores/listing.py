"""The semaphores in use, for the admin: those with a live permit, from each lock shard's
``sems`` index (never KEYS or SCAN), the soonest to be free first, with their holders and
waiters. Each listing first drops the entries of idle semaphores (``SWEEP``), so the count is
of semaphores in use.

A name in the index is whatever was written there: one that ``Semaphore`` would refuse (a
brace, a control character, far too long: planted by something else) is listed with what it
holds, shown escaped and flagged, never an error for the page."""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from ..locks.keys import shard_base, shard_count, text
from ..names import validate_name
from ..redis.clients import call, get_redis, run_script
from .base import parse_state
from .keys import semaphore_keys
from .scripts import STATE, SWEEP

# Index entries one SWEEP call drops at most, and calls per shard and listing: a bigger
# backlog (a crowd of semaphores that lapsed since) is left to the next listings.
SWEEP_BATCH = 5000
SWEEP_CALLS = 20
# How much of a name the page shows.
SHOWN_LENGTH = 200


@dataclass(frozen=True)
class SemaphoreInfo:
    name: str
    held: int
    limit: int | None  # as its latest holder acquired it
    waiters: int
    expires_in: float | None  # seconds until its soonest permit expires
    problem: str = ""  # why this row is not a usable semaphore ("" when it is)

    @property
    def label(self) -> str:
        """The name as the page shows it: control, format and space characters escaped,
        cut to ``SHOWN_LENGTH``."""
        shown = "".join(
            c if c.isprintable() and not c.isspace() else f"\\u{ord(c):04x}"
            for c in self.name[:SHOWN_LENGTH]
        )
        return shown + "…" if len(self.name) > SHOWN_LENGTH else shown


def list_semaphores(
    offset: int = 0, limit: int = 50, using: str | None = None
) -> tuple[list[SemaphoreInfo], int]:
    """A page of the semaphores with a live permit (by their latest permit's expiry), and
    how many there are. An ``offset`` past them gives an empty page without reading them."""
    if offset < 0 or limit < 1:
        raise ValueError("offset must be >= 0 and limit >= 1.")
    client = get_redis(using)
    indexes = [semaphore_keys(shard_base(s), "").listing for s in range(shard_count(client))]
    for index in indexes:
        for _ in range(SWEEP_CALLS):
            if int(run_script(client, SWEEP, (index,), (SWEEP_BATCH,))) < SWEEP_BATCH:
                break
    total = sum(int(call(client, "ZCARD", index)) for index in indexes)
    if offset >= total:
        return [], total
    end = min(offset + limit, total)
    if len(indexes) == 1:  # by rank: O(log n + page) at any offset
        page = [(text(name), 0) for name in call(client, "ZRANGE", indexes[0], offset, end - 1)]
    else:  # each shard's first ones: the page is among them
        found = [
            [
                (float(score), shard, text(name))
                for name, score in _pairs(call(client, "ZRANGE", index, 0, end - 1, "WITHSCORES"))
            ]
            for shard, index in enumerate(indexes)
        ]
        page = [(name, shard) for _, shard, name in heapq.merge(*found)][offset:end]
    return [_describe(client, name, shard) for name, shard in page], total


def _pairs(flat: Any) -> Any:
    if flat and isinstance(flat[0], (list, tuple)):  # RESP3 nests the pairs
        return flat
    return zip(flat[::2], flat[1::2], strict=True)


def _describe(client: Any, name: str, shard: int) -> SemaphoreInfo:
    problem = ""
    try:
        validate_name(name, "Semaphore")
    except ValueError as exc:
        problem = str(exc)
        if len(problem) > SHOWN_LENGTH:  # the message repeats the name
            problem = problem[:SHOWN_LENGTH] + "…"
    keys = semaphore_keys(shard_base(shard), name)
    try:
        state = parse_state(run_script(client, STATE, keys.reading, ("", "1")))
    except ResponseError as exc:  # a key of another type under its name
        return SemaphoreInfo(name, 0, None, 0, None, problem or f"unreadable: {exc}")
    soonest = min((p.expires_ms for p in state.permits), default=None)
    expires_in = None if soonest is None else soonest / 1000 - time.time()
    return SemaphoreInfo(name, state.held, state.limit, state.waiters, expires_in, problem)
