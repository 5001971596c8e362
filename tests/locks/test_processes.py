"""Real OS processes against a real redis-server and a real Redis Cluster: races, crashes
(SIGKILL) and stalls (SIGSTOP) are the real thing here."""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from typing import Any

import pytest

from django_redislock import Lock, get_redis
from django_redislock.exceptions import LockNotOwned
from django_redislock.fencing import fenced_update
from django_redislock.locks.keys import parse_value
from django_redislock.locks.scripts import RELEASE
from tests.models import Account
from tests.support.waiting import ttl_set_since, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]
COUNTER = "test:{counter}"


def increment(times: int, locked: bool, fair: bool) -> None:
    client = get_redis()
    lock = Lock("counter", ttl=5, timeout=math.inf, fair=fair)
    for _ in range(times):
        if locked:
            lock.acquire()
        value = int(client.get(COUNTER) or 0)
        client.set(COUNTER, value + 1)
        if locked:
            lock.release()


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_eight_processes_increment_exactly(real_backend, processes, fair):
    for _ in range(8):
        processes.start(increment, 500, True, fair)
    processes.join_all(120)
    assert int(real_backend.client.get(COUNTER)) == 4000


def test_control_without_the_lock_updates_are_lost(real_backend, processes):
    # Proves the counter test can fail: the same work unguarded loses increments.
    for _ in range(8):
        processes.start(increment, 500, False, False)
    processes.join_all(120)
    assert int(real_backend.client.get(COUNTER)) < 4000


def hold_forever(name: str, ttl: float, held: Any) -> None:
    Lock(name, ttl=ttl).acquire()
    held.set()
    while True:
        time.sleep(1)


def acquire_and_report(name: str, timeout: float, ttl: float, results: Any, tag: Any) -> None:
    lock = Lock(name, ttl=ttl, timeout=timeout)
    got = lock.acquire()
    results.put((tag, got, time.time()))
    if got:
        lock.release()


def test_sigkilled_holder_blocks_others_at_most_its_ttl(real_backend, processes):
    ttl = 1.0
    held, results = processes.event(), processes.queue()
    holder = processes.start(hold_forever, "crash", ttl, held)
    assert held.wait(10)
    processes.start(acquire_and_report, "crash", 10, 5, results, "waiter")
    time.sleep(0.1)
    killed_at = time.time()
    os.kill(holder.pid, signal.SIGKILL)
    _tag, got, at = results.get(timeout=10)
    assert got
    assert at - killed_at <= ttl + 0.2


def stalled_holder(account_pk: int, fences: Any, go: Any, results: Any) -> None:
    lock = Lock("stall", ttl=0.5, fencing=True)
    lock.acquire()
    fence = lock.fence
    fences.put(fence)
    go.wait()  # SIGSTOPped here, far past its TTL
    outcome = {}
    for action in ("release", "extend"):
        try:
            getattr(lock, action)()
            outcome[action] = "ok"
        except LockNotOwned:
            outcome[action] = "LockNotOwned"
    rows = Account.objects.filter(pk=account_pk)
    outcome["write"] = fenced_update(rows, fence, balance=-1)
    results.put(outcome)


def test_sigstopped_holder_past_its_ttl_is_refused_everywhere(real_backend, processes):
    account = Account.objects.create(balance=100)
    fences, go, results = processes.queue(), processes.event(), processes.queue()
    stale = processes.start(stalled_holder, account.pk, fences, go, results)
    stale_fence = fences.get(timeout=10)
    os.kill(stale.pid, signal.SIGSTOP)
    time.sleep(0.7)
    new = Lock("stall", ttl=10, fencing=True)
    since = time.monotonic()
    assert new.acquire(0)
    assert new.fence > stale_fence
    assert fenced_update(Account.objects.filter(pk=account.pk), new.fence, balance=50) == 1
    value = real_backend.client.get(new.keys[0])
    os.kill(stale.pid, signal.SIGCONT)
    go.set()
    outcome = results.get(timeout=10)
    assert outcome == {"release": "LockNotOwned", "extend": "LockNotOwned", "write": 0}
    assert real_backend.client.get(new.keys[0]) == value
    assert ttl_set_since(new.ttl(), 10, since)  # untouched by the stale holder
    account.refresh_from_db()
    assert (account.balance, account.fence) == (50, new.fence)
    new.release()


