"""More of what the lock suites of redis-py (``tests/test_lock.py``,
``tests/test_asyncio/test_lock.py``), python-redis-lock (``tests/test_redis_lock.py``) and
pottery (``tests/test_redlock.py``, ``tests/test_aioredlock.py``) check, for the cases that
``test_ported.py`` and the rest of ``tests/locks`` did not cover yet. The mapping of their API
onto ours is the one ``test_ported.py`` describes; besides it: a python-redis-lock ``id``
shared by two instances is a ``reentrant=True`` lock (its hold belongs to the thread, so any
instance of that name in the thread acts on it), ``get_owner_id`` is ``describe_lock``, a
redis-py ``sleep`` is ``LOCK_RETRY_DELAY``, pottery's Redis errors are nodes really taken
down, and ``AIORedlock`` tests that are not about a quorum run on ``AsyncLock``. Each test
names its origin in a comment.

Left out, as they have no meaning here:

* redis-py ``test_lock_token``, python-redis-lock ``test_owner_id``/``test_token``: there
  is no caller-chosen token or id; the value in Redis is this package's own encoding (its
  owner is read back through ``describe_lock``, ported).
* redis-py ``test_lock`` (a key without TTL), ``test_extending_lock_with_no_timeout_raises_
  error``, ``test_reacquiring_lock_with_no_timeout_raises_error``,
  ``test_context_manager_reacquiring_lock_with_no_timeout_raises_error``; python-redis-lock
  ``test_extend_lock_without_expire_fail``, ``test_auto_renewal_bad_values``: every lock
  here has a TTL (a ttl of 0 is refused, see ``test_ported.py``).
* redis-py ``test_blocking``, ``test_invalid_context_manager_params``; python-redis-lock
  ``test_not_usable_timeout``; pottery ``test_acquire_same_lock_twice_non_blocking_with_
  timeout``, ``test_acquire_nonblocking_with_timeout``, ``test_context_manager_nonblocking_
  with_timeout``: there is no ``blocking`` flag to contradict a timeout (``timeout=0`` is
  the non-blocking acquire).
* redis-py ``raise_on_release_error=False``: no such switch; the raising side is ported in
  ``test_ported.py``.
* redis-py ``TestLockClassSelection``: no ``lock_class`` factory.
* redis-py ``FakeLockTime`` sleep counts (``test_blocking_timeout``,
  ``test_context_manager_blocking_timeout``): waiters block on a wake-up list, they do not
  sleep in steps; the deadline itself is covered by ``test_deadlines.py``. The
  ``test_high_sleep_small_blocking_timeout`` idea is ported below.
* python-redis-lock ``test_upgrade`` (values of an older release), ``test_simple``,
  ``test_simple_auto_renewal`` (log lines of a helper process and of the renewal thread),
  ``test_no_auto_renewal``/``test_auto_renewal`` internals (thread attributes; the visible
  behaviour is in ``test_ported.py``), ``test_plain``.
* python-redis-lock ``test_expire_int_conversion``/``test_timeout_int_conversion`` with
  strings (``'123'``): numbers given as strings are refused with TypeError by design
  (``test_keys.py``); the integer forms are ported.
* python-redis-lock ``test_reset_all``, ``test_reset_all_signalizes``: no "reset every
  lock" call (``force_release`` is per name; its wake-up is tested in ``test_lock.py``).
* python-redis-lock ``test_no_overlap`` (timestamps parsed out of a helper's log): the same
  property is ``test_processes.py::test_eight_processes_increment_exactly``.
* pottery ``test_extend``'s ``TooManyExtensions``: extensions are not capped here (the
  uncapped side is ported), ``test_slots``/``test_repr`` of ``AIORedlock`` (no asyncio
  Redlock; ``Redlock``'s repr is in ``test_redlock.py``, ``Lock``/``AsyncLock``'s below),
  ``raise_on_redis_errors`` (no switch: all nodes down is always ``RedisUnavailable``, see
  ``test_redlock.py``), ``TestSynchronize`` (``@redis_locked`` guards views, not arbitrary
  functions), and the blocking-without-timeout re-acquire (here a ``LockError``, ported in
  ``test_ported.py``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest

from django_redislock import AsyncLock, Lock, Redlock, get_redis
from django_redislock.exceptions import LockNotOwned, LockTimeout
from django_redislock.locks.listing import describe_lock
from django_redislock.redis.aio import get_async_redis
from tests.servers import RedisServer
from tests.support.waiting import ttl_set_since

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def left(ttl: float | None) -> float:
    """A held lock's remaining TTL (None would mean it is not held)."""
    assert ttl is not None, "the lock is not held"
    return ttl


