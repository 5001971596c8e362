"""What applies of redis-py PR #3786's read-write lock tests (``tests/test_rwlock.py`` at
86ab631d, "rwlock: Better benchmark"), ported to ``ReadWriteLock`` on fakeredis, a real
redis-server and a real Cluster.

What does not apply, and why:

- Their key layout (``foo:write``, ``foo:read``, ``foo:write_semaphore`` read directly):
  ours is described in ``read_write_keys`` and read through the public API (``state()``,
  ``ttl()``, ``readers()``); where a test plants or removes a key, it does so in our layout.
- Two guards of one lock held by one thread (``test_multiple_readers``,
  ``test_mutual_exclusion``, the exclusion tests): ours are not reentrant (a thread holds
  one side at a time, and a second acquire raises LockError), so the second holder is
  another thread.
- ``sleep`` (their polling interval) and ``blocking``: we do not poll (waiters are woken by
  the release), and ``acquire(timeout=0)`` is their ``blocking=False``.
- ``reacquire`` is ``extend``. ``test_read_reacquire_after_expiration`` does not apply:
  they renew a reader whose lease lapsed; we never extend a lapsed hold (another writer may
  have been let in meanwhile), so ``extend`` raises LockNotOwned there.
- ``max_writers`` (``test_unique_writer``, ``test_max_writers``): we have no cap on waiting
  writers (each waits its timeout in the line); not ported.
- The context manager's error: theirs is a LockError naming the lock; ours is LockTimeout,
  a LockError, naming it: ported as that.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout
from django_redislock.locks.keys import OWNER
from django_redislock.locks.read_write import ReadWriteLock
from tests.support.waiting import Stalls, server_now, ttl_set_since, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def other_thread(call: Any, *args: Any) -> Any:
    """``call(*args)`` in a thread that ends without releasing what it took."""
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(call(*args)), daemon=True)
    thread.start()
    thread.join(10)
    return got[0]


def test_write_lock(backend):
    rw = ReadWriteLock("foo", ttl=10)
    guard = rw.write()
    since = time.monotonic()
    assert guard.acquire(0)
    state = rw.state()
    assert state.writer is not None
    assert state.writer.pid == os.getpid()
    assert ttl_set_since(state.writer_ms / 1000, 10, since)
    guard.release()
    assert rw.state().writer is None


def test_read_lock(backend):
    rw = ReadWriteLock("foo", ttl=10)
    guard = rw.read()
    since = time.monotonic()
    assert guard.acquire(0)
    assert rw.readers() == 1
    assert ttl_set_since(guard.ttl(), 10, since)
    [member] = backend.client.zrange(guard.layout.readers, 0, -1, withscores=True)
    assert ttl_set_since(member[1] / 1000 - server_now(), 10, since)
    guard.release()
    assert rw.readers() == 0


def test_multiple_readers(backend):
    rw = ReadWriteLock("foo", ttl=10)
    assert rw.read().acquire(0)
    assert other_thread(ReadWriteLock("foo", ttl=10).read().acquire, 0)
    assert rw.readers() == 2
    rw.read().release()
    assert rw.readers() == 1
    assert ReadWriteLock.force_release("foo")  # the other thread's
    assert rw.readers() == 0


@pytest.mark.parametrize(
    ("first", "second"),
    [("write", "write"), ("write", "read"), ("read", "write")],
    ids=["mutual_exclusion", "writer_reader_exclusion", "reader_writer_exclusion"],
)
def test_exclusion(backend, first, second):
    rw = ReadWriteLock("foo", ttl=10)
    assert getattr(rw, first)().acquire(0)
    assert not other_thread(getattr(ReadWriteLock("foo"), second)().acquire, 0)
    getattr(rw, first)().release()
    taker = getattr(ReadWriteLock("foo"), second)()
    assert other_thread(taker.acquire, 0)
    assert ReadWriteLock.force_release("foo")


def test_context_manager(backend):
    rw = ReadWriteLock("foo", ttl=10)
    with rw.write():
        assert rw.state().writer is not None
    assert rw.state().writer is None
    with rw.read():
        assert rw.readers() == 1
    assert rw.readers() == 0


@pytest.mark.parametrize(("holding", "waiting"), [("write", "read"), ("read", "write")])
def test_blocking_timeout(backend, holding, waiting):
    # test_reader_blocking_timeout, test_writer_blocking_timeout
    rw = ReadWriteLock("foo", ttl=10, timeout=0.1)
    with getattr(rw, holding)():
        start = time.monotonic()
        assert not other_thread(getattr(ReadWriteLock("foo", timeout=0.1), waiting)().acquire)
        assert time.monotonic() - start >= 0.1


def test_writer_waiting_blocks_readers(backend):
    rw = ReadWriteLock("foo", ttl=10)
    assert other_thread(rw.read().acquire, 0)  # a reader, so that the writer waits
    waiter = threading.Thread(target=ReadWriteLock("foo").write().acquire, args=(2,), daemon=True)
    waiter.start()
    wait_for(lambda: rw.state().waiters == 1, 10)
    assert not other_thread(ReadWriteLock("foo").read().acquire, 0)
    waiter.join(10)


def test_read_timeout_then_write(backend):
    # A 0.5 s read hold (redis-py's 30 ms lapsed before the writer's try on a loaded machine),
    # and a run that a stall of the process overlapped and that failed is done again.
    names = iter(f"foo-{n}" for n in range(100))

    def lapsed() -> None:
        name = next(names)
        rw = ReadWriteLock(name, ttl=0.5)
        assert other_thread(rw.read().acquire, 0)
        assert rw.readers() == 1
        assert not other_thread(ReadWriteLock(name).write().acquire, 0)
        time.sleep(0.55)
        writer = ReadWriteLock(name).write()
        assert writer.acquire(0)
        assert rw.readers() == 0
        writer.release()

    with Stalls() as stalls:
        stalls.again_if_stalled(lapsed)


def test_read_timeout_then_read(backend):
    rw = ReadWriteLock("foo", ttl=0.03)
    assert other_thread(rw.read().acquire, 0)
    time.sleep(0.05)
    assert rw.read().acquire(0)
    assert rw.readers() == 1
    rw.read().release()


def plant_lapsed_writer(backend: Any, rw: ReadWriteLock) -> None:
    """A waiting writer whose registration lapsed (its process died), in our layout."""
    keys = rw.write().layout
    backend.client.zadd(keys.waiters, {"wdead|": 1})
    backend.client.zadd(keys.writers_waiting, {"wdead|": 1})
    deadline = int(server_now() * 1000) - 1
    backend.client.hset(keys.registrations, "wdead|", f"{deadline}|10000|0|{OWNER}")


@pytest.mark.parametrize("side", ["read", "write"])
def test_a_lapsed_waiting_writer_blocks_nobody(backend, side):
    # test_write_waiting_then_read, test_write_waiting_then_write
    rw = ReadWriteLock("foo", ttl=1)
    plant_lapsed_writer(backend, rw)
    assert getattr(rw, side)().acquire(0)
    assert rw.state().waiters == 0  # dropped when met
    getattr(rw, side)().release()


@pytest.mark.parametrize("side", ["read", "write"])
def test_reacquire_is_extend(backend, side):
    # test_write_reacquire, test_read_reacquire
    def extended() -> None:
        guard = getattr(ReadWriteLock("foo", ttl=0.5), side)()
        assert guard.acquire()
        time.sleep(0.1)
        assert guard.ttl() <= 0.41
        since = time.monotonic()
        guard.extend()
        assert ttl_set_since(guard.ttl(), 0.5, since)
        guard.release()

    # A stall of the process past the 0.5 s TTL loses the hold: such a run is done again.
    with Stalls() as stalls:
        stalls.again_if_stalled(extended)


def test_write_reacquire_failure(backend):
    rw = ReadWriteLock("foo", ttl=10)
    guard = rw.write()
    assert guard.acquire()
    backend.client.delete(guard.layout.writer)
    with pytest.raises(LockNotOwned):
        guard.extend()
    assert other_thread(ReadWriteLock("foo", ttl=10).write().acquire, 0)
    with pytest.raises(LockNotOwned):
        guard.extend()


@pytest.mark.parametrize("side", ["read", "write"])
def test_release_without_acquire_raises(backend, side):
    with pytest.raises(LockNotOwned):
        getattr(ReadWriteLock("foo", ttl=10), side)().release()


def test_read_release_and_reacquire_no_longer_owned_raise(backend):
    # test_read_release_no_longer_owned_raises, test_read_reacquire_no_longer_owned_raises
    guard = ReadWriteLock("foo", ttl=10).read()
    assert guard.acquire(0)
    backend.client.delete(guard.layout.readers)
    with pytest.raises(LockNotOwned):
        guard.extend()
    with pytest.raises(LockNotOwned):
        guard.release()


def test_write_release_no_longer_owned_raises(backend):
    guard = ReadWriteLock("foo", ttl=10).write()
    assert guard.acquire(0)
    backend.client.set(guard.layout.writer, "wother|1|0|1|host", px=10_000)
    with pytest.raises(LockNotOwned):
        guard.release()
    assert backend.client.get(guard.layout.writer) is not None  # not freed by a non-owner


@pytest.mark.parametrize(("holding", "waiting"), [("write", "read"), ("read", "write")])
def test_context_manager_blocking_timeout(backend, holding, waiting):
    # test_read_context_manager_blocking_timeout, test_write_context_manager_blocking_timeout
    assert other_thread(getattr(ReadWriteLock("foo", ttl=10), holding)().acquire, 0)
    with pytest.raises(LockError) as info, getattr(ReadWriteLock("foo", timeout=0.05), waiting)():
        pass
    assert isinstance(info.value, LockTimeout)
    assert info.value.lock_name == "foo"
