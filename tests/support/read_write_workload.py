"""A workload that runs every read-write lock script through the public API on a real
server, contended cases included: ``exercise()`` (run under Redis MONITOR by the check that
every key a script touches is in its KEYS)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from django_redislock import get_redis
from django_redislock.locks.async_read_write import AsyncReadWriteLock
from django_redislock.locks.listing import list_locks
from django_redislock.locks.read_write import ReadWriteLock


def until(predicate: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def contend(name: str, first: str, then: str, **options: Any) -> None:
    """A holder of side ``first``, a waiter for side ``then`` queued behind it (another
    thread), then the release lets the waiter in (handed over and woken)."""
    holder = ReadWriteLock(name, ttl=5, **options)
    assert getattr(holder, first)().acquire(0)
    got: list[bool] = []

    def wait() -> None:
        side = getattr(ReadWriteLock(name, ttl=5, **options), then)()
        got.append(side.acquire(10))
        if got[-1]:
            side.release()

    waiter = threading.Thread(target=wait)
    waiter.start()
    until(lambda: holder.state().waiters == 1)
    getattr(holder, first)().release()
    waiter.join(15)
    assert got == [True]


def exercise() -> None:
    rw = ReadWriteLock("m-rw", ttl=5, fencing=True)
    with rw.read():
        rw.read().extend(10)
        assert rw.readers() == 1
        assert rw.read().owned()
    with rw.write():
        rw.write().extend(10)
        assert rw.write().ttl()
    for options in ({}, {"fair": True}, {"fencing": True, "fair": True}):
        contend("m-rw-contended", "write", "read", **options)
        contend("m-rw-contended", "read", "write", **options)
        contend("m-rw-contended", "write", "write", **options)
    # A waiter that gives up (its leaving lets the readers behind it in, with fair).
    holder = ReadWriteLock("m-rw-busy", ttl=5, fair=True)
    assert holder.read().acquire(0)
    assert not threading_acquire(ReadWriteLock("m-rw-busy", ttl=5, fair=True).write(), 0.2)
    holder.read().release()
    # A holder that dies: the waiter gets in when its TTL ends (a re-check).
    assert threading_acquire(ReadWriteLock("m-rw-dead", ttl=0.2).write(), 0)
    late = ReadWriteLock("m-rw-dead", ttl=5).read()
    assert late.acquire(5)
    late.release()
    # Force release, with a waiter let in by it.
    assert ReadWriteLock("m-rw-forced", ttl=5).read().acquire(0)
    waiter = threading.Thread(target=ReadWriteLock("m-rw-forced", ttl=5).write().acquire, args=(5,))
    waiter.start()
    until(lambda: ReadWriteLock("m-rw-forced").state().waiters == 1)
    assert ReadWriteLock.force_release("m-rw-forced")
    waiter.join(10)
    assert ReadWriteLock.force_release("m-rw-forced")
    with ReadWriteLock("m-rw-renewed", ttl=1.5, auto_renew=True).write():
        time.sleep(0.6)  # the renewer thread extends it (its own EVAL) every ttl / 3
    # Keys of another type are set aside (or deleted, for the waiters' ones).
    corrupt = ReadWriteLock("m-rw-corrupt", ttl=5)
    get_redis().hset(corrupt.read().layout.writer, "x", "y")
    get_redis().set(corrupt.read().layout.waiters, "x")
    with corrupt.read():
        pass
    assert list_locks("m-rw").total >= 0
    asyncio.run(exercise_async())


def threading_acquire(side: Any, timeout: float) -> bool:
    """``side.acquire(timeout)`` in a thread of its own, which ends without a release."""
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(side.acquire(timeout)))
    thread.start()
    thread.join(15)
    return got == [True]


async def exercise_async() -> None:
    rw = AsyncReadWriteLock("m-async-rw", ttl=5)
    async with rw.write():
        await rw.write().extend(10)
        other = AsyncReadWriteLock("m-async-rw", ttl=5).read()
        assert not await asyncio.create_task(other.acquire(0.2))
    async with rw.read():
        assert await rw.readers() == 1
    assert not await AsyncReadWriteLock.force_release("m-async-rw")
