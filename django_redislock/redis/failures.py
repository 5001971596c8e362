"""What a failed Redis command is raised as: ``RedisUnavailable`` for a server gone,
read-only (failing over) or a connection cut mid-reply; a Redis error reply as it is."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import redis
from redis.exceptions import ReadOnlyError

from ..exceptions import RedisUnavailable

UNAVAILABLE = (redis.ConnectionError, redis.TimeoutError)
UNREACHABLE = "Redis is unreachable"


def why_unreachable(exc: BaseException) -> BaseException:
    """What to say after "Redis is unreachable" for ``exc``: its cause when ``exc`` says
    that already (never "Redis is unreachable (Redis is unreachable (…))"), else itself."""
    if str(exc).startswith(UNREACHABLE) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


def mapped(conn: Any, exc: BaseException) -> BaseException:
    """What a command's failure on ``conn`` is raised as. A Redis error reply leaves the
    connection in step; anything else disconnects it (a failover made the server a replica,
    Redis went away, or the command was interrupted mid-reply)."""
    if isinstance(exc, redis.ResponseError) and not isinstance(exc, ReadOnlyError):
        return exc
    conn.disconnect()
    if isinstance(exc, ReadOnlyError):
        error: BaseException = RedisUnavailable(f"Redis is read-only, failing over? ({exc})")
    elif isinstance(exc, (*UNAVAILABLE, OSError)):
        error = RedisUnavailable(f"{UNREACHABLE} ({exc})")
    else:
        return exc
    error.__cause__ = exc
    return error


@contextlib.contextmanager
def unavailable_as_error() -> Iterator[None]:
    """Plain commands (a pipeline, a read) whose connection failed raise RedisUnavailable,
    as the scripts do. A decorator too."""
    try:
        yield
    except (*UNAVAILABLE, OSError) as exc:
        raise RedisUnavailable(f"{UNREACHABLE} ({exc})") from exc
