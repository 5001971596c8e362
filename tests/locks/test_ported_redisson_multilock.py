"""What does not apply, and why: of Redisson's ``RedissonMultiLockTest`` and
``RedissonFasterMultiLockTest`` (redisson/src/test/java/org/redisson/), these checks are not
restated here:

- reentrancy (``testReentrantLock``, ``testReentrancy``'s first half): a MultiLock is not
  reentrant, like a ``Lock`` without ``reentrant=True``; a second acquire by its holder is a
  ``LockError`` (restated as that below), so there is no hold count to check;
- the hash layout (``testSimpleLock``'s field and ``lock_count`` entries): the faster
  multi-lock keeps a group's names as fields of one hash; here each name is an ordinary
  lock, so what is restated is that each name's key holds it and nothing stays after;
- ``test`` with three independent servers, one lock on each: a MultiLock lives on one Redis
  (standalone, Sentinel or Cluster), so the nearest case, restated, is names on several
  Cluster masters;
- thread interruption (``testLockUnInterruptibly``, ``LockWithoutBoolean``,
  ``testLockIsNotRenewedAfterInterruptedTryLock``): Python threads cannot be interrupted;
  asyncio cancellation is the counterpart, restated for ``AsyncMultiLock``;
- pub/sub resources (``testSubscriptionsPerConnection``, ``testSinglePubSub``): waiters here
  block on lists, with no channels; what is restated is their load with zero errors and
  nothing left in Redis;
- ``lock()`` with no lease (the watchdog's default): here a lock always has a TTL, renewed
  only with ``auto_renew=True``; ``leaseTime`` maps to ``ttl``, ``waitTime`` to
  ``acquire(timeout)``, ``isHeldByCurrentThread`` to ``owned()``, ``isLocked`` to
  ``locked()``, ``forceUnlock`` to ``Lock.force_release`` of each name and
  ``IllegalMonitorStateException`` to ``LockNotOwned``.

Each test names its origin; sizes are scaled down where the original only repeats."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from django_redislock import Lock, get_redis
from django_redislock.conf import conf
from django_redislock.exceptions import LockError, LockNotOwned, RedisUnavailable
from django_redislock.locks.async_multi_lock import AsyncMultiLock
from django_redislock.locks.keys import lock_base
from django_redislock.locks.multi_lock import MultiLock
from tests.support.servers import RedisServer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ["lock1", "lock2", "lock3"]


def in_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def other_thread(call: Any) -> Any:
    """``call()``'s result in another thread (another owner)."""
    result: list[Any] = []
    in_thread(lambda: result.append(call())).join(10)
    return result[0]


# --- RedissonMultiLockTest -------------------------------------------------------------


def test_lock_unlock(backend):  # testLockUnlock
    lock = MultiLock(NAMES, ttl=10)
    lock.acquire()
    assert lock.owned()
    lock.release()
    assert not lock.owned()


def test_of_ten_threads_trying_once_exactly_one_wins(backend):  # testWaitAndLeaseTimeouts
    barrier = threading.Barrier(10)

    def attempt() -> bool:
        barrier.wait()
        return MultiLock(NAMES, ttl=10).acquire(0)

    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda _: attempt(), range(10)))
    assert results.count(True) == 1


def test_a_second_thread_waits_for_the_first(backend):  # testMultiThreads
    taken, go = threading.Event(), threading.Event()

    def hold() -> None:
        with MultiLock(NAMES, ttl=10):
            taken.set()
            go.wait(10)

    thread = in_thread(hold)
    assert taken.wait(10)
    lock = MultiLock(NAMES, ttl=10)
    assert not lock.acquire(0)
    go.set()
    assert lock.acquire(10)
    lock.release()
    thread.join(5)


def test_names_on_several_masters_refuse_another_thread(backend):  # test
    by_shard: dict[str, str] = {}
    for i in range(1000):
        by_shard.setdefault(lock_base(f"lock{i}", conf.LOCK_SHARDS), f"lock{i}")
    names = list(by_shard.values())[:3]
    lock = MultiLock(names, ttl=10)
    lock.acquire()
    assert other_thread(lambda: MultiLock(names).acquire(0)) is False
    assert other_thread(lambda: MultiLock(names).acquire(0)) is False
    lock.release()


