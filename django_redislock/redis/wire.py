"""The wire format of the fast path: commands packed by hiredis, replies read from the
socket into redis-py's own hiredis reader (without the layers of its ``read_response``)."""

from __future__ import annotations

import socket
from typing import Any

import hiredis
import redis
from redis.exceptions import ResponseError

try:  # what redis-py's hiredis reader returns while a reply is incomplete
    from redis._parsers.hiredis import NOT_ENOUGH_DATA
except ImportError:  # another redis-py layout: replies are read through redis-py
    NOT_ENOUGH_DATA = None


def reads_directly(conn: Any) -> bool:
    """Whether ``read_reply`` may read ``conn``'s replies: when all redis-py's own read would
    do is what it does (hiredis packing and parsing; a plain TCP or Unix socket is checked
    at each command)."""
    return (
        NOT_ENOUGH_DATA is not None
        and hiredis_packs(conn)
        and type(conn._parser).__name__ == "_HiredisParser"
    )


def read_reply(sock: socket.socket, parser: Any) -> Any:
    """The reply, read from ``sock`` into redis-py's hiredis reader (which turns an
    error reply into the redis-py exception, raised here as redis-py would). A RESP3
    push message before it goes to redis-py's handler, as its own read would send it."""
    reader, buffer = parser._reader, parser._buffer
    reply = reader.gets()
    while True:
        while reply is NOT_ENOUGH_DATA:
            size = sock.recv_into(buffer)
            if not size:
                raise redis.ConnectionError("Connection closed by server.")
            reader.feed(buffer, 0, size)
            reply = reader.gets()
        push = parser._hiredis_PushNotificationType
        if push is None or not isinstance(reply, push):
            break
        parser.handle_push_response(reply)
        reply = reader.gets()
    if isinstance(reply, (ResponseError, redis.ConnectionError)):
        raise reply
    return reply


def hiredis_packs(conn: Any) -> bool:
    """Whether hiredis packs commands into exactly the bytes ``conn`` itself would send (it
    does whenever redis-py packs with hiredis too, as with the hiredis extra installed)."""
    sample = ("EVALSHA", "café", 1, b"\xff", 2.5)
    # (hiredis's stub types the argument as a 1-tuple; it takes any length.)
    packed: bytes = hiredis.pack_command(sample)  # type: ignore[arg-type]
    return b"".join(conn.pack_command(*sample)) == packed


def packer(conn: Any) -> Any:
    """hiredis packs a command in a third of the time of redis-py's checked packer: used
    when it packs as the connection would."""
    if not hiredis_packs(conn):
        return lambda args: conn.pack_command(*args)
    pack = hiredis.pack_command
    return lambda args: [pack(args)]  # a list of chunks, as send_packed_command wants
