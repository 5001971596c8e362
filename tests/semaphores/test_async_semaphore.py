"""AsyncSemaphore on fakeredis, a real redis-server and a real Cluster (asyncio.run per test):
the essentials of ``test_semaphore``, and cancellation."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest

from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout
from django_redislock.semaphores.async_semaphore import AsyncSemaphore
from django_redislock.semaphores.semaphore import Semaphore
from tests.support.waiting import Stalls, ttl_set_since

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def queued(backend: Any, name: str) -> int:
    return int(backend.client.zcard(Semaphore(name, limit=1).layout.waiters))


async def until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


@pytest.fixture
def no_fallback(backend: Any, settings: Any) -> Any:
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    return backend


def test_roundtrip(backend):
    async def main() -> None:
        semaphore = AsyncSemaphore("a:1", limit=2, ttl=5)
        assert await semaphore.ttl() is None
        since = time.monotonic()
        assert await semaphore.acquire(0)
        assert not await semaphore.locked()
        assert await semaphore.owned()
        assert ttl_set_since(await semaphore.ttl(), 5, since)
        since = time.monotonic()
        await semaphore.extend(20)
        assert ttl_set_since(await semaphore.ttl(), 20, since)
        state = await semaphore.state()
        assert (state.held, state.limit, state.waiters) == (1, 2, 0)
        assert [p.pid for p in await semaphore.holders()] == [os.getpid()]
        await semaphore.release()
        assert await semaphore.count() == 0
        with pytest.raises(LockNotOwned):
            await semaphore.release()
        with pytest.raises(LockNotOwned):
            await semaphore.extend()

    run(main())


def test_tasks_never_exceed_the_limit_and_share_it_with_sync_code(backend):
    inside, seen = [0], []

    async def main() -> None:
        go = asyncio.Event()

        async def work(semaphore: AsyncSemaphore) -> None:
            async with semaphore:
                inside[0] += 1
                seen.append(inside[0])
                await go.wait()
                inside[0] -= 1

        sync_holder = Semaphore("pool", limit=3, ttl=30)
        assert sync_holder.acquire(0)
        semaphores = [AsyncSemaphore("pool", limit=3, ttl=30, timeout=20) for _ in range(4)]
        tasks = [asyncio.create_task(work(s)) for s in semaphores]
        await until(lambda: inside[0] == 2)
        await asyncio.sleep(0.05)
        assert inside[0] == 2, "the sync holder keeps one of the three permits"
        sync_holder.release()  # blocks the loop for one round trip: fine here
        await until(lambda: inside[0] == 3)
        go.set()
        await asyncio.gather(*tasks)

    run(main())
    assert len(seen) == 4
    assert max(seen) == 3


def test_a_release_hands_the_permit_to_a_waiting_task(no_fallback):
    async def main() -> None:
        holder = AsyncSemaphore("push", limit=1, ttl=30, fencing=True)
        assert await holder.acquire(0)
        first = holder.fence
        waiter = AsyncSemaphore("push", limit=1, ttl=30, fencing=True)

        async def wait() -> int | None:
            assert await waiter.acquire(10)
            return waiter.fence

        task = asyncio.create_task(wait())
        await until(lambda: queued(no_fallback, "push") == 1)
        await holder.release()
        fence = await task
        assert fence is not None
        assert fence > first

    run(main())


def test_a_waiting_task_wakes_when_a_permit_expires(no_fallback):
    async def main() -> None:
        assert await AsyncSemaphore("expiring", limit=1, ttl=0.3).acquire(0)
        assert await AsyncSemaphore("expiring", limit=1, ttl=30).acquire(10)

    run(main())


def test_timeout_and_context_manager(backend):
    async def main() -> None:
        holder = AsyncSemaphore("busy", limit=1, ttl=30)
        assert await holder.acquire(0)
        with pytest.raises(LockTimeout):
            async with AsyncSemaphore("busy", limit=1, timeout=0.1):
                pass
        with pytest.raises(LockError, match="already holds a permit"):
            await holder.acquire(0)

    run(main())
    assert queued(backend, "busy") == 0


def test_force_release_wakes_the_waiters(no_fallback):
    async def main() -> None:
        holder = AsyncSemaphore("forced", limit=1, ttl=30)
        assert await holder.acquire(0)
        task = asyncio.create_task(AsyncSemaphore("forced", limit=1, ttl=30).acquire(10))
        await until(lambda: queued(no_fallback, "forced") == 1)
        assert await AsyncSemaphore.force_release("forced")
        assert await task
        assert not await holder.owned()

    run(main())


def test_a_cancelled_waiter_leaves_the_queue_and_holds_nothing(backend):
    async def main() -> None:
        holder = AsyncSemaphore("c1", limit=1, ttl=30)
        assert await holder.acquire(0)
        waiter = asyncio.create_task(AsyncSemaphore("c1", limit=1, ttl=30).acquire(10))
        await until(lambda: queued(backend, "c1") == 1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert queued(backend, "c1") == 0
        await holder.release()
        assert await holder.count() == 0

    run(main())


def test_auto_renew_keeps_a_tasks_permit(backend):
    names = iter(f"renewed-{n}" for n in range(100))

    async def main(name: str) -> None:
        async with AsyncSemaphore(name, limit=1, ttl=0.3, auto_renew=True) as semaphore:
            await asyncio.sleep(1.0)
            assert await semaphore.owned()
            assert not await AsyncSemaphore(name, limit=1).acquire(0)

    # A stall of the process past the 0.3 s TTL loses the permit: such a run is done again.
    with Stalls() as stalls:
        stalls.again_if_stalled(lambda: run(main(next(names))))


def test_bad_arguments_fail_before_redis_is_touched(settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1"}
    with pytest.raises(ValueError, match="limit"):
        AsyncSemaphore("bad", limit=0)
    with pytest.raises(TypeError, match="limit"):
        AsyncSemaphore("bad", limit=1.5)  # type: ignore[arg-type]
