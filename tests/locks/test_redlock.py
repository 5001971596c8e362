"""Redlock on real, independent redis-server processes: nodes are killed, stopped and stalled
for real, and holders and waiters run in real OS processes."""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured

from django_redislock.exceptions import (
    LockError,
    LockNotOwned,
    LockTimeout,
    RedisUnavailable,
)
from django_redislock.locks.listing import list_locks
from django_redislock.locks.redlock import DRIFT_FACTOR, DRIFT_FIXED, Redlock
from django_redislock.redis.nodes import NODE_TIMEOUT
from django_redislock.signals import lock_acquired, lock_busy, lock_lost, lock_released
from tests.support.servers import RedisServer, free_port, independent_servers
from tests.support.waiting import Stalls, ttl_set_since

COUNTER = "test:redlock-counter"
FOREIGN = b"0123456789abcdef|0|0|1|elsewhere"


@pytest.fixture(scope="module")
def servers() -> Iterator[list[RedisServer]]:
    yield from independent_servers(5)


_raw: dict[int, redis.Redis] = {}


def raw(server: RedisServer) -> redis.Redis:
    """A plain client of one node, to look at it from outside."""
    if server.port not in _raw:
        _raw[server.port] = server.client(socket_timeout=5)
    return _raw[server.port]


def revive(servers: list[RedisServer]) -> None:
    for server in servers:
        if server.process is None:
            server.start()
        else:
            server.process.send_signal(signal.SIGCONT)
        raw(server).flushall()


def _group(servers: list[RedisServer], settings: Any, count: int) -> Iterator[list[RedisServer]]:
    revive(servers)
    group = servers[:count]
    settings.REDISLOCK = {"REDLOCK_NODES": [server.url for server in group]}
    yield group
    revive(servers)


@pytest.fixture
def three(servers: list[RedisServer], settings: Any) -> Iterator[list[RedisServer]]:
    yield from _group(servers, settings, 3)


@pytest.fixture
def five(servers: list[RedisServer], settings: Any) -> Iterator[list[RedisServer]]:
    yield from _group(servers, settings, 5)


@pytest.fixture(params=[3, 5], ids=["3-nodes", "5-nodes"])
def group(request: pytest.FixtureRequest) -> list[RedisServer]:
    return list(request.getfixturevalue("three" if request.param == 3 else "five"))


def holding(group: list[RedisServer], lock: Redlock) -> int:
    """How many running nodes have the lock's key."""
    return sum(bool(raw(s).exists(lock.keys[0])) for s in group if s.process is not None)


def take_down(servers: list[RedisServer]) -> None:
    for i, server in enumerate(servers):  # crashes and clean shutdowns
        if i % 2:
            server.kill()
        else:
            server.stop()


@pytest.fixture
def stalls() -> Iterator[Stalls]:
    with Stalls() as watching:
        yield watching


def validity_since(validity: float | None, ttl: float, since: float) -> bool:
    """Whether ``validity`` (read just now) is that of a hold of ``ttl`` seconds whose round
    began after ``since`` (a ``time.monotonic()``): its TTL less the drift allowance, less at
    most all the time since."""
    full = ttl * (1 - DRIFT_FACTOR) - DRIFT_FIXED
    return validity is not None and full - (time.monotonic() - since) <= validity <= full


def timed_acquire(stalls: Stalls, lock: Redlock, timeout: float) -> tuple[bool, float]:
    """``lock.acquire(timeout)`` and the seconds it took, from a round that no stall of the
    machine overlapped (one it overlapped is released and done again)."""
    for _ in range(20):
        start = time.monotonic()
        got = lock.acquire(timeout)
        end = time.monotonic()
        if not stalls.between(start, end):
            return got, end - start
        if got:
            lock.release()
    raise AssertionError("the machine stalled in each of 20 rounds")


def test_one_owner_at_a_time_on_every_node(group):
    first, second = Redlock("sale:1", ttl=5), Redlock("sale:1", ttl=5)
    assert first.quorum == len(group) // 2 + 1
    assert not first.locked()
    since = time.monotonic()
    assert first.acquire(0)
    assert first.locked()
    assert first.owned()
    assert holding(group, first) == len(group)
    assert ttl_set_since(first.ttl(), 5, since)
    assert not second.acquire(0)
    assert not second.owned()
    with pytest.raises(LockTimeout) as info, Redlock("sale:1", ttl=5, timeout=0.1):
        pytest.fail("body must not run")
    assert info.value.lock_name == "sale:1"
    first.release()
    assert holding(group, first) == 0
    assert not first.locked()
    assert first.ttl() is None
    assert second.acquire(0)
    second.release()


