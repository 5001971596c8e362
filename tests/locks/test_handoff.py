"""The release wakes the next waiter itself: every waiter of a lock blocks on the lock's one
wake-up list, the hand-off pushes the new holder's wake-up there, and a waiter that pops
another's passes it on. On real redis-servers (standalone and Cluster), real threads, with a
30 s fallback re-check so that only a push can wake a waiter within ``PUSHED`` seconds (wide
bounds: a busy machine is slow, never wrong)."""

from __future__ import annotations

import threading
import time
from typing import Any

from django_redislock import Lock
from django_redislock.locks import waiting
from django_redislock.locks.keys import parse_value, parse_wake_up
from django_redislock.locks.scripts import GIVE_UP, RELEASE
from django_redislock.redis.clients import run_script
from tests.support.waiters import planting_a_lapsing_waiter

RECHECK = 30.0  # LOCK_RETRY_DELAY: a waiter woken sooner than this was woken by a push
PUSHED = 10.0  # a push wakes a waiter within this, however busy the machine


def queued(backend: Any, lock: Lock, count: int) -> None:
    deadline = time.monotonic() + 30
    while backend.client.zcard(lock.keys.waiters) < count:
        assert time.monotonic() < deadline, f"{count} waiters never queued"
        time.sleep(0.005)