def keys_in(backend: Any) -> list[Any]:
    """Every key in the backend's database (on Cluster: on every primary)."""
    if backend.kind == "cluster":
        found = backend.client.keys("*", target_nodes=backend.client.PRIMARIES)
    else:
        found = backend.client.keys("*")
    return sorted(found)


# --- redis-py ---------------------------------------------------------------------------


def test_a_shared_instance_is_held_by_the_thread_that_acquired_it(backend: Any) -> None:
    # redis-py: test_lock_token_thread_local_false — there a thread_local=False token is
    # shared by every thread; here a hold is always the acquiring thread's (redis-py's
    # default thread_local=True), so another thread using the same instance is no owner.
    lock = Lock("foo", ttl=10)
    since = time.monotonic()
    assert lock.acquire(0)
    seen: list[Any] = []

    def other() -> None:
        seen.append(lock.owned())
        for action in (lock.release, lock.extend):
            try:
                action()
            except LockNotOwned as exc:
                seen.append(exc.lock_name)

    in_thread(other).join(10)
    assert seen == [False, "foo", "foo"]
    assert lock.owned(), "the other thread's attempts left the hold alone"
    assert ttl_set_since(lock.ttl(), 10, since)
    lock.release()
    assert not lock.locked()


@pytest.fixture
def decoded(backend: Any, settings: Any) -> Any:
    """The locks' connection (sync and asyncio) answers str, not bytes."""
    if backend.kind == "fakeredis":
        # Django's own RedisCache hands its OPTIONS to the connection pool as they are.
        options = {"connection_class": fakeredis.FakeRedisConnection, "decode_responses": True}
        settings.CACHES = {
            **settings.CACHES,
            "decoded": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": "redis://fakeredis:6379/0",
                "OPTIONS": options,
            },
        }
        settings.REDISLOCK = {"CACHE": "decoded"}
    else:
        settings.REDISLOCK = {
            "URL": f"{backend.url}?decode_responses=True",
            "CLUSTER": backend.kind == "cluster",
        }
    client = get_redis()
    client.set("probe:{decoded}", "x")
    assert client.get("probe:{decoded}") == "x", "the client must really decode"
    client.delete("probe:{decoded}")
    return backend


