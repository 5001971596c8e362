"""``get_queue(name)``: a reliable delayed job queue on Redis (at-least-once delivery)."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..conf import conf
from ..redis.clients import get_redis, run_script
from ..redis.scripts import LuaScript
from .arguments import MAX_DELAY
from .consuming import Consuming
from .jobs import Job, JobState
from .joining import Joining
from .keys import QueueKeys
from .lua import MAX_BATCH
from .operations import CANCELLABLE, Operations
from .pausing import Pausing
from .producing import Producing
from .settling import Settling

__all__ = ["MAX_BATCH", "MAX_DELAY", "Job", "Queue", "get_queue"]


class Queue(Producing, Consuming, Settling, Pausing, Joining, Operations):
    """A named queue from ``REDISLOCK['QUEUES']``; docs/reference/queue.rst has the whole API."""

    def __init__(self, name: str, using: str | None = None) -> None:
        queues = conf.QUEUES
        if name not in queues:
            raise ImproperlyConfigured(
                f"Unknown queue {name!r}: add it to REDISLOCK['QUEUES'] (configured: "
                f"{', '.join(sorted(queues)) or 'none'})."
            )
        options = queues[name]
        self.name = name
        self.using = using
        self.lease = float(options["LEASE"])
        self.max_attempts = int(options["MAX_ATTEMPTS"])
        self.retry_backoff = float(options["RETRY_BACKOFF"])
        self.result_ttl = float(options["RESULT_TTL"])
        self.on_commit = bool(options["ON_COMMIT"])
        self.eager = bool(options["EAGER"])
        self.keys = QueueKeys(conf.KEY_PREFIX, name)
        self.base = self.keys.base
        self.client = get_redis(using)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    def other(self, name: str) -> Queue:
        """Queue ``name``, on the same Redis connection setting as this one."""
        return Queue(name, self.using)

    def key(self, suffix: str) -> str:
        """A raw key of this queue, for tests and debugging; the code names its keys
        through ``keys``."""
        return self.base + suffix

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run a queue script: the fixed keys, then ``keys`` (every one shares the queue's
        hash tag, so the script runs on Redis Cluster)."""
        return run_script(self.client, script, (*self.keys.fixed, *keys), args)

    def cancel(self, job_id: str, score: int | None = None, *, by: str | None = None) -> bool:
        """Delete a ready or scheduled job; with ``score``, only if still due at that time.
        A running job is asked to stop (``by``: who asks, kept with it; default this host
        and process): its worker raises ``JobCancelled`` in it at its next lease renewal,
        and it ends dead as cancelled, never run again. False when there was nothing to
        cancel."""
        if score is not None:
            return self._cancel(job_id, int(score), CANCELLABLE)
        return self._cancel(job_id, "", CANCELLABLE + JobState.RUNNING.letter, asker(by))

    def stop(self, job_id: str, *, by: str | None = None) -> bool:
        """Ask a running job to stop, as ``cancel`` does, but only a running one: False when
        the job is not running (any more), and then nothing is done."""
        return self._cancel(job_id, "", JobState.RUNNING.letter, asker(by))


def get_queue(name: str = "default", using: str | None = None) -> Queue:
    """The queue ``name`` from ``REDISLOCK['QUEUES']``."""
    if not isinstance(name, str):
        raise TypeError(f"Queue name must be a str, not {type(name).__name__}.")
    return Queue(name, using)


def asker(by: str | None) -> str:
    """Who asks a running job to stop: ``by``, checked, or this host and process."""
    who = by if by is not None else f"{socket.gethostname()} pid {os.getpid()}"
    if not isinstance(who, str) or not who or "|" in who or len(who) > 200:
        raise ValueError("by must be a non-empty str of at most 200 characters, no '|'.")
    return who
