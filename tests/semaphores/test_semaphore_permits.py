"""Holders of several permits at once (``permits=n``), sync and asyncio, on fakeredis, a real
redis-server and a real Cluster: all or none, released together, woken when that many are
free, kept in arrival order when fair, and kept alive by extend and auto_renew.

The wake-up tests set ``LOCK_RETRY_DELAY`` to a minute: only a hand-off pushed by a release
can explain a waiter that gets its permits within its timeout."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from django_redislock.locks.waiting import Circling
from django_redislock.redis import wakeups
from django_redislock.semaphores.async_semaphore import AsyncSemaphore
from django_redislock.semaphores.semaphore import Semaphore
from tests.semaphores.test_semaphore import queued
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_fallback(backend: Any, settings: Any) -> Any:
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    return backend


class Waiter(threading.Thread):
    """A thread that waits for ``semaphore``'s permits, then holds them until told."""

    def __init__(self, semaphore: Semaphore, timeout: float = 30) -> None:
        super().__init__(daemon=True)
        self.semaphore, self.timeout = semaphore, timeout
        self.got = threading.Event()
        self.leave = threading.Event()
        self.start()

    def run(self) -> None:
        if self.semaphore.acquire(self.timeout):
            self.got.set()
            self.leave.wait(30)
            self.semaphore.release()


@pytest.mark.parametrize("permits", [0, -1, 5])
def test_permits_outside_one_to_limit_is_a_value_error_naming_it(permits):
    for cls in (Semaphore, AsyncSemaphore):
        with pytest.raises(ValueError, match="permits"):
            cls("x", limit=4, permits=permits)
    with pytest.raises(TypeError, match="permits"):
        Semaphore("x", limit=4, permits="2")


def test_a_holder_takes_its_permits_at_once_and_gives_them_all_back(backend):
    with Semaphore("x", limit=4, permits=2, ttl=30) as first:
        assert first.count() == 2
        assert not first.locked()  # two more are free
        second = Semaphore("x", limit=4, permits=2, ttl=30)
        assert second.acquire(0)
        assert first.locked()
        assert not Semaphore("x", limit=4, ttl=30).acquire(0)
        holders = first.holders()
        assert [p.permits for p in holders] == [2, 2]
        assert first.state().held == 4
        second.release()
        assert first.count() == 2
    assert Semaphore("x", limit=4).count() == 0


def test_all_or_nothing(backend):
    held = Semaphore("x", limit=3, permits=2, ttl=30)
    assert held.acquire(0)
    greedy = Semaphore("x", limit=3, permits=2, ttl=30)
    assert greedy.locked()
    assert not greedy.acquire(0)
    assert held.count() == 2  # it took none of the free one
    assert Semaphore("x", limit=3, ttl=30).acquire(0)


def test_a_waiter_is_woken_when_its_permits_are_free(no_fallback):
    ones = [Semaphore("x", limit=2, ttl=30) for _ in range(2)]
    for one in ones:
        assert one.acquire(0)
    waiter = Waiter(Semaphore("x", limit=2, permits=2, ttl=30))
    wait_for(lambda: queued(no_fallback, "x") == 1)
    ones[0].release()  # one free: not enough
    assert not waiter.got.wait(0.2)
    assert queued(no_fallback, "x") == 1
    ones[1].release()
    assert waiter.got.wait(10)
    assert ones[0].count() == 2
    waiter.leave.set()
    waiter.join(10)
    assert ones[0].count() == 0


def test_fair_keeps_arrival_order_for_a_waiter_of_many(no_fallback):
    holder = Semaphore("x", limit=2, ttl=30, fair=True)
    assert holder.acquire(0)
    big = Waiter(Semaphore("x", limit=2, permits=2, ttl=30, fair=True))
    wait_for(lambda: queued(no_fallback, "x") == 1)
    # One permit is free, but the waiter before this newcomer needs two: it waits behind.
    small = Semaphore("x", limit=2, ttl=30, fair=True)
    assert not small.acquire(0)
    holder.release()
    assert big.got.wait(10)
    big.leave.set()
    big.join(10)
    assert small.acquire(0)