def test_context_manager_holds_the_lock_for_its_body(three):
    with Redlock("ctx", ttl=5, timeout=0) as lock:
        assert lock.owned()
        assert holding(three, lock) == 3
    assert holding(three, lock) == 0
    assert lock.validity is None


@pytest.mark.parametrize(
    ("count", "down", "acquired"),
    [(3, 1, True), (3, 2, False), (5, 1, True), (5, 2, True), (5, 3, False)],
)
def test_a_minority_of_nodes_down_is_tolerated(five, settings, stalls, count, down, acquired):
    group = five[:count]
    settings.REDISLOCK = {"REDLOCK_NODES": [server.url for server in group]}
    take_down(group[:down])
    alive = group[down:]
    lock = Redlock("minority", ttl=5)
    got, took = timed_acquire(stalls, lock, 0)
    assert got is acquired
    assert took < 0.1, "a dead node costs no retries"
    if acquired:
        assert holding(alive, lock) == len(alive)
        assert lock.owned()
        lock.release()
    else:

        def times_out() -> None:
            with pytest.raises(LockTimeout), Redlock("minority", ttl=5, timeout=0.3):
                pytest.fail("body must not run")

        _, took = stalls.timed(times_out)
        assert 0.3 <= took < 0.8
    assert holding(alive, lock) == 0, "a failed or released acquire leaves no key behind"


def test_nodes_that_come_back_rejoin(three):
    take_down(three[:2])
    lock = Redlock("rejoin", ttl=5)
    assert not lock.acquire(0)
    revive(three)  # empty, without our scripts: EVALSHA fails there, EVAL loads them
    assert lock.acquire(0)
    assert holding(three, lock) == 3
    lock.release()


def test_scripts_flushed_on_every_node_are_loaded_again(three):
    for server in three:
        raw(server).script_flush()
    lock = Redlock("flushed", ttl=5)
    assert lock.acquire(0)
    assert lock.owned()
    lock.release()
    assert holding(three, lock) == 0


def test_every_node_down_is_redis_unavailable_at_once(three, stalls):
    held = Redlock("down", ttl=5)
    held.acquire(0)
    take_down(three)
    lock = Redlock("down", ttl=5, timeout=10)

    def unavailable() -> None:
        with pytest.raises(RedisUnavailable, match="none of its 3 nodes is reachable"):
            lock.acquire()

    _, took = stalls.timed(unavailable)
    assert took < 0.2, "an outage is not contention: no waiting"
    for call in (lock.locked, lock.ttl, held.owned, held.release):
        with pytest.raises(RedisUnavailable):
            call()


def test_a_stalled_node_costs_at_most_one_node_timeout(three, stalls):
    # (A round that a stall of this process overlapped is done again: see ``Stalls``.)
    process = three[0].process
    assert process is not None
    lock = Redlock("stalled", ttl=5)
    process.send_signal(signal.SIGSTOP)
    try:
        since = time.monotonic()
        got, took = timed_acquire(stalls, lock, 0)
        assert got
        assert took < NODE_TIMEOUT + 0.3
        assert lock.validity <= 5 - took  # less the round's duration
        assert validity_since(lock.validity, 5, since)
        start = time.monotonic()
        lock.release()
        end = time.monotonic()
        assert end - start < NODE_TIMEOUT + 0.3 or stalls.between(start, end)
        # A round longer than the TTL: the majority it got had expired before it ended.
        brief = Redlock("stalled-brief", ttl=0.3)
        assert not brief.acquire(0)
        assert brief.validity is None
        assert holding(three[1:], brief) == 0
    finally:
        process.send_signal(signal.SIGCONT)


def test_stalled_nodes_wait_out_one_node_timeout_together(five, stalls):
    lock = Redlock("stalled-pair", ttl=5)
    with lock:  # every node now has a pooled connection: the next round only sends and reads
        pass
    stalled = [server.process for server in five[:2]]
    for process in stalled:
        assert process is not None
        process.send_signal(signal.SIGSTOP)
    try:
        got, took = timed_acquire(stalls, lock, 0)  # again if this process stalled
        assert got
        assert took < NODE_TIMEOUT + 0.3, "not one timeout per node"
        lock.release()
    finally:
        for process in stalled:
            process.send_signal(signal.SIGCONT)