def start_waiter(name: str, fair: bool, got: list[Any], done: threading.Event) -> threading.Thread:
    def run() -> None:
        lock = Lock(name, ttl=120, fair=fair, fencing=True)
        if lock.acquire(90):
            got.append((name, time.monotonic(), lock.fence))
            done.wait(90)
            lock.release()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_release_wakes_exactly_one_waiter_in_arrival_order(real_backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": RECHECK}
    for fair in (False, True):
        holder = Lock(f"one-each-{fair}", ttl=120, fair=fair, fencing=True)
        assert holder.acquire(0)
        got: list[Any] = []
        done = [threading.Event() for _ in range(3)]
        threads = []
        for i in range(3):
            threads.append(start_waiter(holder.name, fair, got, done[i]))
            queued(real_backend, holder, i + 1)
        order = [t.decode() for t in real_backend.client.zrange(holder.keys.waiters, 0, -1)]
        released = time.monotonic()
        holder.release()
        for i in range(3):
            deadline = time.monotonic() + PUSHED
            while len(got) < i + 1:
                assert time.monotonic() < deadline, "a release did not wake the next waiter"
                time.sleep(0.002)
            time.sleep(0.1)
            assert len(got) == i + 1, "a release woke more than one waiter"
            assert got[i][1] - released < PUSHED, "woken by the push, not the re-check"
            value = parse_value(real_backend.client.get(holder.keys.lock))
            assert value is not None
            assert value.token == order[i], "handed over in arrival order"
            assert got[i][2] == value.fence
            released = time.monotonic()
            done[i].set()  # this holder releases: the next waiter is woken
        for thread in threads:
            thread.join(PUSHED)
        assert not real_backend.client.exists(holder.keys.lock, holder.keys.wake)


def test_a_waiter_that_pops_another_waiters_wake_up_passes_it_on(real_backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": RECHECK}
    holder = Lock("passed-on", ttl=120, fencing=True)
    assert holder.acquire(0)
    keys = holder.keys
    popped: list[Any] = []
    # A stranger blocks on the wake-up list first, so Redis serves it first.
    stranger = threading.Thread(
        target=lambda: popped.append(real_backend.client.blpop([keys.wake], 30))
    )
    stranger.start()
    deadline = time.monotonic() + 30
    while not any(b"blpop" in c.get("cmd", "").encode() for c in _clients(real_backend, keys.wake)):
        assert time.monotonic() < deadline, "the stranger never blocked"
        time.sleep(0.005)
    got: list[Any] = []
    done = threading.Event()
    waiter = start_waiter(holder.name, False, got, done)
    queued(real_backend, holder, 1)
    time.sleep(0.05)  # the waiter blocks behind the stranger
    released = time.monotonic()
    holder.release()
    stranger.join(30)
    assert popped, "the stranger's BLPOP returned"
    assert popped[0] is not None, "the stranger popped the wake-up"
    wake_up = parse_wake_up(popped[0][1])
    assert wake_up is not None
    assert not got, "the waiter's wake-up went to the stranger"
    # The stranger gives up, passing the wake-up on: it reaches the waiter at once.
    reply = run_script(real_backend.client, GIVE_UP, keys.giving_up, ("stranger|", popped[0][1]))
    assert reply == -1
    deadline = time.monotonic() + PUSHED
    while not got:
        assert time.monotonic() < deadline, "the passed-on wake-up never reached the waiter"
        time.sleep(0.002)
    assert got[0][1] - released < PUSHED, "woken by the passed-on push, not the re-check"
    assert got[0][2] == wake_up.fence
    done.set()
    waiter.join(PUSHED)
    assert not real_backend.client.exists(keys.lock, keys.wake, keys.waiters)


def test_a_waiter_that_times_out_holding_anothers_wake_up_passes_it_on(
    real_backend, settings, monkeypatch
):
    """The impatient waiter blocks first, so Redis gives it the patient one's wake-up; its
    deadline passes as it pops it, and its leaving passes the wake-up on: not lost."""
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": RECHECK}
    holder = Lock("timed-out-pass", ttl=120, fair=True)
    assert holder.acquire(0)
    keys = holder.keys
    real_wait = waiting.wait_for_push
    taken: list[Any] = []

    def wait_for_push(client: Any, key: str, timeout: float, accepts: Any = None) -> Any:
        if threading.current_thread().name == "patient":
            time.sleep(0.3)  # blocks after the impatient waiter
            return real_wait(client, key, timeout, accepts)
        popped = real_wait(client, key, timeout, accepts)
        if popped is not None:
            taken.append(popped[1])
            time.sleep(0.6)  # its deadline passes as it pops
        return popped

    monkeypatch.setattr(waiting, "wait_for_push", wait_for_push)
    got: list[Any] = []
    done = threading.Event()
    patient = start_waiter(holder.name, True, got, done)
    patient.name = "patient"
    queued(real_backend, holder, 1)  # first in line
    results: list[bool] = []
    impatient = threading.Thread(
        target=lambda: results.append(Lock(holder.name, ttl=10, fair=True).acquire(0.5))
    )
    impatient.start()
    queued(real_backend, holder, 2)
    time.sleep(0.05)  # the impatient waiter is blocked; the patient one blocks later
    holder.release()  # to the patient waiter, its wake-up to the impatient one
    released = time.monotonic()
    impatient.join(30)
    assert results == [False]
    assert len(taken) == 1, "the impatient waiter popped the patient one's wake-up"
    deadline = time.monotonic() + PUSHED
    while not got:
        assert time.monotonic() < deadline, "the passed-on wake-up never reached the waiter"
        time.sleep(0.002)
    assert got[0][1] - released < PUSHED, "woken by the passed-on push, not the re-check"
    done.set()
    patient.join(PUSHED)
    assert not real_backend.client.exists(keys.lock, keys.wake, keys.waiters)


def _clients(backend: Any, key: str) -> list[dict[str, Any]]:
    client = backend.client
    if hasattr(client, "get_node_from_key"):
        client = client.get_redis_connection(client.get_node_from_key(key))
    return client.client_list()


def test_a_registration_ending_this_very_ms_gets_no_hand_off(real_backend):
    holder = Lock("edge", ttl=30, fair=True)
    assert holder.acquire(0)
    keys = holder.keys
    # The planted waiter's deadline is the release's own ms: at its deadline a registration
    # has lapsed, so the lock is freed, not handed to it.
    script = planting_a_lapsing_waiter(2, 6) + RELEASE.source
    now = int(time.time() * 1000)
    reply = real_backend.client.eval(script, len(keys.releasing), *keys.releasing, "", "edge", now)
    assert reply == 1  # freed (2: handed to the lapsed waiter)
    assert not real_backend.client.exists(keys.lock, keys.waiters, keys.registrations, keys.wake)
    assert Lock("edge", fair=True).acquire(0)