def test_a_client_that_decodes_responses(decoded: Any) -> None:
    # redis-py: test_owned_with_decoded_responses (and test_locked, test_competing_locks,
    # test_extend_lock on that client); fencing and describe_lock read values back too.
    one, two = Lock("foo", ttl=10, fencing=True), Lock("foo", ttl=10, fencing=True)
    assert (one.locked(), one.owned(), two.owned()) == (False, False, False)
    assert one.acquire(0)
    assert (one.locked(), one.owned(), two.owned()) == (True, True, False)
    assert not two.acquire(0)
    fence = one.fence
    assert isinstance(fence, int)
    info = describe_lock("foo")
    assert info is not None
    assert (info.pid, info.fence) == (os.getpid(), fence)
    since = time.monotonic()
    one.extend(20)
    assert ttl_set_since(one.ttl(), 20, since)
    one.release()
    assert two.acquire(0)
    assert (two.fence or 0) > fence
    handed: list[int | None] = []

    def wait() -> None:
        with Lock("foo", ttl=10, fencing=True, timeout=10) as waiter:
            handed.append(waiter.fence)

    thread = in_thread(wait)
    deadline = time.monotonic() + 10
    while not decoded.client.zcard(two.keys[1]):
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.01)
    two_fence = two.fence
    two.release()  # handed to the waiter, whose wake-up the decoding client reads
    thread.join(10)
    assert len(handed) == 1
    assert handed[0] is not None
    assert two_fence is not None
    assert handed[0] > two_fence
    assert not two.locked()

    async def main() -> None:
        assert await get_async_redis().echo("x") == "x", "the asyncio client decodes too"
        first, second = AsyncLock("bar", ttl=10), AsyncLock("bar", ttl=10)
        assert await first.acquire(0)
        assert await first.owned()
        assert not await second.owned()
        assert not await second.acquire(0)
        since = time.monotonic()
        await first.extend(20)
        assert ttl_set_since(await first.ttl(), 20, since)
        waiter = asyncio.create_task(AsyncLock("bar", ttl=10).acquire(10))
        deadline = time.monotonic() + 10
        while not decoded.client.zcard(first.keys[1]):
            assert time.monotonic() < deadline, "the waiter never queued"
            await asyncio.sleep(0.01)
        await first.release()
        assert await waiter, "handed over to the waiting task"
        assert await first.locked()

    asyncio.run(main())


def test_a_long_retry_delay_does_not_stretch_a_timed_acquire(backend: Any, settings: Any) -> None:
    # redis-py: test_high_sleep_small_blocking_timeout (sleep=60, blocking_timeout=1): the
    # retry delay is at its maximum, 60 s, and the acquire still gives up at its timeout.
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    holder = Lock("foo", ttl=30)
    assert holder.acquire(0)
    start = time.monotonic()
    assert not Lock("foo", ttl=30).acquire(0.3)
    took = time.monotonic() - start
    assert 0.3 <= took < 5, took

    async def main() -> float:
        begun = time.monotonic()
        assert not await AsyncLock("foo", ttl=30).acquire(0.3)
        return time.monotonic() - begun

    took = asyncio.run(main())
    assert 0.3 <= took < 5, took
    holder.release()


@pytest.mark.parametrize("ttl", [10, 9.5])
def test_async_ttl_is_set_in_redis(backend: Any, ttl: Any) -> None:
    # redis-py (asyncio): test_timeout, test_float_timeout, test_lock (the key is there while
    # held, gone after)
    async def main() -> None:
        lock = AsyncLock("foo", ttl=ttl)
        since = time.monotonic()
        assert await lock.acquire(0)
        assert ttl_set_since(backend.client.pttl(lock.keys[0]) / 1000, ttl, since)
        assert ttl_set_since(await lock.ttl(), ttl, since)
        await lock.release()
        assert not backend.client.exists(lock.keys[0])

    asyncio.run(main())


def test_async_locked_and_owned_seen_by_two_instances(backend: Any) -> None:
    # redis-py (asyncio): test_locked, test_owned, test_competing_locks, test_context_manager
    async def main() -> None:
        one, two = AsyncLock("foo", ttl=5), AsyncLock("foo", ttl=5)
        assert (await one.locked(), await one.owned(), await two.owned()) == (False,) * 3
        assert await one.acquire(0)
        assert (await two.locked(), await one.owned(), await two.owned()) == (True, True, False)
        assert not await two.acquire(0)
        await one.release()
        async with two:
            assert backend.client.exists(two.keys[0])
            assert (await one.owned(), await two.owned()) == (False, True)
            assert not await one.acquire(0)
        assert not backend.client.exists(two.keys[0])
        assert (await one.locked(), await two.owned()) == (False, False)

    asyncio.run(main())


