"""Redisson's semaphore tests (``RedissonSemaphoreTest``, ``RedissonPermitExpirableSemaphoreTest``)
ported to ``Semaphore``: the scenarios, in this project's own code, on fakeredis, a real
redis-server and a real Cluster; those with several processes on the real servers only.

What does not apply, and why:
- A stored permit count (``trySetPermits``, ``setPermits``, ``addPermits`` with a positive or
  negative delta, ``drainPermits``, ``releaseIfExists``, ``availablePermits`` of a count that
  ``release()`` raises without an acquire; ``testAcquireAfterAddPermits``,
  ``testAcquireWithoutSetPermits``, ``testTrySetPermits``, ``testSetPermits``,
  ``testAddPermits``, ``testReducePermits``, ``testDrainPermits``, ``testReleaseIfExists``):
  here every acquirer states the ``limit``, and a permit exists only while held, so a
  release without an acquire is ``LockNotOwned`` (ported as such), never a new permit.
- Acquiring 0 permits (``testZero``): ``permits`` is 1 to ``limit``; 0 is a ValueError.
- Permit ids and giving back part of a multi-permit holding (``testRelease``,
  ``testReleaseAsyncMany``, most of ``testReleaseManyNotExistOrExpired``): a holder's n
  permits are one hold, released together; the lapsed-holding part is ported.
- A lease of -1 (never expires, ``testGetLeaseTime``'s first half): every permit has a TTL.
- ``expire()`` on the semaphore object and cluster name mappers (``testExpiration``'s
  ``expire``, ``testGetInClusterNameMapper``): no such API; the keys' own expiry is tested
  (``test_expiration_leaves_no_key``).
- Sleeps that assume an idle machine (``isBetween(1900, 2100)`` ms and the like) become
  conditions and lower bounds; 16 processes x 100 rounds become 4 x 25 (2 shared cores).
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from typing import Any

import pytest

from django_redislock import get_redis
from django_redislock.exceptions import LockNotOwned
from django_redislock.locks.keys import text
from django_redislock.semaphores.async_semaphore import AsyncSemaphore
from django_redislock.semaphores.listing import list_semaphores
from django_redislock.semaphores.semaphore import Semaphore
from tests.semaphores.test_semaphore import queued
from tests.support.waiting import Stalls, ttl_set_since, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
COUNTER = "test:{ported}:counter"  # read and written unatomically: only exclusion keeps it


class Holder(threading.Thread):
    """A thread that takes ``semaphore``'s permits at once and holds them until ``leave``."""

    def __init__(self, semaphore: Semaphore) -> None:
        super().__init__(daemon=True)
        self.semaphore = semaphore
        self.got, self.leave = threading.Event(), threading.Event()
        self.start()
        assert self.got.wait(10)

    def run(self) -> None:
        if self.semaphore.acquire(0):
            self.got.set()
            self.leave.wait(30)
            self.semaphore.release()


def release_once_queued(backend: Any, name: str, *holders: Holder) -> threading.Thread:
    def run() -> None:
        wait_for(lambda: queued(backend, name) == 1)
        for holder in holders:
            holder.leave.set()
            holder.join(10)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# --- RedissonSemaphoreTest -------------------------------------------------------------------


def test_zero_permits_is_refused():
    with pytest.raises(ValueError, match="permits"):
        Semaphore("test", limit=1, permits=0)


def test_release_without_permits_raises(backend):
    with pytest.raises(LockNotOwned):
        Semaphore("test", limit=1).release()
    assert Semaphore("test", limit=1).count() == 0


def test_blocking_acquire(backend):
    holder = Holder(Semaphore("test", limit=1, ttl=30))
    thread = release_once_queued(backend, "test", holder)
    waiter = Semaphore("test", limit=1, ttl=30)
    assert waiter.locked()
    assert waiter.acquire(10)
    thread.join()
    assert not Semaphore("test", limit=1).acquire(0)
    assert waiter.count() == 1


def test_blocking_n_acquire(backend):
    ones = [Holder(Semaphore("test", limit=5, ttl=30)) for _ in range(3)]
    thread = release_once_queued(backend, "test", *ones[:2])  # 2 free, then 3, then 4
    four = Semaphore("test", limit=5, permits=4, ttl=30)
    assert four.acquire(10)
    thread.join()
    assert four.count() == 5
    ones[2].leave.set()