@pytest.mark.parametrize(("foreign", "acquired"), [(2, False), (1, True)])
def test_a_lock_held_elsewhere_on_some_nodes(three, foreign, acquired):
    lock = Redlock("partial", ttl=5)
    for server in three[:foreign]:
        raw(server).set(lock.keys[0], FOREIGN, px=5000)
    assert lock.acquire(0) is acquired
    for server in three[:foreign]:
        assert raw(server).get(lock.keys[0]) == FOREIGN, "a foreign hold is never touched"
    ours = [raw(server).get(lock.keys[0]) for server in three[foreign:]]
    if acquired:
        assert all(value is not None and value != FOREIGN for value in ours)
        lock.release()
    assert holding(three[foreign:], lock) == 0


def test_validity_runs_out_with_the_ttl(three):
    lost: list[str] = []
    lock_lost.connect(receiver := lambda sender, name, **kwargs: lost.append(name))
    try:
        lock = Redlock("brief", ttl=0.5)
        assert lock.validity is None
        since = time.monotonic()
        assert lock.acquire(0)
        assert validity_since(lock.validity, 0.5, since)
        time.sleep(0.55)
        assert lock.validity == 0.0
        assert not lock.owned()
        with pytest.raises(LockNotOwned):
            lock.release()
        assert lost == [], "a hold that simply ran out is not reported lost"
    finally:
        lock_lost.disconnect(receiver)


def test_extend_restores_the_validity(three):
    # A TTL that a stall of a few seconds does not outlast before the extend.
    lock = Redlock("long-job", ttl=5)
    lock.acquire(0)
    time.sleep(0.3)
    assert lock.validity < 4.7
    since = time.monotonic()
    lock.extend(10)
    assert validity_since(lock.validity, 10, since)
    assert ttl_set_since(lock.ttl(), 10, since)
    since = time.monotonic()
    lock.extend()
    assert validity_since(lock.validity, 5, since)
    assert ttl_set_since(lock.ttl(), 5, since)
    lock.release()


def test_extend_after_expiry_is_not_owned(three):
    lock = Redlock("expired", ttl=0.2)
    lock.acquire(0)
    time.sleep(0.3)
    assert Redlock("expired", ttl=5).acquire(0)  # somebody else's now
    with pytest.raises(LockNotOwned) as info:
        lock.extend(5)
    assert info.value.lock_name == "expired"
    with pytest.raises(LockNotOwned):
        lock.release()
    assert holding(three, lock) == 3, "the new holder's lock is untouched"


def test_a_lock_lost_on_a_majority_is_reported_by_extend_and_release(three):
    lost: list[str] = []
    lock_lost.connect(receiver := lambda sender, name, **kwargs: lost.append(name))
    try:
        lock = Redlock("lost", ttl=30)
        lock.acquire(0)
        for server in three[:2]:  # e.g. two nodes restarted without persistence
            raw(server).delete(lock.keys[0])
        with pytest.raises(LockNotOwned):
            lock.extend()
        assert lost == ["lost"]
        assert holding(three, lock) == 0, "released on the node that still had it"
        assert not lock.owned()
        lock.acquire(0)
        for server in three:
            raw(server).delete(lock.keys[0])
        with pytest.raises(LockNotOwned):
            lock.release()
        assert lost == ["lost", "lost"]
    finally:
        lock_lost.disconnect(receiver)


def test_not_reentrant_and_one_hold_per_thread(three):
    lock = Redlock("once", ttl=5)
    lock.acquire(0)
    with pytest.raises(LockError, match="not reentrant"):
        lock.acquire(0)
    other: list[bool] = []
    thread = threading.Thread(target=lambda: other.append(lock.acquire(0)))
    thread.start()
    thread.join()
    assert other == [False]
    lock.release()


def test_holds_are_listed_on_each_node(three):
    with Redlock("shop:listed", ttl=30):
        for server in three:
            [info] = list_locks("shop:", using=server.url).locks
            assert info.name == "shop:listed"
            assert 29 < info.ttl <= 30
            assert info.fence is None