def fair_waiter(tag: Any, ttl: float, timeout: float) -> None:
    lock = Lock("fair", ttl=ttl, fair=True, timeout=timeout)
    got = lock.acquire()
    if got:
        get_redis().rpush("test:{fair}:order", tag)
        lock.release()


def queued(backend: Any, count: int) -> None:
    deadline = time.monotonic() + 10
    while backend.client.zcard(Lock("fair").keys[1]) < count:
        assert time.monotonic() < deadline, f"{count} waiters never queued"
        time.sleep(0.005)


def test_fair_processes_acquire_in_arrival_order(real_backend, processes):
    holder = Lock("fair", ttl=30, fair=True)
    holder.acquire()
    for i in range(10):
        processes.start(fair_waiter, i, 10, 30)
        queued(real_backend, i + 1)
    holder.release()
    processes.join_all(30)
    order = [int(x) for x in real_backend.client.lrange("test:{fair}:order", 0, -1)]
    assert order == list(range(10))


def test_fair_waiters_that_gave_up_or_died_do_not_stall_the_line(real_backend, processes):
    holder = Lock("fair", ttl=30, fair=True)
    holder.acquire()
    # It gives up while the two others queue behind it: long enough for two processes to
    # start and queue on a loaded machine (at 0.3 s, and once in CI at 1.5 s, it had left
    # before the second one queued).
    impatient = processes.start(fair_waiter, "impatient", 5, 4.0)
    queued(real_backend, 1)
    doomed = processes.start(fair_waiter, "doomed", 0.5, 30)
    queued(real_backend, 2)
    processes.start(fair_waiter, "patient", 5, 30)
    queued(real_backend, 3)
    impatient.join(10)
    assert impatient.exitcode == 0
    os.kill(doomed.pid, signal.SIGKILL)
    released_at = time.monotonic()
    holder.release()
    # The dead waiter may get the lock for its TTL (0.5 s); a stalled line would wait for the
    # others' 30 s. The slack is for a loaded CI machine.
    deadline = released_at + 0.5 + 2.0
    while not real_backend.client.lrange("test:{fair}:order", 0, -1):
        assert time.monotonic() < deadline, "the line stalled behind a dead waiter"
        time.sleep(0.005)
    assert real_backend.client.lrange("test:{fair}:order", 0, -1) == [b"patient"]


def try_in_child(lock: Lock, results: Any) -> None:
    # The same instance, inherited through fork, in the thread that forked.
    results.put((lock.acquire(0), Lock(lock.name, ttl=5, reentrant=True).acquire(0)))


def test_a_forked_child_does_not_inherit_its_parents_hold(real_backend, processes):
    results = processes.queue()
    with Lock("forked", ttl=10, reentrant=True) as lock:
        processes.start(try_in_child, lock, results)
        assert results.get(timeout=10) == (False, False)
        assert lock.owned()


def hand_over_then_die(name: str, held: Any, go: Any) -> None:
    """Hold the lock, then run the release script (it hands the lock to the waiter and pushes
    its wake-up) and lose that wake-up in the same transaction, as when another waiter pops it
    and dies before passing it on; then die."""
    lock = Lock(name, ttl=30, fencing=True)
    assert lock.acquire(0)
    held.set()
    assert go.wait(30)
    value = parse_value(lock.client.get(lock.keys.lock))
    assert value is not None
    keys = lock.keys.releasing
    pipe = lock.client.pipeline(transaction=True)
    pipe.execute_command("EVAL", RELEASE.source, len(keys), *keys, value.token, name, 1)
    pipe.delete(lock.keys.wake)
    reply, _ = pipe.execute()
    os._exit(0 if reply == 2 else 3)  # 3: it was not handed over


