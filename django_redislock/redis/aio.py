"""asyncio Redis clients, for ``AsyncLock``: one per event loop and per ``using``, from the
same settings as the sync ones (``REDISLOCK['URL']``, a URL, or a django-redis cache alias,
Sentinel ones included)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    NoScriptError,
    ReadOnlyError,
    TryAgainError,
)
from redis.sentinel import SentinelConnectionPool

from ..conf import conf
from ..exceptions import RedisUnavailable
from . import blocking, direct_waits, wakeups
from .clients import UNAVAILABLE, get_redis, is_cluster, target
from .notices import quiet_maintenance_notices
from .pools import async_gate_free, async_with_connection, pool_size
from .scripts import LuaScript
from .sentinel import async_master_client, async_twin, is_sentinel_url

# The asyncio twin of each sync connection class a django-redis cache may use. fakeredis is
# here because test suites commonly point django-redis at it.
ASYNC_CONNECTION_CLASSES = {
    "redis.connection.Connection": "redis.asyncio.connection.Connection",
    "redis.connection.SSLConnection": "redis.asyncio.connection.SSLConnection",
    "redis.connection.UnixDomainSocketConnection": (
        "redis.asyncio.connection.UnixDomainSocketConnection"
    ),
    "fakeredis._clients._sync.FakeRedisConnection": "fakeredis.aioredis.FakeAsyncRedisConnection",
}
# Connection settings that mean the same to the asyncio connection classes.
PORTABLE_KWARGS = (
    "host",
    "port",
    "db",
    "username",
    "password",
    "path",
    "socket_timeout",
    "socket_connect_timeout",
    "socket_keepalive",
    "encoding",
    "encoding_errors",
    "decode_responses",
    "client_name",
    "health_check_interval",
    "protocol",
    "server",
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_check_hostname",
)

# Clients live on their event loop (an attribute of it), not in a map keyed by the loop:
# their connections refer to the loop, so a map would keep every loop ever used alive (under
# WSGI, Django runs each async view in a loop of its own). This way a finished loop and its
# clients are garbage together.
_LOOP_ATTRIBUTE = "_django_redislock_clients"
_generation = 0


def get_async_redis(using: str | None = None) -> Any:
    """The asyncio client for ``using`` in the running event loop."""
    loop = asyncio.get_running_loop()
    generation, per_loop = getattr(loop, _LOOP_ATTRIBUTE, (None, None))
    if per_loop is None or generation != _generation:
        per_loop = {}
        setattr(loop, _LOOP_ATTRIBUTE, (_generation, per_loop))
    client = per_loop.get(using)
    if client is None:
        client = per_loop[using] = _connect(using)
    return client


def reset_async_connections() -> None:
    """Make every loop build its clients again (the settings changed)."""
    global _generation
    _generation += 1


def _connect(using: str | None) -> Any:
    quiet_maintenance_notices()  # else logged at every connection to a Redis < 8
    where = target(using)
    if where.url is not None:
        return _from_url(where.url, cluster=where.cluster)
    pool = get_redis(where.cache).connection_pool
    if isinstance(pool, SentinelConnectionPool):
        return async_twin(pool, PORTABLE_KWARGS)
    sync_class = f"{pool.connection_class.__module__}.{pool.connection_class.__qualname__}"
    if sync_class not in ASYNC_CONNECTION_CLASSES:
        raise ImproperlyConfigured(
            f"django-redislock: AsyncLock cannot derive an asyncio client from cache "
            f"{where.cache!r} (connection class {sync_class}). Set REDISLOCK['URL'], or pass a "
            "redis:// URL as using=."
        )
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k in PORTABLE_KWARGS}
    async_pool = redis.asyncio.ConnectionPool(
        connection_class=import_string(ASYNC_CONNECTION_CLASSES[sync_class]),
        max_connections=conf.MAX_CONNECTIONS,
        **kwargs,
    )
    return redis.asyncio.Redis(connection_pool=async_pool)


def _from_url(url: str, *, cluster: bool) -> Any:
    # A max_connections in the URL's query wins over MAX_CONNECTIONS.
    size = conf.MAX_CONNECTIONS
    if cluster:
        return AsyncRedisCluster.from_url(url, socket_connect_timeout=5, max_connections=size)
    if is_sentinel_url(url):
        return async_master_client(url, socket_connect_timeout=5, max_connections=size)
    return redis.asyncio.Redis.from_url(url, socket_connect_timeout=5, max_connections=size)


def _unavailable(exc: BaseException) -> RedisUnavailable:
    # A replica refuses writes: the client is on a demoted master (or a replica's URL).
    if isinstance(exc, ReadOnlyError):
        return RedisUnavailable(f"Redis is read-only, failing over? ({exc})")
    return RedisUnavailable(f"Redis is unreachable ({exc})")


async def _discovered(client: Any) -> None:
    """Make sure a Cluster client knows the cluster's layout before a command is routed.

    redis-py resolves a command's route before it discovers the topology, and while it knows
    no node it routes even a keyed command to a random node. When tasks start at once on a
    new client, their first commands draw MOVED replies; every 5th MOVED makes the client
    close itself, cutting the connections other tasks have a command in flight on: those fail
    (``AttributeError`` on a closed writer) or, as a ``ConnectionError`` redis-py retries, run
    twice (an INCR, a lock acquire, a stock addition counted twice). So no command goes out
    before the layout is known. ``initialize()`` serializes callers on the client's own
    ``asyncio.Lock`` and rechecks, so concurrent first callers wait for one discovery; once
    done, the hot path is an isinstance and a None test. A client redis-py closed itself (a
    failover) has no default node either, and is rediscovered here the same way. The
    standalone client has no such step: each command takes a pooled connection to the one
    server."""
    if isinstance(client, AsyncRedisCluster) and client.get_default_node() is None:
        # The exact condition under which redis-py falls back to the random route.
        await client.initialize()


async def run_script(
    client: Any, script: LuaScript, keys: Sequence[Any], args: Sequence[Any]
) -> Any:
    """Run a Lua script in one round trip (loading it first only when the server lacks it)."""

    async def run() -> Any:
        try:
            return await client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError as missing:
            missing.__traceback__ = None  # see connection.run_script
            return await client.execute_command("EVAL", script.source, len(keys), *keys, *args)

    before = cancel_requests()
    try:
        await _discovered(client)
        reply = await async_with_connection(client, run)
    except (*UNAVAILABLE, OSError, ReadOnlyError) as exc:
        raise _unavailable(exc) from exc
    raise_if_cancelled_since(before)
    return reply


async def call(client: Any, *args: Any) -> Any:
    """One plain Redis command, with connection failures raised as RedisUnavailable.
    A one-key ``BLPOP`` answers within its timeout to the millisecond (see ``blocking``);
    its caller checks for a dropped cancellation itself (see ``wait_for_push``)."""
    before = cancel_requests()
    try:
        await _discovered(client)
        if args[0] == "BLPOP" and len(args) == 3:
            return await async_with_connection(client, lambda: _blpop(client, args[1], args[2]))
        reply = await async_with_connection(client, lambda: client.execute_command(*args))
    except (*UNAVAILABLE, OSError, ReadOnlyError) as exc:
        raise _unavailable(exc) from exc
    raise_if_cancelled_since(before)
    return reply


def cancel_requests() -> int:
    """How many cancellations of the running task are pending (Python 3.11+; else 0)."""
    count = getattr(asyncio.current_task(), "cancelling", None)
    return int(count()) if count is not None else 0


def raise_if_cancelled_since(before: int) -> None:
    """Raise the CancelledError that a ``cancel()`` of this task since ``cancel_requests()``
    answered ``before`` should have raised. On Python 3.11 redis-py sends each command
    through ``asyncio.wait_for``, which returns normally, dropping the cancellation, when it
    comes as the send completes (3.12 fixed that): the task would run on as if never
    cancelled, a lock waiter until the holder's TTL ran out."""
    if cancel_requests() > before:
        raise asyncio.CancelledError