def test_cache_aliases_are_nodes_too(three, settings):
    settings.CACHES = {
        **settings.CACHES,
        "node0": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": three[0].url},
    }
    lock = Redlock("aliased", ttl=5, nodes=["node0", three[1].url, three[2].url])
    assert lock.acquire(0)
    assert raw(three[0]).exists(lock.keys[0])
    lock.release()
    assert holding(three, lock) == 0


def test_signals(three):
    seen: list[tuple[str, str, Any]] = []

    def make(kind: str) -> Any:
        def receiver(sender: Any, name: str, **kwargs: Any) -> None:
            assert sender is Redlock
            seen.append((kind, name, kwargs.get("fence", kwargs.get("timeout"))))

        return receiver

    receivers = {
        s: make(k) for s, k in [(lock_acquired, "acq"), (lock_released, "rel"), (lock_busy, "busy")]
    }
    for sig, receiver in receivers.items():
        sig.connect(receiver)
    try:
        with Redlock("sig", ttl=5):
            Redlock("sig", ttl=5).acquire(0)
    finally:
        for sig, receiver in receivers.items():
            sig.disconnect(receiver)
    assert seen == [("acq", "sig", None), ("busy", "sig", 0.0), ("rel", "sig", None)]


def test_an_acquire_that_fails_half_way_leaves_no_lock_behind(three):
    def boom(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver failed")

    lock_acquired.connect(boom)
    try:
        with pytest.raises(RuntimeError, match="receiver failed"):
            Redlock("half", ttl=30).acquire(0)
    finally:
        lock_acquired.disconnect(boom)
    assert not Redlock("half", ttl=30).locked()


def hold_then_release(nodes: list[str], held: Any, seconds: float, released: Any) -> None:
    lock = Redlock("handoff", ttl=5, nodes=nodes)
    assert lock.acquire(0)
    held.set()
    time.sleep(seconds)
    releasing = time.monotonic()  # the system's clock: the test process reads the same one
    lock.release()
    released.put((releasing, time.monotonic()))


def test_a_waiter_gets_the_lock_soon_after_another_process_releases_it(three, processes, stalls):
    held, released = processes.event(), processes.queue()
    processes.start(hold_then_release, [s.url for s in three], held, 0.3, released)
    assert held.wait(30)
    waiter = Redlock("handoff", ttl=5, timeout=30)
    assert waiter.acquire()
    got = time.monotonic()
    releasing, done = released.get(timeout=30)
    assert got >= releasing, "not before the holder let go"
    # Soon after (unless this process stood still in between).
    assert got - done < 1.5 or stalls.between(done, got)
    waiter.release()
    processes.join_all(30)


def hold_forever(nodes: list[str], held: Any) -> None:
    Redlock("crashed", ttl=0.6, nodes=nodes).acquire(0)
    held.set()
    while True:
        time.sleep(1)


def test_a_killed_holder_blocks_others_at_most_its_ttl(three, processes, settings, stalls):
    # A 5 s retry delay: only the busy nodes' reported TTL can wake the waiter in time.
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 5.0}
    held = processes.event()
    holder = processes.start(hold_forever, [s.url for s in three], held)
    assert held.wait(10)
    started = time.monotonic()
    holder.kill()
    assert Redlock("crashed", ttl=5).acquire(30)
    ended = time.monotonic()
    # At its TTL, not at a re-check (2.5 s at the earliest); unless this process stood still.
    assert ended - started < 0.6 + 0.2 or stalls.between(started, ended)


def count_under_redlock(nodes: list[str], times: int) -> None:
    counter = redis.Redis.from_url(nodes[0])
    lock = Redlock("counter", ttl=5, nodes=nodes)
    for _ in range(times):
        assert lock.acquire(10)
        value = int(counter.get(COUNTER) or 0)
        counter.set(COUNTER, value + 1)
        lock.release()