# --- RedissonFasterMultiLockTest -------------------------------------------------------


def test_each_name_is_held_and_nothing_stays_after(backend):  # testSimpleLock
    lock = MultiLock(["student:001", "student:002"], ttl=30)
    lock.acquire()
    keys = [Lock(name).keys for name in lock.names]
    assert all(backend.client.exists(k.lock) for k in keys)
    lock.release()
    left = [key for k in keys for key in (k.lock, k.waiters, k.registrations, k.wake)]
    assert not any(backend.client.exists(key) for key in left)


def test_a_second_acquire_by_the_holder_is_an_error(backend):  # testReentrantLock
    lock = MultiLock(["student:001", "student:002"], ttl=30)
    lock.acquire()
    with pytest.raises(LockError, match="already held"):
        lock.acquire()
    assert other_thread(lambda: MultiLock(lock.names).acquire(0)) is False  # testReentrancy
    lock.release()


def test_force_release_of_each_name(backend):  # testForceUnLock
    lock = MultiLock(["student:001", "student:002"], ttl=30)
    lock.acquire()
    assert all(Lock.force_release(name) for name in lock.names)
    assert not lock.locked()
    with pytest.raises(LockNotOwned):
        lock.release()


def test_auto_renew_moves_every_expiry_on(backend):  # testRenewExpiration
    lock = MultiLock(["student:001", "student:002"], ttl=0.6, auto_renew=True)
    lock.acquire()
    time.sleep(1.5)  # past the TTL: only renewals keep the names
    assert lock.owned()
    assert all(0 < (Lock(name).ttl() or 0) <= 0.6 for name in lock.names)
    lock.release()


def test_try_lock_then_another_thread_fails(backend):  # testTryLock
    lock = MultiLock(["student:001", "student:002"], ttl=30)
    assert lock.acquire(0)
    assert other_thread(lambda: MultiLock(lock.names).acquire(0)) is False
    lock.release()


def test_a_waiter_gets_the_names_when_the_holders_ttl_ends(backend):  # testTryLockWait
    MultiLock(["student:001", "student:002"], ttl=0.5).acquire()  # never released
    start = time.monotonic()
    lock = MultiLock(["student:001", "student:002"], ttl=5)
    assert lock.acquire(3)
    assert time.monotonic() - start >= 0.4
    lock.release()


def test_held_and_locked(backend):  # testIsHeldAndIsLockedByThread, testIsHeldByCurrentThread,
    lock = MultiLock(["test1", "test2"], ttl=30)  # testIsLocked
    assert (lock.owned(), lock.locked()) == (False, False)
    lock.acquire()
    assert (lock.owned(), lock.locked()) == (True, True)
    lock.release()
    assert (lock.owned(), lock.locked()) == (False, False)


def test_held_and_locked_seen_from_another_thread(backend):  # testIsHeldByCurrentThreadOther-
    lock = MultiLock(["test1", "test2"], ttl=30)  # Thread, testIsLockedOtherThread
    lock.acquire()
    assert other_thread(lambda: MultiLock(["test1", "test2"]).owned()) is False
    assert other_thread(lambda: MultiLock(["test1", "test2"]).locked()) is True
    lock.release()
    assert other_thread(lambda: MultiLock(["test1", "test2"]).owned()) is False
    assert other_thread(lambda: Lock("lock").locked()) is False


def test_unlock_by_a_thread_that_does_not_hold_it_fails(backend):  # testUnlockFail
    taken, go = threading.Event(), threading.Event()

    def hold() -> None:
        with MultiLock(["test1", "test2"], ttl=30):
            taken.set()
            go.wait(10)

    thread = in_thread(hold)
    assert taken.wait(10)
    with pytest.raises(LockNotOwned):
        MultiLock(["test1", "test2"]).release()
    go.set()
    thread.join(5)


