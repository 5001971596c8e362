"""A timeout is a deadline: ``acquire(timeout=t)`` answers within t plus a few ms, on a real
redis-server with its default ``hz 10`` (where Redis itself ends a short BLPOP only on its
next 100 ms tick) and on a real Cluster, and never acquires once t has passed."""

from __future__ import annotations

import asyncio
import math
import os
import queue
import signal
import statistics
import threading
import time
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from redis.cluster import RedisCluster
from redis.exceptions import NoPermissionError

from django_redislock import AsyncLock, Lock, get_redis, redis_locked
from django_redislock.redis import wakeups

pytestmark = pytest.mark.django_db(transaction=True)

T = 0.1
# Single waits: generous for a loaded 2-core box. Series of waits: their median must be
# within ON_TIME of the deadline, which waits ended by Redis's 100 ms tick (late by 50 ms
# on average) never are, while a stall of the machine now and then does not fail the test.
LATE = 0.1
ON_TIME = 0.025


def assert_on_time(took: list[float], deadline: float = T) -> None:
    assert min(took) >= deadline - 0.001, f"early: {sorted(took)}"
    assert statistics.median(took) <= deadline + ON_TIME, f"late: {sorted(took)}"
    assert max(took) <= deadline + 3 * LATE, f"late: {sorted(took)}"


def queued(name: str) -> int:
    lock = Lock(name)
    return int(lock.client.zcard(lock.keys[1]))


def until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.002)


def blocked_clients(backend: Any) -> int:
    """Clients blocked in Redis now (on every node of a Cluster): a wait that ended must
    leave none behind. The process's wake-up listener (named, see ``wakeups``) is not a
    waiter: it stays blocked a while with nobody to wake, then ends."""
    if isinstance(backend.client, RedisCluster):
        nodes = [node.redis_connection for node in backend.client.get_nodes()]
    else:
        nodes = [backend.client]
    return sum(
        1
        for node in nodes
        for client in node.client_list()
        if "b" in client["flags"] and client["name"] != wakeups.CLIENT_NAME
    )


def timed(acquire: Any) -> tuple[bool, float]:
    start = time.monotonic()
    got = acquire()
    return got, time.monotonic() - start


def test_a_timed_out_acquire_answers_on_time(backend):
    holder = Lock("deadline", ttl=30)
    holder.acquire()
    for fair in (False, True):
        tooks = []
        for _ in range(10):
            got, took = timed(lambda fair=fair: Lock("deadline", ttl=30, fair=fair).acquire(T))
            assert not got
            tooks.append(took)
        assert_on_time(tooks)
    assert queued("deadline") == 0, "a waiter that timed out must leave the queue"
    if backend.kind != "fakeredis":
        assert blocked_clients(backend) == 0
    holder.release()
    assert not holder.locked()


def test_a_timed_out_async_acquire_answers_on_time(backend):
    holder = Lock("deadline", ttl=30)
    holder.acquire()

    async def main() -> list[float]:
        took = []
        for fair in (False, True):
            for _ in range(10):
                start = time.monotonic()
                assert not await AsyncLock("deadline", ttl=30, fair=fair).acquire(T)
                took.append(time.monotonic() - start)
        return took

    assert_on_time(asyncio.run(main()))
    assert queued("deadline") == 0
    if backend.kind != "fakeredis":
        assert blocked_clients(backend) == 0
    holder.release()


def test_the_decorator_answers_busy_within_its_timeout(backend):
    @redis_locked("deadline:{n}", timeout=T)
    def view(request: HttpRequest, n: int) -> HttpResponse:
        return HttpResponse("ok")

    @redis_locked("deadline:{n}", timeout=T)
    async def async_view(request: HttpRequest, n: int) -> HttpResponse:
        return HttpResponse("ok")

    async def async_tooks() -> list[float]:
        # In one event loop, as under an ASGI server: the loop's asyncio client (on Cluster,
        # its discovery of the nodes) is made by a first call, not timed.
        assert (await async_view(HttpRequest(), n=1)).status_code == 409
        took = []
        for _ in range(7):
            start = time.monotonic()
            assert (await async_view(HttpRequest(), n=1)).status_code == 409
            took.append(time.monotonic() - start)
        return took

    holder = Lock("deadline:1", ttl=30)
    holder.acquire()
    sync_took = []
    for _ in range(7):
        start = time.monotonic()
        assert view(HttpRequest(), n=1).status_code == 409
        sync_took.append(time.monotonic() - start)
    assert_on_time(sync_took)
    assert_on_time(asyncio.run(async_tooks()))
    holder.release()
    assert view(HttpRequest(), n=1).status_code == 200


