"""The release wakes the waiters it hands permits to itself, as a lock's does: every waiter of
a semaphore blocks on its one wake-up list, the hand-off pushes one wake-up per waiter it
gave permits to, and a waiter that pops another's passes it on. On real redis-servers
(standalone and Cluster), real threads, with a 5 s fallback re-check so that only a push can
wake a waiter early."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from redis import Redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from django_redislock import AsyncSemaphore, Semaphore
from django_redislock.locks import waiting
from django_redislock.locks.keys import lock_base, parse_wake_up
from django_redislock.redis.clients import reset_connections, run_script
from django_redislock.semaphores.keys import parse_permit, semaphore_keys
from django_redislock.semaphores.scripts import GIVE_UP
from django_redislock.semaphores.scripts import RELEASE as SEMAPHORE_RELEASE
from tests.support.waiters import planting_a_lapsing_waiter
from tests.support.waiting import BEFORE_ANY_RECHECK, SLOW_RETRY_DELAY


def slow_fallback(settings: Any) -> None:
    """Waiters re-check 15 s at the earliest: one that got its permits within
    BEFORE_ANY_RECHECK was woken by a push, however busy the machine."""
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}


def queued(backend: Any, semaphore: Semaphore, count: int) -> None:
    deadline = time.monotonic() + 30
    while backend.client.zcard(semaphore.layout.waiters) < count:
        assert time.monotonic() < deadline, f"{count} waiters never queued"
        time.sleep(0.005)


def tokens(backend: Any, semaphore: Semaphore) -> list[str]:
    return [t.decode() for t in backend.client.zrange(semaphore.layout.waiters, 0, -1)]


class Waiter(threading.Thread):
    """Waits for ``semaphore``'s permits, notes when it got them, then holds them until told."""

    def __init__(self, semaphore: Semaphore, timeout: float = 20) -> None:
        super().__init__(daemon=True)
        self.semaphore, self.timeout = semaphore, timeout
        self.got_at: float | None = None
        self.fence: int | None = None
        self.leave = threading.Event()
        self.start()

    def run(self) -> None:
        if self.semaphore.acquire(self.timeout):
            self.fence = self.semaphore.fence
            self.got_at = time.monotonic()
            self.leave.wait(20)
            self.semaphore.release()


def until(predicate: Any, within: float, message: str) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, message
        time.sleep(0.002)


def test_a_release_that_frees_two_permits_wakes_exactly_the_two_oldest_eligible_waiters(
    real_backend, settings
):
    slow_fallback(settings)
    for fair in (False, True):
        two_freed(real_backend, fair)


def two_freed(backend: Any, fair: bool) -> None:
    name = f"two-freed-{fair}"
    options: dict[str, Any] = {"limit": 3, "ttl": 10, "fair": fair, "fencing": True}
    pair = Semaphore(name, permits=2, **options)
    single = Semaphore(name, **options)
    assert pair.acquire(0)
    assert single.acquire(0)
    waiters: list[Waiter] = []
    if not fair:
        # Oldest of all, but wants all three permits: not eligible for the two freed
        # (fair, it would hold the others back, see test_semaphore_permits).
        waiters.append(Waiter(Semaphore(name, permits=3, **options)))
        queued(backend, pair, 1)
    for _ in range(3):
        waiters.append(Waiter(Semaphore(name, **options)))
        queued(backend, pair, len(waiters))
    big, (first, second, third) = waiters[:-3], waiters[-3:]
    released = time.monotonic()
    pair.release()
    until(lambda: first.got_at and second.got_at, BEFORE_ANY_RECHECK, "the two oldest not woken")
    time.sleep(0.2)
    assert third.got_at is None, "a release of two permits woke a third waiter"
    assert all(w.got_at is None for w in big)
    assert max(first.got_at or 0, second.got_at or 0) - released < BEFORE_ANY_RECHECK
    fences = {p.fence for p in pair.holders()}
    assert {first.fence, second.fence} <= fences
    assert len(tokens(backend, pair)) == len(big) + 1
    # (a woken waiter may still be taking its wake-up off the list on a busy machine)
    until(lambda: not backend.client.exists(pair.layout.wake), 30, "a wake-up was left over")
    released = time.monotonic()
    first.leave.set()  # frees one permit: the third (the big one needs three) gets it
    until(lambda: third.got_at, BEFORE_ANY_RECHECK, "a release did not wake the next waiter")
    assert (third.got_at or 0) - released < BEFORE_ANY_RECHECK
    for waiter in (second, third):
        waiter.leave.set()
    single.release()
    if big:
        until(lambda: big[0].got_at, BEFORE_ANY_RECHECK, "the big waiter never got its permits")
        big[0].leave.set()
    for waiter in waiters:
        waiter.join(10)
    assert not backend.client.exists(pair.layout.holders, pair.layout.wake, pair.layout.waiters)