def test_try_n_acquire(backend):
    three = Holder(Semaphore("test", limit=5, permits=3, ttl=30))
    four = Semaphore("test", limit=5, permits=4, ttl=30)
    assert not four.acquire(0)
    thread = release_once_queued(backend, "test", three)
    assert four.acquire(10)
    thread.join()
    assert four.count() == 4


def test_release_acquire_counts(backend):
    one = Semaphore("test", limit=10, ttl=30)
    assert one.acquire(0)
    assert one.count() == 1
    one.release()
    assert one.count() == 0
    five = Semaphore("test", limit=10, permits=5, ttl=30)
    assert five.acquire(0)
    assert five.count() == 5
    five.release()
    assert five.count() == 0


def test_concurrency_single_instance(backend):
    def bump() -> None:
        with Semaphore("test", limit=1, ttl=30, timeout=30):
            value = int(backend.client.get(COUNTER) or 0)
            backend.client.set(COUNTER, value + 1)

    threads = [threading.Thread(target=bump) for _ in range(15)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert int(backend.client.get(COUNTER)) == 15


def loop_max(rounds: int, limit: int) -> None:
    client = get_redis()
    for _ in range(rounds):
        permits = random.choice([1, limit])
        with Semaphore("test", limit=limit, permits=permits, ttl=30, timeout=math.inf) as held:
            if permits == limit:  # alone: nobody else holds any
                client.rpush("test:{ported}:alone", held.count())
            time.sleep(0.002)
            client.incr(COUNTER)


@pytest.mark.processes
def test_concurrency_loop_max_multi_instance(real_backend, processes):
    for _ in range(4):
        processes.start(loop_max, 10, 4)
    processes.join_all(120)
    assert int(real_backend.client.get(COUNTER)) == 40
    assert {int(v) for v in real_backend.client.lrange("test:{ported}:alone", 0, -1)} <= {4}


def loop_one(rounds: int) -> None:
    client = get_redis()
    for _ in range(rounds):
        with Semaphore("test", limit=1, ttl=30, timeout=math.inf):
            value = int(client.get(COUNTER) or 0)
            time.sleep(0.002)
            client.set(COUNTER, value + 1)


@pytest.mark.processes
@pytest.mark.parametrize(("procs", "rounds"), [(4, 25), (8, 1)], ids=["loop", "once-each"])
def test_concurrency_multi_instance(real_backend, processes, procs, rounds):
    for _ in range(procs):
        processes.start(loop_one, rounds)
    processes.join_all(120)
    assert int(real_backend.client.get(COUNTER)) == procs * rounds


# --- RedissonPermitExpirableSemaphoreTest --------------------------------------------------


def test_update_lease_time(backend):
    names = iter(f"test-{n}" for n in range(100))

    def updated() -> None:
        name = next(names)
        semaphore = Semaphore(name, limit=1, ttl=0.3)
        with pytest.raises(LockNotOwned):
            semaphore.extend(1)
        assert semaphore.acquire(0)
        semaphore.extend(0.3)
        wait_for(lambda: not semaphore.owned())
        with pytest.raises(LockNotOwned):
            semaphore.extend(1)
        again = Semaphore(name, limit=1, ttl=1)
        assert again.acquire(0)
        since = time.monotonic()
        again.extend(3)
        assert ttl_set_since(again.ttl(), 3, since)

    # A stall past a 0.3 s or 1 s lease before its extend loses it: done again, if so.
    with Stalls() as stalls:
        stalls.again_if_stalled(updated)


def test_not_existent(backend):
    assert Semaphore("testSemaphoreForNPE", limit=1).count() == 0


def test_available_acquired_and_limit(backend):
    first, second, third = (Semaphore("test", limit=2, ttl=0.5) for _ in range(3))
    assert first.acquire(0)
    assert second.acquire(0)
    assert not third.acquire(0)
    assert (first.count(), first.state().limit) == (2, 2)
    wait_for(lambda: first.count() == 0)  # both lapsed
    assert third.acquire(0)
    assert third.count() == 1
    wait_for(lambda: third.count() == 0)


def test_expiration_leaves_no_key(backend):
    assert Semaphore("some-key", limit=1, ttl=0.3).acquire(0)
    wait_for(lambda: Semaphore("some-key", limit=1).count() == 0)
    assert list_semaphores() == ([], 0)
    assert {text(k) for k in backend.client.scan_iter()} == set()


@pytest.mark.parametrize("timeout", [math.inf, 10], ids=["acquire", "try-acquire"])
def test_a_lapsed_permit_goes_to_the_waiter_at_its_expiry(backend, settings, timeout):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}  # no fallback re-check
    stale = Semaphore("test", limit=1, ttl=0.5)
    assert stale.acquire(0)
    started = time.monotonic()
    waiter = Semaphore("test", limit=1, ttl=30)
    assert waiter.acquire(timeout)
    assert time.monotonic() - started >= 0.4  # not before the expiry (woken at it)
    with pytest.raises(LockNotOwned):
        stale.release()
    waiter.release()


