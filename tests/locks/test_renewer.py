"""No immortal locks: the auto-renewer keeps a hold alive only while somebody can still release
it. A hold whose ``Lock`` object was garbage-collected, or whose thread or asyncio task ended
(by an exception, say), is no longer renewed and ends within its TTL, so another client gets
the lock; a hold whose owner lives on is renewed for as long as it is held."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_redislock import AsyncLock, Lock, get_redis
from django_redislock.exceptions import LockNotOwned
from django_redislock.signals import lock_abandoned, lock_lost
from tests.support.waiting import Stalls, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TTL = 0.5
# Locks that must stay renewed: a TTL long enough that a loaded machine stalling the renewer
# thread for over a second (CI beside other work) does not let one lapse (renewed every
# third of it).
LIVE_TTL = 2.5
# What the other client waits beyond the TTL: the hold may have been renewed just before its
# owner went away, and the box is shared and loaded.
MARGIN = 1.5


@pytest.fixture
def stalls() -> Iterator[Stalls]:
    with Stalls() as watching:
        yield watching


@pytest.fixture
def abandoned() -> Iterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        seen.append({"sender": sender, **kwargs})

    lock_abandoned.connect(receiver)
    yield seen
    lock_abandoned.disconnect(receiver)


@pytest.fixture
def lost() -> Iterator[list[str]]:
    names: list[str] = []

    def receiver(sender: Any, name: str, **kwargs: Any) -> None:
        names.append(name)

    lock_lost.connect(receiver)
    yield names
    lock_lost.disconnect(receiver)


@pytest.fixture
def quiet_thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    """The exceptions that ended threads, kept instead of reported as test failures."""
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    return errors


def renewed_past_its_ttl(name: str) -> None:
    """Wait until lock ``name`` was held longer than LIVE_TTL, renewed twice on the way (seen
    as its PTTL going back up): it would have lapsed otherwise. Fails once it lapsed."""
    client, key = get_redis(), Lock(name).keys.lock
    started, renewals, last = time.monotonic(), 0, client.pttl(key)

    def renewed_twice_and_old() -> bool:
        nonlocal renewals, last
        pttl = client.pttl(key)
        assert pttl > 0, f"lock {name!r} lapsed: it was not renewed"
        renewals += pttl > last
        last = pttl
        return renewals >= 2 and time.monotonic() - started > LIVE_TTL

    wait_for(renewed_twice_and_old, 30, f"lock {name!r} renewed past its TTL")


def taken_by_another_client_within_the_ttl(name: str, stalls: Stalls) -> bool:
    """Whether another client got lock ``name`` within its TTL (and the margin), or later
    only because this process stood still meanwhile: one renewed on never comes free."""
    start = time.monotonic()
    other = Lock(name, ttl=5)
    if not other.acquire(30):
        return False
    other.release()
    end = time.monotonic()
    return end - start <= TTL + MARGIN or stalls.between(start, end)


def test_a_collected_lock_is_no_longer_renewed(backend, abandoned, lost, caplog, stalls):
    tries = iter(range(100))

    def collected() -> None:
        # A stall of the process past the TTL loses the lock (reported lost): such a run is
        # done again, under a name of its own.
        name = f"collected-{next(tries)}"
        abandoned.clear()
        lost.clear()
        caplog.clear()
        lock = Lock(name, ttl=TTL, auto_renew=True)
        assert lock.acquire(0)
        time.sleep(TTL)  # renewed meanwhile
        assert lock.owned()
        del lock  # never released: nobody can release it any more
        gc.collect()
        with caplog.at_level(logging.WARNING, logger="django_redislock.locks.renewer"):
            assert taken_by_another_client_within_the_ttl(name, stalls)
            # The TTL runs out by itself; the renewer says so at its next pass (a busy
            # machine may hold that pass up beyond the TTL).
            wait_for(lambda: abandoned, 10, "the renewer to report the collected lock")
        assert [(a["name"], a["lock"]) for a in abandoned] == [(name, None)]
        assert abandoned[0]["sender"] is Lock
        assert "garbage-collected" in abandoned[0]["reason"]
        assert f"Stopped renewing lock '{name}'" in caplog.text
        assert lost == [], "an abandoned lock is not reported lost"

    stalls.again_if_stalled(collected)


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_thread_that_raised_leaves_its_lock_to_expire(
    backend, reentrant, abandoned, quiet_thread_errors, stalls
):
    kept: list[Lock] = []  # the Lock object outlives its thread
    taking: list[float] = []

    def holder() -> None:
        lock = Lock("thread-died", ttl=TTL, auto_renew=True, reentrant=reentrant)
        kept.append(lock)
        taking.append(time.monotonic())
        assert lock.acquire(0)
        raise RuntimeError("the job failed without releasing")

    thread = threading.Thread(target=holder, name="doomed-holder")
    thread.start()
    thread.join(10)
    assert [type(e) for e in quiet_thread_errors] == [RuntimeError]
    # Left held (its TTL ran out already only if this process stood still meanwhile).
    assert kept[0].locked() or stalls.between(taking[0], time.monotonic())
    assert taken_by_another_client_within_the_ttl("thread-died", stalls)
    assert abandoned[0]["lock"] is kept[0]
    assert abandoned[0]["reason"] == "its thread 'doomed-holder' ended"


def test_an_asyncio_task_that_raised_leaves_its_lock_to_expire(backend, abandoned, stalls):
    async def main() -> tuple[float, float]:
        kept: list[AsyncLock] = []

        async def holder() -> None:
            lock = AsyncLock("task-died", ttl=TTL, auto_renew=True)
            kept.append(lock)
            assert await lock.acquire(0)
            raise RuntimeError("the job failed without releasing")

        task = asyncio.create_task(holder(), name="doomed-task")
        with pytest.raises(RuntimeError):
            await task
        start = time.monotonic()
        other = AsyncLock("task-died", ttl=5)
        assert await other.acquire(30), "the dead task's lock is renewed forever"
        await other.release()
        assert abandoned[0]["lock"] is kept[0]  # the task and its lock object both live on
        return start, time.monotonic()

    start, end = run(main())
    # Within its TTL and the margin (later only if this process stood still meanwhile).
    assert end - start <= TTL + MARGIN or stalls.between(start, end)
    assert abandoned[0]["reason"] == "its asyncio task 'doomed-task' ended"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# A stall of the process longer than LIVE_TTL's two thirds rightly lets a renewed lock lapse:
# a run that a stall overlapped and that failed is done again, under names of its own.


def attempts(base: str) -> Iterator[str]:
    """``base``, then ``base-1``, ``base-2``...: a name for each run of a test."""
    yield base
    yield from (f"{base}-{n}" for n in itertools.count(1))


def holding_in_a_thread(
    name: str, thread_class: type[threading.Thread]
) -> tuple[threading.Thread, threading.Event, list[bool]]:
    """A thread of ``thread_class`` started, holding lock ``name`` (auto-renewed) until the
    event is set; it then appends whether it still owned the lock to the list."""
    done, results = threading.Event(), []

    def holder() -> None:
        with Lock(name, ttl=LIVE_TTL, auto_renew=True) as lock:
            done.wait(10)
            results.append(lock.owned())

    thread = thread_class(target=holder)
    thread.start()
    return thread, done, results


def test_a_live_thread_keeps_its_lock_past_several_ttls(backend, abandoned, stalls):
    names = attempts("thread-alive")

    def kept() -> None:
        name = next(names)
        abandoned.clear()
        thread, done, results = holding_in_a_thread(name, threading.Thread)
        wait_for(lambda: Lock(name).locked(), 10, "the holder thread to take its lock")
        try:
            renewed_past_its_ttl(name)
            assert not Lock(name, ttl=1).acquire(0)
        finally:
            done.set()
            thread.join(10)
        assert results == [True]
        assert abandoned == []

    stalls.again_if_stalled(kept)


def test_a_live_task_keeps_its_lock_past_several_ttls(backend, abandoned, stalls):
    async def main(name: str) -> None:
        async def holder(done: asyncio.Event) -> bool:
            async with AsyncLock(name, ttl=LIVE_TTL, auto_renew=True) as lock:
                await done.wait()
                return await lock.owned()

        done = asyncio.Event()
        task = asyncio.create_task(holder(done))
        while not await AsyncLock(name).locked():
            await asyncio.sleep(0.005)
        await asyncio.to_thread(renewed_past_its_ttl, name)
        assert not await AsyncLock(name, ttl=1).acquire(0)
        done.set()
        assert await task

    names = attempts("task-alive")

    def kept() -> None:
        abandoned.clear()
        run(main(next(names)))
        assert abandoned == []

    stalls.again_if_stalled(kept)


def test_a_reentrant_hold_outlives_its_first_instance_in_a_live_thread(
    backend, lost, abandoned, stalls
):
    # Any instance re-enters and releases a reentrant hold of its thread, so it is renewed as
    # long as the thread lives, even once the instance that took it is gone.
    names = attempts("reentered")

    def kept() -> None:
        name = next(names)
        lost.clear()
        abandoned.clear()
        assert Lock(name, ttl=LIVE_TTL, auto_renew=True, reentrant=True).acquire(0)
        gc.collect()
        renewed_past_its_ttl(name)
        again = Lock(name, ttl=LIVE_TTL, reentrant=True)
        assert again.owned()
        again.release()  # by an instance without auto_renew: the renewer must let go too
        assert not again.locked()
        time.sleep(LIVE_TTL / 2)  # over the renewer's period (a third of the TTL)
        assert lost == [], "a released hold must not be renewed, then reported lost"
        assert abandoned == []
        with pytest.raises(LockNotOwned):
            again.release()

    stalls.again_if_stalled(kept)


class _CannotTell(threading.Thread):
    """A thread that cannot say whether it is alive (as a dummy thread may not)."""

    def is_alive(self) -> bool:
        raise RuntimeError("cannot tell")


def test_an_owner_that_cannot_tell_whether_it_lives_is_kept(backend, abandoned, stalls):
    names = attempts("cannot-tell")

    def kept() -> None:
        name = next(names)
        abandoned.clear()
        thread, done, results = holding_in_a_thread(name, _CannotTell)
        other = Lock(f"other-{name}", ttl=LIVE_TTL, auto_renew=True)
        assert other.acquire(0)
        try:
            wait_for(lambda: Lock(name).locked(), 10, "the holder thread to take its lock")
            renewed_past_its_ttl(name)
            assert not Lock(name, ttl=1).acquire(0)
            assert other.owned(), "the renewer thread must survive the question"
        finally:
            done.set()
            thread.join(10)
            if other.owned():
                other.release()
        assert results == [True]
        assert abandoned == []

    stalls.again_if_stalled(kept)


def test_a_with_block_keeps_its_unnamed_lock_renewed(backend, abandoned, stalls):
    names = attempts("unnamed")

    def kept() -> None:
        name = next(names)
        abandoned.clear()
        with Lock(name, ttl=LIVE_TTL, auto_renew=True):  # no name bound to the Lock object
            gc.collect()
            renewed_past_its_ttl(name)
            assert not Lock(name, ttl=1).acquire(0)
        assert not Lock(name).locked()
        assert abandoned == []

    stalls.again_if_stalled(kept)
