"""A ``BLPOP`` that answers on time, over redis-py connections (sync and asyncio).

Redis ends a blocked command's timeout only on its next internal tick (every 100 ms at the
default ``hz 10``): ``BLPOP key 0.1`` answers after 0.1 to 0.2 s, too late for a deadline.
So the pop blocks in Redis without a timeout, its reply is awaited here with a precise one,
and when that passes first the connection is unblocked (``CLIENT UNBLOCK``) from another
one: Redis then answers nil at once, or the value it popped just before. A nil reply can
therefore only follow our own unblock. A connection that cannot be unblocked (fakeredis, a
proxy, an ACL user without CLIENT) pops with Redis's own timeout instead.

The callers own the connection (checked out, or kept by their thread) and the error
handling: an error here leaves the connection out of step, to be disconnected.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import redis

from .wire import read_reply

# While an unblock finds our BLPOP not blocked yet (still on its way to Redis), wait this
# long for the reply before unblocking again; after so many tries (a paused server, someone
# else's unblock), drop the connection instead, which ends the BLPOP too.
UNBLOCK_RETRY = 0.005
UNBLOCK_TRIES = 200
# No connection to unblock from (a full pool, Redis gone): dropping ours ends the BLPOP too,
# and the caller's next command reports an outage.
CANNOT_UNBLOCK = (redis.ConnectionError, redis.TimeoutError, OSError)

# connection -> (its socket or stream when asked, its CLIENT ID or None when it cannot be
# unblocked); a reconnected connection is asked again.
_ids: weakref.WeakKeyDictionary[Any, tuple[Any, int | None]] = weakref.WeakKeyDictionary()
os.register_at_fork(after_in_child=_ids.clear)


def pop(
    conn: Any,
    key: str,
    timeout: float,
    unblock: Callable[[int], Any],
    pack: Callable[[tuple[Any, ...]], Any],
    direct: bool = False,
) -> Any:
    """``BLPOP key`` on ``conn`` answered within ``timeout`` seconds: the raw reply, None
    once the timeout passed. ``unblock(client_id)`` runs ``CLIENT UNBLOCK`` elsewhere;
    ``pack(command)`` packs a command for ``conn.send_packed_command``; ``direct``: the reply
    may be read straight into redis-py's hiredis reader (``wire.reads_directly``)."""
    ident = _client_id(conn, unblock, pack)
    if ident is None:
        # At least 1 ms: Redis reads a timeout that rounds down to 0 ms as "forever".
        conn.send_packed_command(pack(("BLPOP", key, max(timeout, 0.001))), check_health=False)
        return conn.read_response()
    conn.send_packed_command(pack(("BLPOP", key, 0)), check_health=False)
    sock = conn._sock
    if _readable(sock, timeout):
        if direct and type(sock) is socket.socket:  # (not TLS: it reads its own way)
            return read_reply(sock, conn._parser)
        return conn.read_response()
    for _ in range(UNBLOCK_TRIES):
        try:
            unblocked = unblock(ident)
        except CANNOT_UNBLOCK:
            break
        # 0: our BLPOP was not blocked yet (it will be), or its reply is on its way.
        if unblocked or _readable(sock, UNBLOCK_RETRY):
            return conn.read_response()
    conn.disconnect()
    return None


def _client_id(
    conn: Any, unblock: Callable[[int], Any], pack: Callable[[tuple[Any, ...]], Any]
) -> int | None:
    if conn._sock is None:
        conn.connect()
    sock = conn._sock
    if _remembered(conn, sock):
        return _ids[conn][1]
    ident = None
    if isinstance(sock, socket.socket):  # not fakeredis
        try:
            conn.send_packed_command(pack(("CLIENT", "ID")), check_health=False)
            ident = int(conn.read_response())
            unblock(ident)  # nothing to unblock yet: only proves that the server can
        except redis.ResponseError:
            ident = None
    _ids[conn] = (sock, ident)
    return ident


def _remembered(conn: Any, handle: Any) -> bool:
    """Whether ``conn``'s client id was asked on its current socket (a reconnect drops it)."""
    known = _ids.get(conn)
    return known is not None and known[0] is handle


def _readable(sock: Any, timeout: float) -> bool:
    if getattr(sock, "pending", None) and sock.pending():  # TLS: decrypted, not yet read
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(timeout * 1000))  # milliseconds, rounded up
    return bool(select.select([sock], [], [], timeout)[0])


async def async_pop(
    conn: Any, key: str, timeout: float, unblock: Callable[[int], Awaitable[Any]]
) -> Any:
    """``pop`` for a ``redis.asyncio`` connection."""
    ident = await _async_client_id(conn, unblock)
    if ident is None:
        await conn.send_command("BLPOP", key, max(timeout, 0.001))
        return await conn.read_response()
    await conn.send_command("BLPOP", key, 0)
    # With a timeout, read_response gives None when it passes and keeps the connection.
    reply = await conn.read_response(timeout=timeout)
    if reply is not None:
        return reply
    for _ in range(UNBLOCK_TRIES):
        try:
            unblocked = await unblock(ident)
        except CANNOT_UNBLOCK:
            break
        if unblocked:
            return await conn.read_response()  # the nil of our unblock
        reply = await conn.read_response(timeout=UNBLOCK_RETRY)
        if reply is not None:
            return reply
    await conn.disconnect()
    return None


async def _async_client_id(conn: Any, unblock: Callable[[int], Awaitable[Any]]) -> int | None:
    if not conn.is_connected:
        await conn.connect()
    stream = conn._reader
    if _remembered(conn, stream):
        return _ids[conn][1]
    ident = None
    if isinstance(stream, asyncio.StreamReader):  # not fakeredis
        try:
            await conn.send_command("CLIENT", "ID")
            ident = int(await conn.read_response())
            await unblock(ident)
        except redis.ResponseError:
            ident = None
    _ids[conn] = (stream, ident)
    return ident
