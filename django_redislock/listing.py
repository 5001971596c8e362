"""Active locks for the admin: read from each shard's index, never from KEYS or SCAN, so the
cost follows the number of locks shown, not the size of the keyspace."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple

from .connection import UNAVAILABLE, get_redis
from .exceptions import RedisUnavailable
from .keys import lock_keys, shard_base, shard_count

# Index entries whose expiry passed this long ago are deleted. The margin keeps an entry
# whose writer's clock ran a little behind until its lock has surely expired.
STALE_MARGIN_MS = 60_000
SCAN_COUNT = 5000


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


def _list(client: Any, prefix: str, offset: int, limit: int) -> LockPage:
    bases = [shard_base(s) for s in range(shard_count(client))]
    now = int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    for base in bases:
        pipe.zremrangebyscore(f"{base}index", "-inf", f"({now - STALE_MARGIN_MS}")
        if not prefix:
            pipe.zcount(f"{base}index", now, "+inf")
            pipe.zrangebyscore(f"{base}index", now, "+inf", 0, offset + limit, withscores=True)
    replies = pipe.execute()
    candidates: list[tuple[float, str, str]] = []
    if prefix:
        match = _glob_escape(prefix) + "*"
        for base in bases:
            for name, score in client.zscan_iter(f"{base}index", match=match, count=SCAN_COUNT):
                if score >= now:
                    candidates.append((score, _text(name), base))
        total = len(candidates)
    else:
        total = sum(replies[1::3])
        for base, entries in zip(bases, replies[2::3], strict=True):
            candidates.extend((score, _text(name), base) for name, score in entries)
    candidates.sort()
    page = candidates[offset : offset + limit]
    return LockPage(_describe(client, page), total)


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
