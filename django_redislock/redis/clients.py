"""Redis clients: one per process and per ``using``, from a Redis cache alias (django-redis,
or Django's own ``RedisCache``) or a URL."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.exceptions import AskError, ClusterDownError, NoScriptError, TryAgainError

from ..conf import conf
from ..exceptions import RedisUnavailable
from . import blocking, direct_waits, fastpath, pools, wakeups
from .failures import UNAVAILABLE as UNAVAILABLE  # where the rest of the app imports it from
from .failures import mapped
from .fastpath import dedicated, execute
from .notices import quiet_maintenance_notices
from .pools import with_connection
from .scripts import LuaScript
from .sentinel import SCHEMES as SENTINEL_SCHEMES
from .sentinel import is_sentinel_url, master_client
from .wire import packer

URL_SCHEMES = ("redis://", "rediss://", "unix://", *SENTINEL_SCHEMES)
_clients: dict[str | None, Any] = {}
_clients_lock = threading.Lock()


def get_redis(using: str | None = None) -> Any:
    """The client for ``using``: a cache alias, a Redis URL (``redis+sentinel://`` included,
    see ``sentinel``), or None for the configured default (``REDISLOCK['URL']`` if set, else
    the Redis cache ``REDISLOCK['CACHE']``: see ``cache_client``).

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
        fastpath.forget()


def _after_fork() -> None:
    # A child starts with no client, and with a lock of its own: another thread of the
    # parent may have held this one at the fork, and would never release it here.
    global _clients_lock
    _clients.clear()
    _clients_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def is_cluster(client: Any) -> bool:
    return isinstance(client, (RedisCluster, AsyncRedisCluster))


class Target(NamedTuple):
    """Where ``using`` points: a Redis URL (``cluster``: a Cluster's), or a Redis cache."""

    url: str | None
    cluster: bool = False
    cache: str | None = None


def target(using: str | None) -> Target:
    """Resolve ``using`` (None: ``REDISLOCK['URL']``, else the cache ``REDISLOCK['CACHE']``)."""
    if using is None:
        if conf.URL:
            return Target(conf.URL, cluster=conf.CLUSTER)
        using = conf.CACHE
    if using.startswith(URL_SCHEMES):
        return Target(using)
    if using not in getattr(settings, "CACHES", {}):
        raise ImproperlyConfigured(
            f"django-redislock: {using!r} is neither a cache alias in CACHES nor a Redis URL."
        )
    return Target(None, cache=using)


def _connect(using: str | None) -> Any:
    quiet_maintenance_notices()  # else logged at every connection to a Redis < 8
    where = target(using)
    if where.url is None:
        return cache_client(str(where.cache))
    return _from_url(where.url, cluster=where.cluster)


# What a cache alias may name: its BACKEND (or a subclass of it).
DJANGO_REDIS_CACHE = "django.core.cache.backends.redis.RedisCache"
SUPPORTED_CACHES = (
    "django-redis ('django_redis.cache.RedisCache') or Django's own Redis cache "
    f"({DJANGO_REDIS_CACHE!r})"
)


def cache_kind(backend: Any) -> str | None:
    """``"django-redis"`` or ``"django"`` for a cache BACKEND path this app can take its
    connection from (a subclass of either included), else None. Never raises."""
    if not isinstance(backend, str):
        return None
    if backend.startswith("django_redis."):
        return "django-redis"
    if backend == DJANGO_REDIS_CACHE:
        return "django"
    try:
        from django.core.cache.backends.redis import RedisCache
        from django.utils.module_loading import import_string

        cls = import_string(backend)
    except Exception:  # a typo or a missing package: Django's own checks say so
        return None
    if isinstance(cls, type) and issubclass(cls, RedisCache):
        return "django"
    return None


def cache_client(alias: str) -> Any:
    """The redis-py client of the Redis cache ``alias``: django-redis's own connection, or,
    for Django's ``RedisCache``, a client on the pool the cache writes through (its first
    server, with its OPTIONS: pool class, connection class, password...)."""
    caches_setting: dict[str, dict[str, Any]] = getattr(settings, "CACHES", {})
    backend = caches_setting[alias].get("BACKEND")
    kind = cache_kind(backend)
    if kind == "django-redis":
        from django_redis import get_redis_connection

        return get_redis_connection(alias)
    if kind == "django":
        from django.core.cache import caches

        # An instance of our own: ``caches[alias]`` is one per thread, and this client is
        # shared by every thread of the process (redis-py pools are thread-safe).
        cache: Any = caches.create_connection(alias)
        return cache._cache.get_client(None, write=True)
    raise ImproperlyConfigured(
        f"django-redislock: the cache {alias!r} ({backend}) is not a Redis cache; use "
        f"{SUPPORTED_CACHES}, or set REDISLOCK['URL']."
    )