def test_fair_waiters_get_the_permits_one_release_at_a_time_in_arrival_order(
    real_backend, settings
):
    slow_fallback(settings)
    options: dict[str, Any] = {"limit": 1, "ttl": 10, "fair": True, "fencing": True}
    holder = Semaphore("fair-order", **options)
    assert holder.acquire(0)
    waiters = []
    for i in range(4):
        waiters.append(Waiter(Semaphore("fair-order", **options)))
        queued(real_backend, holder, i + 1)
    order = tokens(real_backend, holder)
    released = time.monotonic()
    holder.release()
    for i, waiter in enumerate(waiters):
        until(lambda w=waiter: w.got_at, BEFORE_ANY_RECHECK, "a release woke no next waiter")
        time.sleep(0.1)
        assert sum(w.got_at is not None for w in waiters) == i + 1, "woke more than one"
        assert (waiter.got_at or 0) - released < BEFORE_ANY_RECHECK, "woken by a re-check"
        (permit,) = holder.holders()
        assert permit.fence == waiter.fence
        member = real_backend.client.zrange(holder.layout.holders, 0, 0)[0]
        assert member.decode().startswith(order[i]), "handed over in arrival order"
        released = time.monotonic()
        waiter.leave.set()
    for waiter in waiters:
        waiter.join(10)
    assert not real_backend.client.exists(holder.layout.holders, holder.layout.wake)


def test_a_waiter_that_pops_another_waiters_wake_up_passes_it_on(real_backend, settings):
    slow_fallback(settings)
    holder = Semaphore("sem-passed-on", limit=1, ttl=10, fencing=True)
    assert holder.acquire(0)
    keys = holder.layout
    popped: list[Any] = []
    # A stranger blocks on the wake-up list first, so Redis serves it first (on a client of
    # its own that waits out a stalled machine, beyond the backend client's 5 s reads).
    patient = (RedisCluster if real_backend.kind == "cluster" else Redis).from_url(
        real_backend.url, socket_timeout=60, client_name=STRANGER
    )
    stranger = threading.Thread(target=lambda: popped.append(patient.blpop([keys.wake], 30)))
    stranger.start()
    until(lambda: _blocked(real_backend, keys.wake, STRANGER), 30, "the stranger never blocked")
    waiter = Waiter(Semaphore("sem-passed-on", limit=1, ttl=10, fencing=True))
    queued(real_backend, holder, 1)
    time.sleep(0.05)  # the waiter blocks behind the stranger (or later: the same outcome)
    released = time.monotonic()
    holder.release()
    stranger.join(60)
    patient.close()
    assert popped, "the stranger's BLPOP returned"
    assert popped[0] is not None, "the stranger popped the wake-up"
    wake_up = parse_wake_up(popped[0][1])
    assert wake_up is not None
    assert waiter.got_at is None, "the waiter's wake-up went to the stranger"
    # The stranger gives up, passing the wake-up on: it reaches the waiter at once.
    args = ("stranger|", popped[0][1])
    assert run_script(real_backend.client, GIVE_UP, keys.giving_up, args) == -1
    until(lambda: waiter.got_at, BEFORE_ANY_RECHECK, "the passed-on wake-up never came")
    assert (waiter.got_at or 0) - released < BEFORE_ANY_RECHECK, "woken by a re-check"
    assert waiter.fence == wake_up.fence
    waiter.leave.set()
    waiter.join(10)
    assert not real_backend.client.exists(keys.holders, keys.wake, keys.waiters)


def test_a_wake_up_whose_permit_is_gone_is_not_passed_on(real_backend):
    holder = Semaphore("sem-stale", limit=2, ttl=10, fencing=True)
    assert holder.acquire(0)
    keys = holder.layout
    member = real_backend.client.zrange(keys.holders, 0, 0)[0].decode()
    permit = parse_permit(0, member)
    assert permit is not None
    holder.release()
    run_script(real_backend.client, GIVE_UP, keys.giving_up, ("stranger|", f"{member}|0"))
    assert not real_backend.client.exists(keys.wake), "a wake-up for a freed permit is dropped"


