"""The fast path for one-round-trip commands (a lock hand-off, an enqueue): each thread keeps
a connection of its own per pool, sends hiredis-packed commands on it and polls the socket
for the reply for up to ``SPIN_WAIT`` before sleeping, and maps a failed command to
``RedisUnavailable``. Used by ``clients.call``/``run_script``; Cluster clients and bounded
pools that must not be held from go through redis-py as they are."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import select
import socket
import threading
import time
import weakref
from typing import Any

import hiredis
import redis

from ..conf import conf
from ..exceptions import RedisUnavailable
from .failures import UNAVAILABLE, mapped
from .pools import is_exhausted, with_connection
from .wire import packer, read_reply, reads_directly

logger = logging.getLogger(__name__)

# A dedicated connection unused for this long is checked for a server-side close first.
IDLE_CHECK_SECONDS = 1.0
# After a reply that outlasted SPIN_WAIT, this many commands in a row wait without spinning,
# doubling with each further miss up to MAX_SKIP: spinning for a remote Redis is only waste.
MAX_SKIP = 1024
# Commands whose reply waits on purpose (a lock waiter's BLPOP): never spun for.
BLOCKING = frozenset({"BLPOP", "BRPOP", "BLMOVE", "BZPOPMIN", "BZPOPMAX", "WAIT"})


class Dedicated:
    """A connection a thread keeps for its lock and queue commands. These are latency-bound
    (a lock hand-off, an enqueue: one round trip each), so they skip the pool's checkout, its
    readiness poll and the response callbacks, and wait for the reply by polling the socket
    for up to ``SPIN_WAIT`` before sleeping in ``recv`` (blocking commands excepted). A
    thread put to sleep waits for the kernel to wake it once the reply lands; on a virtual
    machine that wake-up alone can cost more than Redis takes to answer. Given back to the
    pool when the thread ends."""

    __slots__ = (
        "conn",
        "direct",
        "misses",
        "pack",
        "polled",
        "poller",
        "pool",
        "skip",
        "spin",
        "used",
    )

    def __init__(self, pool: Any, conn: Any, spin: float) -> None:
        # The connection is checked out by the caller: a failed checkout leaves no
        # half-built object behind for the garbage collector to finalize.
        self.pool = pool
        self.conn = conn
        self.used = time.monotonic()
        self.pack = packer(self.conn)
        # The reply is read from the socket into redis-py's own hiredis reader, without the
        # layers of its read_response, when that is all they would do: a plain TCP or Unix
        # socket (not TLS), hiredis packing and parsing.
        self.direct = reads_directly(self.conn)
        self.spin = spin if hasattr(select, "poll") else 0.0
        self.poller: Any = None
        self.polled: Any = None  # the socket the poller watches
        self.skip = self.misses = 0

    def __del__(self) -> None:
        # A finalizer may run inside any allocation of any thread, this one's included, while
        # it holds a lock (the pool's, the bookkeeping's): it only posts the connection on a
        # SimpleQueue, which is safe there; the next ``dedicated`` call gives it back.
        with contextlib.suppress(Exception):  # interpreter shutdown
            _returned.put((self.pool, self.conn))

    def freshen(self) -> None:
        now = time.monotonic()
        if now - self.used > IDLE_CHECK_SECONDS:
            self._drop_if_stale()
        self.used = now

    def execute(self, args: tuple[Any, ...], meanwhile: Any = None) -> Any:
        self.freshen()
        # A connection that worked before may have been closed under us (a Redis restart, a
        # failover, a proxy): the command did not reach the new server, so it is sent once
        # more on a new connection. A connection made for this command is not retried.
        if self.conn._sock is not None and args[0] not in BLOCKING:
            try:
                return self._send(args, meanwhile)
            except RedisUnavailable as exc:
                if isinstance(exc.__cause__, (redis.TimeoutError, socket.timeout)):
                    raise  # it may have run: never twice
                logger.debug("Redis connection lost; sending %s again once.", args[0])
        return self._send(args, meanwhile)

    def _send(self, args: tuple[Any, ...], meanwhile: Any = None) -> Any:
        conn = self.conn
        failed: BaseException | None = None
        try:
            if conn._sock is None:
                # connect() itself, not the implicit reconnect of send_packed_command: a
                # Sentinel-managed connection asks the sentinels for the master there, and
                # would otherwise go back to the address of the master that failed.
                conn.connect()
            sock = conn._sock
            direct = self.direct and type(sock) is socket.socket
            if direct:
                sock.sendall(hiredis.pack_command(args))
            else:
                conn.send_packed_command(self.pack(args), check_health=False)
            if meanwhile is not None:
                failed = _call(meanwhile)
            if self.spin and args[0] not in BLOCKING:
                self._spin(conn._sock)
            reply = read_reply(sock, conn._parser) if direct else conn.read_response()
        except BaseException as exc:
            raise mapped(conn, exc)  # noqa: B904 (the cause is set there)
        if failed is not None:
            raise failed
        return reply

    def _spin(self, sock: Any) -> None:
        """Return once ``sock`` is readable, or after ``spin`` seconds (then the read sleeps).
        Each poll releases the GIL, so other threads run meanwhile."""
        if self.skip:
            self.skip -= 1
            return
        if sock is not self.polled:  # a new connection
            self.poller = select.poll()
            self.poller.register(sock, select.POLLIN)
            self.polled = sock
        poll, clock = self.poller.poll, time.perf_counter
        end = clock() + self.spin
        while not poll(0):
            if clock() > end:
                self.misses = min(self.misses + 1, 10)
                self.skip = min(2**self.misses, MAX_SKIP)
                return
        self.misses = 0

    def _drop_if_stale(self) -> None:
        # The server may have closed an idle connection (its `timeout`); readable data on an
        # idle connection means EOF or junk either way.
        try:
            if self.conn._sock is not None and self.conn.can_read():
                self.conn.disconnect()
        except (*UNAVAILABLE, OSError):
            self.conn.disconnect()


_generation = 0  # bumped when the settings change: threads then give their connections back
# Threads keep at most half of a pool's connections for lock traffic; threads beyond that
# use the pool command by command, so locks can never starve the cache of connections.
_kept: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()
# Connections of threads that ended (or of settings that changed), posted by finalizers.
_returned: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()


def keep_limit(pool: Any) -> int:
    """How many of ``pool``'s connections threads may keep: half of a bounded pool, so that
    the rest serves the cache, short commands and the wake-up listener."""
    limit = getattr(pool, "max_connections", None)
    return limit // 2 if isinstance(limit, int) else 0


def _keep_one(pool: Any) -> bool:
    _give_back_returned()
    limit = keep_limit(pool)
    with _kept_lock:
        kept = _kept.get(pool, 0)
        if kept >= limit:
            return False
        _kept[pool] = kept + 1
        return True


def _give_back_one(pool: Any) -> None:
    with _kept_lock:
        _kept[pool] = max(0, _kept.get(pool, 1) - 1)


def _give_back_returned() -> None:
    """Give the connections finalizers posted back to their pools (never from a finalizer)."""
    while not _returned.empty():
        try:
            pool, conn = _returned.get_nowait()
        except queue.Empty:
            return
        with contextlib.suppress(Exception):  # a pool reset after a fork
            pool.release(conn)
        _give_back_one(pool)


class _ThreadConnections(threading.local):
    def __init__(self) -> None:
        self.by_pool: dict[int, Dedicated | None] = {}
        self.generation = _generation


_threads = _ThreadConnections()


def forget() -> None:
    """Have every thread give back its connections at its next command (the settings
    changed)."""
    global _generation
    _generation += 1


def _reset_threads() -> None:
    # A child keeps no thread's connection, and gets a lock of its own (another thread of
    # the parent may have held this one at the fork).
    global _threads, _kept_lock, _returned
    _threads = _ThreadConnections()
    _kept_lock = threading.Lock()
    _returned = queue.SimpleQueue()


os.register_at_fork(after_in_child=_reset_threads)


def dedicated(client: Any) -> Dedicated | None:
    """This thread's connection for ``client``, or None to use the client as it is (Redis
    Cluster routes each command to its node; a bounded pool must not be held from)."""
    threads = _threads
    if threads.generation != _generation:  # settings changed: give old connections back
        threads.by_pool.clear()
        threads.generation = _generation
    pool = getattr(client, "connection_pool", None)
    key = id(pool)
    if key in threads.by_pool:
        held = threads.by_pool[key]
        if held is None or held.pool is pool:
            return held
    if pool is None or not _keep_one(pool):
        threads.by_pool[key] = None
        return None
    try:
        conn = pool.get_connection()
    except BaseException as exc:
        _give_back_one(pool)
        if is_exhausted(exc):  # the cache's own traffic took them: go command by command
            return None
        if isinstance(exc, (*UNAVAILABLE, OSError)):
            raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
        raise
    held = threads.by_pool[key] = Dedicated(pool, conn, conf.SPIN_WAIT)
    return held


def execute(client: Any, args: tuple[Any, ...], meanwhile: Any = None) -> Any:
    """Run one command. ``meanwhile``, a callable taking nothing, runs while the command is
    on its way (its work overlaps Redis's), or before the command without a connection of
    this thread's own; again if the command is sent again. What it raises is raised once
    the reply was read (a failed command's error first)."""
    held = dedicated(client)
    if held is not None:
        return held.execute(args, meanwhile)
    if meanwhile is not None:
        meanwhile()
    return with_connection(client, lambda: _plain(client, args))


def _plain(client: Any, args: tuple[Any, ...]) -> Any:
    try:
        return client.execute_command(*args)
    except UNAVAILABLE as exc:
        raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc


def _call(meanwhile: Any) -> BaseException | None:
    # The reply must be read whatever meanwhile does, or the connection is out of step.
    try:
        meanwhile()
    except BaseException as exc:
        return exc
    return None
