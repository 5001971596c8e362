"""The worker registry: which workers are alive, as each describes itself (host, pid,
queues, running jobs, counts), for the admin's Workers page.

Its keys are built here and nowhere else: ``<prefix>:{W}:workers``, a sorted set of worker
ids scored by when their entry expires (epoch ms), and ``<prefix>:{W}:w:<id>``, a worker's
description as JSON, expiring at the same time. An entry lasts three beats, so a worker that
was killed drops out by itself.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from ...conf import conf
from ...exceptions import RedisUnavailable
from ...redis.clients import UNAVAILABLE, get_redis
from .background import Background, periodic

logger = logging.getLogger("django_redislock.queue.registry")  # the name users' LOGGING knows
START_TRIES = 3  # of the first heartbeat, before the worker gives up starting


def registry_key() -> str:
    return f"{conf.KEY_PREFIX}:{{W}}:workers"


def entry_key(worker_id: str) -> str:
    return f"{conf.KEY_PREFIX}:{{W}}:w:{worker_id}"


class Heartbeat:
    """A worker's entry in the registry: written at ``start`` (raising RedisUnavailable when
    Redis cannot be reached) and then every ``every`` seconds, removed at ``stop``."""

    def __init__(
        self, client: Any, worker_id: str, every: float, describe: Callable[[], dict[str, Any]]
    ) -> None:
        self.client, self.worker_id = client, worker_id
        self.every = every
        self.describe = describe
        beating = periodic(self.every, self.beat, "Worker heartbeat")
        self.thread = Background("redislock-heartbeat", beating, daemon=True)

    def start(self) -> None:
        # Fails fast, and clearly, when Redis is unreachable at start; a connection cut as it
        # opened (a CLIENT KILL, a proxy's restart) is tried again first, a few times.
        for attempt in range(1, START_TRIES + 1):
            try:
                self.beat()
                break
            except RedisUnavailable:
                if attempt == START_TRIES:
                    raise
                time.sleep(0.1 * attempt)
        self.thread.start()

    def beat(self) -> None:
        now = time.time()
        ttl_ms = max(1000, round(self.every * 3000))
        pipe = self.client.pipeline(transaction=False)
        pipe.set(entry_key(self.worker_id), json.dumps({**self.describe(), "beat": now}), px=ttl_ms)
        pipe.zadd(registry_key(), {self.worker_id: now * 1000 + ttl_ms})
        pipe.zremrangebyscore(registry_key(), "-inf", now * 1000)
        try:
            pipe.execute()
        except UNAVAILABLE as exc:
            raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc

    def stop(self) -> None:
        self.thread.stop()
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.delete(entry_key(self.worker_id))
            pipe.zrem(registry_key(), self.worker_id)
            pipe.execute()
        except Exception:  # Redis away at exit: the entry expires by itself
            logger.info("Could not deregister worker %s; its entry expires.", self.worker_id)


def live_workers(using: str | None = None) -> list[dict[str, Any]]:
    """The workers that heartbeat recently, as they describe themselves; an entry that is not
    a JSON object is ``{"id": ..., "unreadable": <what it holds>}``."""
    client = get_redis(using)
    ids = client.zrangebyscore(registry_key(), time.time() * 1000, "+inf")
    if not ids:
        return []
    names = [i.decode(errors="replace") for i in ids]
    workers: list[dict[str, Any]] = []
    for name, value in zip(names, client.mget([entry_key(n) for n in names]), strict=True):
        if value is None:
            continue
        try:
            info = json.loads(value)
        except ValueError as exc:  # not JSON, or not UTF-8: written by something else
            info = f"not JSON ({exc})"
        if not isinstance(info, dict):  # shown as such, never an error for the others
            info = {"id": name, "unreadable": f"{info!s:.200}"}
        workers.append(info)
    return workers
