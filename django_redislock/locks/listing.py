"""Active locks for the admin, read from each shard's indexes (see ``scripts``), never from
KEYS or SCAN: a page costs O(log n + page) whatever the number of locks.

All locks are listed from the expiry index, soonest to expire first; a prefix search reads
the name index (a lex range), in name order. Each listing first sweeps (``SWEEP``): locks
that ended without a release leave the name index, so a prefix's count is exact, except for
a lock indexed as expiring before the last sweep (its host's clock runs behind the admin's),
counted but not shown until its entry goes stale.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple

from ..exceptions import RedisUnavailable
from ..names import validate_name
from ..redis.clients import UNAVAILABLE, get_redis
from .keys import (
    STALE_MARGIN_MS,
    LockValue,
    index_keys,
    lock_base,
    lock_keys,
    parse_value,
    shard_base,
    shard_count,
    text,
)
from .name_search import DEEP_OFFSET, by_name
from .read_write_keys import index_member, name_of_member, read_write_keys
from .scripts import SWEEP

# Entries one SWEEP call handles at most, and calls per listing: a bigger backlog (a crowd
# of locks that ended unreleased since the last listing) is left to the next listings.
SWEEP_BATCH = 5000
SWEEP_CALLS = 20


@dataclass(frozen=True)
class LockInfo:
    """A held lock. For a read-write lock (``readers`` is not None), owner, acquired time
    and fence are its writer's; with readers only, ``pid`` is 0, ``host`` empty and ``ttl``
    the latest reader's."""

    name: str
    host: str
    pid: int
    acquired_at: datetime
    ttl: float
    fence: int | None
    waiters: int
    readers: int | None = None  # a read-write lock's live readers; None for a plain lock

    @property
    def held_for(self) -> float:
        return max(0.0, time.time() - self.acquired_at.timestamp())

    @property
    def read_write(self) -> bool:
        return self.readers is not None

    @property
    def writer(self) -> bool:
        """Whether a writer holds this read-write lock (False for a plain lock)."""
        return self.read_write and bool(self.host)


class LockPage(NamedTuple):
    locks: list[LockInfo]
    total: int


# (sort key, lock name, shard base) of one lock to show
Entry = tuple[Any, str, str]


def list_locks(
    prefix: str = "", *, offset: int = 0, limit: int = 50, using: str | None = None
) -> LockPage:
    """Held locks: all, soonest to expire first; or those whose name starts with ``prefix``,
    in name order. ``total`` counts them all (see the module's doc for when it may not)."""
    if offset < 0 or limit < 1:
        raise ValueError("offset must be >= 0 and limit >= 1.")
    try:
        return _list(get_redis(using), prefix, offset, limit)
    except UNAVAILABLE as exc:
        raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc


def describe_lock(
    name: str, *, read_write: bool = False, using: str | None = None
) -> LockInfo | None:
    """Lock ``name`` (with ``read_write``, the ``ReadWriteLock`` of that name) as
    ``list_locks`` shows it, or None when it is not held."""
    validate_name(name)
    member = index_member(name) if read_write else name
    try:
        client = get_redis(using)
        found = _describe(client, [(0.0, member, lock_base(name, shard_count(client)))])
    except UNAVAILABLE as exc:
        raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
    return found[0] if found else None


def _list(client: Any, prefix: str, offset: int, limit: int) -> LockPage:
    bases = [shard_base(s) for s in range(shard_count(client))]
    now = int(time.time() * 1000)
    live, expired = _sweep(client, bases, now)
    if prefix:
        page, total = by_name(client, bases, prefix, offset, limit)
        return LockPage(_describe(client, page, live_from=now), total)
    candidates: list[Entry] = []
    skip = offset
    if offset < live:
        candidates, skip = _around(client, bases, now, offset, limit, expired)
    candidates.sort()
    return LockPage(_describe(client, candidates[skip : skip + limit]), live)


def _eval(pipe: Any, script: Any, keys: tuple[str, ...], *args: Any) -> None:
    # EVAL, not EVALSHA: a pipeline (on Cluster too) cannot load a missing script and retry.
    pipe.execute_command("EVAL", script.source, len(keys), *keys, *args)


def _sweep(client: Any, bases: list[str], now: int) -> tuple[int, int]:
    """Sweep every shard's indexes. Returns the number of live locks, and of entries expired
    but still indexed (the rank of the first live lock, on one shard)."""
    live: dict[str, tuple[int, int]] = {}
    pending = bases
    for _ in range(SWEEP_CALLS):
        pipe = client.pipeline(transaction=False)
        for base in pending:
            _eval(pipe, SWEEP, index_keys(base), now, now - STALE_MARGIN_MS, SWEEP_BATCH)
        again = []
        for base, (count, state, expired) in zip(pending, pipe.execute(), strict=True):
            live[base] = int(count), int(expired)
            if state == 0:
                again.append(base)
        pending = again
        if not pending:
            break
    return sum(n for n, _ in live.values()), sum(n for _, n in live.values())


