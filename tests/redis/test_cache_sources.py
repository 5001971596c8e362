"""Any Redis cache as the connection source: django-redis, and Django's own RedisCache."""

from __future__ import annotations

import asyncio
from typing import Any

import fakeredis
import pytest
from django.core.cache.backends.redis import RedisCache
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured

from django_redislock import AsyncLock, Lock, Redlock
from django_redislock.queue.queue import get_queue
from django_redislock.redis.clients import get_redis
from django_redislock.test import run_jobs
from tests.support.servers import RedisServer

DJANGO = "django.core.cache.backends.redis.RedisCache"


class SubclassedRedisCache(RedisCache):
    """A project's own subclass of Django's RedisCache."""


def redis_caches(server: RedisServer) -> dict[str, Any]:
    base = f"redis://127.0.0.1:{server.port}"
    return {
        # each on a database of its own: where a key lands shows which cache was used
        "django": {"BACKEND": DJANGO, "LOCATION": f"{base}/1"},
        "django-redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": f"{base}/2"},
        "subclass": {"BACKEND": f"{__name__}.SubclassedRedisCache", "LOCATION": f"{base}/3"},
        # the first server takes the writes (the second would be a replica): locks go there
        "replicated": {"BACKEND": DJANGO, "LOCATION": [f"{base}/4", f"{base}/5"]},
        "locmem": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }


@pytest.fixture
def caches(settings: Any, redis_server: RedisServer) -> RedisServer:
    settings.CACHES = {**settings.CACHES, **redis_caches(redis_server)}
    redis_server.client().flushall()
    return redis_server


@pytest.mark.parametrize(
    ("alias", "db"), [("django", 1), ("django-redis", 2), ("subclass", 3), ("replicated", 4)]
)
def test_a_lock_and_a_job_through_each_redis_cache(
    settings: Any, caches: RedisServer, alias: str, db: int
) -> None:
    settings.REDISLOCK = {"CACHE": alias}
    server = caches.client(db=db)
    with Lock("through-cache", ttl=5) as lock:
        assert server.exists(lock.keys[0])
    job = get_queue().enqueue("tests.testing.tasks.add", args=[20, 22])
    assert server.exists(get_queue().keys.job(job.id))
    assert run_jobs().done[0].result == "42"
    assert get_queue().get(job.id).result == "42"
    assert get_redis() is get_redis()  # one client per process, not one per call


def test_django_redis_cache_options_are_used(settings: Any, caches: RedisServer) -> None:
    caches.client().config_set("requirepass", "s3cret")
    try:
        settings.CACHES = {
            **settings.CACHES,
            "guarded": {
                "BACKEND": DJANGO,
                "LOCATION": f"redis://127.0.0.1:{caches.port}/6",
                "OPTIONS": {"password": "s3cret", "socket_timeout": 3},
            },
        }
        settings.REDISLOCK = {"CACHE": "guarded"}
        client = get_redis()
        assert client.connection_pool.connection_kwargs["socket_timeout"] == 3
        with Lock("guarded", ttl=5) as lock:
            assert caches.client(db=6, password="s3cret").exists(lock.keys[0])
    finally:
        caches.client(password="s3cret").config_set("requirepass", "")


def test_async_lock_and_redlock_through_djangos_redis_cache(
    settings: Any, caches: RedisServer
) -> None:
    settings.REDISLOCK = {"CACHE": "django"}

    async def hold() -> bool:
        async with AsyncLock("async-cache", ttl=5) as lock:
            return bool(caches.client(db=1).exists(lock.keys[0]))

    assert asyncio.run(hold())
    with Redlock("quorum", ttl=5, nodes=["django", "django-redis", "subclass"]) as lock:
        assert lock.owned()
        assert all(caches.client(db=db).keys("*quorum*") for db in (1, 2, 3))


def test_anything_else_is_refused_naming_what_is_supported(
    settings: Any, caches: RedisServer
) -> None:
    settings.REDISLOCK = {"CACHE": "locmem"}
    errors = [e for e in run_checks() if e.id.startswith("django_redislock")]
    assert [e.id for e in errors] == ["django_redislock.E006"]
    assert "'locmem' named by REDISLOCK['CACHE'] is not a Redis cache" in errors[0].msg
    assert "django_redis.cache.RedisCache" in (errors[0].hint or "")
    assert DJANGO in (errors[0].hint or "")
    with pytest.raises(ImproperlyConfigured, match="not a Redis cache"):
        get_redis()
    settings.REDISLOCK = {"REDLOCK_NODES": ["django", "locmem"]}
    errors = [e for e in run_checks() if e.id.startswith("django_redislock")]
    assert [e.id for e in errors] == ["django_redislock.E006"]
    assert "REDLOCK_NODES" in errors[0].msg


@pytest.mark.parametrize("alias", ["django", "django-redis", "subclass", "replicated"])
def test_every_redis_cache_passes_the_checks(
    settings: Any, caches: RedisServer, alias: str
) -> None:
    settings.REDISLOCK = {"CACHE": alias, "REDLOCK_NODES": [alias]}
    assert not [e for e in run_checks() if e.id.startswith("django_redislock")]


def test_fakeredis_behind_djangos_redis_cache(settings: Any) -> None:
    # The README's testing recipe, with Django's RedisCache in place of django-redis.
    settings.CACHES = {
        **settings.CACHES,
        "fake": {
            "BACKEND": DJANGO,
            "LOCATION": "redis://fake-django-cache:6379/0",
            "OPTIONS": {"connection_class": fakeredis.FakeRedisConnection},
        },
    }
    settings.REDISLOCK = {"CACHE": "fake"}
    with Lock("fake", ttl=5) as lock:
        assert get_redis().exists(lock.keys[0])
    get_queue().enqueue("tests.testing.tasks.add", args=[1, 1])
    assert [job.result for job in run_jobs().jobs] == ["2"]

    async def hold() -> bool:
        async with AsyncLock("fake-async", ttl=5) as held:
            return await held.owned()

    assert asyncio.run(hold())
