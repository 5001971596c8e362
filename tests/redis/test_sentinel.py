"""Redis Sentinel, for real: a master, a replica and three sentinels (``redis_sentinel``).

Both ways of pointing the app at a Sentinel group: a ``redis+sentinel://`` URL in
``REDISLOCK['URL']``, and a django-redis Sentinel cache named by ``REDISLOCK['CACHE']``; sync
and asyncio. The failover under load (workers and lockers while the master is SIGKILLed)
lives in ``test_sentinel_failover.py``."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest
from django.core.checks import Error

from django_redislock.checks import check_settings
from django_redislock.exceptions import RedisUnavailable
from django_redislock.locks.async_lock import AsyncLock
from django_redislock.locks.lock import Lock
from django_redislock.locks.redlock import Redlock
from django_redislock.redis.clients import get_redis
from django_redislock.redis.sentinel import SentinelURL, parse
from tests.support.sentinel_servers import RedisSentinelGroup
from tests.support.servers import free_port


def sentinel_cache(group: RedisSentinelGroup) -> dict[str, Any]:
    """A django-redis cache on the group's master, as django-redis documents it."""
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{group.service}/0",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.SentinelClient",
            "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
            "SENTINELS": group.addresses,
        },
    }


@pytest.fixture(params=["url", "cache"])
def via_sentinel(
    request: pytest.FixtureRequest, settings: Any, redis_sentinel: RedisSentinelGroup
) -> RedisSentinelGroup:
    """The app configured through the group's URL, then through a django-redis cache."""
    redis_sentinel.wait_healthy()
    if request.param == "url":
        settings.REDISLOCK = {"URL": redis_sentinel.url}
    else:
        settings.CACHES = {**settings.CACHES, "sentinel": sentinel_cache(redis_sentinel)}
        settings.REDISLOCK = {"CACHE": "sentinel"}
    redis_sentinel.master().client().flushall()
    return redis_sentinel


# --- the URL ------------------------------------------------------------------------------


def test_url_names_sentinels_service_db_and_the_masters_credentials() -> None:
    assert parse("redis+sentinel://s1:26380,s2,[::1]:5000/mymaster/3") == SentinelURL(
        sentinels=(("s1", 26380), ("s2", 26379), ("::1", 5000)), service="mymaster", db=3
    )
    parsed = parse("rediss+sentinel://app:p%40ss@s1/cache")
    assert (parsed.username, parsed.password, parsed.db, parsed.ssl) == ("app", "p@ss", 0, True)


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("redis+sentinel://s1:26379", "must name the monitored master"),
        ("redis+sentinel://s1:26379/", "must name the monitored master"),
        ("redis+sentinel://s1/master/x", "'x' is not a number"),
        ("redis+sentinel://s1/master/0/extra", "must name the monitored master"),
        ("redis+sentinel://s1:99999/master", "'s1:99999' is not a sentinel's host"),
        ("redis+sentinel://s1,,s2/master", "'' is not a sentinel's host"),
        ("redis+sentinel://s1/master?db=1", "no query"),
        ("redis+sentinel://:secret@s1:x/master", "'s1:x'"),
    ],
)
def test_malformed_url_is_a_value_error_and_a_check_error(
    settings: Any, url: str, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint) as info:
        parse(url)
    assert "secret" not in str(info.value)
    settings.REDISLOCK = {"URL": url}
    assert [e.id for e in check_settings()] == ["django_redislock.E020"]
    settings.REDISLOCK = {"REDLOCK_NODES": [url]}
    assert [e.id for e in check_settings()] == ["django_redislock.E020"]


def test_checks_accept_a_sentinel_url_but_not_as_a_cluster(settings: Any) -> None:
    url = "redis+sentinel://s1,s2,s3/mymaster/0"
    settings.REDISLOCK = {"URL": url, "REDLOCK_NODES": [url]}
    assert check_settings() == []
    settings.REDISLOCK = {"URL": url, "CLUSTER": True}
    errors = check_settings()
    assert [e.id for e in errors] == ["django_redislock.E021"]
    assert isinstance(errors[0], Error)


# --- real sentinels -----------------------------------------------------------------------


def test_client_discovers_the_master(via_sentinel: RedisSentinelGroup) -> None:
    client = get_redis()
    client.set("probe", "here")
    master, replica = via_sentinel.master(), via_sentinel.replica()
    assert master.client().get("probe") == b"here"
    with Lock("discovered", ttl=5, fencing=True) as lock:
        assert lock.fence
        assert master.client().exists(*lock.keys[:1]) == 1
        assert client.connection_pool.get_master_address() == ("127.0.0.1", master.port)
    assert replica.client().info("replication")["role"] == "slave"


