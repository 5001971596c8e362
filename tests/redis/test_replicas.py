"""wait_replicas, proven with real replicas: a standalone master with one replica, and a
3-master Redis Cluster with one replica each (fakeredis has no WAIT)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest

from django_redislock import Lock
from django_redislock.exceptions import ReplicasNotConfirmed
from tests.support.servers import RedisClusterServers, RedisServer
from tests.support.waiting import Stalls


def wait_online(master: RedisServer) -> None:
    deadline = time.monotonic() + 20
    while master.client().info("replication").get("slave0", {}).get("state") != "online":
        assert time.monotonic() < deadline, "the replica did not come online"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def standalone_with_replica() -> Iterator[dict[str, object]]:
    master = RedisServer("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0").start()
    replica = RedisServer("--replicaof", "127.0.0.1", str(master.port)).start()
    wait_online(master)
    yield {"URL": master.url}
    replica.cleanup()
    master.cleanup()


@pytest.fixture(scope="module")
def cluster_servers() -> Iterator[RedisClusterServers]:
    with RedisClusterServers(3, replicas=1) as cluster:
        for master in cluster.servers[:3]:
            wait_online(master)
        yield cluster


@pytest.fixture(scope="module")
def cluster_with_replicas(cluster_servers) -> dict[str, object]:
    return {"URL": cluster_servers.url, "CLUSTER": True}


@pytest.fixture(params=["redis", "cluster"])
def replicated(request, settings):
    fixture = "standalone_with_replica" if request.param == "redis" else "cluster_with_replicas"
    settings.REDISLOCK = request.getfixturevalue(fixture)


@pytest.mark.usefixtures("replicated")
@pytest.mark.parametrize("name", ["replicated", "other-slot-7", "yet-another-name"])
def test_acquire_waits_for_replicas(name):
    with Lock(name, ttl=5, wait_replicas=1) as lock:
        assert lock.owned()


@pytest.mark.usefixtures("replicated")
def test_too_few_replicas_releases_and_fails():
    # A TTL of 6 s: its WAIT gives the one replica 2 s (a third of it, 2 s at most) to
    # confirm, which a briefly stalled replica still does.
    lock = Lock("replicated2", ttl=6, wait_replicas=2)
    with Stalls() as stalls:
        start = time.monotonic()
        with pytest.raises(ReplicasNotConfirmed, match="only 1 of 2 replicas") as info:
            lock.acquire()
        end = time.monotonic()
        assert info.value.lock_name == "replicated2"
        # Within the TTL (unless this process stood still meanwhile).
        assert end - start < 6 or stalls.between(start, end)
    assert not lock.locked(), "the unconfirmed lock must be released"


def test_cluster_waits_on_the_node_that_owns_the_lock(settings, cluster_servers):
    settings.REDISLOCK = {"URL": cluster_servers.url, "CLUSTER": True}
    masters = cluster_servers.servers[:3]
    ports = [m.port for m in masters]

    def master_of(lock: Lock) -> int:
        return ports.index(lock.client.get_node_from_key(lock.keys[0]).port)

    names = [f"slot-probe-{i}" for i in range(40)]
    locks = [Lock(name, ttl=0.9, wait_replicas=1) for name in names]
    target = master_of(locks[0])
    other = next(lock for lock in locks if master_of(lock) != target)
    replica = cluster_servers.servers[3 + target]  # replicates masters[target]
    assert replica.process is not None
    replica.process.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(ReplicasNotConfirmed):
            locks[0].acquire()
        assert other.acquire()  # its master's replica is healthy
        other.release()
    finally:
        replica.process.send_signal(signal.SIGCONT)
