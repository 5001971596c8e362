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


def test_a_connection_closed_by_the_server_is_replaced(settings, redis_server, monkeypatch):
    from django_redislock import connection

    monkeypatch.setattr(connection, "IDLE_CHECK_SECONDS", 0.0)
    settings.REDISLOCK = {"URL": redis_server.url}
    with Lock("idle", ttl=5):
        pass
    redis_server.client().client_kill_filter(_type="normal", skipme=True)
    with Lock("idle", ttl=5) as lock:  # the lock's own connection was killed meanwhile
        assert lock.owned()


def test_redis_restart_then_locks_work_again(settings, processes):
    from django_redislock.exceptions import RedisUnavailable
    from django_redislock.testing import RedisServer

    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url}
        with Lock("restart", ttl=5):
            pass
        server.stop()
        with pytest.raises(RedisUnavailable):
            Lock("restart", ttl=5).acquire()
        server.start()
        with Lock("restart", ttl=5) as lock:
            assert lock.owned()


def test_threads_that_end_give_their_connection_back(settings, redis_server):
    import gc
    import threading

    settings.REDISLOCK = {"URL": f"{redis_server.url}?max_connections=2"}
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with Lock("pool", ttl=5):
                pass
        except BaseException as exc:
            errors.append(exc)

    for _ in range(6):  # more threads than the pool has connections
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        gc.collect()
    assert errors == []


def test_lock_traffic_never_starves_a_bounded_pool(settings, redis_server):
    import threading

    settings.REDISLOCK = {"URL": f"{redis_server.url}?max_connections=3"}
    done, stay = threading.Barrier(4), threading.Event()

    def work() -> None:
        with Lock(f"bounded-{threading.get_ident()}", ttl=5):
            pass
        done.wait()
        stay.wait(10)  # a long-lived server thread

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    done.wait()
    try:
        assert get_redis().set("still", "works")
        with Lock("bounded-main", ttl=5) as lock:
            assert lock.owned()
    finally:
        stay.set()
        for thread in threads:
            thread.join()


@pytest.mark.parametrize("options", ["", "?encoding=latin-1"])
def test_lock_keys_are_encoded_as_the_client_encodes_them(settings, redis_server, options):
    settings.REDISLOCK = {"URL": f"{redis_server.url}{options}"}
    lock = Lock("café", ttl=5)
    with lock:
        lock.client.set(lock.keys[0] + ":probe", 1)  # the same name, sent by the client
        keys = set(redis_server.client().keys("*caf*"))
    assert len(keys) == 2
    assert {key.removesuffix(b":probe") for key in keys} == {min(keys, key=len)}