def test_a_waiter_finds_the_lock_handed_to_it_when_its_wake_up_is_lost(
    real_backend, processes, settings
):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 1.0}
    held, go = processes.event(), processes.event()
    releaser = processes.start(hand_over_then_die, "orphaned", held, go)
    assert held.wait(10)
    waiter = Lock("orphaned", ttl=30, fencing=True)
    got: list[Any] = []

    def wait() -> None:
        if waiter.acquire(20):
            got.append((time.monotonic(), waiter.fence, real_backend.client.get(waiter.keys.lock)))
            waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    deadline = time.monotonic() + 10
    while not real_backend.client.hlen(waiter.keys.registrations):
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.005)
    go.set()
    released_at = time.monotonic()
    releaser.join(10)
    assert releaser.exitcode == 0, "the lock was not handed to the waiter"
    thread.join(25)
    assert got, "the waiter never got the lock"
    at, fence, raw = got[0]
    # Found at its next re-check (its retry delay, 1 s), long before the lock's TTL (30 s),
    # however busy the machine.
    assert at - released_at < 10
    value = parse_value(raw)
    assert value is not None
    assert fence == value.fence > 0  # the very hand-off the releaser made
    keys = waiter.keys
    assert not real_backend.client.exists(keys.lock, keys.waiters, keys.registrations, keys.wake)


def wait_forever(name: str) -> None:
    Lock(name, ttl=30, fair=True).acquire(math.inf)


def wait_and_report(name: str) -> None:
    with Lock(name, ttl=5, fair=True, timeout=30):
        get_redis().rpush("test:{registered}:got", "patient")


def registrations(backend: Any, keys: Any, count: int) -> dict[bytes, int]:
    """Wait until ``count`` waiters are registered; their deadlines (server ms) by token."""
    deadline = time.monotonic() + 10
    while backend.client.hlen(keys.registrations) < count:
        assert time.monotonic() < deadline, f"{count} waiters never registered"
        time.sleep(0.005)
    found = backend.client.hgetall(keys.registrations).items()
    return {token: int(value.split(b"|")[0]) for token, value in found}


def test_a_dead_waiters_registration_is_dropped_when_met_and_nothing_of_it_is_left(
    real_backend, processes
):
    holder = Lock("registered", ttl=30, fair=True)
    assert holder.acquire(0)
    keys = holder.keys
    doomed = processes.start(wait_forever, "registered")
    (dead,) = registrations(real_backend, keys, 1)
    # The live waiter queues behind it while it lives (its registration, renewed while it
    # waits, then keeps the hash: a process slow to start must not find it expired).
    processes.start(wait_and_report, "registered")
    registrations(real_backend, keys, 2)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(5)
    # The hash expires no sooner than its latest deadline (the server's clock: this host's).
    latest = max(registrations(real_backend, keys, 2).values())
    assert real_backend.client.pttl(keys.registrations) >= latest - time.time() * 1000 - 50

    def dead_lapsed_live_registered() -> bool:
        deadlines = registrations(real_backend, keys, 2)
        return deadlines[dead] < time.time() * 1000 < max(deadlines.values())

    # The dead waiter's deadline passes, but the live one renews its own and keeps the
    # hash: both still listed (waited for, not slept: a busy machine delays the renewals).
    wait_for(dead_lapsed_live_registered, 30, "the dead waiter's deadline to pass")
    holder.release()  # meets the dead waiter first: dropped; the live one gets the lock
    deadline = time.monotonic() + 10
    while not real_backend.client.lrange("test:{registered}:got", 0, -1):
        assert time.monotonic() < deadline, "the live waiter never got the lock"
        time.sleep(0.005)
    assert dead not in real_backend.client.hgetall(keys.registrations)
    deadline = time.monotonic() + 10
    while real_backend.client.exists(keys.lock):  # the live waiter releases it
        assert time.monotonic() < deadline
        time.sleep(0.005)
    leftovers = (keys.waiters, keys.registrations, keys.wake)
    assert not real_backend.client.exists(*leftovers), "nothing of the dead waiter is left"
