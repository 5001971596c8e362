"""Benchmarks; an installed app while ``benchmarks/queue.py`` runs, so that the queue
worker will run the tasks in ``benchmarks.queue_tasks``."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
from collections.abc import Iterator
from typing import Any


def redis_url() -> tuple[str, Any]:
    """``REDIS_URL`` when set, else a ``redis-server`` of the benchmark's own on a free port:
    the URL, and that server (None for ``REDIS_URL``), to stop at the end."""
    url = os.environ.get("REDIS_URL")
    if url:
        return url, None
    from tests.support.servers import RedisServer

    server = RedisServer().start()
    return server.url, server


@contextlib.contextmanager
def queue_redis(versions_of: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """For a queue benchmark: the Redis (``redis_url``) with Django set up on it
    (``queue.setup``), the machine's description printed; emptied and stopped at the end.
    Yields (url, a client)."""
    import redis

    from benchmarks import queue as queue_bench

    url, server = redis_url()
    queue_bench.setup(url)
    r = redis.Redis.from_url(url)
    versions = "".join(f"; {p} {importlib.metadata.version(p)}" for p in versions_of)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Redis {r.info('server')['redis_version']}; Python {sys.version.split()[0]}"
        f"{versions}; {os.cpu_count()} CPUs, load average {load}\n"
    )
    try:
        yield url, r
    finally:
        r.flushdb()
        if server is not None:
            server.cleanup()