def test_processes_increment_exactly(three, processes):
    for _ in range(4):
        processes.start(count_under_redlock, [s.url for s in three], 50)
    processes.join_all(60)
    assert int(raw(three[0]).get(COUNTER)) == 200


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"nodes": []}, ValueError, "nodes must not be empty"),
        ({"nodes": "redis://127.0.0.1:1/0"}, TypeError, "nodes must be a list"),
        ({"nodes": [1]}, TypeError, "nodes entries must be str"),
        ({"nodes": ["nowhere"]}, ValueError, "nodes entry 'nowhere' is neither"),
        ({"nodes": ["redis://a:1/0", "redis://a:1/0"]}, ValueError, "nodes lists a node twice"),
        ({"name": ""}, ValueError, "name must not be empty"),
        ({"name": "two words"}, ValueError, "whitespace"),
        ({"name": 7}, TypeError, "name must be a str"),
        ({"ttl": 0}, ValueError, "ttl must be > 0"),
        ({"ttl": math.inf}, ValueError, "ttl must be finite"),
        ({"ttl": "5"}, TypeError, "ttl must be a number"),
        ({"timeout": -1}, ValueError, "timeout must be >= 0"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    arguments = {"name": "ok", "nodes": ["redis://127.0.0.1:1/0"], **kwargs}
    with pytest.raises(error, match=match):
        Redlock(**arguments)


@pytest.mark.parametrize("nodes", [[], ["nowhere"]])
def test_bad_nodes_setting_is_improperly_configured(settings, nodes):
    settings.REDISLOCK = {"REDLOCK_NODES": nodes}
    with pytest.raises(ImproperlyConfigured, match=r"REDISLOCK\['REDLOCK_NODES'\]"):
        Redlock("x")


def test_constructing_touches_no_redis(settings):
    closed = f"redis://127.0.0.1:{free_port()}/0"
    settings.REDISLOCK = {"REDLOCK_NODES": [closed]}
    lock = Redlock("nothing-yet", ttl=5)
    assert lock.nodes == [closed]
    assert repr(lock) == "<Redlock 'nothing-yet' ttl=5.0 nodes=1>"
    with pytest.raises(ValueError, match="timeout"):
        lock.acquire(-1)
    with pytest.raises(LockNotOwned):
        lock.extend(1)
    with pytest.raises(RedisUnavailable):
        lock.acquire(0)


def test_release_on_fewer_than_a_majority_raises_and_reports_the_loss(group):
    lost: list[str] = []
    lock_lost.connect(receiver := lambda sender, name, **kwargs: lost.append(name))
    try:
        lock = Redlock("minority-release", ttl=30)
        assert lock.acquire(0)
        majority = len(group) // 2 + 1
        for server in group[:majority]:  # e.g. restarted without persistence, or evicted
            raw(server).delete(lock.keys[0])
        with pytest.raises(LockNotOwned, match=r"only \d of its \d nodes") as info:
            lock.release()
        assert info.value.lock_name == "minority-release"
        assert f"only {len(group) - majority} of its {len(group)} nodes" in str(info.value)
        assert lost == ["minority-release"]
        assert holding(group, lock) == 0, "released on the nodes that still had it"
        with pytest.raises(LockNotOwned):
            lock.release()  # the hold is gone, as after any release
    finally:
        lock_lost.disconnect(receiver)


def test_release_on_a_bare_majority_succeeds(group):
    lock = Redlock("majority-release", ttl=30)
    assert lock.acquire(0)
    for server in group[: len(group) // 2]:  # a minority lost it
        raw(server).delete(lock.keys[0])
    lock.release()
    assert holding(group, lock) == 0


@pytest.mark.parametrize(
    ("count", "down", "released"), [(3, 2, False), (5, 3, False), (5, 2, True)]
)
def test_release_with_nodes_down(five, settings, count, down, released):
    group = five[:count]
    settings.REDISLOCK = {"REDLOCK_NODES": [server.url for server in group]}
    lost: list[str] = []
    lock_lost.connect(receiver := lambda sender, name, **kwargs: lost.append(name))
    try:
        lock = Redlock("down-release", ttl=30)
        assert lock.acquire(0)
        take_down(group[:down])
        if released:
            lock.release()
        else:
            with pytest.raises(LockNotOwned, match="could not be reached") as info:
                lock.release()
            assert info.value.lock_name == "down-release"
        assert lost == [], "nodes that did not answer may still hold it: not reported lost"
        assert holding(group, lock) == 0, "released on every node that answered"
    finally:
        lock_lost.disconnect(receiver)


def test_release_twice_is_not_owned(three):
    lock = Redlock("twice", ttl=5)
    assert lock.acquire(0)
    lock.release()
    with pytest.raises(LockNotOwned) as info:
        lock.release()
    assert info.value.lock_name == "twice"
    with pytest.raises(LockNotOwned), Redlock("twice", ttl=5) as held:
        held.release()  # released in the body: the exit's release is not owned
