"""What a semaphore leaves in Redis once its permits are released or lapsed: nothing per name
(the README's "What stays in Redis"), checked by scanning the whole keyspace after thousands
of names, on fakeredis, a real redis-server and a real Cluster."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_redislock.locks.keys import text
from django_redislock.semaphores.listing import list_semaphores
from django_redislock.semaphores.scripts import ACQUIRE_SWEEP
from django_redislock.semaphores.semaphore import Semaphore

pytestmark = pytest.mark.django_db(transaction=True)


def keyspace(backend: Any) -> set[str]:
    """Every key of the database (of every master, on Cluster)."""
    return {text(key) for key in backend.client.scan_iter(count=1000)}


def wait_for(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def indexes(names: list[str]) -> set[str]:
    return {Semaphore(name, limit=1).layout.listing for name in names}


def test_released_names_leave_no_key(backend):
    for i in range(2000):
        with Semaphore(f"export:{i}", limit=2, ttl=30):
            pass
    assert keyspace(backend) == set()  # no listing needed: each release cleaned up


def test_a_multi_permit_holder_released_leaves_no_key(backend):
    for i in range(200):
        with Semaphore(f"batch:{i}", limit=4, permits=3, ttl=30) as semaphore:
            assert semaphore.count() == 3
    assert keyspace(backend) == set()


def test_lapsed_names_leave_no_key_once_listed(backend):
    names = [f"export:{i}" for i in range(2000)]
    for name in names:  # holders that die without releasing
        assert Semaphore(name, limit=2, ttl=0.3).acquire(0)
    live = Semaphore("export:live", limit=2, ttl=300)
    assert live.acquire(0)
    kept = {live.layout.holders, live.layout.listing}
    # Every lapsed holder's keys expire by themselves; only the indexes still name them.
    wait_for(lambda: keyspace(backend) == kept | indexes(names))
    page, total = list_semaphores()
    assert ([info.name for info in page], total) == (["export:live"], 1)
    assert keyspace(backend) == kept
    live.release()
    assert keyspace(backend) == set()


def test_acquires_drop_lapsed_entries_of_their_shard(backend):
    probe = Semaphore("probe", limit=1, ttl=30)
    index = probe.layout.listing
    names = [n for n in (f"gone:{i}" for i in range(4000)) if indexes([n]) == {index}][:100]
    for name in names:
        assert Semaphore(name, limit=1, ttl=1).acquire(0)
    wait_for(lambda: all(Semaphore(name, limit=1).count() == 0 for name in names))
    # (an acquire of the last ones may already have dropped a few of the first)
    left = backend.client.zcard(index)
    assert left > 2 * ACQUIRE_SWEEP
    while left:
        with probe:
            pass
        now = backend.client.zcard(index)
        assert now == max(0, left - ACQUIRE_SWEEP)  # a bounded batch each time
        left = now
    assert keyspace(backend) == set()


def test_fenced_names_leave_only_their_counters_for_a_minute(backend):
    names = [f"fenced:{i}" for i in range(300)]
    for name in names:
        with Semaphore(name, limit=2, ttl=30, fencing=True):
            pass
    counters = {Semaphore(name, limit=1).layout.fence for name in names}
    assert keyspace(backend) == counters
    assert all(0 < backend.client.pttl(key) <= 60_000 for key in counters)
    # A counter gone changes nothing for the fences: the server clock floor is above it.
    last = Semaphore("fenced:0", limit=2, ttl=30, fencing=True)
    with last:
        before = last.fence
    backend.client.delete(last.layout.fence)
    with last:
        assert last.fence > before


def test_waiters_who_gave_up_leave_no_key(backend):
    holder = Semaphore("crowded", limit=1, ttl=30)
    assert holder.acquire(0)
    for _ in range(20):
        assert not Semaphore("crowded", limit=1, ttl=30).acquire(0.01)
    holder.release()
    wait_for(lambda: keyspace(backend) == set(), timeout=10)


def test_ten_thousand_names_on_a_real_server(redis_backend):
    names = [f"user-export:{i}" for i in range(10_000)]
    for i, name in enumerate(names):
        semaphore = Semaphore(name, limit=2, ttl=0.5 if i % 2 else 30)
        assert semaphore.acquire(0)
        if not i % 2:
            semaphore.release()
    wait_for(lambda: keyspace(redis_backend) == indexes(names), timeout=60)
    assert list_semaphores() == ([], 0)
    assert keyspace(redis_backend) == set()
