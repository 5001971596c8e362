"""What the lock test suites of redis-py (``tests/test_lock.py``), python-redis-lock
(``tests/test_redis_lock.py``) and pottery (``tests/test_redlock.py``) check, restated for
this package's API wherever their behaviour maps onto it: ``acquire(timeout)`` for
``blocking``/``blocking_timeout``, ``ttl`` for ``timeout``/``expire``/``auto_release_time``,
``extend(ttl)`` resets the remaining TTL, ``force_release`` for ``reset``, and
``LockNotOwned``/``LockTimeout``/``LockError`` for their exceptions. Each names its origin."""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from django_redislock import AsyncLock, Lock, Redlock
from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout
from tests.servers import RedisServer
from tests.support.waiting import Stalls, ttl_set_since

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stalls() -> Iterator[Stalls]:
    with Stalls() as watching:
        yield watching


def named(base: str) -> Iterator[str]:
    """``base``, then ``base-1``, ``base-2``...: a name of its own for each run of a test
    that a stall of the machine made run again (see ``Stalls.again_if_stalled``)."""
    yield base
    yield from (f"{base}-{n}" for n in itertools.count(1))


def eventually(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# --- redis-py ---------------------------------------------------------------------------


def test_locked_and_owned_seen_by_two_instances(backend):  # test_locked, test_owned
    one, two = Lock("foo", ttl=5), Lock("foo", ttl=5)
    assert (one.locked(), one.owned(), two.owned()) == (False, False, False)
    assert one.acquire(0)
    assert (one.locked(), two.locked(), one.owned(), two.owned()) == (True, True, True, False)
    one.release()
    assert (one.locked(), one.owned()) == (False, False)
    assert two.acquire(0)
    assert (one.owned(), two.owned()) == (False, True)
    two.release()
    assert (one.owned(), two.owned()) == (False, False)


def test_competing_instances_take_turns(backend):  # test_competing_locks
    one, two = Lock("foo", ttl=5), Lock("foo", ttl=5)
    assert one.acquire(0)
    assert not two.acquire(0)
    one.release()
    assert two.acquire(0)
    assert not one.acquire(0)
    two.release()


@pytest.mark.parametrize("ttl", [10, 9.5])
def test_the_ttl_is_set_in_redis(backend, ttl):  # test_timeout, test_float_timeout
    lock = Lock("foo", ttl=ttl)
    since = time.monotonic()
    assert lock.acquire(0)
    assert ttl_set_since(lock.ttl(), ttl, since)
    assert ttl_set_since(backend.client.pttl(lock.keys[0]) / 1000, ttl, since)
    lock.release()


def test_a_key_held_by_someone_else_times_out_naming_the_lock(backend):
    # test_context_manager_raises_when_locked_not_acquired, test_lock_error_gives_correct_lock_name
    backend.client.set(Lock("foo").keys[0], "bar")
    with pytest.raises(LockTimeout) as info, Lock("foo", ttl=5, timeout=0.1):
        pytest.fail("the body must not run")
    assert info.value.lock_name == "foo"


def test_a_ttl_that_ran_out_in_the_body_raises_on_exit(backend):
    # test_context_manager_not_raise_on_release_lock_not_owned_error (raise_on_release_error)
    with pytest.raises(LockNotOwned) as info, Lock("foo", ttl=0.1):
        time.sleep(0.15)
    assert info.value.lock_name == "foo"


def test_a_release_in_the_body_makes_the_exit_raise(backend):
    # test_context_manager_not_raise_on_release_lock_error
    with pytest.raises(LockNotOwned), Lock("foo", ttl=5) as lock:
        lock.release()
    assert not Lock("foo").locked()


def test_release_and_extend_of_an_unheld_lock_raise(backend):
    # test_releasing_unlocked_lock_raises_error, test_extending_unlocked_lock_raises_error
    lock = Lock("foo", ttl=10)
    with pytest.raises(LockNotOwned):
        lock.release()
    with pytest.raises(LockNotOwned):
        lock.extend(10)
    assert issubclass(LockNotOwned, LockError)


def test_a_token_changed_behind_its_back_is_not_released_or_extended(backend):
    # test_releasing_lock_no_longer_owned_raises_error,
    # test_extending_lock_no_longer_owned_raises_error,
    # test_context_manager_reacquiring_lock_no_longer_owned_raises_error
    lock = Lock("foo", ttl=10)
    assert lock.acquire(0)
    backend.client.set(lock.keys[0], "a")
    with pytest.raises(LockNotOwned):
        lock.extend(10)
    with pytest.raises(LockNotOwned):
        lock.release()
    assert backend.client.get(lock.keys[0]) in (b"a", "a"), "someone else's value is kept"
    with pytest.raises(LockNotOwned):
        lock.release()  # the hold was dropped by the failed release
    assert not lock.owned()
    backend.client.delete(lock.keys[0])
    with pytest.raises(LockNotOwned), Lock("foo", ttl=10) as held:
        backend.client.set(held.keys[0], "a")


def test_extend_resets_the_remaining_ttl(backend):  # test_extend_lock(_replace_ttl, _float)
    lock = Lock("foo", ttl=10)
    assert lock.acquire(0)
    backend.client.pexpire(lock.keys[0], 5000)
    since = time.monotonic()
    lock.extend()
    assert ttl_set_since(backend.client.pttl(lock.keys[0]) / 1000, 10, since)
    since = time.monotonic()
    lock.extend(20.5)
    assert ttl_set_since(backend.client.pttl(lock.keys[0]) / 1000, 20.5, since)
    lock.release()


# --- python-redis-lock ------------------------------------------------------------------


def test_a_held_lock_makes_a_timed_acquire_fail(backend):  # test_timeout
    with Lock("foobar", ttl=5):
        start = time.monotonic()
        assert Lock("foobar", ttl=5).acquire(timeout=0.3) is False
        assert time.monotonic() - start >= 0.3


# (The short TTLs below run out on a machine that stalls the test for longer: a run that
# a stall overlapped and that failed is done again, under a name of its own.)


def test_an_expiring_holder_lets_a_timed_acquire_in(backend, stalls):
    # test_timeout_expire, test_expire_without_timeout
    names = named("foobar")

    def expiring() -> None:
        name = next(names)
        assert Lock(name, ttl=0.5).acquire(0)  # never released
        second = Lock(name, ttl=5)
        assert not second.acquire(0)
        assert second.acquire(timeout=2)
        second.release()

    stalls.again_if_stalled(expiring)


def test_auto_renew_outlasts_a_timed_acquire(backend, stalls):  # test_timeout_expire_with_renewal
    names = named("foobar")

    def outlasted() -> None:
        name = next(names)
        with Lock(name, ttl=0.5, auto_renew=True):
            assert Lock(name, ttl=5).acquire(timeout=1.2) is False

    stalls.again_if_stalled(outlasted)


def test_auto_renew_keeps_the_value_past_the_ttl(backend, stalls):  # test_auto_renewal
    names = named("lock_renewal")

    def renewed() -> None:
        lock = Lock(next(names), ttl=0.6, auto_renew=True)
        assert lock.acquire(0)
        value = backend.client.get(lock.keys[0])
        time.sleep(1.5)
        assert backend.client.get(lock.keys[0]) == value, "expired while it should be renewed"
        lock.release()
        assert not lock.locked()

    stalls.again_if_stalled(renewed)


def test_auto_renewal_stops_after_gc(backend):  # test_auto_renewal_stops_after_gc
    lock = Lock("spam", ttl=1, auto_renew=True)
    key = lock.keys[0]
    assert lock.acquire(0)
    del lock
    gc.collect()
    assert eventually(lambda: not backend.client.exists(key), timeout=30)  # not renewed on


def test_extend_to_a_longer_ttl(backend):  # test_extend, test_extend_lock_default_expire
    with Lock("foobar", ttl=100) as lock:
        assert backend.client.ttl(lock.keys[0]) <= 100
        lock.extend(1000)
        assert backend.client.ttl(lock.keys[0]) > 100
        backend.client.expire(lock.keys[0], 50)
        since = time.monotonic()
        lock.extend()
        assert ttl_set_since(backend.client.pttl(lock.keys[0]) / 1000, 100, since)


def test_another_instance_cannot_extend_or_release(backend):
    # test_extend_another_instance_different_id_fail, test_bogus_release
    lock = Lock("foobar", ttl=100)
    assert lock.acquire(0)
    other = Lock("foobar", ttl=100)
    with pytest.raises(LockNotOwned):
        other.extend(1000)
    with pytest.raises(LockNotOwned):
        other.release()
    assert backend.client.ttl(lock.keys[0]) <= 100
    lock.release()


def test_double_acquire_is_an_error(backend):  # test_double_acquire
    lock = Lock("foobar", ttl=5)
    with lock, pytest.raises(LockError):
        lock.acquire()


def test_entering_a_held_lock_without_waiting_raises(backend):
    # test_enter_already_acquired_with_not_blocking
    assert Lock("foobar", ttl=5).acquire(0)
    with pytest.raises(LockTimeout), Lock("foobar", ttl=5, timeout=0):
        pytest.fail("the body must not run")


def test_force_release_then_the_old_holder_does_not_own_it(backend):  # test_reset
    lock = Lock("foobar", ttl=5)
    assert lock.acquire(0)
    assert Lock.force_release("foobar")
    new = Lock("foobar", ttl=5)
    assert new.acquire(0)
    new.release()
    with pytest.raises(LockNotOwned):
        lock.release()


def test_locked_is_true_for_every_instance(backend):  # test_locked_method
    one, another = Lock("lock_name", ttl=5), Lock("lock_name", ttl=5)
    assert (one.locked(), another.locked()) == (False, False)
    assert one.acquire(0)
    assert (one.locked(), another.locked()) == (True, True)
    one.release()
    assert (one.locked(), another.locked()) == (False, False)


@pytest.mark.parametrize("ttl", [-1, -123, 0])
def test_bad_ttls_are_refused(ttl):  # test_borken_expires
    with pytest.raises(ValueError, match="ttl"):
        Lock("foobar", ttl=ttl)
    with pytest.raises(ValueError, match="ttl"):
        Lock("foobar", ttl=5).extend(ttl)


def test_bad_timeouts_are_refused():  # test_invalid_timeout
    lock = Lock("foobar", ttl=5)
    for timeout in (-123, -1, math.nan):
        with pytest.raises(ValueError, match="timeout"):
            lock.acquire(timeout=timeout)
    with pytest.raises(TypeError, match="timeout"):
        lock.acquire(timeout="foobar")  # type: ignore[arg-type]


def contender(ready: Any, go: Any, won: Any) -> None:
    lock = Lock("contended", ttl=30)
    ready.put(1)
    go.wait(10)
    won.put(lock.acquire(0))


def test_exactly_one_of_many_processes_gets_it(real_backend, processes):  # test_no_overlap2
    ready, won, go = processes.queue(), processes.queue(), processes.event()
    count = 8  # 125 in the original; the box has two cores
    for _ in range(count):
        processes.start(contender, ready, go, won)
    for _ in range(count):
        ready.get(timeout=20)
    go.set()
    results = [won.get(timeout=20) for _ in range(count)]
    processes.join_all()
    assert results.count(True) == 1


# --- pottery ----------------------------------------------------------------------------


@pytest.fixture
def nodes(masters: list[RedisServer], settings: Any) -> list[RedisServer]:
    for server in masters:
        server.client().flushall()
    settings.REDISLOCK = {"REDLOCK_NODES": [server.url for server in masters]}
    return masters


def on_nodes(nodes: list[RedisServer], lock: Redlock) -> int:
    return sum(bool(server.client().exists(lock.keys[0])) for server in nodes)


# (The Redlocks of 0.2-0.3 s below run out on a machine that stalls the test for longer: a
# run that a stall overlapped and that failed is done again, under a name of its own.)


def test_redlock_acquire_and_time_out(nodes, stalls):  # test_acquire_and_time_out, test_acquired
    names = named("printer")

    def timed_out() -> None:
        lock = Redlock(next(names), ttl=0.2)
        assert on_nodes(nodes, lock) == 0
        assert not lock.locked()
        assert lock.acquire(0)
        assert on_nodes(nodes, lock) == 3
        assert lock.locked()
        time.sleep(0.4)
        assert on_nodes(nodes, lock) == 0
        assert not lock.locked()

    stalls.again_if_stalled(timed_out)


def test_redlock_acquire_twice(nodes, stalls):
    # test_acquire_same_lock_twice_(non_)blocking_without_timeout: not reentrant while valid,
    # acquirable again by the same owner once its validity ran out
    names = named("printer")

    def twice() -> None:
        lock = Redlock(next(names), ttl=0.2)
        assert lock.acquire(0)
        with pytest.raises(LockError, match="not reentrant"):
            lock.acquire(0)
        time.sleep(0.4)
        assert lock.acquire(0)
        lock.release()

    stalls.again_if_stalled(twice)


def test_redlock_release_unheld_or_twice(nodes, stalls):
    # test_release_unlocked_lock, test_release_same_lock_twice, test_acquire_then_release
    names = named("printer")

    def released() -> None:
        lock = Redlock(next(names), ttl=0.2)
        with pytest.raises(LockNotOwned):
            lock.release()
        assert lock.acquire(0)
        lock.release()
        assert on_nodes(nodes, lock) == 0
        with pytest.raises(LockNotOwned):
            lock.release()

    stalls.again_if_stalled(released)


def test_redlock_context_manager(nodes):  # test_context_manager(_acquired)
    lock = Redlock("printer", ttl=5)
    with lock:
        assert on_nodes(nodes, lock) == 3
        assert lock.locked()
    assert on_nodes(nodes, lock) == 0
    assert not lock.locked()


def test_redlock_timed_out_before_exit(nodes, stalls):
    # test_context_manager_(acquired_)time_out_before_exit
    names = named("printer")

    def timed_out() -> None:
        lock = Redlock(next(names), ttl=0.2)
        seen = []

        def body() -> None:
            with lock:
                seen.append(lock.locked())
                time.sleep(0.4)
                seen.extend((on_nodes(nodes, lock), lock.locked()))

        with pytest.raises(LockNotOwned):
            body()
        assert seen == [True, 0, False]
        assert on_nodes(nodes, lock) == 0

    stalls.again_if_stalled(timed_out)


def test_redlock_released_before_exit(nodes):  # test_context_manager_release_before_exit
    lock = Redlock("printer", ttl=5)

    def body() -> None:
        with lock:
            lock.release()
            assert on_nodes(nodes, lock) == 0

    with pytest.raises(LockNotOwned):
        body()


def test_redlock_a_second_instance_waits_its_turn(nodes, stalls):
    # test_default_context_manager_params, test_overridden_context_manager_params
    names = named("printer")

    def waits() -> None:
        name = next(names)
        first, second = Redlock(name, ttl=0.3), Redlock(name, ttl=5, timeout=0)
        with first, pytest.raises(LockTimeout), second:
            pytest.fail("the body must not run")
        seen = []

        def body() -> None:
            with first, Redlock(name, ttl=5, timeout=2) as waited:
                seen.extend((waited.owned(), first.owned()))  # first's ttl ran out meanwhile

        with pytest.raises(LockNotOwned):
            body()  # first's exit: it no longer holds the lock
        assert seen == [True, False]

    stalls.again_if_stalled(waits)


def test_redlock_extend(nodes, stalls):  # test_extend (no cap on extensions here)
    names = named("printer")

    def extended() -> None:
        lock = Redlock(next(names), ttl=0.3)
        with pytest.raises(LockNotOwned):
            lock.extend()
        assert lock.acquire(0)
        for _ in range(5):
            time.sleep(0.1)
            lock.extend()
        assert lock.owned()
        lock.release()

    stalls.again_if_stalled(extended)


@pytest.mark.parametrize("count", [1, 2, 5, 10])
def test_redlock_contention(nodes, count):  # test_contention
    locks = [Redlock("printer", ttl=5) for _ in range(count)]
    with ThreadPoolExecutor(count) as pool:
        results = list(pool.map(lambda lock: lock.acquire(0), locks))
    # Several contenders may split the votes so that nobody wins; never two.
    assert results.count(True) <= 1
    if count == 1:
        assert results == [True]


# --- the same for AsyncLock -------------------------------------------------------------


def test_async_unheld_release_extend_and_expiry_in_the_body(backend):
    async def main() -> None:
        lock = AsyncLock("foo", ttl=0.1)
        with pytest.raises(LockNotOwned):
            await lock.release()
        with pytest.raises(LockNotOwned):
            await lock.extend()
        with pytest.raises(LockNotOwned):
            async with lock:
                await asyncio.sleep(0.15)
        held = AsyncLock("foo", ttl=5)
        assert await held.acquire(0)
        backend.client.set(held.keys[0], "a")
        with pytest.raises(LockNotOwned):
            await held.extend()
        with pytest.raises(LockNotOwned):
            await held.release()
        assert not await held.owned()

    asyncio.run(main())


def test_threads_never_hold_one_lock_at_once(backend):  # the spirit of test_no_overlap
    inside, overlaps = [0], []
    guard = threading.Lock()

    def work() -> None:
        for _ in range(20):
            with Lock("overlap", ttl=5, timeout=10):
                with guard:
                    inside[0] += 1
                    overlaps.append(inside[0])
                time.sleep(0.001)
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert overlaps == [1] * 80
