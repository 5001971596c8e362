from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from redis.cluster import RedisCluster

from django_redislock import Lock, get_redis
from django_redislock.connection import reset_connections


def test_default_comes_from_the_django_redis_cache(settings):
    from django_redis import get_redis_connection

    settings.REDISLOCK = {"CACHE": "default"}
    assert get_redis() is get_redis()
    get_redis().set("probe", "1")
    assert get_redis_connection("default").get("probe") == b"1"


def test_url_setting_wins_and_changes_follow_override_settings(settings, redis_server):
    settings.REDISLOCK = {"URL": redis_server.url}
    client = get_redis()
    assert client.connection_pool.connection_kwargs["port"] == redis_server.port
    settings.REDISLOCK = {"CACHE": "default"}
    assert get_redis() is not client


def test_using_a_url_or_an_alias(settings, redis_server):
    assert (
        get_redis(redis_server.url).connection_pool.connection_kwargs["port"] == redis_server.port
    )
    assert get_redis("default") is get_redis("default")
    with pytest.raises(ImproperlyConfigured, match="neither a cache alias"):
        get_redis("nope")


def test_cluster_setting(settings, redis_cluster):
    settings.REDISLOCK = {"URL": redis_cluster.url, "CLUSTER": True}
    assert isinstance(get_redis(), RedisCluster)


def test_lock_using_another_redis(settings, redis_server):
    settings.REDISLOCK = {"CACHE": "default"}
    reset_connections()
    lock = Lock("elsewhere", ttl=5, using=redis_server.url)
    with lock:
        assert redis_server.client().exists(lock.keys[0])
        assert not get_redis().exists(lock.keys[0])
