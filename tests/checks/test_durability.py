"""The deploy check warns when the Redis behind locks and queues may evict keys or lose them
on restart, on real servers; it never raises, whatever the server lets it read."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import fakeredis
import pytest
import redis
from django.core.management import call_command

from django_redislock import get_redis
from django_redislock.checks import check_redis_durability, redis_durability_warnings
from tests.support.servers import RedisClusterServers, RedisServer, free_port


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    # Its own server: the tests reconfigure it.
    with RedisServer("--appendonly", "yes") as server:
        yield server


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    client = server.client()
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("appendonly", "yes")
    client.config_set("save", "")
    yield client
    client.close()


def ids(messages: list[Any]) -> list[str]:
    assert all(m.hint for m in messages), "every warning carries a hint"
    return [m.id for m in messages]


def deploy_check(settings: Any, url: str) -> str:
    settings.REDISLOCK = {"URL": url}
    out, err = StringIO(), StringIO()
    call_command("check", "--deploy", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_a_healthy_redis_passes(client: redis.Redis, server: RedisServer, settings: Any) -> None:
    assert redis_durability_warnings(client) == []
    assert "django_redislock.W" not in deploy_check(settings, server.url)


@pytest.mark.parametrize(
    "policy", ["allkeys-lru", "allkeys-random", "volatile-lru", "volatile-ttl"]
)
def test_an_evicting_policy_is_w001(client: redis.Redis, policy: str) -> None:
    # volatile-* too: every lock has a TTL, so those policies evict locks first.
    client.config_set("maxmemory-policy", policy)
    [warning] = redis_durability_warnings(client)
    assert warning.id == "django_redislock.W001"
    assert policy in warning.msg
    assert "noeviction" in warning.hint


def test_manage_py_check_deploy_reports_w001(
    client: redis.Redis, server: RedisServer, settings: Any
) -> None:
    client.config_set("maxmemory-policy", "allkeys-lru")
    output = deploy_check(settings, server.url)
    assert output.count("django_redislock.W001") == 1, output
    assert f"127.0.0.1:{server.port}" in output


def test_no_persistence_is_w002(client: redis.Redis, server: RedisServer, settings: Any) -> None:
    client.config_set("appendonly", "no")
    client.config_set("save", "")
    assert ids(redis_durability_warnings(client)) == ["django_redislock.W002"]
    assert "django_redislock.W002" in deploy_check(settings, server.url)
    client.config_set("save", "3600 1")  # RDB snapshots are persistence, if a lossy one
    assert redis_durability_warnings(client) == []


def test_both_problems_are_both_reported(client: redis.Redis) -> None:
    client.config_set("maxmemory-policy", "allkeys-lfu")
    client.config_set("appendonly", "no")
    assert ids(redis_durability_warnings(client)) == [
        "django_redislock.W001",
        "django_redislock.W002",
    ]


def test_an_unreachable_redis_is_w003_and_never_raises(settings: Any) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    [warning] = redis_durability_warnings(redis.Redis.from_url(url))
    assert warning.id == "django_redislock.W003"
    assert "django_redislock.W003" in deploy_check(settings, url)


def test_without_config_the_policy_is_read_from_info() -> None:
    # Managed Redis often renames or disables CONFIG; INFO still tells the policy and AOF.
    with RedisServer(
        "--rename-command", "CONFIG", "", "--maxmemory-policy", "allkeys-lru"
    ) as server:
        client = server.client()
        messages = redis_durability_warnings(client)
        # No CONFIG: the save points cannot be read, so with AOF off persistence is unknown.
        assert ids(messages) == ["django_redislock.W001", "django_redislock.W003"]
        assert "persistence" in messages[1].msg
        client.close()
    with RedisServer("--rename-command", "CONFIG", "", "--appendonly", "yes") as server:
        client = server.client()
        assert redis_durability_warnings(client) == []  # AOF on, noeviction: all known
        client.close()


def test_a_server_that_answers_neither_config_nor_info_is_w003() -> None:
    [warning] = redis_durability_warnings(fakeredis.FakeRedis())
    assert warning.id == "django_redislock.W003"


def test_broken_settings_leave_the_durability_check_to_the_settings_check(
    settings: Any,
) -> None:
    settings.REDISLOCK = {"URL": "http://nowhere"}
    assert check_redis_durability() == []  # E007 says what is wrong; no connection tried


def test_every_cluster_primary_is_checked(
    redis_cluster: RedisClusterServers, settings: Any
) -> None:
    settings.REDISLOCK = {"URL": redis_cluster.url, "CLUSTER": True}
    nodes = [server.client() for server in redis_cluster.servers]
    evicting = redis_cluster.servers[1]
    try:
        for node in nodes:
            node.config_set("appendonly", "yes")
        nodes[1].config_set("maxmemory-policy", "allkeys-lru")
        [warning] = redis_durability_warnings(get_redis())
        assert warning.id == "django_redislock.W001"
        assert f":{evicting.port}" in warning.msg
        nodes[2].config_set("appendonly", "no")  # the cluster's servers start without RDB
        messages = check_redis_durability()
        assert ids(messages) == ["django_redislock.W001", "django_redislock.W002"]
        assert f":{redis_cluster.servers[2].port}" in messages[1].msg
    finally:
        for node in nodes:
            node.config_set("maxmemory-policy", "noeviction")
            node.config_set("appendonly", "no")
            node.close()
