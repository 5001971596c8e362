"""What applies of Redisson's ``RedissonReadWriteLockTest`` (redisson/src/test/java/org/
redisson/RedissonReadWriteLockTest.java), ported to ``ReadWriteLock`` on fakeredis, a real
redis-server and a real Cluster. Redisson's seconds are scaled down to tenths.

What does not apply, and why:

- Reentrancy (``testWriteReadReentrancy``, ``testHoldCount``, ``testReentrancy``, and the
  second acquire in ``testWR``, ``testWriteLock``, ``testInCluster``,
  ``testWriteLockExpiration``, ``testReadLockIsLocked``): Redisson's locks are reentrant, and
  its write holder may take the read lock too (a downgrade). Ours are not reentrant: a
  thread holds one side of a lock at a time, and a second acquire of either side raises
  LockError at once (ported as such below), since read-then-write would wait for itself.
  A reentrant hold count would also need a per-thread count in Redis for each reader.
- Per-side ``forceUnlock`` (``testForceUnlock``): ``ReadWriteLock.force_release`` frees the
  whole lock, readers and writer (an operator's escape hatch, like ``Lock.force_release``);
  ported as that.
- The watchdog's default lease (``getLockWatchdogTimeout``): ours is ``auto_renew=True``
  with the lock's ``ttl`` (renewed at a third of it); ported with a short ttl.
- ``testName``'s name ``{test}:abc:key``: a brace would change our keys' Cluster hash tag,
  so such a name is refused (ValueError); the test is ported with a name without braces.
- Separate Redisson instances (``testMultiInstance*``, ``testAutoExpire``'s shutdown): an
  instance is a thread here (each its own ``ReadWriteLock`` objects), or a thread that ends
  without releasing (a dead instance); real processes are in ``test_read_write_processes``.
- ``testMultiInstanceZombieReadLockPerformance`` is disabled upstream (no ``@Test``).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest

from django_redislock.exceptions import LockError, LockNotOwned
from django_redislock.locks.read_write import ReadWriteLock
from tests.support.waiting import Stalls, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def left_behind(side: Any) -> None:
    """``side`` acquired by a thread that ends without releasing it (a dead instance)."""
    got: list[bool] = []
    in_thread(lambda: got.append(side.acquire(0))).join(10)
    assert got == [True]


def test_read_lock_expiration(backend):
    # testReadLockExpiration: the writer gets in when the longest reader's lease ends (soon
    # after, unless this process stood still meanwhile).
    with Stalls() as stalls:
        start = time.monotonic()
        left_behind(ReadWriteLock("test", ttl=1.0).read())
        left_behind(ReadWriteLock("test", ttl=0.3).read())
        assert ReadWriteLock("test", ttl=1.0).write().acquire(30)
        end = time.monotonic()
        assert end - start >= 0.9
        assert end - start < 4 or stalls.between(start, end)


def test_read_lock_is_not_locked_while_a_writer_holds(backend):
    # testReadLockIsLocked (its reentrant read after the write does not apply).
    rw = ReadWriteLock("TEST", ttl=5)
    with rw.write():
        assert not rw.read().locked()
        assert rw.write().locked()
        with pytest.raises(LockError):
            rw.read().acquire(1)
    assert rw.read().acquire(0)
    assert rw.read().locked()
    rw.read().release()


def test_read_lock_expiration_renewal(backend):
    # testReadLockExpirationRenewal: renewed readers outlive their lease, none fails. (A
    # stall of the process past the 0.3 s lease loses some: such a run is done again.)
    names = iter(f"mytestlock-{n}" for n in range(100))

    def renewed() -> None:
        errors: list[BaseException] = []
        name = next(names)

        def read() -> None:
            try:
                side = ReadWriteLock(name, ttl=0.3, auto_renew=True).read()
                side.acquire()
                time.sleep(0.8)
                side.release()
            except BaseException as exc:
                errors.append(exc)

        threads = [in_thread(read) for _ in range(10)]
        for thread in threads:
            thread.join(30)
        assert errors == []

    with Stalls() as stalls:
        stalls.again_if_stalled(renewed)


def test_name_many_threads_read(backend):
    # testName, with a name without braces (see the module's doc).
    errors: list[BaseException] = []
    rw = ReadWriteLock("test:abc:key", ttl=5)

    def read() -> None:
        try:
            for _ in range(10):
                with rw.read():
                    pass
        except BaseException as exc:
            errors.append(exc)

    for thread in [in_thread(read) for _ in range(10)]:
        thread.join(30)
    assert errors == []
    with pytest.raises(ValueError, match="brace"):
        ReadWriteLock("{test}:abc:key")


def test_write_lock_expiration(backend):
    # testWriteLockExpiration: while a writer holds, another cannot get in within its wait.
    left_behind(ReadWriteLock("test2s3", ttl=1.0).write())
    assert not ReadWriteLock("test2s3").write().acquire(0.3)
    assert ReadWriteLock("test2s3").write().acquire(3)  # once its lease ended


def test_in_cluster_write_then_read(backend):
    # testInCluster (on every backend, Cluster included; its reentrancy does not apply).
    rw = ReadWriteLock("1234", ttl=5)
    with rw.write():
        pass
    with rw.read():
        pass


def test_readers_get_in_when_the_writers_lease_ends(backend):
    # testReadLockLeaseTimeoutDiffThreadsWRR
    left_behind(ReadWriteLock("my_read_write_lock", ttl=0.5).write())
    executed: list[bool] = []

    def read() -> None:
        executed.append(ReadWriteLock("my_read_write_lock", ttl=5).read().acquire(3))

    threads = [in_thread(read), in_thread(read)]
    for thread in threads:
        thread.join(10)
    assert executed == [True, True]


def test_writer_gets_in_when_the_first_readers_lease_ends(backend):
    # testReadLockLeaseTimeoutDiffThreadsRRW
    start = time.monotonic()
    left_behind(ReadWriteLock("my_read_write_lock", ttl=1.0).read())
    second = ReadWriteLock("my_read_write_lock", ttl=1.0).read()
    assert second.acquire(0.1)
    second.release()
    assert ReadWriteLock("my_read_write_lock", ttl=1.0).write().acquire(30)
    assert time.monotonic() - start >= 0.9


def test_read_lock_lease_timeout(backend):
    # testReadLockLeaseTimeout, scaled: 4 s -> 0.4 s, 3 s -> 0.3 s, 2 s -> 0.2 s.
    left_behind(ReadWriteLock("my_read_write_lock", ttl=0.4).read())
    time.sleep(0.3)
    second = ReadWriteLock("my_read_write_lock", ttl=0.4).read()
    assert second.acquire(0.1)
    second.release()
    time.sleep(0.2)
    assert ReadWriteLock("my_read_write_lock").write().acquire(0)


def test_write_then_read_in_one_thread_raises(backend):
    # testWR: Redisson's write holder may read too; ours refuses (not reentrant).
    rw = ReadWriteLock("my_read_write_lock", ttl=5)
    with rw.write():
        with pytest.raises(LockError):
            rw.read().acquire(0)
        assert rw.write().locked()
    assert not rw.write().locked()


def test_write_read_many_readers_get_in_together(backend):
    # testWriteRead: 20 readers wait for a writer; its release lets them all in at once.
    rw = ReadWriteLock("TEST", ttl=5)
    assert rw.write().acquire(0)
    inside, most = [0], [0]
    guard = threading.Lock()
    all_in = threading.Event()

    def read() -> None:
        side = ReadWriteLock("TEST", ttl=5).read()
        assert side.acquire(10)
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            if inside[0] == 20:
                all_in.set()
        all_in.wait(10)
        with guard:
            inside[0] -= 1
        side.release()

    threads = [in_thread(read) for _ in range(20)]
    wait_for(lambda: rw.state().waiters == 20, 10)
    rw.write().release()
    for thread in threads:
        thread.join(15)
    assert most[0] == 20


def test_write_lock_seen_from_another_thread(backend):
    # testWriteLock, its other thread's part (the reentrant tryLock does not apply).
    rw = ReadWriteLock("lock", ttl=5)
    assert rw.write().acquire(0)
    seen: list[bool] = []

    def look() -> None:
        seen.extend([rw.write().owned(), rw.write().locked(), rw.read().acquire(0)])
        seen.append(ReadWriteLock("lock").read().acquire(0))

    in_thread(look).join(10)
    assert seen == [False, True, False, False]
    rw.write().release()
    assert not rw.write().locked()
    assert not rw.write().owned()


def test_multi_read(backend):
    # testMultiRead
    rw = ReadWriteLock("lock", ttl=5)
    assert not ReadWriteLock.force_release("lock")
    assert rw.read().acquire(0)
    other_in, release_other = threading.Event(), threading.Event()

    def read() -> None:
        side = ReadWriteLock("lock", ttl=5).read()
        assert not side.owned()
        assert side.locked()
        assert side.acquire(5)
        other_in.set()
        release_other.wait(10)
        side.release()

    thread = in_thread(read)
    assert other_in.wait(10)
    rw.read().release()
    checker: list[bool] = []
    in_thread(lambda: checker.append(ReadWriteLock("lock").write().acquire(0))).join(10)
    assert checker == [False]  # the other reader still holds it
    assert not rw.read().owned()
    release_other.set()
    thread.join(10)
    assert not rw.read().locked()
    assert rw.write().acquire(0)
    assert rw.write().owned()
    rw.write().release()
    assert not rw.write().locked()


def test_force_release_frees_readers_and_the_writer(backend):
    # testForceUnlock, for the whole lock (see the module's doc).
    rw = ReadWriteLock("lock", ttl=5)
    left_behind(rw.read())
    assert rw.read().locked()
    assert ReadWriteLock.force_release("lock")
    assert not rw.read().locked()
    left_behind(rw.write())
    assert rw.write().locked()
    assert ReadWriteLock.force_release("lock")
    assert not rw.write().locked()
    assert not ReadWriteLock("lock").locked()


def test_read_write_ttl_kept_by_auto_renew(backend):
    # testReadWriteTTL: the watchdog keeps each side's TTL up while held. (A stall of the
    # process past the 0.6 s TTL lets it run down: such a run is done again.)
    names = iter(f"rwlock-{n}" for n in range(100))

    def kept_up() -> None:
        rw = ReadWriteLock(next(names), ttl=0.6, auto_renew=True)
        for side in (rw.write(), rw.read()):
            with side:
                for _ in range(4):
                    assert (side.ttl() or 0) > 0.2
                    time.sleep(0.3)
                assert side.owned()

    with Stalls() as stalls:
        stalls.again_if_stalled(kept_up)


def test_expire_read_a_second_reader_is_not_kept_waiting(backend):
    # testExpireRead
    rw = ReadWriteLock("lock", ttl=2)
    assert rw.read().acquire(0)
    spent: list[float] = []

    def read() -> None:
        start = time.monotonic()
        side = ReadWriteLock("lock", ttl=2).read()
        assert side.acquire(5)
        spent.append(time.monotonic() - start)
        side.release()

    with Stalls() as stalls:
        start = time.monotonic()
        in_thread(read).join(10)
        end = time.monotonic()
        assert spent
        assert spent[0] < 1 or stalls.between(start, end)  # (unless this process stood still)
    rw.read().release()


def test_expire_write_the_next_writer_gets_in_after_the_lease(backend):
    # testExpireWrite
    rw = ReadWriteLock("lock", ttl=0.3)
    assert rw.write().acquire(0)
    spent: list[float] = []
    start = time.monotonic()

    def write() -> None:
        side = ReadWriteLock("lock", ttl=5).write()
        assert side.acquire(30)
        spent.append(time.monotonic() - start)
        side.release()

    with Stalls() as stalls:
        in_thread(write).join(30)
        end = time.monotonic()
        assert spent
        assert spent[0] < 3 or stalls.between(start, end)  # (unless this process stood still)
    with pytest.raises(LockNotOwned):
        rw.write().release()


def test_auto_expire_once_its_owner_is_gone(backend):
    # testAutoExpire: the renewer stops when the owner's thread ends; the lock lapses.
    rw = ReadWriteLock("lock", ttl=0.5, auto_renew=True)
    left_behind(rw.write())
    wait_for(lambda: not ReadWriteLock("lock").write().locked(), 5, "the hold lapsed")


def test_is_held_by_current_thread_and_is_locked(backend):
    # testIsHeldByCurrentThread(OtherThread), testIsLocked(OtherThread), testLockUnlock
    rw = ReadWriteLock("lock", ttl=5)
    side = rw.read()
    assert not side.owned()
    assert not side.locked()
    side.acquire()
    assert side.owned()
    assert side.locked()
    seen: list[bool] = []
    in_thread(lambda: seen.extend([side.owned(), ReadWriteLock("lock").read().locked()])).join(5)
    assert seen == [False, True]
    side.release()
    assert not side.owned()
    seen.clear()
    in_thread(lambda: seen.extend([side.owned(), ReadWriteLock("lock").read().locked()])).join(5)
    assert seen == [False, False]
    for _ in range(2):
        side.acquire()
        side.release()


def test_unlock_of_another_threads_read_lock_fails(backend):
    # testUnlockFail
    left_behind(ReadWriteLock("lock", ttl=5).read())
    with pytest.raises(LockNotOwned):
        ReadWriteLock("lock").read().release()
    assert ReadWriteLock.force_release("lock")


@pytest.mark.parametrize(("workers", "iterations"), [(15, 1), (8, 10)])
def test_concurrency_random_sides(backend, workers, iterations):
    # testConcurrency_SingleInstance, testConcurrency(Loop)_MultiInstance: every acquire
    # gets in, and writers are alone.
    counter, inside = [0], {"read": 0, "write": 0}
    guard = threading.Lock()
    broken: list[str] = []

    def work(seed: int) -> None:
        chance = random.Random(seed)
        rw = ReadWriteLock("testConcurrency", ttl=5, timeout=30)
        for _ in range(iterations):
            kind = "write" if chance.random() < 0.5 else "read"
            with getattr(rw, kind)():
                with guard:
                    inside[kind] += 1
                    if inside["write"] > 1 or (inside["write"] and inside["read"]):
                        broken.append(kind)
                time.sleep(0.002)
                with guard:
                    inside[kind] -= 1
                    counter[0] += 1

    for thread in [in_thread(work, seed) for seed in range(workers)]:
        thread.join(60)
    assert counter[0] == workers * iterations
    assert broken == []


def test_a_dead_instances_reader_does_not_block_writers_for_ever(backend):
    # testMultiInstanceReadLockZombieCleanup
    left_behind(ReadWriteLock("zombie_test", ttl=0.3).read())
    living = ReadWriteLock("zombie_test", ttl=5)
    assert living.read().acquire(0)
    time.sleep(0.4)  # the dead reader's lease ends
    living.read().release()
    assert living.write().acquire(3)
    living.write().release()