def test_async_lock_on_sentinel(via_sentinel: RedisSentinelGroup) -> None:
    master = via_sentinel.master()

    async def take() -> int | None:
        async with AsyncLock("async-sentinel", ttl=5, fencing=True) as lock:
            assert master.client().exists(lock.keys[0]) == 1
            return lock.fence

    assert asyncio.run(take())


def test_lock_waits_for_the_replica(via_sentinel: RedisSentinelGroup) -> None:
    replica = via_sentinel.replica()
    with Lock("replicated", ttl=5, wait_replicas=1) as lock:
        assert replica.client().exists(lock.keys[0]) == 1  # WAIT saw it there


def test_a_replica_refuses_writes_as_redis_unavailable(
    settings: Any, redis_sentinel: RedisSentinelGroup
) -> None:
    """A client left on a replica (a demoted master, a replica's URL by mistake): its writes
    are refused (READONLY), which the app reports as Redis unavailable, not as a bug."""
    redis_sentinel.wait_healthy()
    settings.REDISLOCK = {"URL": redis_sentinel.replica().url}
    with pytest.raises(RedisUnavailable, match="read-only"):
        Lock("on-a-replica", ttl=5).acquire()

    async def take() -> None:
        await AsyncLock("on-a-replica", ttl=5).acquire()

    with pytest.raises(RedisUnavailable):
        asyncio.run(take())


def test_clients_follow_a_failover(via_sentinel: RedisSentinelGroup) -> None:
    """Sync and asyncio clients made before a failover reach the new master after it, by
    themselves (the failover under load: test_sentinel_failover.py). An attempt whose
    reply was lost on the way may have taken the lock and left it to its TTL (its clean-up
    failed too): the next attempts wait for it, up to twice the TTL."""
    Lock("before", ttl=5).acquire()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(AsyncLock("before-async", ttl=5).acquire())
        old = via_sentinel.kill_master()
        new = via_sentinel.wait_promoted(old)
        lock = Lock("after", ttl=5)
        assert _eventually(lambda: lock.acquire(timeout=10))
        assert new.client().exists(lock.keys[0]) == 1
        async_lock = AsyncLock("after-async", ttl=5)
        assert _eventually(lambda: loop.run_until_complete(async_lock.acquire(timeout=10)))
        assert new.client().exists(async_lock.keys[0]) == 1
    finally:
        loop.close()
        via_sentinel.restart(old)
        via_sentinel.wait_healthy()


def _eventually(attempt: Any, tries: int = 50) -> Any:
    """The first connections after a promotion may still meet the dead master (a client
    asked the sentinels just before they switched): one RedisUnavailable each, then none."""
    for _ in range(tries - 1):
        try:
            return attempt()
        except RedisUnavailable:
            pass
    return attempt()


# --- discovery when sentinels fail (the ideas of redis-py's sentinel tests, on real ones) ---


def test_a_stalled_sentinel_is_passed_over(
    settings: Any, redis_sentinel: RedisSentinelGroup
) -> None:
    """The first sentinel asked answers nothing (SIGSTOP): the next one names the master."""
    redis_sentinel.wait_healthy()
    settings.REDISLOCK = {"URL": redis_sentinel.url}
    master = redis_sentinel.master()
    first = redis_sentinel.sentinels[0].process
    assert first is not None
    first.send_signal(signal.SIGSTOP)
    try:
        with Lock("one-sentinel-down", ttl=5) as lock:
            assert master.client().exists(lock.keys[0]) == 1
    finally:
        first.send_signal(signal.SIGCONT)


def test_no_sentinel_reachable_is_redis_unavailable(settings: Any) -> None:
    url = f"redis+sentinel://127.0.0.1:{free_port()},127.0.0.1:{free_port()}/mymaster/0"
    settings.REDISLOCK = {"URL": url}
    with pytest.raises(RedisUnavailable, match="No master found for 'mymaster'"):
        Lock("nowhere", ttl=5).acquire()

    async def take() -> None:
        await AsyncLock("nowhere", ttl=5).acquire()

    with pytest.raises(RedisUnavailable, match="No master found"):
        asyncio.run(take())


def test_a_redlock_node_may_be_a_sentinel_group(
    settings: Any, redis_sentinel: RedisSentinelGroup
) -> None:
    redis_sentinel.wait_healthy()
    with Redlock("quorum-of-one", ttl=5, nodes=[redis_sentinel.url]) as lock:
        assert lock.locked()
