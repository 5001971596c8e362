"""AsyncLock on fakeredis, a real redis-server and a real Cluster (asyncio.run per test)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from django_redislock import AsyncLock, Lock
from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout
from django_redislock.locks import async_lock as module
from django_redislock.locks import waiting
from tests.support.waiting import BEFORE_ANY_RECHECK, SLOW_RETRY_DELAY, Stalls, ttl_set_since

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def until(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


def queued(backend: Any, name: str) -> int:
    return int(backend.client.zcard(Lock(name).keys[1]))


def test_roundtrip(backend):
    async def main() -> None:
        lock = AsyncLock("a:1", ttl=5)
        assert not await lock.locked()
        since = time.monotonic()
        assert await lock.acquire()
        assert await lock.locked()
        assert await lock.owned()
        assert ttl_set_since(await lock.ttl(), 5, since)
        since = time.monotonic()
        await lock.extend(20)
        assert ttl_set_since(await lock.ttl(), 20, since)
        await lock.release()
        assert not await lock.locked()
        assert await lock.ttl() is None
        with pytest.raises(LockNotOwned):
            await lock.release()

    run(main())


def test_tasks_exclude_each_other_and_sync_locks_too(backend):
    async def main() -> None:
        async with AsyncLock("shared", ttl=5):
            other = asyncio.create_task(AsyncLock("shared", ttl=5).acquire(0))
            assert await other is False
            assert not Lock("shared", ttl=5).acquire(0), "the same lock as the sync one"
        assert await AsyncLock("shared", ttl=5).acquire(0)

    run(main())


def test_async_with_raises_lock_timeout(backend):
    async def main() -> None:
        async with AsyncLock("busy", ttl=5):

            async def contender() -> None:
                async with AsyncLock("busy", ttl=5, timeout=0.05):
                    pytest.fail("body must not run")

            with pytest.raises(LockTimeout) as info:
                await asyncio.create_task(contender())
        assert info.value.lock_name == "busy"

    run(main())


def test_waiter_is_woken_by_the_release(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}

    async def main() -> float:
        holder = AsyncLock("push", ttl=30)
        await holder.acquire()
        waiter = asyncio.create_task(AsyncLock("push", ttl=30).acquire(math.inf))

        async def is_queued() -> bool:
            return queued(backend, "push") == 1

        await until(is_queued)
        released = time.monotonic()
        await holder.release()
        assert await waiter
        return time.monotonic() - released

    assert run(main()) < BEFORE_ANY_RECHECK


def test_waiter_wakes_when_the_holders_ttl_runs_out(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}

    async def main() -> float:
        await AsyncLock("crashed", ttl=0.3).acquire()
        start = time.monotonic()
        assert await AsyncLock("crashed", ttl=5).acquire(2 * BEFORE_ANY_RECHECK)
        return time.monotonic() - start

    # At the TTL, not at a re-check (15 s at the earliest) nor at its deadline.
    assert 0.25 <= run(main()) < BEFORE_ANY_RECHECK


def test_reentrant_per_task(backend):
    async def main() -> None:
        async with AsyncLock("re", ttl=5, reentrant=True) as outer:
            async with AsyncLock("re", ttl=5, reentrant=True, timeout=0):
                assert await outer.owned()
            assert await outer.locked()
            other = asyncio.create_task(AsyncLock("re", ttl=5, reentrant=True).acquire(0))
            assert await other is False, "another task is another owner"
        assert not await outer.locked()
        plain = AsyncLock("nre", ttl=5)
        await plain.acquire()
        with pytest.raises(LockError, match="reentrant=True"):
            await plain.acquire()

    run(main())


def test_fair_tasks_in_arrival_order_with_increasing_fences(backend):
    async def main() -> tuple[list[int], list[int]]:
        holder = AsyncLock("fifo", ttl=10, fair=True, fencing=True)
        await holder.acquire()
        order: list[int] = []
        fences = [holder.fence]

        async def wait(i: int) -> None:
            async with AsyncLock("fifo", ttl=10, fair=True, fencing=True, timeout=10) as lock:
                order.append(i)
                fences.append(lock.fence)

        tasks = []
        for i in range(5):
            tasks.append(asyncio.create_task(wait(i)))

            async def n_queued(n: int = i + 1) -> bool:
                return queued(backend, "fifo") == n

            await until(n_queued)
        await holder.release()
        await asyncio.gather(*tasks)
        return order, fences

    order, fences = run(main())
    assert order == list(range(5))
    assert fences == sorted(set(fences))
    assert len(fences) == 6


def test_auto_renew_keeps_an_async_lock(backend):
    async def kept() -> bool:
        # Three TTLs: renewed twice at least.
        lock = AsyncLock("renew", ttl=0.3, auto_renew=True)
        await lock.acquire()
        await asyncio.sleep(1.0)
        if not await lock.owned():
            return False  # lost (and reported): nothing to release
        await lock.release()
        return True

    # A stall of the process longer than the TTL rightly loses the lock: such a run is
    # done again; one that no stall overlapped must keep it.
    with Stalls() as stalls:
        renewed, _ = stalls.timed(lambda: run(kept()))
    assert renewed


def test_force_release_wakes_an_async_waiter(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}

    async def main() -> float:
        holder = AsyncLock("stuck", ttl=30)
        await holder.acquire()
        waiter = asyncio.create_task(AsyncLock("stuck", ttl=30).acquire(2 * BEFORE_ANY_RECHECK))

        async def is_queued() -> bool:
            return queued(backend, "stuck") == 1

        await until(is_queued)
        forced = time.monotonic()
        assert await AsyncLock.force_release("stuck")
        assert await waiter
        with pytest.raises(LockNotOwned):
            await holder.release()
        return time.monotonic() - forced

    assert run(main()) < BEFORE_ANY_RECHECK


# --- cancellation: never a lock held by nobody who knows it


def cancel_after(monkeypatch: Any, nth: int) -> list[str]:
    """The nth Redis command of AsyncLock runs on the server, then its caller is cancelled
    (as if the cancellation arrived while the reply was on its way)."""
    seen: list[str] = []
    real_run, real_call = module.run_script, module.call

    def wrap(real: Any, label: Any) -> Any:
        async def wrapper(*args: Any) -> Any:
            result = await real(*args)
            seen.append(label(args))
            if len(seen) == nth:
                raise asyncio.CancelledError
            return result

        return wrapper

    monkeypatch.setattr(module, "run_script", wrap(real_run, lambda a: a[1].name))
    monkeypatch.setattr(module, "call", wrap(real_call, lambda a: a[1]))
    # The wait loop's BLPOP (or its wait on the wake-up listener).
    real_wait = waiting.aio_wait_for_push
    monkeypatch.setattr(waiting, "aio_wait_for_push", wrap(real_wait, lambda a: "BLPOP"))
    return seen


def test_cancelled_uncontended_acquire_leaves_no_lock(backend, monkeypatch):
    seen = cancel_after(monkeypatch, 1)

    async def main() -> None:
        with pytest.raises(asyncio.CancelledError):
            await AsyncLock("c1", ttl=30).acquire()

    run(main())
    assert seen[0] == "acquire"
    assert not Lock("c1").locked()


@pytest.mark.parametrize(("nth", "point"), [(1, "acquire"), (2, "BLPOP")])
def test_cancelled_waiting_acquire_leaves_no_lock_and_no_place(backend, monkeypatch, nth, point):
    holder = Lock("c2", ttl=30)
    holder.acquire()

    async def main() -> None:
        if point == "BLPOP":
            # The holder releases while the waiter blocks, so the BLPOP that gets cancelled
            # has just handed the lock to the waiter.
            async def release_soon() -> None:
                await until(lambda: asyncio.sleep(0, queued(backend, "c2") == 1))
                await asyncio.to_thread(Lock.force_release, "c2")

            releaser = asyncio.create_task(release_soon())
        seen = cancel_after(monkeypatch, nth)
        with pytest.raises(asyncio.CancelledError):
            await AsyncLock("c2", ttl=30).acquire(10)
        assert seen[nth - 1] == point
        if point == "BLPOP":
            await releaser

    run(main())
    assert queued(backend, "c2") == 0
    if point == "acquire":
        holder.release()
    else:
        with pytest.raises(LockNotOwned):
            holder.release()  # it was force-released, then handed on
    assert not Lock("c2").locked(), "nobody may hold it"


def test_really_cancelled_waiter_is_skipped(backend):
    async def main() -> None:
        holder = AsyncLock("c3", ttl=30)
        await holder.acquire()
        waiter = asyncio.create_task(AsyncLock("c3", ttl=30).acquire(10))

        async def is_queued() -> bool:
            return queued(backend, "c3") == 1

        await until(is_queued)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert queued(backend, "c3") == 0
        await holder.release()
        assert not await holder.locked()

    run(main())


def test_a_cancel_at_any_step_of_a_queued_acquire_is_never_lost(backend):
    # The cancel lands after 0, 1, 2... turns of the event loop, so one of them comes as
    # redis-py finishes sending a command: Python 3.11's asyncio.wait_for, which redis-py
    # sends through, then returns normally and drops the cancellation. The waiter must still
    # stop at once, not wait on until the holder's TTL (30 s) runs out.
    async def main() -> None:
        holder = AsyncLock("c6", ttl=30)
        await holder.acquire()
        for turns in range(40):
            waiter = asyncio.create_task(AsyncLock("c6", ttl=30).acquire(math.inf))
            for _ in range(turns):
                await asyncio.sleep(0)
            waiter.cancel()
            done, _ = await asyncio.wait([waiter], timeout=BEFORE_ANY_RECHECK)
            assert done, f"a cancel after {turns} turns was lost"
            assert waiter.cancelled(), f"cancelled after {turns} turns, it returned"
            assert queued(backend, "c6") == 0
        assert await holder.owned()
        await holder.release()

    run(main())
    assert not Lock("c6").locked()


def test_cancelled_release_still_releases(backend):
    async def main() -> None:
        lock = AsyncLock("c4", ttl=30)
        releasing = asyncio.Event()

        async def owner() -> None:
            await lock.acquire()
            releasing.set()
            await lock.release()  # runs synchronously up to its (shielded) Redis call

        task = asyncio.create_task(owner())
        await releasing.wait()  # the owner is now suspended inside release()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async def freed() -> bool:
            return not await lock.locked()

        await until(freed)

    run(main())