def follow(name: str, fair: bool) -> tuple[threading.Thread, list[tuple[bool, float]]]:
    """A live waiter in a thread: acquire(10), then (got, seconds taken) in the list."""
    outcome: list[tuple[bool, float]] = []

    def run() -> None:
        outcome.append(timed(lambda: Lock(name, ttl=30, fair=fair).acquire(10)))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


class Holder:
    """A holder in a thread of its own (a lock belongs to its thread), releasing when told."""

    def __init__(self, name: str, fair: bool = False) -> None:
        self.lock = Lock(name, ttl=30, fair=fair)
        self.at: queue.Queue[float] = queue.Queue()
        self.released = math.inf
        taken = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(taken,), daemon=True)
        self.thread.start()
        assert taken.wait(5)

    def _run(self, taken: threading.Event) -> None:
        assert self.lock.acquire(0)
        taken.set()
        at = self.at.get()
        time.sleep(max(0.0, at - time.monotonic()))
        self.lock.release()
        self.released = time.monotonic()  # when the release had surely reached Redis

    def release_at(self, at: float) -> None:
        self.at.put(at)

    def join(self) -> None:
        self.thread.join(5)
        assert not self.thread.is_alive()


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_release_shortly_before_the_deadline_hands_over(real_backend, fair):
    # A round counts when the holder's release was done 40 ms or more before the waiter's
    # deadline: on a loaded machine its thread may wake too late (then the lock rightly goes
    # to nobody), and that round says nothing.
    wait, counted = 0.3, 0
    for _ in range(15):
        holder = Holder("deadline", fair)
        start = time.monotonic()
        holder.release_at(start + wait - 0.07)
        got, took = timed(lambda: Lock("deadline", ttl=30, fair=fair).acquire(wait))
        holder.join()
        Lock.force_release("deadline")
        if holder.released > start + wait - 0.04:
            continue
        assert got, f"released {wait - (holder.released - start):.3f}s before the deadline"
        assert holder.released - start - 0.05 <= took <= wait + LATE
        counted += 1
        if counted == 3:
            return
    pytest.fail(f"the holder released in time in only {counted} of 15 rounds")


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_release_just_after_the_deadline_does_not_go_to_the_timed_out_waiter(real_backend, fair):
    # Before, the waiter's BLPOP outlived its timeout until Redis's next tick and caught
    # this release, so acquire(T) returned True after T.
    for offset in (0.005, 0.01, 0.02, 0.03, 0.04):
        holder = Holder("deadline", fair)
        waiter = Lock("deadline", ttl=30, fair=fair)
        holder.release_at(time.monotonic() + T + offset)
        got, took = timed(lambda waiter=waiter: waiter.acquire(T))
        holder.join()
        assert not got, f"acquired after {took:.3f}s"
        assert took <= T + LATE
        assert not waiter.owned()
        assert not holder.lock.locked(), "nobody may hold it"
        assert queued("deadline") == 0


def handed_to_stopped_waiter(name: str) -> bool:
    """The lock is held, by neither the holder (released) nor the follower (still queued)."""
    return Lock(name).locked() and queued(name) == 1


def wait_in_child(name: str, timeout: float, kind: str, fair: bool, results: Any) -> None:
    if kind == "sync":
        lock = Lock(name, ttl=30, fair=fair)
        got = lock.acquire(timeout)
    else:

        async def main() -> bool:
            return await AsyncLock(name, ttl=30, fair=fair).acquire(timeout)

        got = asyncio.run(main())
    results.put(got)


