"""Benchmarks; an installed app while ``benchmarks/queue.py`` runs, so that the queue
worker will run the tasks in ``benchmarks.queue_tasks``."""

from __future__ import annotations

import os
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