def test_async_extend_resets_the_remaining_ttl(backend: Any) -> None:
    # redis-py (asyncio): test_extend_lock_replace_ttl, test_reacquire_lock,
    # test_extend_lock_float; pottery (aio): test_extend, test_context_manager_extend (no cap
    # on the number of extensions here)
    async def main() -> None:
        lock = AsyncLock("foo", ttl=10)
        with pytest.raises(LockNotOwned):
            await lock.extend()
        async with lock:
            backend.client.pexpire(lock.keys[0], 5000)
            since = time.monotonic()
            await lock.extend()
            assert ttl_set_since(backend.client.pttl(lock.keys[0]) / 1000, 10, since)
            since = time.monotonic()
            await lock.extend(20.5)
            assert ttl_set_since(backend.client.pttl(lock.keys[0]) / 1000, 20.5, since)
            for _ in range(20):
                await lock.extend()
            assert await lock.owned()

    asyncio.run(main())


def test_async_release_in_the_body_makes_the_exit_raise(backend: Any) -> None:
    # redis-py (asyncio): test_context_manager_not_raise_on_release_lock_error (the raising
    # side); pottery (aio): test_context_manager_release_before_exit
    seen: list[bool] = []

    async def body() -> None:
        async with AsyncLock("foo", ttl=5) as lock:
            await lock.release()
            seen.append(await lock.locked())

    async def main() -> None:
        with pytest.raises(LockNotOwned) as info:
            await body()
        assert seen == [False]
        assert info.value.lock_name == "foo"
        assert await AsyncLock("foo", ttl=5).acquire(0), "nothing was left held"

    asyncio.run(main())


def test_async_release_from_another_task_leaves_the_lock_consistent(backend: Any) -> None:
    # redis-py (asyncio): test_release_cancellation_preserves_lock_state — there the release
    # runs in a task of its own and is cancelled at once; the lock must be either released
    # or still held and releasable. Here a hold belongs to the task that acquired it, so
    # such a task is no owner: cancelled or not, the owner keeps the lock and releases it.
    async def main() -> None:
        lock = AsyncLock("foo", ttl=10)
        assert await lock.acquire(0)
        cancelled = asyncio.create_task(lock.release())
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert await lock.owned()
        with pytest.raises(LockNotOwned):
            await asyncio.create_task(lock.release())
        assert await lock.owned()
        await lock.release()
        assert not await lock.locked()

    asyncio.run(main())


# --- python-redis-lock ------------------------------------------------------------------


def test_another_instance_with_the_same_owner_extends_and_releases(backend: Any) -> None:
    # python-redis-lock: test_extend_another_instance, test_given_id, test_bogus_release
    # (their shared ``id`` is a reentrant lock's thread here)
    orig = Lock("foobar", ttl=100, reentrant=True)
    assert orig.acquire(0)
    assert backend.client.ttl(orig.keys[0]) <= 100
    same = Lock("foobar", ttl=100, reentrant=True)
    assert same.owned()
    same.extend(1000)
    assert backend.client.ttl(orig.keys[0]) > 100
    other: list[bool] = []
    in_thread(lambda: other.append(Lock("foobar", ttl=5, reentrant=True).owned())).join(10)
    assert other == [False], "another thread is another owner"
    same.release()  # not the instance that acquired it
    assert not backend.client.exists(orig.keys[0])
    with pytest.raises(LockNotOwned):
        orig.release()  # and the hold was that one's too


def test_a_timeout_longer_than_the_ttl_is_accepted(backend: Any) -> None:
    # python-redis-lock: test_expire_less_than_timeout — there TimeoutTooLarge unless
    # auto_renewal; here the timeout only bounds the wait, so both forms are fine.
    for auto_renew in (False, True):
        lock = Lock("foobar", ttl=1, auto_renew=auto_renew)
        assert lock.acquire(timeout=2)
        lock.release()
    assert Lock("foobar", ttl=0.3).acquire(0)  # left to expire
    waiter = Lock("foobar", ttl=1)
    assert waiter.acquire(timeout=2), "got it once the holder's TTL ran out"
    waiter.release()