@pytest.mark.processes
@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_hand_off_that_reaches_a_waiter_after_its_deadline_goes_on(
    real_backend, processes, kind, fair, settings
):
    # The waiter is stopped while it waits; meanwhile its deadline passes and the holder
    # hands it the lock. Woken, it must not take it: it passes it on to the next waiter.
    # (A longer retry delay keeps the stopped waiter's registration alive, 2.5 s, past its
    # deadline, so that the hand-off does go to it.)
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 0.5}
    holder = Lock("late", ttl=30, fair=fair)
    holder.acquire()
    results = processes.queue()
    # A timeout long enough that a loaded machine surely sees the waiter queued in time.
    late = processes.start(wait_in_child, "late", 1.0, kind, fair, results)
    until(lambda: queued("late") == 1)
    os.kill(late.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    follower, got_next = follow("late", fair)
    until(lambda: queued("late") == 2)
    # The stopped waiter's deadline passes (its registration lives on).
    time.sleep(max(0.0, stopped + 1.05 - time.monotonic()))
    holder.release()  # handed to the stopped waiter, first in line
    assert handed_to_stopped_waiter("late"), "the hand-off must reach the stopped waiter"
    resumed = time.monotonic()
    os.kill(late.pid, signal.SIGCONT)
    assert results.get(timeout=10) is False
    follower.join(10)
    assert got_next[0][0], "the next waiter must get the lock"
    # Passed on at once, not after the stopped waiter's registration lapsed.
    assert time.monotonic() - resumed < 1.0
    processes.join_all()
    Lock.force_release("late")


def wait_in_line(name: str, timeout: float, ready: Any, go: Any, results: Any) -> None:
    lock = Lock(name, ttl=30, fair=True)
    lock.locked()  # connected (on Cluster: the slot map read) before the race starts
    ready.put(True)
    go.wait()
    start = time.monotonic()
    got = lock.acquire(timeout)
    results.put((got, time.monotonic() - start))
    if got:
        lock.release()


@pytest.mark.processes
def test_many_timed_out_waiters_do_not_stall_the_fair_line(real_backend, processes):
    # Six waiters give up while the holder releases about at their deadlines: whichever
    # wins each race, every one answers and the lock reaches the live waiter queued behind
    # them at once.
    wait = 0.5
    for offset in (-0.01, 0.0, 0.01):
        holder = Holder("line", fair=True)
        ready, go, results = processes.queue(), processes.event(), processes.queue()
        for _ in range(6):
            processes.start(wait_in_line, "line", wait, ready, go, results)
        for _ in range(6):
            ready.get(timeout=10)
        started = time.monotonic()
        go.set()
        until(lambda: queued("line") == 6, timeout=wait)
        follower, live = follow("line", True)
        until(lambda: queued("line") == 7)
        holder.release_at(started + wait + offset)
        for _ in range(6):
            _got, took = results.get(timeout=10)
            # Seven processes wake at once here: the on-time bound is the tests' above.
            assert took <= wait + 0.2, f"took {took:.3f}s"
        holder.join()
        follower.join(10)
        assert live[0][0], "the live waiter must get the lock"
        assert live[0][1] < wait + offset + 1.0, "not after a registration lapsed"
        Lock.force_release("line")
        processes.join_all()
        processes.children.clear()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_long_timeout_acquires_at_the_release(real_backend, kind):
    holder = Holder("long")
    holder.release_at(time.monotonic() + 0.5)
    if kind == "sync":
        got, took = timed(lambda: Lock("long", ttl=30).acquire(2))
    else:

        async def main() -> tuple[bool, float]:
            lock = AsyncLock("long", ttl=30)
            start = time.monotonic()  # in the loop: not its start nor its shutdown
            return await lock.acquire(2), time.monotonic() - start

        got, took = asyncio.run(main())
    holder.join()
    assert got
    assert 0.45 <= took < 0.5 + LATE
    Lock.force_release("long")


@pytest.fixture
def no_client_command(redis_backend: Any, redis_server: Any, settings: Any) -> Any:
    """The locks' settings point at a Redis user denied CLIENT (so no CLIENT UNBLOCK)."""
    redis_backend.client.execute_command(
        "ACL", "SETUSER", "noclient", "on", ">secret", "~*", "&*", "+@all", "-client"
    )
    url = f"redis://noclient:secret@127.0.0.1:{redis_server.port}/0"
    # A long fallback re-check, so only the release's push can wake a waiter early.
    settings.REDISLOCK = {"URL": url, "LOCK_RETRY_DELAY": 5.0}
    with pytest.raises(NoPermissionError):
        get_redis().execute_command("CLIENT", "ID")
    yield redis_backend
    redis_backend.client.execute_command("ACL", "DELUSER", "noclient")


def test_without_client_unblock_waits_fall_back_to_redis_timeouts(no_client_command):
    # Less precise (Redis's tick ends the wait), but still correct and pushed.
    holder = Holder("fallback")
    for _ in range(3):
        got, took = timed(lambda: Lock("fallback", ttl=30).acquire(T))
        assert not got
        assert T <= took <= T + 0.3

    async def main() -> tuple[bool, float]:
        # In one event loop, as under an ASGI server: the loop's asyncio client (and its
        # connection, authenticated as the denied user) is made by a first call, not timed.
        assert not await AsyncLock("fallback", ttl=30).acquire(T)
        lock = AsyncLock("fallback", ttl=30)
        start = time.monotonic()
        return await lock.acquire(T), time.monotonic() - start

    got, took = asyncio.run(main())
    assert not got
    assert T <= took <= T + 0.3
    holder.release_at(time.monotonic() + 0.05)
    got, took = timed(lambda: Lock("fallback", ttl=30).acquire(2))
    assert got
    assert took < 0.05 + LATE, "woken by the release, not by a re-check"
    holder.join()
    assert queued("fallback") == 0
    assert blocked_clients(no_client_command) == 0
