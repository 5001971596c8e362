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
from collections.abc import Iterator
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from redis.cluster import RedisCluster
from redis.exceptions import NoPermissionError

from django_redislock import AsyncLock, Lock, get_redis, redis_locked
from django_redislock.redis import wakeups
from tests.support.waiting import BEFORE_ANY_RECHECK, SLOW_RETRY_DELAY, Stalls

pytestmark = pytest.mark.django_db(transaction=True)

T = 0.1
# Single waits: generous for a loaded 2-core box. Series of waits: their median must be
# within ON_TIME of the deadline, which waits ended by Redis's 100 ms tick (late by 50 ms
# on average) never are. A wait that a stall of the machine (0.1 s or more, see ``Stalls``)
# overlapped says nothing of the code's timing: it is done again, or its round is.
LATE = 0.1
ON_TIME = 0.025


@pytest.fixture
def stalls() -> Iterator[Stalls]:
    with Stalls() as watching:
        yield watching


def assert_on_time(took: list[float], deadline: float = T) -> None:
    assert min(took) >= deadline - 0.001, f"early: {sorted(took)}"
    assert statistics.median(took) <= deadline + ON_TIME, f"late: {sorted(took)}"
    assert max(took) <= deadline + 3 * LATE, f"late: {sorted(took)}"


def queued(name: str) -> int:
    lock = Lock(name)
    return int(lock.client.zcard(lock.keys[1]))


def until(predicate: Any, timeout: float = 30.0) -> None:
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


def test_a_timed_out_acquire_answers_on_time(backend, stalls):
    holder = Lock("deadline", ttl=30)
    holder.acquire()
    for fair in (False, True):
        tooks = []
        for _ in range(10):
            got, took = stalls.timed(
                lambda fair=fair: Lock("deadline", ttl=30, fair=fair).acquire(T)
            )
            assert not got
            tooks.append(took)
        assert_on_time(tooks)
    assert queued("deadline") == 0, "a waiter that timed out must leave the queue"
    if backend.kind != "fakeredis":
        assert blocked_clients(backend) == 0
    holder.release()
    assert not holder.locked()


def test_a_timed_out_async_acquire_answers_on_time(backend, stalls):
    holder = Lock("deadline", ttl=30)
    holder.acquire()

    async def main() -> list[float]:
        took = []
        for fair in (False, True):
            for _ in range(10):
                took.append(
                    await timed_in_loop(stalls, AsyncLock("deadline", ttl=30, fair=fair).acquire, T)
                )
        return took

    assert_on_time(asyncio.run(main()))
    assert queued("deadline") == 0
    if backend.kind != "fakeredis":
        assert blocked_clients(backend) == 0
    holder.release()


async def timed_in_loop(stalls: Stalls, acquire: Any, timeout: float, tries: int = 20) -> float:
    """Seconds a failing ``await acquire(timeout)`` took, in a run no stall overlapped."""
    for _ in range(tries):
        start = time.monotonic()
        assert not await acquire(timeout)
        end = time.monotonic()
        if not stalls.between(start, end):
            return end - start
    raise AssertionError(f"the machine stalled in each of {tries} runs")


def test_the_decorator_answers_busy_within_its_timeout(backend, stalls):
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

        async def busy(_timeout: float) -> bool:
            assert (await async_view(HttpRequest(), n=1)).status_code == 409
            return False

        return [await timed_in_loop(stalls, busy, T) for _ in range(7)]

    holder = Lock("deadline:1", ttl=30)
    holder.acquire()
    sync_took = []
    for _ in range(7):
        status, took = stalls.timed(lambda: view(HttpRequest(), n=1).status_code)
        assert status == 409
        sync_took.append(took)
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
        self.error: BaseException | None = None
        taken = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(taken,), daemon=True)
        self.thread.start()
        assert taken.wait(5)

    def _run(self, taken: threading.Event) -> None:
        try:
            assert self.lock.acquire(0)
            taken.set()
            at = self.at.get()
            time.sleep(max(0.0, at - time.monotonic()))
            self.lock.release()
            self.released = time.monotonic()  # when the release had surely reached Redis
        except BaseException as exc:  # shown by join(), in the test's own thread
            self.error = exc
            raise

    def release_at(self, at: float) -> None:
        self.at.put(at)

    def join(self) -> None:
        self.thread.join(5)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise AssertionError("the holder's acquire or release failed") from self.error


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_release_shortly_before_the_deadline_hands_over(real_backend, fair, stalls):
    # A round counts when the holder's release was done 40 ms or more before the waiter's
    # deadline and no stall of the machine overlapped it: on a loaded machine its thread may
    # wake too late (then the lock rightly goes to nobody), and that round says nothing.
    wait, counted = 0.3, 0
    for _ in range(15):
        holder = Holder("deadline", fair)
        start = time.monotonic()
        holder.release_at(start + wait - 0.07)
        got, took = timed(lambda: Lock("deadline", ttl=30, fair=fair).acquire(wait))
        holder.join()
        Lock.force_release("deadline")
        if holder.released > start + wait - 0.04 or stalls.between(start, start + took):
            continue
        assert got, f"released {wait - (holder.released - start):.3f}s before the deadline"
        assert holder.released - start - 0.05 <= took <= wait + LATE
        counted += 1
        if counted == 3:
            return
    pytest.fail(f"the holder released in time in only {counted} of 15 rounds")


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_release_just_after_the_deadline_does_not_go_to_the_timed_out_waiter(
    real_backend, fair, stalls
):
    # Before, the waiter's BLPOP outlived its timeout until Redis's next tick and caught
    # this release, so acquire(T) returned True after T.
    for offset in (0.005, 0.01, 0.02, 0.03, 0.04):
        holder = Holder("deadline", fair)
        waiter = Lock("deadline", ttl=30, fair=fair)
        start = time.monotonic()
        holder.release_at(start + T + offset)
        got, took = timed(lambda waiter=waiter: waiter.acquire(T))
        holder.join()
        assert not got, f"acquired after {took:.3f}s"
        # (Late only if a stall of the machine overlapped the wait.)
        assert took <= T + LATE or stalls.between(start, start + took)
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
    # (A long retry delay keeps the stopped waiter's registration alive, 150 s, past its
    # deadline, so that the hand-off does go to it; and the follower's fallback re-check,
    # 15 s at the earliest, far from the pass-on.)
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
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
    assert results.get(timeout=30) is False
    follower.join(BEFORE_ANY_RECHECK)
    assert got_next[0][0], "the next waiter must get the lock"
    # Passed on by the woken waiter, not at the follower's re-check nor once the stopped
    # waiter's registration lapsed.
    assert time.monotonic() - resumed < BEFORE_ANY_RECHECK
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