def test_integer_seconds_are_accepted(backend: Any) -> None:
    # python-redis-lock: test_timeout_int_conversion, test_expire_int_conversion (integers;
    # numbers as strings are refused here, see test_keys.py)
    lock = Lock("foobar", ttl=123, timeout=0)
    since = time.monotonic()
    assert lock.acquire(timeout=123)
    assert ttl_set_since(lock.ttl(), 123, since)
    lock.extend(1)
    assert left(lock.ttl()) <= 1
    lock.release()
    assert lock.acquire(timeout=0)
    lock.release()


def test_release_and_hand_offs_leave_no_keys_behind(backend: Any) -> None:
    # python-redis-lock: test_release_from_nonblocking_leaving_garbage, test_signal_expiration
    # (their signal list must not pile up; here nothing at all is left once the lock is free)
    for _ in range(10):
        lock = Lock("release_from_nonblocking", ttl=5)
        assert lock.acquire(0)
        lock.release()
    assert keys_in(backend) == []
    holder = Lock("handed", ttl=5)
    assert holder.acquire(0)
    assert not Lock("handed", ttl=5).acquire(0.1)  # a waiter that gave up
    got: list[bool] = []

    def wait() -> None:
        waiter = Lock("handed", ttl=5)
        if waiter.acquire(10):
            got.append(True)
            waiter.release()

    thread = in_thread(wait)
    deadline = time.monotonic() + 10
    while not backend.client.zcard(holder.keys[1]):
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.01)
    holder.release()
    thread.join(10)
    assert got == [True]
    assert keys_in(backend) == []


def test_describe_lock_names_this_process_as_owner(backend: Any) -> None:
    # python-redis-lock: test_get_owner_id (the owner of a held lock can be read back)
    assert describe_lock("foobar-tok") is None
    since = time.monotonic()
    with Lock("foobar-tok", ttl=30):
        info = describe_lock("foobar-tok")
        assert info is not None
        assert (info.name, info.pid, info.host) == ("foobar-tok", os.getpid(), socket.gethostname())
        assert ttl_set_since(info.ttl, 30, since)
    assert describe_lock("foobar-tok") is None


def hold_for(seconds: float, held: Any) -> None:
    with Lock("foobar", ttl=30):
        held.set()
        time.sleep(seconds)


def test_a_timed_acquire_gets_the_lock_another_process_releases(
    real_backend: Any, processes: Any
) -> None:
    # python-redis-lock: test_timeout_acquired, test_expire (the helper process holds the
    # lock, then lets it go; the waiter in this process gets it within its timeout)
    held = processes.event()
    processes.start(hold_for, 0.5, held)
    assert held.wait(10)
    lock = Lock("foobar", ttl=30)
    assert not lock.acquire(0)
    start = time.monotonic()
    assert lock.acquire(timeout=5)
    assert time.monotonic() - start < 5
    lock.release()
    processes.join_all(10)
    assert lock.acquire(0) is True
    lock.release()


# --- pottery ----------------------------------------------------------------------------


def revive(group: list[RedisServer]) -> None:
    for server in group:
        if server.process is None:
            server.start()
        server.client().flushall()


@pytest.fixture
def nodes(masters: list[RedisServer], settings: Any) -> Iterator[list[RedisServer]]:
    revive(masters)
    settings.REDISLOCK = {"REDLOCK_NODES": [server.url for server in masters]}
    yield masters
    revive(masters)


def on_nodes(group: list[RedisServer], lock: Redlock) -> int:
    return sum(bool(s.client().exists(lock.keys[0])) for s in group if s.process is not None)


def test_redlock_ttl_shorter_than_its_drift_allowance_is_never_held(nodes: Any) -> None:
    # pottery: test_acquire_fails_within_auto_release_time; pottery (aio): the same and
    # test_context_manager_fails_within_auto_release_time (auto_release_time=.001)
    lock = Redlock("printer", ttl=0.001)
    assert lock.acquire(0) is False
    assert lock.validity is None
    assert not lock.owned()
    with pytest.raises(LockTimeout) as info, Redlock("printer", ttl=0.001, timeout=0):
        pytest.fail("the body must not run")
    assert info.value.lock_name == "printer"
    assert on_nodes(nodes, lock) == 0, "the failed rounds left nothing on the nodes"
    assert Redlock("printer", ttl=5).acquire(0), "nor blocked anyone"