def test_an_expired_hold_lets_a_waiter_in_and_its_release_fails(backend):  # testExpire
    lock = MultiLock(["test1", "test2"], ttl=0.5)
    lock.acquire()
    start = time.monotonic()
    waited = other_thread(lambda: _take_and_release(["test1", "test2"], 5))
    assert waited < 0.5 + 1.5
    assert time.monotonic() - start >= 0.4
    with pytest.raises(LockNotOwned):
        lock.release()


def _take_and_release(names: list[str], timeout: float) -> float:
    start = time.monotonic()
    lock = MultiLock(names, ttl=5)
    assert lock.acquire(timeout)
    lock.release()
    return time.monotonic() - start


def test_lock_and_unlock_three_times(backend):  # testInCluster
    for _ in range(3):
        lock = MultiLock(["test1", "test2"], ttl=10)
        lock.acquire()
        assert lock.locked()
        lock.release()
        assert not lock.locked()


def _hold_until_killed(names: list[str], held: Any) -> None:
    MultiLock(names, ttl=1, auto_renew=True).acquire()
    held.set()
    while True:
        time.sleep(1)


def test_a_killed_holders_names_expire(real_backend, processes):  # testAutoExpire
    held = processes.event()
    holder = processes.start(_hold_until_killed, ["test1", "test2"], held)
    assert held.wait(10)
    lock = MultiLock(["test1", "test2"])
    assert lock.locked()
    os.kill(holder.pid, signal.SIGKILL)
    wait_for(lambda: not lock.locked(), 5, "the names' TTL ran out")


def test_a_stopped_server_is_redis_unavailable(settings):  # testRedisFailed
    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url}
        lock = MultiLock(["test1", "test2"], ttl=10)
        server.stop()
        with pytest.raises(RedisUnavailable):
            lock.acquire(5)


def test_a_cancelled_acquire_leaves_nothing_held(backend):  # testLockIsNotRenewedAfter-
    async def main() -> None:  # InterruptedTryLock
        lock = AsyncMultiLock(["test1", "test2"], ttl=1, auto_renew=True)
        task = asyncio.create_task(lock.acquire(0))
        await asyncio.sleep(0)  # the request on its way
        task.cancel()
        try:
            got = await task
        except asyncio.CancelledError:
            got = False
        deadline = time.monotonic() + 5
        # Cancelled on its way: it freed what it took. Had it finished first, its owner (the
        # task) is gone: the renewer stops and the TTL ends the names.
        while got and await lock.locked():
            assert time.monotonic() < deadline, "the names stayed held"
            await asyncio.sleep(0.01)
        assert not await lock.locked()

    asyncio.run(main())


def test_many_threads_over_a_few_groups_no_errors_nothing_left(backend):
    # testSubscriptionsPerConnection, testSinglePubSub
    errors: list[BaseException] = []

    def work(_: int) -> None:
        try:
            group = f"lock-{random.randrange(5)}"
            with MultiLock([f"{group}:test1", f"{group}:test2"], ttl=10, timeout=30):
                time.sleep(random.random() / 500)
        except BaseException as exc:
            errors.append(exc)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(work, range(300)))
    assert errors == []
    client = get_redis()
    for i in range(5):
        for field in ("test1", "test2"):
            keys = Lock(f"lock-{i}:{field}").keys
            assert not any(client.exists(k) for k in (keys.lock, keys.waiters, keys.wake))


@pytest.mark.parametrize("instances", ["one instance", "an instance each"])
def test_concurrent_holders_count_exactly(backend, instances):
    # testConcurrency_SingleInstance, testConcurrency(Loop)_MultiInstance
    shared = MultiLock(["test1", "test2"], ttl=10, timeout=30)
    counter = [0]

    def work(_: int) -> None:
        for _ in range(15):
            lock = shared if instances == "one instance" else MultiLock(shared.names, timeout=30)
            with lock:
                value = counter[0]
                time.sleep(0.0002)
                counter[0] = value + 1

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    assert counter[0] == 8 * 15
