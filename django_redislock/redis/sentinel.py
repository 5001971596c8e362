"""Redis Sentinel: the ``redis+sentinel://`` URL, and clients of the master it names.

``redis+sentinel://[[username]:password@]host[:port][,host[:port]...]/service_name[/db]``
(``rediss+sentinel://`` for TLS to the master) lists the sentinels (port 26379 by default),
the name they monitor the master under, and the database. The credentials are the Redis
master's, as in a ``redis://`` URL; sentinels are asked without any (use a django-redis
Sentinel cache with ``SENTINEL_KWARGS`` for sentinels that require a password).

The client asks the sentinels for the master when it connects, and again whenever a
connection to it fails or finds it demoted to a replica, so after a failover the next
command goes to the new master.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis.asyncio.sentinel
import redis.sentinel
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

SCHEMES = ("redis+sentinel://", "rediss+sentinel://")
DEFAULT_PORT = 26379
# Sentinels answer at once or are down: a short timeout and no retries, so that one dead
# sentinel costs little on each discovery (the next one is asked).
SENTINEL_TIMEOUT = 0.5
SERVICE_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
HOST_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)(?::(\d{1,5}))?$")


@dataclass(frozen=True)
class SentinelURL:
    """A parsed ``redis+sentinel://`` URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False

    def master_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"db": self.db, "username": self.username}
        kwargs["password"] = self.password
        if self.ssl:
            kwargs["ssl"] = True
        return kwargs


def is_sentinel_url(value: str) -> bool:
    return value.startswith(SCHEMES)


def parse(url: str) -> SentinelURL:
    """Parse ``url``; ValueError saying what is wrong when it is malformed."""
    if not is_sentinel_url(url):
        raise ValueError(f"{url!r} does not start with {' or '.join(SCHEMES)}.")
    scheme, rest = url.split("://", 1)
    if "?" in rest or "#" in rest:
        raise ValueError(f"{_safe(url)!r}: a Sentinel URL takes no query or fragment.")
    netloc, _, path = rest.partition("/")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    sentinels = tuple(_address(host, url) for host in hosts.split(","))
    parts = path.split("/") if path else []
    if not parts or len(parts) > 2 or not SERVICE_RE.match(parts[0]):
        raise ValueError(
            f"{_safe(url)!r} must name the monitored master after the sentinels: "
            "…host:port/service_name[/db]."
        )
    if len(parts) == 2 and not parts[1].isdigit():
        raise ValueError(f"{_safe(url)!r}: the database {parts[1]!r} is not a number.")
    return SentinelURL(
        sentinels=sentinels,
        service=parts[0],
        db=int(parts[1]) if len(parts) == 2 else 0,
        username=unquote(username) or None,
        password=unquote(password) or None,
        ssl=scheme == "rediss+sentinel",
    )


def _address(host: str, url: str) -> tuple[str, int]:
    match = HOST_RE.match(host)
    port = int(match.group(2) or DEFAULT_PORT) if match else 0
    if match is None or not 0 < port < 65536:
        raise ValueError(f"{_safe(url)!r}: {host!r} is not a sentinel's host[:port].")
    return match.group(1).strip("[]"), port


def _safe(url: str) -> str:
    """``url`` without its password, for messages."""
    return re.sub(r"://([^:@/]*):[^@/]*@", r"://\1:***@", url)


def _sentinel_kwargs(retry: type[Any]) -> dict[str, Any]:
    return {
        "socket_timeout": SENTINEL_TIMEOUT,
        "socket_connect_timeout": SENTINEL_TIMEOUT,
        "retry": retry(NoBackoff(), 0),
    }


def master_client(url: str, **kwargs: Any) -> Any:
    """A client of the master that the sentinels of ``url`` name (found again after a
    failover). ``kwargs``: connection settings for the master's connections."""
    where = parse(url)
    sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        where.sentinels, sentinel_kwargs=_sentinel_kwargs(Retry)
    )
    return sentinel.master_for(where.service, **where.master_kwargs(), **kwargs)  # type: ignore[no-untyped-call]


def async_master_client(url: str, **kwargs: Any) -> Any:
    """``master_client`` for asyncio."""
    where = parse(url)
    sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        where.sentinels, sentinel_kwargs=_sentinel_kwargs(AsyncRetry)
    )
    return sentinel.master_for(where.service, **where.master_kwargs(), **kwargs)


def async_twin(pool: redis.sentinel.SentinelConnectionPool, portable: Collection[str]) -> Any:
    """An asyncio client of the master behind a sync Sentinel pool (a django-redis Sentinel
    cache's): the same sentinels and service, with the connection settings (of the sentinels
    and of the master) named in ``portable``, those that mean the same to asyncio."""
    manager = pool.sentinel_manager
    addresses = []
    for node in manager.sentinels:
        node_kwargs = node.connection_pool.connection_kwargs
        addresses.append((node_kwargs["host"], node_kwargs["port"]))
    sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        addresses,
        min_other_sentinels=manager.min_other_sentinels,
        sentinel_kwargs={k: v for k, v in manager.sentinel_kwargs.items() if k in portable},
    )
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k in portable}
    return sentinel.master_for(pool.service_name, **kwargs)