def test_a_waiter_that_times_out_holding_anothers_wake_up_passes_it_on(
    real_backend, settings, monkeypatch
):
    """The impatient waiter blocks first, so Redis gives it the patient one's wake-up; its
    deadline passes as it pops it, and its leaving passes the wake-up on: not lost."""
    slow_fallback(settings)
    options: dict[str, Any] = {"limit": 1, "ttl": 10, "fair": True}
    holder = Semaphore("sem-timed-out-pass", **options)
    assert holder.acquire(0)
    keys = holder.layout
    real_wait = waiting.wait_for_push
    taken: list[Any] = []
    blocking = threading.Event()  # the impatient waiter is about to block

    def wait_for_push(client: Any, key: str, timeout: float, accepts: Any = None) -> Any:
        if threading.current_thread().name == "patient":
            if not taken:  # its first wait: it blocks after the impatient waiter
                assert blocking.wait(30)
                time.sleep(0.3)
            return real_wait(client, key, timeout, accepts)
        blocking.set()
        popped = real_wait(client, key, timeout, accepts)
        if popped is not None:
            taken.append(popped[1])
            time.sleep(timeout + 0.1)  # its deadline (at most ``timeout`` away) passes
        return popped

    monkeypatch.setattr(waiting, "wait_for_push", wait_for_push)
    patient = Waiter(Semaphore("sem-timed-out-pass", **options))
    patient.name = "patient"
    queued(real_backend, holder, 1)  # first in line
    results: list[bool] = []
    impatient = threading.Thread(
        # A deadline that a stalled machine does not see pass before the waiter blocks.
        target=lambda: results.append(Semaphore("sem-timed-out-pass", **options).acquire(2))
    )
    impatient.start()
    queued(real_backend, holder, 2)
    # The impatient waiter blocks (the patient one later): the wake-up is its to pop.
    assert blocking.wait(30)
    holder.release()  # to the patient waiter, its wake-up to the impatient one
    released = time.monotonic()
    impatient.join(30)
    assert results == [False]
    assert len(taken) == 1, "the impatient waiter popped the patient one's wake-up"
    until(lambda: patient.got_at, 30, "the passed-on wake-up never reached the waiter")
    # The impatient one's deadline (2 s) passed, then the push; not the re-check (15 s).
    assert (patient.got_at or 0) - released < BEFORE_ANY_RECHECK, "woken by a re-check"
    patient.leave.set()
    patient.join(10)
    assert not real_backend.client.exists(keys.holders, keys.wake, keys.waiters)


def test_asyncio_waiters_on_the_shared_listener_each_get_their_own_wake_up(real_backend, settings):
    """With two connections per event loop, the tasks beyond them wait on the process's
    wake-up listener; a release of three permits wakes three of them, each with its own."""
    slow_fallback(settings)
    settings.REDISLOCK = {**settings.REDISLOCK, "MAX_CONNECTIONS": 4}
    reset_connections()
    got: list[int] = []

    async def main() -> None:
        options: dict[str, Any] = {"limit": 3, "ttl": 10, "fencing": True}
        holder = AsyncSemaphore("sem-listened", permits=3, **options)
        assert await holder.acquire(0)
        leave = asyncio.Event()

        async def wait(n: int) -> None:
            semaphore = AsyncSemaphore("sem-listened", **options)
            assert await semaphore.acquire(20)
            got.append(n)
            await leave.wait()
            await semaphore.release()

        tasks = [asyncio.create_task(wait(n)) for n in range(8)]
        deadline = time.monotonic() + 30
        while real_backend.client.zcard(holder.layout.waiters) < 8:
            assert time.monotonic() < deadline, "the eight waiters never queued"
            await asyncio.sleep(0.005)
        released = time.monotonic()
        await holder.release()
        while len(got) < 3:
            assert time.monotonic() - released < BEFORE_ANY_RECHECK, "three were not woken"
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.2)
        assert len(got) == 3, "a release of three permits woke more than three waiters"
        leave.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)

    try:
        asyncio.run(main())
    finally:
        reset_connections()
    assert sorted(got) == list(range(8))


def test_every_key_of_a_semaphore_is_in_one_cluster_slot():
    for name in ("slot-check", "export:42", "x"):
        layout = semaphore_keys(lock_base(name, 16), name)
        assert len({key_slot(key.encode()) for key in layout[:-1]}) == 1


STRANGER = "test-stranger"


def _blocked(backend: Any, key: str, name: str) -> bool:
    """Whether the client named ``name`` is blocked in a BLPOP on ``key``'s node."""
    client = backend.client
    if hasattr(client, "get_node_from_key"):
        client = client.get_redis_connection(client.get_node_from_key(key))
    return any(c.get("cmd") == "blpop" and c.get("name") == name for c in client.client_list())


def test_a_registration_ending_this_very_ms_gets_no_permit(real_backend):
    holder = Semaphore("edge", limit=1, ttl=30, fair=True)
    assert holder.acquire(0)
    keys = holder.layout
    # The planted waiter's deadline is the force release's own ms: at its deadline a
    # registration has lapsed, so the permit is not handed to it.
    script = planting_a_lapsing_waiter(2, 3) + SEMAPHORE_RELEASE.source
    keys_and_args = (len(keys.releasing), *keys.releasing, "", "edge", "", "1")
    reply = real_backend.client.eval(script, *keys_and_args)
    assert reply == 1  # the holder's permit was freed
    assert real_backend.client.zcard(keys.holders) == 0  # and given to nobody
    assert not real_backend.client.exists(keys.waiters, keys.registrations, keys.wake)
    assert Semaphore("edge", limit=1, fair=True).acquire(0)
