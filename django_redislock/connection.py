"""Redis clients: one per process and per ``using``, from a django-redis cache alias or a URL."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, TypeAlias

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError

from .conf import conf
from .exceptions import RedisUnavailable
from .scripts import LuaScript

Client: TypeAlias = "redis.Redis | RedisCluster"
URL_SCHEMES = ("redis://", "rediss://", "unix://")
UNAVAILABLE = (redis.ConnectionError, redis.TimeoutError)

_clients: dict[str | None, Any] = {}
_clients_lock = threading.Lock()


def get_redis(using: str | None = None) -> Any:
    """The client for ``using``: a cache alias, a Redis URL, or None for the configured default
    (``REDISLOCK['URL']`` if set, else the django-redis cache ``REDISLOCK['CACHE']``).

    The client is built on first use and kept for the life of the process (redis-py pools
    reconnect by themselves after a fork)."""
    client = _clients.get(using)
    if client is None:
        with _clients_lock:
            client = _clients.get(using)
            if client is None:
                client = _clients[using] = _connect(using)
    return client


def reset_connections() -> None:
    """Forget every client, so the next ``get_redis`` reads the settings again."""
    with _clients_lock:
        _clients.clear()


os.register_at_fork(after_in_child=_clients.clear)


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def _connect(using: str | None) -> Any:
    if using is None:
        if conf.URL:
            return _from_url(conf.URL, cluster=conf.CLUSTER)
        using = conf.CACHE
    if using.startswith(URL_SCHEMES):
        return _from_url(using, cluster=False)
    caches = getattr(settings, "CACHES", {})
    if using not in caches:
        raise ImproperlyConfigured(
            f"django-redislock: {using!r} is neither a cache alias in CACHES nor a Redis URL."
        )
    from django_redis import get_redis_connection

    return get_redis_connection(using)


def _from_url(url: str, *, cluster: bool) -> Any:
    if cluster:
        return RedisCluster.from_url(url, socket_connect_timeout=5)
    return redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30)


def run_script(client: Any, script: LuaScript, keys: Sequence[Any], args: Sequence[Any]) -> Any:
    """Run a Lua script in one round trip (loading it first only when the server lacks it)."""
    try:
        try:
            return client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            return client.execute_command("EVAL", script.source, len(keys), *keys, *args)
    except UNAVAILABLE as exc:
        raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc


def call(client: Any, *args: Any, **options: Any) -> Any:
    """One plain Redis command, with connection failures raised as RedisUnavailable."""
    try:
        return client.execute_command(*args, **options)
    except UNAVAILABLE as exc:
        raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
