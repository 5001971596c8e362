"""Benchmarks; an installed app while ``benchmarks/queue.py`` runs, so that the queue
worker will run the tasks in ``benchmarks.queue_tasks``."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import sys
from collections.abc import Iterator
from typing import Any


def command_line(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """A benchmark's options: its docstring as the help, and ``--quick``, which does
    what ``quick`` says."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help=quick)
    return parser


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
def benchmark_redis(flush: bool = False) -> Iterator[str]:
    """The URL of ``redis_url`` for the length of a benchmark; its own server is stopped at
    the end, after the database is emptied when ``flush``."""
    url, server = redis_url()
    try:
        yield url
    finally:
        recording = sys.modules.get("django_redislock.history.recording")
        if recording is not None:  # the task history its jobs counted, sent while Redis is up
            recording.RECORDER.flush()
        if flush:
            import redis

            redis.Redis.from_url(url).flushdb()
        if server is not None:
            server.cleanup()


def machine(r: Any, url: str | None = None, *versions: str) -> str:
    """The line a report starts with: Redis's version (and ``url``), Python's, ``versions``
    of other software, and the CPUs with their load."""
    redis_at = f"Redis {r.info('server')['redis_version']}" + (f" at {url}" if url else "")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    cpus = f"{os.cpu_count()} CPUs, load average {load}"
    return "; ".join([redis_at, f"Python {sys.version.split()[0]}", *versions, cpus])


@contextlib.contextmanager
def queue_redis(versions_of: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """For a queue benchmark: the Redis (``redis_url``) with Django set up on it
    (``queue.setup``), the machine's description printed; emptied and stopped at the end.
    Yields (url, a client)."""
    import redis

    from benchmarks import queue as queue_bench

    with benchmark_redis(flush=True) as url:
        queue_bench.setup(url)
        r = redis.Redis.from_url(url)
        versions = [f"{p} {importlib.metadata.version(p)}" for p in versions_of]
        print(machine(r, None, *versions) + "\n")
        yield url, r
