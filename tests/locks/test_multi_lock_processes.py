"""MultiLock across real OS processes on a real redis-server and a real Cluster: eight
processes (half of them asyncio) take overlapping random sets of six names, over and over,
and record when they held each name. No two holds of one name overlap, and every process
finishes: no deadlock. On Cluster the six names mix one shard (the one-script path) and
several (the ordered path)."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import defaultdict
from typing import Any

import pytest

from django_redislock.conf import conf
from django_redislock.locks.async_multi_lock import AsyncMultiLock
from django_redislock.locks.keys import lock_base
from django_redislock.locks.multi_lock import MultiLock

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

PROCESSES, ROUNDS = 8, 60
Interval = tuple[str, float, float]


def six_names() -> list[str]:
    """Three names sharing a shard (on Cluster) and three on other shards."""
    by_shard: dict[str, list[str]] = defaultdict(list)
    for i in range(10_000):
        by_shard[lock_base(f"acc:{i}", conf.LOCK_SHARDS)].append(f"acc:{i}")
    shared = next(group for group in by_shard.values() if len(group) >= 3)[:3]
    others = [group[0] for group in by_shard.values() if group[0] not in shared][:3]
    names = shared + others
    return names if len(set(names)) == 6 else [f"acc:{i}" for i in range(6)]


def sets(seed: int, names: list[str]) -> list[list[str]]:
    rng = random.Random(seed)
    return [rng.sample(names, rng.randint(2, 4)) for _ in range(ROUNDS)]


def hold_sync(seed: int, names: list[str], guarded: bool, out: Any) -> None:
    intervals: list[Interval] = []
    for chosen in sets(seed, names):
        lock = MultiLock(chosen, ttl=10, timeout=60, fair=seed % 4 == 0)
        if guarded and not lock.acquire():
            out.put(("timed out", seed, chosen))
            return
        start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process
        time.sleep(0.001)
        end = time.monotonic()
        if guarded:
            lock.release()
        intervals += [(name, start, end) for name in chosen]
    out.put(("done", seed, intervals))


def hold_async(seed: int, names: list[str], guarded: bool, out: Any) -> None:
    async def main() -> None:
        intervals: list[Interval] = []
        for chosen in sets(seed, names):
            lock = AsyncMultiLock(chosen, ttl=10, timeout=60, fair=seed % 4 == 1)
            if guarded and not await lock.acquire():
                out.put(("timed out", seed, chosen))
                return
            start = time.monotonic()
            await asyncio.sleep(0.001)
            end = time.monotonic()
            if guarded:
                await lock.release()
            intervals += [(name, start, end) for name in chosen]
        out.put(("done", seed, intervals))

    asyncio.run(main())


def run_all(processes: Any, guarded: bool, count: int) -> list[Interval]:
    names = six_names()
    out = processes.queue()
    for seed in range(count):
        processes.start(hold_sync if seed % 2 else hold_async, seed, names, guarded, out)
    intervals: list[Interval] = []
    for _ in range(count):
        outcome, seed, found = out.get(timeout=180)  # a deadlock shows as a timeout here
        assert outcome == "done", f"process {seed} timed out on {found}"
        intervals += found
    processes.join_all(30)
    return intervals


def overlaps(intervals: list[Interval]) -> list[tuple[Interval, Interval]]:
    by_name: dict[str, list[Interval]] = defaultdict(list)
    for interval in intervals:
        by_name[interval[0]].append(interval)
    found = []
    for held in by_name.values():
        held.sort(key=lambda interval: interval[1])
        found += [(a, b) for a, b in itertools.pairwise(held) if b[1] < a[2]]
    return found


def test_overlapping_sets_from_eight_processes_never_overlap_or_deadlock(real_backend, processes):
    intervals = run_all(processes, True, PROCESSES)
    assert len(intervals) >= PROCESSES * ROUNDS * 2
    assert overlaps(intervals) == []


def test_control_without_the_lock_the_holds_overlap(real_backend, processes):
    # Proves the check above can fail: the same work unguarded overlaps.
    assert overlaps(run_all(processes, False, 4)) != []