async def wait_for_push(
    client: Any,
    sync_client: Any,
    key: str,
    timeout: float,
    accepts: Callable[[Any], bool] | None = None,
) -> Any:
    """``clients.wait_for_push`` for an asyncio waiter: while the event loop's pool has
    connections to spare, a ``BLPOP`` on one of them; otherwise through the process's wake-up
    listener (``sync_client``: the sync client of the same Redis), holding none meanwhile.
    A cancellation dropped meanwhile (see ``raise_if_cancelled_since``) is raised when nothing
    was popped; along with a value, the caller must check ``cancel_requests()`` itself, since
    the value is to be passed on."""
    before = cancel_requests()
    popped = await _pop_or_wait(client, sync_client, key, timeout, accepts)
    if popped is None:
        raise_if_cancelled_since(before)
    return popped


async def _pop_or_wait(
    client: Any,
    sync_client: Any,
    key: str,
    timeout: float,
    accepts: Callable[[Any], bool] | None,
) -> Any:
    if async_gate_free(client) > pool_size(client) // 2:
        claimed = direct_waits.claim(client, key)
        if claimed is not None:
            try:  # a socket read: no longer than the README lets a cache's timeout be
                return await call(client, "BLPOP", key, min(timeout, conf.LOCK_RETRY_DELAY))
            finally:
                direct_waits.unclaim(claimed, None)
    node = sync_client
    if is_cluster(sync_client):
        node = sync_client.get_node_from_key(key).redis_connection

    async def nudge(found: wakeups.Listener) -> Any:
        return await run_script(client, wakeups.NUDGE, *found.nudge_command())

    try:
        return await wakeups.async_wait(node, key, timeout, nudge, accepts)
    except (*UNAVAILABLE, OSError, ReadOnlyError) as exc:
        raise _unavailable(exc) from exc


async def _blpop(client: Any, key: str, timeout: float) -> Any:
    # A connection of its own for the wait, on Cluster from the key's node.
    if isinstance(client, AsyncRedisCluster):
        node: Any = client.get_node_from_key(key)
        conn = node.acquire_connection()
        try:
            return await _pop_on(client, node, conn, key, timeout)
        finally:
            node.release(conn)
    pool = client.connection_pool
    conn = await pool.get_connection()
    try:
        return await _pop_on(client, client, conn, key, timeout)
    finally:
        await pool.release(conn)


async def _pop_on(client: Any, node: Any, conn: Any, key: str, timeout: float) -> Any:
    async def unblock(ident: int) -> Any:
        # From another connection of the pool: wait for one rather than fail.
        return await async_with_connection(
            client, lambda: node.execute_command("CLIENT", "UNBLOCK", ident)
        )

    try:
        return await blocking.async_pop(conn, key, timeout, unblock)
    except (AskError, TryAgainError, ClusterDownError):
        # The slot moved: the Cluster client finds its new node (less precisely).
        return await client.execute_command("BLPOP", key, max(timeout, 0.001))
    except redis.ResponseError:
        raise
    except BaseException:
        # Cancelled or cut off while blocked: the stream is out of step.
        await conn.disconnect(nowait=True)
        raise