def queued_by(name: str, count: int, deadline: float) -> bool:
    """Whether ``count`` waiters of ``name`` were queued before ``deadline`` (monotonic)."""
    while queued(name) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


@pytest.mark.processes
def test_many_timed_out_waiters_do_not_stall_the_fair_line(real_backend, processes, stalls):
    # Six waiters give up while the holder releases about at their deadlines: whichever
    # wins each race, every one answers and the lock reaches the live waiter queued behind
    # them at once. A round that a stall of this process overlapped says nothing (the
    # waiters may give up before all are queued, a wait may end late): it is done again.
    # (The child processes are not watched: a stall of theirs shows in this process too on
    # a machine that busy, and the bounds leave 0.2 s for what does not.)
    wait = 0.5
    for offset in (-0.01, 0.0, 0.01):
        for _ in range(10):
            holder = Holder("line", fair=True)
            ready, go, results = processes.queue(), processes.event(), processes.queue()
            for _ in range(6):
                processes.start(wait_in_line, "line", wait, ready, go, results)
            for _ in range(6):
                ready.get(timeout=30)
            started = time.monotonic()
            go.set()
            in_line = queued_by("line", 6, started + wait)
            follower, live = follow("line", True)
            if in_line:
                until(lambda: queued("line") == 7)
            holder.release_at(started + wait + offset)
            tooks = [results.get(timeout=30)[1] for _ in range(6)]
            holder.join()
            follower.join(30)
            ended = time.monotonic()
            Lock.force_release("line")
            processes.join_all()
            processes.children.clear()
            if not stalls.between(started, ended):
                break
        else:
            pytest.fail("the machine stalled in each of 10 rounds")
        assert in_line, "the six waiters were not queued before their deadline"
        for took in tooks:
            # Seven processes wake at once here: the on-time bound is the tests' above.
            assert took <= wait + 0.2, f"took {took:.3f}s"
        assert live[0][0], "the live waiter must get the lock"
        assert live[0][1] < wait + offset + 1.0, "not after a registration lapsed"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_long_timeout_acquires_at_the_release(real_backend, kind, stalls):
    def at_the_release() -> tuple[bool, float]:
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
        Lock.force_release("long")
        return got, took

    (got, took), _ = stalls.timed(at_the_release)  # again if a stall overlapped it
    assert got
    assert 0.45 <= took < 0.5 + LATE


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


def test_without_client_unblock_waits_fall_back_to_redis_timeouts(no_client_command, stalls):
    # Less precise (Redis's tick ends the wait), but still correct and pushed. (A wait that
    # a stall of the machine overlapped is done again.)
    holder = Holder("fallback")
    for _ in range(3):
        got, took = stalls.timed(lambda: Lock("fallback", ttl=30).acquire(T))
        assert not got
        assert T <= took <= T + 0.3

    async def main() -> float:
        # In one event loop, as under an ASGI server: the loop's asyncio client (and its
        # connection, authenticated as the denied user) is made by a first call, not timed.
        assert not await AsyncLock("fallback", ttl=30).acquire(T)
        return await timed_in_loop(stalls, AsyncLock("fallback", ttl=30).acquire, T)

    took = asyncio.run(main())
    assert T <= took <= T + 0.3
    for _ in range(20):
        start = time.monotonic()
        holder.release_at(start + 0.05)
        lock = Lock("fallback", ttl=30)
        got = lock.acquire(2)
        took = time.monotonic() - start
        holder.join()
        if not stalls.between(start, start + took):
            break
        if got:
            lock.release()
        holder = Holder("fallback")
    assert got
    assert took < 0.05 + LATE, "woken by the release, not by a re-check"
    assert queued("fallback") == 0
    assert blocked_clients(no_client_command) == 0
