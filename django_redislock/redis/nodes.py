"""The independent masters of a ``Redlock``: their clients, and one command sent to every
node at once (each is sent before any reply is read, so a round costs the slowest node's
round trip, and a node that is down or stalled only loses its vote)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .clients import URL_SCHEMES, get_redis
from .sentinel import is_sentinel_url, master_client

# Connect and read timeout of a URL node, and the longest a round waits for replies: a node
# slower than this loses its vote instead of eating every holder's validity. A healthy node
# runs a script in well under a millisecond, so only a dead or stalled one trips it. (All the
# reads of a round share it; connecting does not: each stalled node that needs a new
# connection costs up to this in turn.)
NODE_TIMEOUT = 0.5
_FAILED = (redis.RedisError, OSError)  # what a node shows in place of a reply when it fails
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, OSError)

# URL node clients of this process (cache aliases are kept by ``get_redis``, which drops
# them when CACHES changes, while a URL names its server whatever the settings).
_clients: dict[str, Any] = {}
os.register_at_fork(after_in_child=_clients.clear)


def node_client(node: str) -> Any:
    """The client of one Redlock node: a cache alias or a Redis URL."""
    if not node.startswith(URL_SCHEMES):
        return get_redis(node)  # kept per process, dropped when CACHES changes
    client = _clients.get(node)
    if client is None:
        # No connect retries (redis.Redis() defaults to ten, with backoff): a dead node should
        # cost one refused connect, not hold up the round for everybody.
        timeouts: dict[str, Any] = {
            "socket_connect_timeout": NODE_TIMEOUT,
            "socket_timeout": NODE_TIMEOUT,
            "retry": Retry(NoBackoff(), 0),
        }
        if is_sentinel_url(node):  # a node may be a Sentinel-managed master
            client = master_client(node, **timeouts)
        else:
            client = redis.Redis.from_url(node, **timeouts)
        client = _clients.setdefault(node, client)
    return client


def _give_back(pool: Any, conn: Any, reply: Any) -> None:
    if isinstance(reply, _FAILED) and not isinstance(reply, redis.ResponseError):
        conn.disconnect()  # failed mid-command: a reply may still be on its way
    pool.release(conn)


def fan_out(clients: Sequence[Any], commands: Sequence[tuple[Any, ...] | None]) -> list[Any]:
    """Send each node its command (None: nothing), all before reading any reply. A reply is
    the node's answer, or the error that cost it its vote in this round."""
    replies: list[Any] = [None] * len(clients)
    out: list[tuple[int, Any, Any]] = []  # (node, pool, connection) owing a reply
    try:
        for i, command in enumerate(commands):
            if command is None:
                continue
            pool = clients[i].connection_pool
            try:
                conn = pool.get_connection()
            except _FAILED as exc:
                replies[i] = exc
                continue
            out.append((i, pool, conn))
            try:
                conn.send_packed_command(conn.pack_command(*command), check_health=False)
            except _FAILED as exc:
                replies[i] = exc
                _give_back(*out.pop()[1:], exc)
        end = time.monotonic() + NODE_TIMEOUT
        while out:
            i, pool, conn = out[-1]
            try:
                replies[i] = conn.read_response(timeout=max(0.0, end - time.monotonic()))
            except _FAILED as exc:
                replies[i] = exc
            _give_back(*out.pop()[1:], replies[i])
    finally:
        for _, pool, conn in out:  # interrupted: these replies were never read
            conn.disconnect()
            pool.release(conn)
    return replies