def test_acquire_and_try_acquire_many(backend):
    six = Semaphore("test", limit=10, permits=6, ttl=30)
    assert six.acquire(0)
    assert six.count() == 6
    six.release()
    assert six.count() == 0
    four = Semaphore("test", limit=10, permits=4, ttl=30)
    five = Semaphore("test", limit=10, permits=5, ttl=30)
    assert four.acquire(0)
    assert five.acquire(0)
    assert five.count() == 9  # one left


def test_release_expired(backend):
    semaphore = Semaphore("test", limit=1, ttl=0.1)
    assert semaphore.acquire(0)
    wait_for(lambda: semaphore.count() == 0)
    with pytest.raises(LockNotOwned):
        semaphore.release()


def test_release_many_expired_does_not_stall_the_others(backend):
    timed = Semaphore("test", limit=10, permits=6, ttl=0.1)
    assert timed.acquire(0)
    assert timed.count() == 6
    wait_for(lambda: timed.count() == 0)
    one = Semaphore("test", limit=10, ttl=0.1)
    assert one.acquire(0)
    assert one.count() == 1
    wait_for(lambda: one.count() == 0)


def test_try_release_many_expired(backend):
    timed = Semaphore("test", limit=10, permits=3, ttl=0.1)
    lasting = Semaphore("test", limit=10, permits=3, ttl=30)
    assert timed.acquire(0)
    assert lasting.acquire(0)
    assert timed.count() == 6
    wait_for(lambda: timed.count() == 3)
    lasting.release()
    assert lasting.count() == 0
    with pytest.raises(LockNotOwned):
        timed.release()
    assert timed.count() == 0


def test_get_lease_time(backend):
    semaphore = Semaphore("test", limit=1, ttl=1.1)
    assert semaphore.ttl() is None
    since = time.monotonic()
    assert semaphore.acquire(0)
    left = semaphore.ttl()
    # (None only if a stall of the machine outlasted the lease meanwhile.)
    assert ttl_set_since(left, 1.1, since) or (left is None and time.monotonic() - since > 1.1)
    wait_for(lambda: Semaphore("test", limit=1).count() == 0)
    assert semaphore.ttl() is None


def test_async_acquire_and_acquire_many(backend):
    async def main() -> None:
        one = AsyncSemaphore("test.sync_semaphore", limit=1, ttl=5)
        assert await one.acquire(5)
        six = AsyncSemaphore("test", limit=10, permits=6, ttl=5)
        assert await six.acquire(0)
        assert await six.count() == 6

    asyncio.run(main())


def take_both(wants: int, timeout: float, hold: float, fair: bool) -> None:
    semaphore = Semaphore("multi", limit=2, permits=wants, ttl=30, fair=fair)
    if semaphore.acquire(timeout):
        time.sleep(hold)
        get_redis().incr(COUNTER)
        semaphore.release()


@pytest.mark.processes
@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
@pytest.mark.parametrize("wants", [(2, 2), (1, 2)], ids=["both-want-two", "one-and-two"])
def test_concurrency_multi_permits(real_backend, processes, wants, fair):
    # Two holders racing for both permits (or one and two) must not each take some and wait
    # for the rest until their timeouts: both succeed, one after the other.
    for want in wants:
        processes.start(take_both, want, 20, 0.3, fair)
    processes.join_all(60)
    assert int(real_backend.client.get(COUNTER)) == 2
    assert Semaphore("multi", limit=2).count() == 0