def test_plain_mode_hands_free_permits_to_a_later_waiter_that_fits(no_fallback):
    two = Semaphore("x", limit=3, permits=2, ttl=30)
    one = Semaphore("x", limit=3, ttl=30)
    assert two.acquire(0)
    assert one.acquire(0)
    big = Waiter(Semaphore("x", limit=3, permits=2, ttl=30))
    wait_for(lambda: queued(no_fallback, "x") == 1)
    small = Waiter(Semaphore("x", limit=3, ttl=30))
    wait_for(lambda: queued(no_fallback, "x") == 2)
    one.release()  # one free: the later waiter fits, the first does not
    assert small.got.wait(10)
    assert not big.got.is_set()
    two.release()
    assert big.got.wait(10)
    for waiter in (big, small):
        waiter.leave.set()
        waiter.join(10)


def test_a_hand_off_waits_for_an_addressee_that_blocks_late(real_backend, settings, monkeypatch):
    """The later waiter is queued, but its thread is slow to block (a busy machine): the
    waiter blocked on the list before it pops its wake-up, and passes it on. It must step
    aside rather than pop its own pass-on again at once until the hops run out, which left
    the addressee to its fallback re-check (a minute here)."""
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    register = wakeups.Listener.register

    def slow_register(listener: Any, key: str, waiter: Any) -> Any:
        time.sleep(0.05)
        return register(listener, key, waiter)

    monkeypatch.setattr(wakeups.Listener, "register", slow_register)
    test_plain_mode_hands_free_permits_to_a_later_waiter_that_fits(real_backend)


def test_a_waiter_steps_aside_longer_each_time_a_wake_up_comes_straight_back():
    circling = Circling()
    assert circling.step_aside("tok|7|0") == 0  # passed on for the first time
    assert circling.step_aside("tok|7|1") == pytest.approx(0.001)  # back at once
    assert circling.step_aside("tok|7|2") == pytest.approx(0.002)
    assert circling.step_aside("other|3|0") == 0  # someone else's: a new count
    assert circling.step_aside("") == 0  # passed nothing on
    assert circling.step_aside("other|3|1") == 0
    for hops in range(2, 16):
        pause = circling.step_aside(f"other|3|{hops}")
    assert pause == Circling.MAX_STEP


def test_extend_and_ttl_cover_every_permit_of_a_holder(backend):
    semaphore = Semaphore("x", limit=3, permits=2, ttl=0.5)
    assert semaphore.acquire(0)
    semaphore.extend(30)
    assert semaphore.ttl() > 29
    scores = {s for _, s in backend.client.zrange(semaphore.layout.holders, 0, -1, withscores=True)}
    assert len(scores) == 1  # both permits moved together
    assert backend.client.zcard(semaphore.layout.holders) == 2
    semaphore.release()
    assert backend.client.exists(semaphore.layout.holders) == 0


def test_auto_renew_keeps_every_permit_alive(backend):
    with Semaphore("x", limit=3, permits=3, ttl=0.6, auto_renew=True) as semaphore:
        first = semaphore.holders()[0].expires_ms
        wait_for(lambda: semaphore.holders()[0].expires_ms > first)
        wait_for(lambda: time.time() * 1000 > first + 100)  # the first TTL has run out
        assert semaphore.owned()
        assert semaphore.count() == 3
    assert semaphore.count() == 0


def test_async_twin(no_fallback):
    async def hold(semaphore: AsyncSemaphore, got: asyncio.Event, leave: asyncio.Event) -> None:
        assert await semaphore.acquire(0)
        got.set()
        await leave.wait()
        await semaphore.release()

    async def main() -> None:
        held = AsyncSemaphore("a", limit=2, permits=2, ttl=30)
        got, leave = asyncio.Event(), asyncio.Event()
        holder = asyncio.ensure_future(hold(held, got, leave))
        await got.wait()
        assert await held.count() == 2
        assert await held.locked()
        assert [p.permits for p in await held.holders()] == [2]

        async def release_once_queued() -> None:
            while queued(no_fallback, "a") < 1:
                await asyncio.sleep(0.005)
            leave.set()

        releasing = asyncio.ensure_future(release_once_queued())
        waiter = AsyncSemaphore("a", limit=2, permits=2, ttl=30)
        assert await waiter.acquire(10)
        await asyncio.gather(holder, releasing)
        assert await waiter.count() == 2
        await waiter.extend(20)
        assert await waiter.ttl() > 19
        await waiter.release()
        assert await waiter.count() == 0
        async with AsyncSemaphore("a", limit=4, permits=2, ttl=5) as entered:
            assert await entered.count() == 2

    asyncio.run(main())