def test_redlock_on_nodes_that_decode_responses(nodes: Any) -> None:
    # redis-py: test_owned_with_decoded_responses, for Redlock's node clients
    urls = [f"{server.url}?decode_responses=True" for server in nodes]
    lock, other = Redlock("printer", ttl=5, nodes=urls), Redlock("printer", ttl=5, nodes=urls)
    since = time.monotonic()
    assert lock.acquire(0)
    assert (lock.locked(), lock.owned(), other.owned()) == (True, True, False)
    assert not other.acquire(0)
    assert ttl_set_since(lock.ttl(), 5, since)
    since = time.monotonic()
    lock.extend(10)
    assert ttl_set_since(lock.ttl(), 10, since)
    lock.release()
    assert on_nodes(nodes, lock) == 0
    assert other.acquire(0)
    other.release()


def test_redlock_held_lock_with_a_majority_of_nodes_gone(nodes: Any) -> None:
    # pottery: test_locked_rediserror, test_extend_rediserror, test_release_rediserror (their
    # Redis calls fail; here two of the three nodes are really down once the lock is held)
    lock = Redlock("printer", ttl=30)
    assert lock.acquire(0)
    nodes[0].stop()
    nodes[1].kill()
    assert not lock.locked()
    assert not lock.owned()
    assert lock.ttl() is None
    with pytest.raises(LockNotOwned) as info:
        lock.extend()
    assert info.value.lock_name == "printer"
    assert on_nodes(nodes, lock) == 0, "released where it could be"
    with pytest.raises(LockNotOwned):
        lock.release()  # the failed extend dropped the hold

    held = Redlock("printer", ttl=30)
    revive(nodes)
    assert held.acquire(0)
    nodes[0].stop()
    nodes[1].kill()
    with pytest.raises(LockNotOwned, match="could not be reached"):
        held.release()
    assert on_nodes(nodes, held) == 0


def test_redlock_a_long_retry_delay_does_not_stretch_a_timed_acquire(
    nodes: Any, settings: Any
) -> None:
    # redis-py: test_high_sleep_small_blocking_timeout, on Redlock (whose waiters retry)
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    holder = Redlock("printer", ttl=30)
    assert holder.acquire(0)
    start = time.monotonic()
    assert not Redlock("printer", ttl=30).acquire(0.3)
    took = time.monotonic() - start
    assert 0.3 <= took < 5, took
    holder.release()


@pytest.mark.parametrize("count", [1, 2, 5, 10])
def test_async_contention(backend: Any, count: Any) -> None:
    # pottery (aio): test_contention — one Redis here, so exactly one task wins
    async def main() -> list[bool]:
        locks = [AsyncLock("shower", ttl=5) for _ in range(count)]
        return list(await asyncio.gather(*(lock.acquire(0) for lock in locks)))

    results = asyncio.run(main())
    assert results.count(True) == 1
    assert Lock("shower").locked()


def test_async_a_holder_that_expires_lets_the_next_in(backend: Any) -> None:
    # pottery (aio): test_acquire_and_time_out, test_enqueued
    async def main() -> None:
        first = AsyncLock("shower", ttl=0.3)
        assert await first.acquire(0)
        assert await first.locked()
        second = AsyncLock("shower", ttl=5)
        assert await second.acquire(timeout=3), "in once the first one's TTL ran out"
        assert not await first.owned()
        assert not await first.acquire(timeout=0.1), "and now the first one waits in vain"
        await second.release()
        assert not await second.locked()

    asyncio.run(main())


def test_repr_names_the_lock() -> None:
    # pottery: test_repr, (aio) test_repr
    assert repr(Lock("printer", ttl=0.2)) == "<Lock 'printer' ttl=0.2>"
    assert repr(AsyncLock("shower", ttl=5)) == "<AsyncLock 'shower' ttl=5.0>"