def _around(
    client: Any, bases: list[str], now: int, offset: int, limit: int, expired: int
) -> tuple[list[Entry], int]:
    """Index entries holding entries offset .. offset + limit of all shards merged by expiry,
    and how many of them come before the page."""
    pipe = client.pipeline(transaction=False)
    if len(bases) == 1:  # by rank: O(log n), at any offset
        first = expired + offset
        pipe.zrange(index_keys(bases[0]).expiries, first, first + limit - 1, withscores=True)
        skip = 0
    else:  # the merge needs each shard's entries from ``start`` on, up to skip + limit
        start, skip = _seek(client, bases, now, offset) if offset > DEEP_OFFSET else (now, offset)
        for base in bases:
            pipe.zrangebyscore(
                index_keys(base).expiries, start, "+inf", 0, skip + limit, withscores=True
            )
    candidates = [
        (score, text(name), base)
        for base, entries in zip(bases, pipe.execute(), strict=True)
        for name, score in entries
    ]
    return candidates, skip


def _seek(client: Any, bases: list[str], now: int, offset: int) -> tuple[int, int]:
    """The expiry (ms) of entry ``offset`` of the shards merged, found by halving the range of
    expiries on counts (pipelined ZCOUNTs, no entries read), and how many entries expiring
    then come before it."""

    def before(ms: int) -> int:  # entries expiring in [now, ms)
        pipe = client.pipeline(transaction=False)
        for base in bases:
            pipe.zcount(index_keys(base).expiries, now, f"({ms}")
        return int(sum(pipe.execute()))

    pipe = client.pipeline(transaction=False)
    for base in bases:
        pipe.zrange(index_keys(base).expiries, -1, -1, withscores=True)
    lo, hi, below = now, max([int(e[0][1]) for e in pipe.execute() if e], default=now) + 1, 0
    while hi - lo > 1:  # before(lo) <= offset < before(hi)
        mid = (lo + hi) // 2
        count = before(mid)
        if count <= offset:
            lo, below = mid, count
        else:
            hi = mid
    return lo, offset - below


# --- the locks themselves ---------------------------------------------------------------------


def _describe(client: Any, page: list[Entry], live_from: int | None = None) -> list[LockInfo]:
    """The locks of ``page`` still held; with ``live_from`` (ms: the page came from the name
    index), only those whose expiry entry is not older. A read-write lock's entry (see
    ``read_write_keys``) reads its writer, readers and waiters."""
    now = int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    counts = []
    for _, member, base in page:
        rw_name = name_of_member(member)
        if rw_name is None:
            keys = lock_keys(base, member)
            pipe.get(keys.lock)
            pipe.pttl(keys.lock)
            pipe.zcard(keys.waiters)
            expiries = keys.expiries
        else:
            layout = read_write_keys(base, rw_name)
            pipe.get(layout.writer)
            pipe.pttl(layout.writer)
            pipe.zcard(layout.waiters)
            pipe.zcount(layout.readers, f"({now}", "+inf")
            pipe.zrange(layout.readers, -1, -1, withscores=True)
            expiries = layout.expiries
        if live_from is not None:
            pipe.zscore(expiries, member)
        counts.append(3 + (rw_name is not None) * 2 + (live_from is not None))
    replies = pipe.execute(raise_on_error=False)
    infos = []
    at = 0
    for (_, member, _base), count in zip(page, counts, strict=True):
        found = [None if isinstance(r, Exception) else r for r in replies[at : at + count]]
        at += count
        # (a key of the wrong type reads as missing; its TTL ends it)
        if live_from is not None and (found[-1] is None or found[-1] < live_from):
            continue  # ended since it was indexed
        rw_name = name_of_member(member)
        info = _lock(member, found) if rw_name is None else _read_write(rw_name, found, now)
        if info is not None:
            infos.append(info)
    return infos


_UNREADABLE = LockValue("", 0, 0, 0, "(unreadable lock value)")


def _lock(name: str, found: list[Any]) -> LockInfo | None:
    value, pttl, queued = found[:3]
    if value is None:
        return None  # ended since it was indexed
    # A value that is not a lock value of ours is shown, not fatal to the page.
    held = parse_value(value) or _UNREADABLE
    return LockInfo(
        name=name,
        host=held.host,
        pid=held.pid,
        acquired_at=datetime.fromtimestamp(held.acquired_ms / 1000, tz=timezone.utc),
        ttl=max(pttl or 0, 0) / 1000,
        fence=held.fence or None,
        waiters=int(queued or 0),
    )


def _read_write(name: str, found: list[Any], now: int) -> LockInfo | None:
    value, pttl, queued, readers, latest = found[:5]
    readers = int(readers or 0)
    if value is None and not readers:
        return None  # ended since it was indexed
    if value is not None:
        held = parse_value(value) or _UNREADABLE
        ttl = max(pttl or 0, 0) / 1000
    else:  # readers only: no owner, and the latest reader's TTL
        held = LockValue("", now, 0, 0, "")
        ttl = max((float(latest[0][1]) if latest else now) - now, 0) / 1000
    return LockInfo(
        name=name,
        host=held.host,
        pid=held.pid,
        acquired_at=datetime.fromtimestamp(held.acquired_ms / 1000, tz=timezone.utc),
        ttl=ttl,
        fence=held.fence or None,
        waiters=int(queued or 0),
        readers=readers,
    )
