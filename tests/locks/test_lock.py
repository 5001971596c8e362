"""Lock behaviour seen from outside, on fakeredis, a real redis-server and a real Cluster."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import Lock
from django_redislock.exceptions import (
    LockError,
    LockNotOwned,
    LockTimeout,
    RedisLockError,
    RedisUnavailable,
)
from django_redislock.locks.listing import list_locks
from django_redislock.signals import lock_acquired, lock_busy, lock_lost, lock_released
from tests.support.waiting import BEFORE_ANY_RECHECK, SLOW_RETRY_DELAY, Stalls, ttl_set_since

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def wait_for(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def waiters_of(backend: Any, lock: Lock) -> int:
    return int(backend.client.zcard(lock.keys[1]))


def test_acquire_release_roundtrip(backend):
    lock = Lock("order:1", ttl=5)
    assert not lock.locked()
    since = time.monotonic()
    assert lock.acquire()
    assert lock.locked()
    assert lock.owned()
    assert ttl_set_since(lock.ttl(), 5, since)
    lock.release()
    assert not lock.locked()
    assert lock.ttl() is None
    assert not lock.owned()


def test_at_most_one_owner(backend):
    first, second = Lock("flash-sale:42", ttl=5), Lock("flash-sale:42", ttl=5)
    assert first.acquire(0)
    assert not second.acquire(0)
    assert not second.owned()
    first.release()
    assert second.acquire(0)
    second.release()


def test_context_manager_raises_lock_timeout_naming_the_lock(backend):
    holder = Lock("sale:7", ttl=5)
    holder.acquire()
    with pytest.raises(LockTimeout) as info, Lock("sale:7", ttl=5, timeout=0.05):
        pytest.fail("body must not run")
    holder.release()
    assert info.value.lock_name == "sale:7"
    assert "sale:7" in str(info.value)
    assert isinstance(info.value, LockError)
    assert isinstance(info.value, RedisLockError)


def test_release_by_non_owner_and_double_release_raise(backend):
    holder, other = Lock("r", ttl=5), Lock("r", ttl=5)
    holder.acquire()
    with pytest.raises(LockNotOwned):
        other.release()
    holder.release()
    with pytest.raises(LockNotOwned) as info:
        holder.release()
    assert info.value.lock_name == "r"


def test_expired_lock_is_never_deleted_or_extended_by_its_old_owner(backend):
    old, new = Lock("exp", ttl=0.15), Lock("exp", ttl=10)
    old.acquire()
    time.sleep(0.25)
    assert not old.owned()
    since = time.monotonic()
    assert new.acquire(0)
    value_before = backend.client.get(new.keys[0])
    with pytest.raises(LockNotOwned):
        old.extend(30)
    with pytest.raises(LockNotOwned):
        old.release()
    assert backend.client.get(new.keys[0]) == value_before
    assert ttl_set_since(new.ttl(), 10, since)
    new.release()


def test_extend_resets_ttl(backend):
    lock = Lock("ext", ttl=1)
    lock.acquire()
    since = time.monotonic()
    lock.extend(20)
    assert ttl_set_since(lock.ttl(), 20, since)
    lock.extend()
    assert lock.ttl() <= 1
    lock.release()


def test_timeout_zero_tries_once_and_timeout_waits(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    holder = Lock("busy", ttl=5)
    holder.acquire()
    start = time.monotonic()
    assert not Lock("busy", ttl=5).acquire(0)
    assert time.monotonic() - start < BEFORE_ANY_RECHECK  # one try, no wait
    start = time.monotonic()
    assert not Lock("busy", ttl=5).acquire(0.2)
    assert 0.2 <= time.monotonic() - start < BEFORE_ANY_RECHECK  # at its deadline
    assert waiters_of(backend, holder) == 0, "a waiter that gave up must leave the queue"
    holder.release()


@override_settings()
def test_waiter_is_woken_by_the_release_not_by_polling(backend, settings):
    # With a 5 s fallback re-check, only the push from the release can wake the waiter fast.
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    holder, waiter = Lock("push", ttl=30), Lock("push", ttl=30)
    holder.acquire()
    got: list[float] = []
    thread = in_thread(lambda: got.append(time.monotonic()) if waiter.acquire(math.inf) else None)
    wait_for(lambda: waiters_of(backend, holder) == 1)
    released = time.monotonic()
    holder.release()
    thread.join(BEFORE_ANY_RECHECK)
    assert got
    assert got[0] - released < BEFORE_ANY_RECHECK
    assert not holder.owned()
    assert waiter.keys[0]
    assert backend.client.get(waiter.keys[0]) is not None


@override_settings()
def test_waiter_wakes_when_the_holders_ttl_runs_out(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    Lock("crashed", ttl=0.3).acquire()  # never released: its holder "crashed"
    start = time.monotonic()
    waiter = Lock("crashed", ttl=5)
    assert waiter.acquire(2 * BEFORE_ANY_RECHECK)
    # Woken by the TTL (0.3 s), not by a re-check (15 s at the earliest), nor at its deadline.
    assert 0.25 <= time.monotonic() - start < BEFORE_ANY_RECHECK
    waiter.release()


def test_lock_instance_shared_by_threads_excludes_them(backend):
    lock = Lock("shared", ttl=5)
    lock.acquire()
    result: list[bool] = []
    in_thread(lambda: result.append(lock.acquire(0))).join()
    assert result == [False]
    lock.release()


def test_reentrant_same_owner_reacquires_and_needs_as_many_releases(backend):
    lock = Lock("re", ttl=5, reentrant=True)
    assert lock.acquire()
    assert lock.acquire()
    other: list[bool] = []
    in_thread(lambda: other.append(lock.acquire(0))).join()
    assert other == [False], "another thread is another owner"
    lock.release()
    assert lock.locked()
    lock.release()
    assert not lock.locked()


def test_non_reentrant_reacquire_by_the_holder_is_an_error(backend):
    lock = Lock("nre", ttl=5)
    lock.acquire()
    with pytest.raises(LockError, match="reentrant=True"):
        lock.acquire()
    lock.release()


def test_fair_waiters_acquire_in_arrival_order(backend):
    holder = Lock("fifo", ttl=10, fair=True)
    holder.acquire()
    order: list[int] = []

    def wait(i: int) -> None:
        lock = Lock("fifo", ttl=10, fair=True)
        assert lock.acquire(10)
        order.append(i)
        lock.release()

    threads = []
    for i in range(6):
        threads.append(in_thread(wait, i))
        wait_for(lambda n=i + 1: waiters_of(backend, holder) == n)
    holder.release()
    for thread in threads:
        thread.join(10)
    assert order == list(range(6))


def test_fair_waiter_that_gave_up_does_not_get_the_lock(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    holder = Lock("fifo2", ttl=10, fair=True)
    holder.acquire()
    assert not Lock("fifo2", ttl=10, fair=True).acquire(0.1)
    result: list[bool] = []
    waiter = Lock("fifo2", ttl=10, fair=True)
    thread = in_thread(lambda: result.append(waiter.acquire(2 * BEFORE_ANY_RECHECK)))
    wait_for(lambda: waiters_of(backend, holder) == 1)
    start = time.monotonic()
    holder.release()
    thread.join(BEFORE_ANY_RECHECK)
    assert result == [True]
    assert time.monotonic() - start < BEFORE_ANY_RECHECK  # handed over by the release


def test_fair_newcomer_does_not_jump_the_queue(backend):
    # The holder's TTL runs out once the waiter is queued (a TTL of its own could run out
    # before, on a stalled machine: then there would be no queue to jump).
    holder = Lock("nojump", ttl=30, fair=True)
    holder.acquire()
    result: list[bool] = []
    in_thread(lambda: result.append(Lock("nojump", ttl=30, fair=True).acquire(20)))
    wait_for(lambda: waiters_of(backend, holder) == 1)
    backend.client.pexpire(holder.keys[0], 1)
    wait_for(lambda: not holder.owned())  # ran out; the queued waiter, not a newcomer, is next
    assert not Lock("nojump", ttl=5, fair=True).acquire(0)
    wait_for(lambda: result == [True], 20)


def held_past_the_ttl(name: str) -> bool:
    """Holds ``name`` (TTL 0.3 s, renewed) for 1 s: whether it was still held, then."""
    lock = Lock(name, ttl=0.3, auto_renew=True)
    lock.acquire()
    time.sleep(1.0)
    if not lock.owned():
        return False  # lost (and reported): nothing to release
    assert not Lock(name, ttl=1).acquire(0)
    lock.release()
    assert not lock.locked()
    return True


def test_auto_renew_keeps_the_lock_past_its_ttl(backend):
    # A stall of the process longer than the TTL rightly loses the lock: such a run is
    # done again; one that no stall overlapped must keep it.
    with Stalls() as stalls:
        kept, _ = stalls.timed(lambda: held_past_the_ttl("renew"))
    assert kept


def test_auto_renew_reports_a_lost_lock(backend):
    lost: list[str] = []

    def receiver(sender: Any, name: str, **kwargs: Any) -> None:
        lost.append(name)

    lock_lost.connect(receiver)
    try:
        lock = Lock("renew-lost", ttl=0.3, auto_renew=True)
        lock.acquire()
        backend.client.delete(lock.keys[0])  # e.g. an operator or a failover lost it
        wait_for(lambda: lost == ["renew-lost"], timeout=30)
        assert not lock.owned()
        with pytest.raises(LockNotOwned):
            lock.release()
    finally:
        lock_lost.disconnect(receiver)


def test_fences_strictly_increase_including_hand_offs(backend):
    fences = []
    for _ in range(3):
        with Lock("fenced", ttl=5, fencing=True) as lock:
            fences.append(lock.fence)
    holder = Lock("fenced", ttl=5, fencing=True)
    holder.acquire()
    fences.append(holder.fence)

    def wait() -> None:
        with Lock("fenced", ttl=5, fencing=True, timeout=5) as waiter:
            fences.append(waiter.fence)

    thread = in_thread(wait)
    wait_for(lambda: waiters_of(backend, holder) == 1)
    holder.release()
    thread.join(5)
    assert all(isinstance(f, int) for f in fences)
    assert fences == sorted(set(fences))
    assert len(fences) == 5
    assert Lock("plain", ttl=5).fence is None


def test_force_release_frees_the_lock_and_wakes_a_waiter(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    holder = Lock("stuck", ttl=30)
    holder.acquire()
    got: list[float] = []

    def wait() -> None:
        with Lock("stuck", ttl=30, timeout=2 * BEFORE_ANY_RECHECK):
            got.append(time.monotonic())

    thread = in_thread(wait)
    wait_for(lambda: waiters_of(backend, holder) == 1)
    forced = time.monotonic()
    assert Lock.force_release("stuck") is True
    thread.join(BEFORE_ANY_RECHECK)
    assert got
    assert got[0] - forced < BEFORE_ANY_RECHECK
    with pytest.raises(LockNotOwned):
        holder.release()
    assert Lock.force_release("stuck") is False


def test_signals(backend):
    seen: list[tuple[str, str]] = []

    def make(kind: str) -> Any:
        def receiver(sender: Any, name: str, **kwargs: Any) -> None:
            seen.append((kind, name))

        return receiver

    receivers = {
        s: make(k) for s, k in [(lock_acquired, "acq"), (lock_released, "rel"), (lock_busy, "busy")]
    }
    for signal, receiver in receivers.items():
        signal.connect(receiver)
    try:
        with Lock("sig", ttl=5):
            Lock("sig", ttl=5).acquire(0)
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    assert seen == [("acq", "sig"), ("busy", "sig"), ("rel", "sig")]


def test_listing_shows_held_locks_with_owner_ttl_fence_and_waiters(backend):
    import os
    import socket

    a = Lock("shop:a", ttl=30, fencing=True)
    b = Lock("shop:b", ttl=10)
    c = Lock("other:c", ttl=20)
    since = time.monotonic()
    for lock in (a, b, c):
        lock.acquire()
    thread = in_thread(Lock("shop:b", ttl=5).acquire, 20)
    wait_for(lambda: waiters_of(backend, b) == 1)
    page = list_locks()
    assert page.total == 3
    by_name = {info.name: info for info in page.locks}
    assert [info.name for info in page.locks] == ["shop:b", "other:c", "shop:a"]  # by expiry
    info = by_name["shop:a"]
    assert info.pid == os.getpid()
    assert info.host == socket.gethostname()
    assert ttl_set_since(info.ttl, 30, since)
    assert info.fence == a.fence
    assert info.waiters == 0
    assert 0 <= info.held_for <= time.monotonic() - since + 0.002
    assert by_name["shop:b"].waiters == 1
    shop = list_locks("shop:")
    assert shop.total == 2
    assert {i.name for i in shop.locks} == {"shop:a", "shop:b"}
    assert [i.name for i in list_locks(offset=1, limit=1).locks] == ["other:c"]
    b.release()
    thread.join(20)
    a.release()
    assert "shop:a" not in {i.name for i in list_locks().locks}


def test_redis_unreachable_is_a_clear_error(backend, settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}
    lock = Lock("down", ttl=5)  # constructing touches nothing
    with pytest.raises(RedisUnavailable, match="unreachable"):
        lock.acquire()
    assert isinstance(RedisUnavailable("x"), RedisLockError)


def test_listing_leaves_out_locks_that_expired_without_release(backend):
    Lock("gone:1", ttl=0.1).acquire()
    Lock("gone:2", ttl=30).acquire()
    time.sleep(0.2)
    assert [i.name for i in list_locks().locks] == ["gone:2"]
    assert list_locks().total == 1
    assert list_locks("gone:").total == 1


def test_listing_prefix_is_literal_not_a_pattern(backend):
    Lock("a*b", ttl=30).acquire()
    Lock("axb", ttl=30).acquire()
    assert [i.name for i in list_locks("a*").locks] == ["a*b"]


def test_a_waiter_interrupted_while_waiting_leaves_the_queue(backend, monkeypatch):
    from django_redislock.locks import waiting as locks

    holder = Lock("interrupted", ttl=30)
    holder.acquire()
    real_wait = locks.wait_for_push

    def failing_blpop(client: Any, *args: Any) -> Any:
        raise RedisUnavailable("connection lost while blocked")

    monkeypatch.setattr(locks, "wait_for_push", failing_blpop)
    with pytest.raises(RedisUnavailable):
        Lock("interrupted", ttl=30).acquire(5)
    monkeypatch.setattr(locks, "wait_for_push", real_wait)
    assert waiters_of(backend, holder) == 0
    holder.release()
    assert not holder.locked(), "the lock must not go to a waiter that left"


def test_reentrancy_is_per_thread_across_lock_instances(backend):
    with Lock("nested", ttl=5, reentrant=True) as outer:
        with Lock("nested", ttl=5, reentrant=True, timeout=0):
            assert outer.owned()
        assert outer.locked(), "freed only after as many releases"
    assert not outer.locked()


def test_reentrant_reacquire_of_a_lost_lock_does_not_succeed(backend):
    lock = Lock("lost-re", ttl=30, reentrant=True)
    lock.acquire()
    backend.client.delete(lock.keys[0])  # lost (expired, or force-released)
    taken: list[bool] = []
    in_thread(lambda: taken.append(Lock("lost-re", ttl=30).acquire(0))).join()
    assert taken == [True]
    assert not lock.acquire(0), "another thread holds it now"


def test_acquire_that_fails_half_way_leaves_no_lock_behind(backend):
    def boom(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver failed")

    lock_acquired.connect(boom)
    try:
        with pytest.raises(RuntimeError, match="receiver failed"):
            Lock("half", ttl=30).acquire()
    finally:
        lock_acquired.disconnect(boom)
    assert not Lock("half", ttl=30).locked()
    with Lock("half", ttl=30, timeout=0) as lock:
        assert lock.owned()


def test_renewer_survives_a_failing_lost_receiver(backend):
    def boom(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver failed")

    def renewed_beside_a_lost_one() -> bool:
        doomed = Lock("renew-doomed", ttl=0.3, auto_renew=True)
        kept = Lock("renew-kept", ttl=0.3, auto_renew=True)
        doomed.acquire()
        kept.acquire()
        backend.client.delete(doomed.keys[0])
        time.sleep(1.0)
        if not kept.owned():
            return False
        kept.release()
        return True

    lock_lost.connect(boom)
    try:
        # A run that a stall of the process (past the 0.3 s TTL) overlapped is done again.
        with Stalls() as stalls:
            renewed, _ = stalls.timed(renewed_beside_a_lost_one)
        assert renewed, "the renewer must keep renewing the other locks"
    finally:
        lock_lost.disconnect(boom)


def test_a_lock_left_to_expire_can_be_taken_again_by_the_same_thread(backend):
    assert Lock("once-a-while", ttl=0.1).acquire(0)  # never released, on purpose
    time.sleep(0.15)
    assert Lock("once-a-while", ttl=0.1).acquire(0)
    reused = Lock("same-instance", ttl=0.1)
    assert reused.acquire(0)
    time.sleep(0.15)
    assert reused.acquire(0), "an expired hold of the same instance is dropped, not an error"
