"""Waiting for a free connection instead of failing.

redis-py's pools refuse a command once ``max_connections`` are checked out (100 by default):
under ASGI every request of a worker shares one event loop and so one pool, and a burst of
requests would answer 503 while Redis is healthy. So the commands of this app pass a gate
first: a semaphore per pool (per client on Cluster, per client and event loop for asyncio)
that admits as many commands at once as the pool can serve beside what threads keep (see
``fastpath``) and the wake-up listener (see ``wakeups``). A command beyond that waits for one
to end, pushed by the semaphore's release. When the pool is full anyway (the cache's own
traffic shares it), the command tries again, jittered, for up to ``CONNECTION_WAIT``: then
Redis is not keeping up and ``RedisUnavailable`` says so. So does a command whose new
connection did not open within its connect timeout (nothing was sent: a loaded event loop
or server, not a Redis gone). The pools built from ``URL``
(standalone and Cluster) are ``BlockingConnectionPool``s waiting as long: a plain read
outside the gate (a job's hash, a listing) waits for a connection too.

``REDISLOCK['MAX_CONNECTIONS']`` sizes the pools this app builds (from ``URL``, and every
asyncio pool); a cache's pool keeps the cache's own ``max_connections``.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import MaxConnectionsError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..conf import conf
from ..exceptions import RedisUnavailable

# How long a command waits for a free connection before giving up.
CONNECTION_WAIT = 10.0
# What a pool says when every connection is out: MaxConnectionsError, or the timeout of a
# BlockingConnectionPool (a ConnectionError with this text).
_BLOCKING_POOL_EMPTY = "No connection available"
# What redis-py says when a new connection did not open within its connect timeout: no
# command was sent, so sending it again on another try is safe. (A busy event loop, or a
# server too busy to accept for a moment: Redis is healthy, and the command waits.)
_CONNECT_TIMEOUT = "Timeout connecting to server"

T = TypeVar("T")

_gates: weakref.WeakKeyDictionary[Any, threading.BoundedSemaphore] = weakref.WeakKeyDictionary()
_gates_lock = threading.Lock()
_ASYNC_GATE = "_django_redislock_gate"


def pool_size(client: Any) -> int:
    """The ``max_connections`` of ``client``'s pool (per node on Cluster), else
    ``MAX_CONNECTIONS``."""
    pool = getattr(client, "connection_pool", None)
    limit = getattr(pool, "max_connections", None)
    if isinstance(limit, int) and 0 < limit < 2**31:
        return limit
    return conf.MAX_CONNECTIONS


def _budget(client: Any) -> int:
    # Half of the pool may be kept by threads (fastpath.keep_limit), one connection is the
    # wake-up listener's; the rest serves commands one at a time.
    size = pool_size(client)
    return max(1, size - size // 2 - 1)


def _gate(client: Any) -> threading.BoundedSemaphore:
    owner = getattr(client, "connection_pool", None) or client
    gate = _gates.get(owner)
    if gate is None:
        with _gates_lock:
            gate = _gates.get(owner)
            if gate is None:
                gate = _gates[owner] = threading.BoundedSemaphore(_budget(client))
    return gate


def is_exhausted(exc: BaseException) -> bool:
    """Whether ``exc`` says the pool had no free connection (not that Redis failed)."""
    return isinstance(exc, MaxConnectionsError) or _BLOCKING_POOL_EMPTY in str(exc)


def is_connect_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` says a new connection did not open in time (nothing was sent)."""
    return isinstance(exc, RedisTimeoutError) and _CONNECT_TIMEOUT in str(exc)


def _try_again(client: Any, exc: Exception, deadline: float, pause: float) -> None:
    """Return when the command that raised ``exc`` may be tried again; else raise."""
    cause = exc.__cause__ if isinstance(exc, RedisUnavailable) else exc
    if cause is None:
        raise exc
    late = time.monotonic() + pause > deadline
    if is_exhausted(cause):
        if late:
            raise _too_long(client) from exc
    elif not is_connect_timeout(cause) or late:
        raise exc


def _too_long(client: Any) -> RedisUnavailable:
    return RedisUnavailable(
        f"No free Redis connection within {CONNECTION_WAIT:g}s: all {pool_size(client)} of "
        "the pool were busy. Raise REDISLOCK['MAX_CONNECTIONS'] (or the cache's "
        "max_connections), or find what holds them."
    )


def with_connection(client: Any, command: Callable[[], T]) -> T:
    """Run ``command`` (which checks a connection out of ``client``'s pool) once the gate
    admits it, waiting for a free connection rather than failing."""
    gate = _gate(client)
    deadline = time.monotonic() + CONNECTION_WAIT
    if not gate.acquire(timeout=CONNECTION_WAIT):
        raise _too_long(client)
    try:
        pause = 0.001
        while True:
            try:
                return command()
            except Exception as exc:  # redis-py's ConnectionError, or our RedisUnavailable
                _try_again(client, exc, deadline, pause)
            time.sleep(random.uniform(pause / 2, pause))
            pause = min(pause * 2, 0.05)
    finally:
        gate.release()


def _async_gate(client: Any) -> asyncio.Semaphore:
    # Kept on the client, which belongs to one event loop (see aio).
    gate: asyncio.Semaphore | None = getattr(client, _ASYNC_GATE, None)
    if gate is None:
        gate = asyncio.Semaphore(max(1, pool_size(client) - 1))
        setattr(client, _ASYNC_GATE, gate)
    return gate


def async_gate_free(client: Any) -> int:
    """How many more commands the asyncio ``client``'s gate admits at once right now."""
    gate = _async_gate(client)
    return int(gate._value)


async def async_with_connection(client: Any, command: Callable[[], Awaitable[T]]) -> T:
    """``with_connection`` for an asyncio client."""
    gate = _async_gate(client)
    deadline = time.monotonic() + CONNECTION_WAIT
    if gate.locked():
        try:
            await asyncio.wait_for(gate.acquire(), CONNECTION_WAIT)
        except asyncio.TimeoutError:
            raise _too_long(client) from None
    else:
        await gate.acquire()  # at once: no task for wait_for to make
    try:
        pause = 0.001
        while True:
            try:
                return await command()
            except Exception as exc:
                _try_again(client, exc, deadline, pause)
            await asyncio.sleep(random.uniform(pause / 2, pause))
            pause = min(pause * 2, 0.05)
    finally:
        gate.release()


def _after_fork() -> None:
    global _gates_lock
    _gates.clear()
    _gates_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
