"""Prefix search over held locks: each shard's name index (a sorted set read by lex range)
counted and merged by name, so a page costs O(log n + page) at any offset."""

from __future__ import annotations

from typing import Any, NamedTuple

from .keys import index_keys, text

# Past this offset, a page merged from several shards (Redis Cluster) starts where counting
# finds it, instead of reading every shard from its first entry.
DEEP_OFFSET = 500


class Matches(NamedTuple):
    """One shard's matches: ranks ``first`` .. ``first + size - 1`` of its name index."""

    base: str
    first: int
    size: int


def by_name(
    client: Any, bases: list[str], prefix: str, offset: int, limit: int
) -> tuple[list[tuple[str, str, str]], int]:
    """Matches ``offset .. offset + limit`` of ``prefix`` over all shards merged by name, as
    (name, name, shard base), and how many matches there are."""
    # Names are UTF-8, which never holds the byte 0xff: every name starting with ``prefix``
    # sorts in [prefix, prefix + 0xff), and no other name does.
    raw = prefix.encode()
    low, high = b"[" + raw, b"(" + raw + b"\xff"
    pipe = client.pipeline(transaction=False)
    for base in bases:
        names = index_keys(base).names
        pipe.zlexcount(names, "-", b"(" + raw)
        pipe.zlexcount(names, low, high)
    counts = pipe.execute()
    shards = [Matches(b, int(counts[2 * i]), int(counts[2 * i + 1])) for i, b in enumerate(bases)]
    total = sum(s.size for s in shards)
    if offset >= total:
        return [], total
    if len(shards) == 1:
        starts, skip = [offset], 0
    elif offset > DEEP_OFFSET:
        starts, skip = _seek(client, shards, low, offset)
    else:
        starts, skip = [0] * len(shards), offset
    read = [(s, start) for s, start in zip(shards, starts, strict=True) if start < s.size]
    pipe = client.pipeline(transaction=False)
    for shard, start in read:  # (ZRANGE's end must not go below its start: -1 means the last)
        pipe.zrange(
            index_keys(shard.base).names,
            shard.first + start,
            shard.first + min(shard.size, start + skip + limit) - 1,
        )
    merged = sorted(
        (text(name), shard.base)
        for (shard, _), names in zip(read, pipe.execute(), strict=True)
        for name in names
    )
    return [(name, name, base) for name, base in merged[skip : skip + limit]], total


def _seek(client: Any, shards: list[Matches], low: bytes, offset: int) -> tuple[list[int], int]:
    """How many of each shard's matches come before match ``offset`` of all shards merged by
    name (at least: to within DEEP_OFFSET in all), and how many more do.

    Keeps, per shard, a window of ranks where match ``offset`` may be; takes the middle of
    the widest as a pivot and counts on every shard the matches up to it (pipelined
    ZLEXCOUNTs): all of them come before match ``offset``, or none after the pivot does."""
    lo, hi = [0] * len(shards), [s.size for s in shards]
    while offset - sum(lo) > DEEP_OFFSET:
        j = max(range(len(shards)), key=lambda i: hi[i] - lo[i])
        if hi[j] <= lo[j]:
            break  # only when the index changed meanwhile
        mid = (lo[j] + hi[j]) // 2
        found = client.zrange(
            index_keys(shards[j].base).names, shards[j].first + mid, shards[j].first + mid
        )
        if not found:
            break  # the index shrank meanwhile
        pivot = found[0] if isinstance(found[0], bytes) else found[0].encode()
        pipe = client.pipeline(transaction=False)
        for shard in shards:
            pipe.zlexcount(index_keys(shard.base).names, low, b"[" + pivot)
        upto = [min(int(c), s.size) for c, s in zip(pipe.execute(), shards, strict=True)]
        before = sum(upto) - 1  # matches before the pivot, in all shards
        if before < offset:
            lo = [max(a, b) for a, b in zip(lo, upto, strict=True)]
            lo[j] = max(lo[j], mid + 1)
        elif before == offset:  # the pivot is match ``offset``
            lo = [max(a, b) for a, b in zip(lo, upto, strict=True)]
            lo[j] = mid
            break
        else:
            hi = [min(a, b) for a, b in zip(hi, upto, strict=True)]
            hi[j] = min(hi[j], mid)
    return lo, offset - sum(lo)
