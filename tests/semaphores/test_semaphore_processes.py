"""Semaphores across real OS processes on a real redis-server and a real Redis Cluster: the
limit holds under a race, and a SIGKILLed holder's permit comes back after its TTL."""

from __future__ import annotations

import math
import os
import signal
import time
from typing import Any

import pytest

from django_redislock import get_redis
from django_redislock.semaphores.semaphore import Semaphore

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]
INSIDE = "test:{sem}:inside"  # holders inside the critical section now
SEEN = "test:{sem}:seen"  # how many were inside, as each holder entered
FENCES = "test:{sem}:fences"
LIMIT = 3


def enter_and_leave(times: int, guarded: bool, fair: bool) -> None:
    client = get_redis()
    semaphore = Semaphore("pool", limit=LIMIT, ttl=10, timeout=math.inf, fencing=True, fair=fair)
    for _ in range(times):
        if guarded:
            semaphore.acquire()
            client.rpush(FENCES, semaphore.fence)
        client.rpush(SEEN, client.incr(INSIDE))
        time.sleep(0.002)  # long enough for the others to pile in, were they let in
        client.decr(INSIDE)
        if guarded:
            semaphore.release()


def run_eight(backend: Any, processes: Any, guarded: bool, fair: bool = False) -> list[int]:
    for _ in range(8):
        processes.start(enter_and_leave, 60, guarded, fair)
    processes.join_all(120)
    return [int(v) for v in backend.client.lrange(SEEN, 0, -1)]


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_eight_processes_never_exceed_the_limit(real_backend, processes, fair):
    seen = run_eight(real_backend, processes, True, fair)
    assert len(seen) == 480
    assert max(seen) == LIMIT  # the limit is reached, never passed
    fences = [int(v) for v in real_backend.client.lrange(FENCES, 0, -1)]
    assert len(set(fences)) == 480  # every acquisition its own fence
    assert int(real_backend.client.get(INSIDE)) == 0


def test_control_without_the_semaphore_the_limit_is_passed(real_backend, processes):
    # Proves the test above can fail: the same work unguarded has more than LIMIT inside.
    assert max(run_eight(real_backend, processes, False)) > LIMIT


def hold_forever(ttl: float, held: Any) -> None:
    assert Semaphore("crash", limit=2, ttl=ttl).acquire(0)
    held.put(time.time())
    while True:
        time.sleep(1)


def wait_for_a_permit(results: Any) -> None:
    semaphore = Semaphore("crash", limit=2, ttl=30)
    results.put((semaphore.acquire(20), time.time()))


def test_a_sigkilled_holders_permit_comes_back_after_its_ttl(real_backend, processes, settings):
    # A fallback re-check a minute away: the waiter can only get the permit in time by the
    # wake-up it times to the soonest permit's expiry.
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    ttl = 1.0
    held, results = processes.queue(), processes.queue()
    holders = [processes.start(hold_forever, ttl if i == 0 else 60, held) for i in range(2)]
    acquired_at = held.get(timeout=10)
    held.get(timeout=10)
    processes.start(wait_for_a_permit, results)
    os.kill(holders[0].pid, signal.SIGKILL)
    got, at = results.get(timeout=30)
    assert got
    assert at >= acquired_at + ttl - 0.05  # not before the dead holder's TTL ran out
    assert Semaphore("crash", limit=2).count() == 2


def wait_in_line(tag: int, results: Any) -> None:
    semaphore = Semaphore("line", limit=1, ttl=30, fair=True, fencing=True)
    assert semaphore.acquire(30)
    results.put((semaphore.fence, tag))
    semaphore.release()


def test_fair_processes_get_permits_in_arrival_order(real_backend, processes, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    holder = Semaphore("line", limit=1, ttl=30, fair=True)
    assert holder.acquire(0)
    results = processes.queue()
    waiters = holder.layout.waiters
    for tag in range(4):
        processes.start(wait_in_line, tag, results)
        deadline = time.monotonic() + 10
        while real_backend.client.zcard(waiters) < tag + 1:
            assert time.monotonic() < deadline, "the waiter never queued"
            time.sleep(0.005)
    holder.release()
    got = sorted(results.get(timeout=30) for _ in range(4))
    assert [tag for _, tag in got] == [0, 1, 2, 3]
    processes.join_all(30)


def wait_until_killed() -> None:
    Semaphore("dead-line", limit=1, ttl=30, fair=True).acquire(60)


def wait_and_report(results: Any) -> None:
    semaphore = Semaphore("dead-line", limit=1, ttl=30, fair=True)
    results.put((semaphore.acquire(20), os.getpid()))


def test_a_dead_waiter_does_not_stall_the_line(real_backend, processes):
    holder = Semaphore("dead-line", limit=1, ttl=30, fair=True)
    assert holder.acquire(0)
    waiters = holder.layout.waiters

    def queued(count: int) -> None:
        deadline = time.monotonic() + 10
        while real_backend.client.zcard(waiters) < count:
            assert time.monotonic() < deadline, "the waiter never queued"
            time.sleep(0.005)

    dead = processes.start(wait_until_killed)
    queued(1)
    os.kill(dead.pid, signal.SIGKILL)
    results = processes.queue()
    processes.start(wait_and_report, results)
    queued(2)  # behind the dead one
    time.sleep(holder.registration_ms / 1000 + 0.2)  # the dead one's registration lapses
    holder.release()
    got, pid = results.get(timeout=30)
    assert got
    assert [p.pid for p in holder.holders()] == [pid]
