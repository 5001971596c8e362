"""The jobs ``benchmarks/queue.py`` runs, the same for every library: a no-op taking a
small int, and ``stamp``, which pushes ``time.time() - since`` onto a Redis list (the time
from ``since`` until the job started, measured in the worker process).

django-redislock runs only ``@task`` objects of an installed app; RQ runs plain functions
by dotted path; huey registers the same functions on a huey instance (``huey_tasks``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from django_tasks import task

STAMPS = "bench:stamps"

_url = ""
_client: tuple[int, redis.Redis] | None = None


def configure(url: str) -> None:
    """Where ``stamp`` writes; set in the parent before any worker process is forked."""
    global _url, _client
    _url, _client = url, None


def _redis() -> redis.Redis:
    global _client
    if _client is None or _client[0] != os.getpid():  # a forked worker makes its own
        _client = (os.getpid(), redis.Redis.from_url(_url))
    return _client[1]


def noop(n: int) -> None:
    return None


def stamp(since: float) -> None:
    now = time.time()
    _redis().rpush(STAMPS, now - since)


@task()
def redislock_noop(n: int) -> None:
    return None


def redislock_noop_with_options() -> Any:
    """``redislock_noop`` with per-task options: the worker's (kept in each job's metadata)
    and ``expires``, decided at enqueue (its jobs go through the queue's enqueue with
    options). Made on first use: django-redislock's own ``task`` takes them on every Django."""
    from django_redislock.tasks import task as redislock_task

    global _with_options
    if _with_options is None:
        _with_options = redislock_task(
            max_attempts=5,
            retry_backoff=2,
            retry_on=(ConnectionError,),
            time_limit=30,
            expires=3600,
        )(redislock_noop.func)
    return _with_options


_with_options: Any = None


@task()
def redislock_stamp(since: float) -> None:
    stamp(since)


# A workflow's hand-off (``benchmarks/workflows.py``): a step pushes the time it ended, the
# step after it the time it started.
ENDS, STARTS = "bench:ends", "bench:starts"


def end_mark() -> int:
    _redis().rpush(ENDS, time.time())
    return 1


def start_mark(*ignored: Any) -> None:  # (huey's then() passes the result before)
    _redis().rpush(STARTS, time.time())


@task()
def redislock_end_mark() -> int:
    return end_mark()


@task()
def redislock_start_mark() -> None:
    start_mark()


def huey_tasks(huey: Any) -> tuple[Any, Any]:
    """``noop`` and ``stamp`` registered on ``huey`` (each instance has its own registry)."""
    return huey.task()(noop), huey.task()(stamp)


@task()
def redislock_cpu(n: int) -> int:
    """About 10 ms of pure Python arithmetic (it holds the GIL throughout)."""
    total = 0
    for i in range(n):
        total += i * i % 7
    return total
