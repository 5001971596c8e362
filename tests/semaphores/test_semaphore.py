"""Semaphore behaviour seen from outside, on fakeredis, a real redis-server and a real Cluster.

Tests of pushed wake-ups set ``LOCK_RETRY_DELAY`` to a minute: a waiter's fallback re-check
then comes far too late to explain a success within its timeout, so only a hand-off pushed by
the release (or the wake-up timed to a permit's expiry) can."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest

from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout, RedisUnavailable
from django_redislock.redis.clients import run_script
from django_redislock.semaphores.keys import MAX_LIMIT
from django_redislock.semaphores.scripts import ACQUIRE
from django_redislock.semaphores.semaphore import Semaphore
from django_redislock.signals import lock_acquired, lock_busy, lock_lost, lock_released
from tests.support.waiting import Stalls, ttl_set_since

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_fallback(backend: Any, settings: Any) -> Any:
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    return backend


def in_thread(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def queued(backend: Any, name: str) -> int:
    return int(backend.client.zcard(Semaphore(name, limit=1).layout.waiters))


def held(name: str, count: int, **options: Any) -> list[Semaphore]:
    semaphores = [Semaphore(name, **{"limit": count, "ttl": 30, **options}) for _ in range(count)]
    for semaphore in semaphores:
        assert semaphore.acquire(0)
    return semaphores


def test_at_most_limit_holders(backend):
    first, second = held("exports", 2)
    third = Semaphore("exports", limit=2, ttl=30)
    assert not third.acquire(0)
    assert first.locked()
    assert third.locked()
    assert first.count() == 2
    assert first.owned()
    assert not third.owned()
    first.release()
    assert not third.locked()
    assert third.acquire(0)
    assert third.owned()
    assert not first.owned()
    assert {p.pid for p in third.holders()} == {p.pid for p in second.holders()}
    assert len(third.holders()) == 2
    state = third.state()
    assert (state.held, state.limit, state.waiters) == (2, 2, 0)
    assert [p.fence for p in state.permits] == [0, 0]


def test_roundtrip_ttl_and_context_manager(backend):
    semaphore = Semaphore("report", limit=3, ttl=5)
    assert semaphore.ttl() is None
    since = time.monotonic()
    with semaphore as entered:
        assert entered is semaphore
        assert ttl_set_since(semaphore.ttl(), 5, since)
        assert semaphore.count() == 1
    assert semaphore.count() == 0
    assert semaphore.ttl() is None


def test_the_context_manager_raises_lock_timeout_when_every_permit_is_taken(backend):
    held("busy", 1)
    with pytest.raises(LockTimeout), Semaphore("busy", limit=1, timeout=0.05):
        pass


def test_release_of_a_permit_not_held_raises(backend):
    semaphore = Semaphore("free", limit=2, ttl=5)
    with pytest.raises(LockNotOwned):
        semaphore.release()
    with pytest.raises(LockNotOwned):
        semaphore.extend()
    semaphore.acquire(0)
    semaphore.release()
    with pytest.raises(LockNotOwned):
        semaphore.release()


def test_a_permit_past_its_ttl_is_reclaimed_and_cannot_be_released(backend):
    lost: list[str] = []
    receiver = lambda sender, **kw: lost.append(kw["name"])  # noqa: E731
    lock_lost.connect(receiver)
    try:
        stale = Semaphore("short", limit=1, ttl=0.1)
        assert stale.acquire(0)
        time.sleep(0.2)
        fresh = Semaphore("short", limit=1, ttl=30)
        assert fresh.acquire(0)
        with pytest.raises(LockNotOwned):
            stale.release()
        assert fresh.owned()
        assert fresh.count() == 1
    finally:
        lock_lost.disconnect(receiver)
    assert lost == ["short"]


def test_extend_keeps_a_permit_past_its_ttl(backend):
    names = iter(f"long-{n}" for n in range(100))

    def extended() -> None:
        name = next(names)
        semaphore = Semaphore(name, limit=1, ttl=0.3)
        assert semaphore.acquire(0)
        since = time.monotonic()
        semaphore.extend(5)
        time.sleep(0.4)
        assert semaphore.owned()
        assert not Semaphore(name, limit=1).acquire(0)
        assert ttl_set_since(semaphore.ttl(), 5, since)
        semaphore.release()

    # A stall past the 0.3 s TTL before the extend loses the permit: done again, if so.
    with Stalls() as stalls:
        stalls.again_if_stalled(extended)


def test_extend_after_expiry_raises(backend):
    semaphore = Semaphore("gone", limit=1, ttl=0.1)
    assert semaphore.acquire(0)
    time.sleep(0.2)
    with pytest.raises(LockNotOwned):
        semaphore.extend()


def test_auto_renew_keeps_a_permit_past_several_ttls(backend):
    names = iter(f"renewed-{n}" for n in range(100))

    def renewed() -> None:
        name = next(names)
        with Semaphore(name, limit=1, ttl=0.3, auto_renew=True) as semaphore:
            time.sleep(1.0)
            assert semaphore.owned()
            assert not Semaphore(name, limit=1).acquire(0)
        assert Semaphore(name, limit=1).acquire(0)

    # A stall of the process past the 0.3 s TTL loses the permit: such a run is done again.
    with Stalls() as stalls:
        stalls.again_if_stalled(renewed)


def test_timeouts(backend):
    held("timeouts", 1)
    waiter = Semaphore("timeouts", limit=1, timeout=0.2)
    start = time.monotonic()
    assert not waiter.acquire()
    assert time.monotonic() - start >= 0.2
    assert not waiter.acquire(0)
    assert queued(backend, "timeouts") == 0  # a waiter that gave up left the queue
    with pytest.raises(ValueError, match="timeout"):
        waiter.acquire(-1)


def test_a_release_hands_the_permit_to_a_waiter_without_polling(no_fallback):
    holders = held("push", 2)
    got: list[bool] = []
    thread = in_thread(lambda: got.append(Semaphore("push", limit=2, ttl=30).acquire(10)))
    wait_for(lambda: queued(no_fallback, "push") == 1)
    holders[0].release()
    thread.join(15)
    assert got == [True]
    assert holders[1].count() == 2


def test_a_waiter_wakes_by_itself_when_a_permit_expires(no_fallback):
    assert Semaphore("expiring", limit=1, ttl=0.3).acquire(0)  # never released
    assert Semaphore("expiring", limit=1, ttl=30).acquire(10)


def test_fair_hand_off_goes_to_the_oldest_waiter(no_fallback):
    holders = held("line", 2, fair=True)
    got: list[tuple[int, int]] = []  # (fence, waiter): fences number the hand-offs in order

    def wait(tag: int) -> None:
        semaphore = Semaphore("line", limit=2, ttl=30, fair=True, fencing=True)
        assert semaphore.acquire(20)
        got.append((semaphore.fence, tag))
        if tag < 2:
            time.sleep(0.05)
            semaphore.release()

    threads = []
    for tag in range(4):
        threads.append(in_thread(wait, tag))
        wait_for(lambda tag=tag: queued(no_fallback, "line") == tag + 1)
    for holder in holders:
        holder.release()
    for thread in threads:
        thread.join(30)
    assert [tag for _, tag in sorted(got)] == [0, 1, 2, 3]


def test_fences_increase_strictly_across_holders_and_hand_offs(no_fallback):
    fences: list[int] = []
    first, second = held("fenced", 2, fencing=True)
    fences += [first.fence, second.fence]

    def wait() -> None:
        semaphore = Semaphore("fenced", limit=2, ttl=30, fencing=True)
        assert semaphore.acquire(10)
        fences.append(semaphore.fence)
        semaphore.release()

    thread = in_thread(wait)
    wait_for(lambda: queued(no_fallback, "fenced") == 1)
    first.release()  # handed over
    thread.join(15)
    Semaphore.force_release("fenced")
    for _ in range(2):
        with Semaphore("fenced", limit=2, ttl=30, fencing=True) as again:
            fences.append(again.fence)
    assert fences == sorted(set(fences))
    assert len(fences) == 5
    assert Semaphore("fenced", limit=2).fence is None


def test_force_release_frees_every_permit_and_wakes_the_waiters(no_fallback):
    holders = held("forced", 2)
    got: list[bool] = []
    threads = [
        in_thread(lambda: got.append(Semaphore("forced", limit=2, ttl=30).acquire(10)))
        for _ in range(2)
    ]
    wait_for(lambda: queued(no_fallback, "forced") == 2)
    assert Semaphore.force_release("forced")
    for thread in threads:
        thread.join(15)
    assert got == [True, True]
    assert not any(h.owned() for h in holders)
    with pytest.raises(LockNotOwned):
        holders[0].release()
    assert Semaphore.force_release("forced")
    assert not Semaphore.force_release("forced")  # nothing held any more


def test_signals(backend):
    seen: list[tuple[str, Any]] = []

    def receiver(signal: Any, **kwargs: Any) -> None:
        seen.append((signal, kwargs.get("fence", kwargs.get("timeout"))))

    for signal in (lock_acquired, lock_released, lock_busy):
        signal.connect(receiver)
    try:
        semaphore = Semaphore("signalled", limit=1, fencing=True)
        with semaphore:
            assert not Semaphore("signalled", limit=1).acquire(0)
    finally:
        for signal in (lock_acquired, lock_released, lock_busy):
            signal.disconnect(receiver)
    assert [s for s, _ in seen] == [lock_acquired, lock_busy, lock_released]
    assert seen[0][1] > 0
    assert seen[1][1] == 0


def test_one_permit_per_owner_per_object(backend):
    semaphore = Semaphore("twice", limit=3, ttl=30)
    assert semaphore.acquire(0)
    with pytest.raises(LockError, match="already holds a permit"):
        semaphore.acquire(0)
    other = in_thread(lambda: semaphore.acquire(0))  # another thread: its own permit
    other.join(5)
    assert semaphore.count() == 2


@pytest.mark.parametrize(
    ("limit", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        (MAX_LIMIT + 1, ValueError),
        (10**18, ValueError),
        (2.0, TypeError),
        ("3", TypeError),
        (True, TypeError),
        (None, TypeError),
    ],
)
def test_bad_limits_fail_before_redis_is_touched(settings, limit, error):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1"}  # nothing listens there
    with pytest.raises(error, match="limit"):
        Semaphore("bad", limit=limit)


def test_bad_arguments_fail_before_redis_is_touched(settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1"}
    with pytest.raises(TypeError):
        Semaphore("bad")  # type: ignore[call-arg]
    for name in ("", "a{b}", "with space", "x" * 201):
        with pytest.raises(ValueError, match="name"):
            Semaphore(name, limit=2)
    with pytest.raises(ValueError, match="ttl"):
        Semaphore("bad", limit=2, ttl=0)
    with pytest.raises(ValueError, match="timeout"):
        Semaphore("bad", limit=2, timeout=-1)
    with pytest.raises(RedisUnavailable):
        Semaphore("bad", limit=2).acquire(math.inf)


def test_another_thread_releases_an_owners_permit(backend):
    # As @redis_locked does when a streaming response is closed on another thread.
    semaphore = Semaphore("streamed", limit=1, ttl=30)
    owners: list[Any] = []

    def take() -> None:
        assert semaphore.acquire(0)
        owners.append(semaphore.current_owner())

    in_thread(take).join(5)
    assert semaphore.count() == 1
    in_thread(semaphore.release_owner, owners[0]).join(5)
    assert semaphore.count() == 0


def test_the_renewer_reports_a_force_released_permit_lost(backend):
    lost: list[str] = []
    receiver = lambda sender, **kw: lost.append(kw["name"])  # noqa: E731
    lock_lost.connect(receiver)
    try:
        semaphore = Semaphore("renewed-lost", limit=2, ttl=0.3, auto_renew=True)
        assert semaphore.acquire(0)
        assert Semaphore.force_release("renewed-lost")
        wait_for(lambda: lost == ["renewed-lost"])
        assert not semaphore.owned()
        with pytest.raises(LockNotOwned):
            semaphore.release()
    finally:
        lock_lost.disconnect(receiver)


def test_a_fair_newcomer_keeps_the_permits_it_hands_on_alive(backend):
    # Every permit expired while a waiter (queued straight through the script, so it never
    # re-checks) still waits: a fair newcomer hands it a 30 s permit first, then takes its own
    # short one, which must not cut the permits' key short under the waiter's permit.
    for _ in range(2):
        assert Semaphore("handed", limit=2, ttl=0.1, fair=True).acquire(0)
    waiter = Semaphore("handed", limit=2, ttl=30, fair=True)
    args = waiter._acquire_argv("waiter|", True, False)
    run_script(backend.client, ACQUIRE, waiter.layout.acquiring, args)
    assert queued(backend, "handed") == 1
    time.sleep(0.2)
    newcomer = Semaphore("handed", limit=2, ttl=0.3, fair=True)
    assert newcomer.acquire(0)
    assert backend.client.pttl(newcomer.layout.holders) > 20_000
    time.sleep(0.4)
    assert newcomer.count() == 1  # the waiter's permit outlived the newcomer's
