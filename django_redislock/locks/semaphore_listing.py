"""The semaphores in use, for the admin: those whose latest permit has not expired, from each
lock shard's ``sems`` index (never KEYS or SCAN), the soonest to be free first, with their
holders and waiters read by ``Semaphore.state``."""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

from ..redis.clients import call, get_redis
from .keys import shard_base, shard_count, text
from .semaphore import Semaphore
from .semaphore_keys import semaphore_keys


@dataclass(frozen=True)
class SemaphoreInfo:
    name: str
    held: int
    limit: int | None  # as its latest holder acquired it
    waiters: int
    expires_in: float | None  # seconds until its soonest permit expires


def list_semaphores(
    offset: int = 0, limit: int = 50, using: str | None = None
) -> tuple[list[SemaphoreInfo], int]:
    """A page of the semaphores with a live permit (by their latest permit's expiry), and
    how many there are. Each shard's index is read up to the page's end only."""
    client = get_redis(using)
    now_ms = time.time() * 1000
    indexes = [semaphore_keys(shard_base(s), "").listing for s in range(shard_count(client))]
    total = sum(int(call(client, "ZCOUNT", index, now_ms, "+inf")) for index in indexes)
    found = []
    for index in indexes:  # each shard's first ones: its page is among them
        flat = call(client, "ZRANGEBYSCORE", index, now_ms, "+inf", "WITHSCORES", "LIMIT", 0,
                    offset + limit)  # fmt: skip
        nested = flat and isinstance(flat[0], (list, tuple))  # RESP3 nests the pairs
        pairs = flat if nested else zip(flat[::2], flat[1::2], strict=True)
        found.append([(float(score), text(name)) for name, score in pairs])
    names = [name for _, name in heapq.merge(*found)][offset : offset + limit]
    page = []
    for name in names:
        state = Semaphore(name, limit=1, using=using).state()
        soonest = min((p.expires_ms for p in state.permits), default=None)
        expires_in = None if soonest is None else soonest / 1000 - time.time()
        page.append(SemaphoreInfo(name, state.held, state.limit, state.waiters, expires_in))
    return page, total