def _from_url(url: str, *, cluster: bool) -> Any:
    # A max_connections in the URL's query wins over MAX_CONNECTIONS. The pools wait up to
    # CONNECTION_WAIT for a free connection (BlockingConnectionPool) rather than fail: the
    # gate of ``pools`` paces this app's commands, and a read outside it (a listing, a
    # job's hash) under a burst of threads is then slower, never an error.
    size = conf.MAX_CONNECTIONS
    if cluster:
        return RedisCluster.from_url(
            url,
            socket_connect_timeout=5,
            max_connections=size,
            connection_pool_class=redis.BlockingConnectionPool,
            timeout=pools.CONNECTION_WAIT,
        )
    if is_sentinel_url(url):
        return master_client(
            url, socket_connect_timeout=5, health_check_interval=30, max_connections=size
        )
    pool = redis.BlockingConnectionPool.from_url(
        url,
        socket_connect_timeout=5,
        health_check_interval=30,
        max_connections=size,
        timeout=pools.CONNECTION_WAIT,
    )
    return redis.Redis.from_pool(pool)


def run_script(
    client: Any,
    script: LuaScript,
    keys: Sequence[Any],
    args: Sequence[Any],
    meanwhile: Callable[[], Any] | None = None,
) -> Any:
    """Run a Lua script in one round trip (loading it first only when the server lacks it).
    ``meanwhile`` runs while the script is on its way (see ``fastpath.execute``)."""
    try:
        return execute(client, ("EVALSHA", script.sha, len(keys), *keys, *args), meanwhile)
    except NoScriptError as missing:
        # fakeredis keeps the error it raised; with its traceback it would keep the caller's
        # stack (a Lock that should be garbage-collected, say) alive.
        missing.__traceback__ = None
        return execute(client, ("EVAL", script.source, len(keys), *keys, *args), meanwhile)


def call(client: Any, *args: Any) -> Any:
    """One plain Redis command (raw reply), with connection failures as RedisUnavailable.
    A one-key ``BLPOP`` answers within its timeout to the millisecond (see ``blocking``)."""
    if args[0] == "BLPOP" and len(args) == 3:
        return _blpop(client, args[1], args[2])
    return execute(client, args)


def _blpop(client: Any, key: str, timeout: float) -> Any:
    node = _node(client, key)
    held = dedicated(node)
    if held is not None:
        held.freshen()
        return _pop_on(client, node, held.conn, held.pack, key, timeout, held.direct)
    return with_connection(node, lambda: _pop_checked_out(client, node, key, timeout))


def _node(client: Any, key: str) -> Any:
    # On Cluster, the key's node (a client of its own, with its own pool).
    return client.get_node_from_key(key).redis_connection if is_cluster(client) else client


def _pop_checked_out(client: Any, node: Any, key: str, timeout: float) -> Any:
    pool = node.connection_pool
    try:
        conn = pool.get_connection()
    except (*UNAVAILABLE, OSError) as exc:
        raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
    try:
        return _pop_on(client, node, conn, packer(conn), key, timeout)
    finally:
        pool.release(conn)


def wait_for_push(
    client: Any, key: str, timeout: float, accepts: Callable[[Any], bool] | None = None
) -> Any:
    """What a lock's waiter blocks on: a value pushed to list ``key`` within ``timeout``
    seconds (``BLPOP``'s reply), else None. On the thread's kept connection when it has one;
    otherwise through the process's wake-up listener, holding no connection meanwhile (which
    gives it a value that ``accepts`` first, see ``wakeups``)."""
    node = _node(client, key)
    held = dedicated(node)
    if held is not None:
        claimed = direct_waits.claim(node, key)
        if claimed is not None:
            try:  # a socket read: no longer than the README lets a cache's timeout be
                held.freshen()
                timeout = min(timeout, conf.LOCK_RETRY_DELAY)
                return _pop_on(client, node, held.conn, held.pack, key, timeout, held.direct)
            finally:
                direct_waits.unclaim(claimed, None)
    return wakeups.wait(
        node,
        key,
        timeout,
        lambda found: run_script(client, wakeups.NUDGE, *found.nudge_command()),
        accepts,
    )


def _pop_on(
    client: Any,
    node: Any,
    conn: Any,
    pack: Any,
    key: str,
    timeout: float,
    direct: bool = False,
) -> Any:
    def unblock(ident: int) -> Any:
        # From another connection of the pool: wait for one rather than fail.
        return with_connection(node, lambda: node.execute_command("CLIENT", "UNBLOCK", ident))

    try:
        return blocking.pop(conn, key, timeout, unblock, pack, direct)
    except (AskError, TryAgainError, ClusterDownError):
        # The slot moved: the Cluster client finds its new node (less precisely).
        return execute(client, ("BLPOP", key, max(timeout, 0.001)))
    except BaseException as exc:
        raise mapped(conn, exc)  # noqa: B904 (the cause is set there)
