"""A workload that runs every MultiLock script (``locks.multi_scripts``) on the configured
real Redis, for the check that each keeps to its KEYS (run under MONITOR): the one-script
acquire (plain, fenced, fair with a live waiter in the way, over a key of another type) and
release, a contended hand-off from a MultiLock's release to a waiting Lock, and a MultiLock
that waits for a name (the ordered path) and is handed it."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.test import override_settings

from django_redislock import Lock, get_redis
from django_redislock.conf import conf
from django_redislock.locks.async_multi_lock import AsyncMultiLock
from django_redislock.locks.keys import lock_base
from django_redislock.locks.multi_lock import MultiLock


def names_on_one_shard(prefix: str, count: int) -> list[str]:
    """``count`` names on one shard (on Cluster; every name shares one elsewhere)."""
    found: dict[str, list[str]] = {}
    for i in range(10_000):
        group = found.setdefault(lock_base(f"{prefix}{i}", conf.LOCK_SHARDS), [])
        group.append(f"{prefix}{i}")
        if len(group) == count:
            return group
    raise AssertionError("no shard holds that many names")


def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def queued(name: str) -> int:
    return int(get_redis().zcard(Lock(name).keys[1]))


def exercise() -> None:
    first, middle, last = names_on_one_shard("mlw:", 3)
    with MultiLock([first, middle, last], ttl=5, fencing=True) as multi:
        assert multi.fences is not None

    # A contended hand-off: the release gives ``last`` to the Lock waiting for it.
    multi = MultiLock([first, middle, last], ttl=5)
    assert multi.acquire(0)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(Lock(last, ttl=5).acquire(10)))
    waiter.start()
    until(lambda: queued(last) == 1)
    multi.release()
    waiter.join(10)
    assert got == [True]
    Lock.force_release(last)

    # A MultiLock waiting for a busy name: the one-script try finds it busy, then the names
    # are taken in order, the busy one handed over by its holder's release.
    holder = Lock(middle, ttl=5)
    holder.acquire()
    taken: list[bool] = []
    waiting = MultiLock([first, middle], ttl=5)

    def wait_and_release() -> None:
        taken.append(waiting.acquire(10))
        waiting.release()

    thread = threading.Thread(target=wait_and_release)
    thread.start()
    until(lambda: queued(middle) == 1)
    holder.release()
    thread.join(10)
    assert taken == [True]

    # Fair: a live waiter queued on a free name keeps the one-script acquire out (the waiter
    # asleep for seconds: no fallback re-check comes sooner).
    with override_settings(REDISLOCK={**settings.REDISLOCK, "LOCK_RETRY_DELAY": 5.0}):
        fair_holder = Lock(first, ttl=30, fair=True, timeout=0)
        fair_holder.acquire()
        fair_waiter = threading.Thread(target=lambda: Lock(first, ttl=5, fair=True).acquire(2))
        fair_waiter.start()
        until(lambda: queued(first) == 1)
        get_redis().delete(fair_holder.keys[0])  # ended unreleased: free, its waiter asleep
        assert not MultiLock([first, middle], ttl=5, fair=True).acquire(0)
        fair_waiter.join(10)
    Lock.force_release(first)

    # A key of another type in a lock's place is set aside.
    get_redis().hset(Lock(middle).keys[0], "not", "a lock")
    with MultiLock([first, middle], ttl=5, timeout=0):
        pass

    async def twin() -> None:
        async with AsyncMultiLock([first, middle, last], ttl=5, timeout=math.inf):
            pass

    asyncio.run(twin())
