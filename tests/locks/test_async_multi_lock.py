"""AsyncMultiLock on fakeredis, a real redis-server and a real Cluster (asyncio.run per
test): the same contract as MultiLock, with the current task as the owner, and
cancellation that leaves nothing held."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from django_redislock import AsyncLock, Lock
from django_redislock.conf import conf
from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout, RedisUnavailable
from django_redislock.locks.async_multi_lock import AsyncMultiLock
from django_redislock.locks.keys import lock_base, parse_value
from django_redislock.locks.multi_lock import MultiLock
from tests.support.proxy import ReplyLosingProxy
from tests.support.waiting import BEFORE_ANY_RECHECK, SLOW_RETRY_DELAY, Stalls, ttl_set_since

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def until(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


def queued(backend: Any, name: str) -> int:
    return int(backend.client.zcard(Lock(name).keys[1]))


def held(*names: str) -> list[bool]:
    return [Lock(name).locked() for name in names]


def on_several_shards(prefix: str, count: int) -> list[str]:
    found: dict[str, str] = {}
    for i in range(10_000):
        found.setdefault(lock_base(f"{prefix}{i}", conf.LOCK_SHARDS), f"{prefix}{i}")
        if len(found) == count:
            return sorted(found.values())
    raise AssertionError("not enough shards")


def test_roundtrip_and_exclusion_with_sync_locks(backend):
    async def main() -> None:
        lock = AsyncMultiLock(["b:2", "b:1", "b:3"], ttl=10, fencing=True)
        assert lock.names == ("b:1", "b:2", "b:3")
        assert not await lock.locked()
        assert await lock.acquire()
        assert await lock.owned()
        assert await lock.locked()
        assert lock.fences is not None
        assert set(lock.fences) == set(lock.names)
        assert not MultiLock(["b:3", "b:9"]).acquire(0), "the same names as the sync one"
        assert not await AsyncLock("b:2", ttl=5).acquire(0)
        other = asyncio.create_task(AsyncMultiLock(["b:1"]).acquire(0))
        assert await other is False, "another task is another owner"
        since = time.monotonic()
        await lock.extend(20)
        assert all(ttl_set_since(Lock(name).ttl(), 20, since) for name in lock.names)
        await lock.release()
        assert held(*lock.names) == [False, False, False]
        with pytest.raises(LockNotOwned):
            await lock.release()
        with pytest.raises(LockNotOwned):
            await lock.extend()
        assert lock.fences is None

    run(main())


def test_all_or_nothing_and_async_with_raises_lock_timeout(backend):
    async def main() -> None:
        holder = AsyncLock("aon:b", ttl=30)
        await holder.acquire()
        assert not await AsyncMultiLock(["aon:a", "aon:b", "aon:c"]).acquire(0)
        with pytest.raises(LockTimeout) as info:
            async with AsyncMultiLock(["aon:a", "aon:b"], timeout=0.05):
                pytest.fail("body must not run")
        assert info.value.lock_name == "aon:a, aon:b"
        assert held("aon:a", "aon:c") == [False, False]
        assert queued(backend, "aon:b") == 0
        await holder.release()
        async with AsyncMultiLock(["aon:a", "aon:b"]) as lock:
            assert await lock.owned()
            with pytest.raises(LockError, match="already held"):
                await lock.acquire()

    run(main())


def test_the_timeout_is_one_deadline(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}

    async def main() -> float:
        holders = [AsyncLock(name, ttl=30) for name in ("dl:b", "dl:c", "dl:d")]
        for holder in holders:
            await holder.acquire()
        start = time.monotonic()
        assert not await AsyncMultiLock(["dl:a", "dl:b", "dl:c", "dl:d"]).acquire(0.8)
        elapsed = time.monotonic() - start
        for holder in holders:
            await holder.release()
        return elapsed

    # Not 3 x 0.8 s. (A run that a stall of the machine overlapped may take longer, and is
    # done again.)
    with Stalls() as stalls:
        elapsed, _ = stalls.timed(lambda: run(main()))
    assert 0.8 <= elapsed < 2.0
    assert held("dl:a") == [False]
    assert [queued(backend, name) for name in ("dl:b", "dl:c", "dl:d")] == [0, 0, 0]


def test_a_waiting_multi_lock_is_woken_by_the_release_and_hands_on(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}

    async def main() -> tuple[float, float]:
        holder = AsyncLock("wk:b", ttl=30)
        await holder.acquire()
        multi = AsyncMultiLock(["wk:a", "wk:b"], ttl=30)
        got, release = asyncio.Event(), asyncio.Event()

        async def hold() -> None:  # the task that acquires is the one that releases
            assert await multi.acquire(math.inf)
            got.set()
            await release.wait()
            await multi.release()

        holding = asyncio.create_task(hold())
        await until(lambda: queued(backend, "wk:b") == 1)
        released = time.monotonic()
        await holder.release()
        await asyncio.wait_for(got.wait(), 10)
        woken = time.monotonic() - released
        # Its own release hands "wk:a" to a task waiting for it.
        single = asyncio.create_task(AsyncLock("wk:a", ttl=30).acquire(math.inf))
        await until(lambda: queued(backend, "wk:a") == 1)
        released = time.monotonic()
        release.set()
        assert await single
        await holding
        return woken, time.monotonic() - released

    woken, handed = run(main())
    assert woken < BEFORE_ANY_RECHECK
    assert handed < BEFORE_ANY_RECHECK
    assert held("wk:a", "wk:b") == [True, False]


def test_a_cancelled_acquire_leaves_nothing_held_or_queued(backend):
    async def main() -> None:
        holder = AsyncLock("cx:b", ttl=30)
        await holder.acquire()
        waiter = asyncio.create_task(AsyncMultiLock(["cx:a", "cx:b"], ttl=30).acquire(math.inf))
        await until(lambda: queued(backend, "cx:b") == 1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await holder.release()

    run(main())
    assert held("cx:a", "cx:b") == [False, False]
    assert queued(backend, "cx:b") == 0


def test_a_cancel_at_any_step_of_the_acquire_is_never_lost(backend):
    # As the AsyncLock test of the same name: after 0, 1, 2... turns of the event loop the
    # cancel meets each command in turn (the at-once try, "cx:a", the queued "cx:b") as
    # redis-py finishes sending it, when Python 3.11's wait_for would drop it.
    async def main() -> None:
        holder = AsyncLock("cx:b", ttl=30)
        await holder.acquire()
        for turns in range(60):
            multi = AsyncMultiLock(["cx:a", "cx:b"], ttl=30)
            waiter = asyncio.create_task(multi.acquire(math.inf))
            for _ in range(turns):
                await asyncio.sleep(0)
            waiter.cancel()
            done, _ = await asyncio.wait([waiter], timeout=BEFORE_ANY_RECHECK)
            assert done, f"a cancel after {turns} turns was lost"
            assert waiter.cancelled(), f"cancelled after {turns} turns, it returned"
            assert queued(backend, "cx:b") == 0
            assert not Lock("cx:a").locked()
        await holder.release()

    run(main())
    assert held("cx:a", "cx:b") == [False, False]


def test_names_on_several_shards(backend):
    names = on_several_shards("sh:", 3)

    async def main() -> set[str | None]:
        async with AsyncMultiLock(names, ttl=10):
            tokens = set()
            for name in names:
                value = parse_value(backend.client.get(Lock(name).keys[0]))
                tokens.add(None if value is None else value.token)
            return tokens

    assert len(run(main())) == (3 if backend.kind == "cluster" else 1)
    assert held(*names) == [False, False, False]


def test_auto_renew_and_a_lost_name(backend):
    async def kept() -> bool:
        lock = AsyncMultiLock(["rn:a", "rn:b"], ttl=0.3, auto_renew=True)
        await lock.acquire()
        await asyncio.sleep(1.0)
        if await lock.owned():
            await lock.release()
            return True
        for name in ("rn:a", "rn:b"):  # what is left of it
            Lock.force_release(name)
        return False

    # A stall of the process longer than the TTL rightly loses a name: such a run is done
    # again; one that no stall overlapped must keep both.
    with Stalls() as stalls:
        renewed, _ = stalls.timed(lambda: run(kept()))
    assert renewed

    async def main() -> None:
        lock = AsyncMultiLock(["rn:a", "rn:b"], ttl=30, auto_renew=True)
        await lock.acquire()
        assert await lock.owned()
        backend.client.delete(Lock("rn:b").keys[0])
        assert not await lock.owned()
        with pytest.raises(LockNotOwned) as info:
            await lock.release()
        assert info.value.lock_name == "rn:b"

    run(main())
    assert held("rn:a", "rn:b") == [False, False]


def test_an_acquire_whose_reply_is_lost_frees_what_it_took(settings, redis_server):
    redis_server.client().flushall()
    with ReplyLosingProxy("127.0.0.1", redis_server.port) as proxy:
        settings.REDISLOCK = {"URL": proxy.url}

        async def main() -> bool:
            async with AsyncMultiLock(["warm:a"], ttl=30):
                pass
            proxy.lose_replies = 1  # an asyncio command is sent once
            with pytest.raises(RedisUnavailable):
                await AsyncMultiLock(["lost:a", "lost:b"], ttl=30).acquire(0)
            assert proxy.lost == 1
            return await AsyncMultiLock(["lost:a", "lost:b"]).locked()

        assert run(main()) is False


def test_bad_input_and_redis_unreachable(backend, settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}
    with pytest.raises(TypeError, match="single str"):
        AsyncMultiLock("sku:1")
    with pytest.raises(ValueError, match="empty"):
        AsyncMultiLock([])
    with pytest.raises(ValueError, match="'x' more than once"):
        AsyncMultiLock(["x", "y", "x"])

    async def main() -> None:
        with pytest.raises(RedisUnavailable):
            await AsyncMultiLock(["down:a", "down:b"]).acquire()

    run(main())
