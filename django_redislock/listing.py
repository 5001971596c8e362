"""Active locks for the admin: read from each shard's index, never from KEYS or SCAN, so the
cost follows the number of locks shown, not the size of the keyspace."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple

from .connection import UNAVAILABLE, get_redis
from .exceptions import RedisUnavailable
from .keys import lock_base, lock_keys, shard_base, shard_count, validate_name

# Index entries whose expiry passed this long ago are deleted. The margin keeps an entry
# whose writer's clock ran a little behind until its lock has surely expired.
STALE_MARGIN_MS = 60_000
SCAN_COUNT = 5000
# Past this offset, a page merged from several shards (Redis Cluster) starts at the expiry
# found by counting, instead of reading every shard from its first entry.
DEEP_OFFSET = 500


@dataclass(frozen=True)
class LockInfo:
    name: str
    host: str
    pid: int
    acquired_at: datetime
    ttl: float
    fence: int | None
    waiters: int

    @property
    def held_for(self) -> float:
        return max(0.0, time.time() - self.acquired_at.timestamp())


class LockPage(NamedTuple):
    locks: list[LockInfo]
    total: int


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def list_locks(
    prefix: str = "", *, offset: int = 0, limit: int = 50, using: str | None = None
) -> LockPage:
    """Held locks whose name starts with ``prefix``, soonest to expire first."""
    if offset < 0 or limit < 1:
        raise ValueError("offset must be >= 0 and limit >= 1.")
    try:
        return _list(get_redis(using), prefix, offset, limit)
    except UNAVAILABLE as exc:
        raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc


def describe_lock(name: str, *, using: str | None = None) -> LockInfo | None:
    """Lock ``name`` as ``list_locks`` shows it, or None when it is not held."""
    validate_name(name)
    try:
        client = get_redis(using)
        found = _describe(client, [(0.0, name, lock_base(name, shard_count(client)))])
    except UNAVAILABLE as exc:
        raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
    return found[0] if found else None


def _list(client: Any, prefix: str, offset: int, limit: int) -> LockPage:
    bases = [shard_base(s) for s in range(shard_count(client))]
    now = int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    for base in bases:
        pipe.zremrangebyscore(f"{base}index", "-inf", f"({now - STALE_MARGIN_MS}")
        pipe.zcount(f"{base}index", now, "+inf")
    total = sum(pipe.execute()[1::2])
    candidates: list[tuple[float, str, str]] = []
    skip = offset
    if prefix:
        match = _glob_escape(prefix) + "*"
        for base in bases:
            for name, score in client.zscan_iter(f"{base}index", match=match, count=SCAN_COUNT):
                if score >= now:
                    candidates.append((score, _text(name), base))
        total = len(candidates)
    elif offset < total:
        candidates, skip = _around(client, bases, now, offset, limit)
    candidates.sort()
    return LockPage(_describe(client, candidates[skip : skip + limit]), total)


def _around(
    client: Any, bases: list[str], now: int, offset: int, limit: int
) -> tuple[list[tuple[float, str, str]], int]:
    """Index entries holding entries offset .. offset + limit of all shards merged by expiry,
    and how many of them come before the page."""
    start, skip = now, offset
    if len(bases) == 1:
        first, count, skip = offset, limit, 0
    else:  # the merge needs each shard's entries from ``start`` on, up to skip + limit
        if offset > DEEP_OFFSET:
            start, skip = _seek(client, bases, now, offset)
        first, count = 0, skip + limit
    pipe = client.pipeline(transaction=False)
    for base in bases:
        pipe.zrangebyscore(f"{base}index", start, "+inf", first, count, withscores=True)
    candidates = [
        (score, _text(name), base)
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
            pipe.zcount(f"{base}index", now, f"({ms}")
        return int(sum(pipe.execute()))

    pipe = client.pipeline(transaction=False)
    for base in bases:
        pipe.zrange(f"{base}index", -1, -1, withscores=True)
    lo, hi, below = now, max([int(e[0][1]) for e in pipe.execute() if e], default=now) + 1, 0
    while hi - lo > 1:  # before(lo) <= offset < before(hi)
        mid = (lo + hi) // 2
        count = before(mid)
        if count <= offset:
            lo, below = mid, count
        else:
            hi = mid
    return lo, offset - below


def _describe(client: Any, page: list[tuple[float, str, str]]) -> list[LockInfo]:
    pipe = client.pipeline(transaction=False)
    for _, name, base in page:
        lock, waiters, _, _ = lock_keys(base, name)
        pipe.get(lock)
        pipe.pttl(lock)
        pipe.zcard(waiters)
    replies = pipe.execute()
    infos = []
    for i, (_, name, _) in enumerate(page):
        value, pttl, waiters = replies[3 * i : 3 * i + 3]
        if value is None:
            continue  # expired between the two reads
        _token, acquired_ms, fence, pid, host = _text(value).split("|", 4)
        infos.append(
            LockInfo(
                name=name,
                host=host,
                pid=int(pid),
                acquired_at=datetime.fromtimestamp(int(acquired_ms) / 1000, tz=timezone.utc),
                ttl=max(pttl, 0) / 1000,
                fence=int(fence) or None,
                waiters=int(waiters),
            )
        )
    return infos
