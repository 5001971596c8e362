"""wait_replicas, proven with a real replica (fakeredis has no WAIT)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from django_redislock import Lock
from django_redislock.exceptions import ReplicasNotConfirmed
from django_redislock.testing import RedisServer


@pytest.fixture(scope="module")
def master_with_replica() -> Iterator[RedisServer]:
    master = RedisServer("--repl-diskless-sync-delay", "0").start()
    replica = RedisServer("--replicaof", "127.0.0.1", str(master.port)).start()
    deadline = time.monotonic() + 10
    while master.client().info("replication").get("slave0", {}).get("state") != "online":
        assert time.monotonic() < deadline, "the replica did not connect"
        time.sleep(0.05)
    yield master
    replica.cleanup()
    master.cleanup()


def test_acquire_waits_for_replicas(settings, master_with_replica):
    settings.REDISLOCK = {"URL": master_with_replica.url}
    with Lock("replicated", ttl=5, wait_replicas=1) as lock:
        assert lock.owned()


def test_too_few_replicas_releases_and_fails(settings, master_with_replica):
    settings.REDISLOCK = {"URL": master_with_replica.url}
    lock = Lock("replicated2", ttl=0.9, wait_replicas=2)
    start = time.monotonic()
    with pytest.raises(ReplicasNotConfirmed, match="only 1 of 2 replicas") as info:
        lock.acquire()
    assert info.value.lock_name == "replicated2"
    assert time.monotonic() - start < 1.0
    assert not lock.locked(), "the unconfirmed lock must be released"
