"""AsyncReadWriteLock on fakeredis, a real redis-server and a real Cluster (asyncio.run per
test): the essentials of ``test_read_write_lock``, the sync and asyncio locks sharing one
lock, and cancellation."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout, RedisUnavailable
from django_redislock.locks.async_read_write import AsyncReadWriteLock
from django_redislock.locks.read_write import ReadWriteLock
from tests.support.waiting import ttl_set_since

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


def queued_of(rw: AsyncReadWriteLock, count: int) -> Any:
    async def check() -> bool:
        return (await rw.state()).waiters == count

    return check


@pytest.fixture
def no_fallback(backend: Any, settings: Any) -> Any:
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    return backend


def test_roundtrip_on_both_sides(backend):
    async def main() -> None:
        rw = AsyncReadWriteLock("a:1", ttl=5, fencing=True)
        assert not await rw.locked()
        for side in (rw.read(), rw.write()):
            assert await side.ttl() is None
            since = time.monotonic()
            async with side as entered:
                assert entered is side
                assert await side.owned()
                assert await side.locked()
                assert ttl_set_since(await side.ttl(), 5, since)
                since = time.monotonic()
                await side.extend(20)
                assert ttl_set_since(await side.ttl(), 20, since)
            assert not await side.owned()
            with pytest.raises(LockNotOwned):
                await side.release()
            with pytest.raises(LockNotOwned):
                await side.extend()
        assert not await rw.locked()

    run(main())


def test_tasks_read_together_and_write_alone(backend):
    async def main() -> None:
        rw = AsyncReadWriteLock("tasks", ttl=5, fencing=True)

        async def read() -> bool:
            return await AsyncReadWriteLock("tasks", ttl=5).read().acquire(0)

        async with rw.read():
            assert await asyncio.create_task(read())  # another task reads beside it
            assert await rw.readers() == 2
            writer = AsyncReadWriteLock("tasks", ttl=5).write()
            assert not await asyncio.create_task(writer.acquire(0))
            assert not ReadWriteLock("tasks").write().acquire(0), "the sync lock is the same"
        assert await AsyncReadWriteLock.force_release("tasks")  # the other task's reader
        async with rw.write() as side:
            assert isinstance(side.fence, int)
            assert not await asyncio.create_task(read())
            assert ReadWriteLock("tasks").write().locked()
        assert rw.read().fence is None

    run(main())


def test_a_waiting_writer_blocks_new_readers_and_wakes_on_release(no_fallback):
    async def main() -> None:
        rw = AsyncReadWriteLock("pref", ttl=30)
        order: list[str] = []

        async def take(kind: str) -> None:
            side = getattr(AsyncReadWriteLock("pref", ttl=30), kind)()
            assert await side.acquire(20)
            order.append(kind)
            await asyncio.sleep(0.02)
            await side.release()

        assert await rw.read().acquire(0)
        writer = asyncio.create_task(take("write"))
        await until(queued_of(rw, 1))
        reader = asyncio.create_task(take("read"))
        await until(queued_of(rw, 2))
        started = time.monotonic()
        await rw.read().release()
        await asyncio.wait_for(asyncio.gather(writer, reader), 20)
        assert order == ["write", "read"]
        assert time.monotonic() - started < 5  # pushed: the fallback is a minute away

    run(main())


def test_fair_arrival_order(no_fallback):
    async def main() -> None:
        holder = AsyncReadWriteLock("fair", ttl=30, fair=True)
        assert await holder.write().acquire(0)
        entered: list[str] = []

        async def take(tag: str) -> None:
            rw = AsyncReadWriteLock("fair", ttl=30, fair=True)
            side = rw.read() if tag[0] == "r" else rw.write()
            assert await side.acquire(20)
            entered.append(tag)
            await asyncio.sleep(0.02)
            await side.release()

        tasks = []
        for count, tag in enumerate(["r1", "w1", "r2"], 1):
            tasks.append(asyncio.create_task(take(tag)))
            await until(queued_of(holder, count))
        await holder.write().release()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)
        assert entered == ["r1", "w1", "r2"]

    run(main())


def test_a_cancelled_waiter_leaves_the_line_and_holds_nothing(backend):
    async def main() -> None:
        holder = AsyncReadWriteLock("cancel", ttl=30)
        assert await holder.read().acquire(0)
        waiter = asyncio.create_task(AsyncReadWriteLock("cancel", ttl=30).write().acquire(10))
        await until(queued_of(holder, 1))
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert (await holder.state()).waiters == 0
        # its leaving lets readers in at once again (no writer waits any more)
        assert await asyncio.create_task(AsyncReadWriteLock("cancel").read().acquire(0))
        await holder.read().release()

    run(main())


def test_no_reentrancy_in_a_task(backend):
    async def main() -> None:
        rw = AsyncReadWriteLock("upgrade", ttl=5, timeout=math.inf)
        async with rw.read():
            with pytest.raises(LockError, match="read side"):
                await rw.write().acquire()
            with pytest.raises(LockError):
                await AsyncReadWriteLock("upgrade").read().acquire()
        async with rw.write():
            pass

    run(main())


def test_auto_renew_keeps_a_tasks_hold(backend):
    async def main() -> None:
        async with AsyncReadWriteLock("renewed", ttl=0.3, auto_renew=True).write() as side:
            await asyncio.sleep(1.0)
            assert await side.owned()
            other = AsyncReadWriteLock("renewed").read()
            assert not await asyncio.create_task(other.acquire(0))

    run(main())


def test_the_context_manager_raises_lock_timeout(backend):
    async def main() -> None:
        holder = AsyncReadWriteLock("busy", ttl=5)
        assert await holder.write().acquire(0)

        async def enter() -> None:
            async with AsyncReadWriteLock("busy", timeout=0.05).read():
                pytest.fail("the body must not run")

        with pytest.raises(LockTimeout) as info:
            await asyncio.create_task(enter())
        assert info.value.lock_name == "busy"
        await holder.write().release()

    run(main())


def test_bad_arguments_fail_before_redis_is_touched(settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1"}
    with pytest.raises(ValueError, match="ttl"):
        AsyncReadWriteLock("x", ttl=-1)
    with pytest.raises(TypeError, match="name"):
        AsyncReadWriteLock(None)  # type: ignore[arg-type]
    rw = AsyncReadWriteLock("x")
    with pytest.raises(ValueError, match="timeout"):
        run(rw.read().acquire(-2))
    with pytest.raises(RedisUnavailable):
        run(rw.write().acquire(0))
