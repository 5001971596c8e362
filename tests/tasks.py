"""Tasks the worker tests run; each records what it did in Redis, where every process sees it."""

from __future__ import annotations

import json
import os
import time

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

from django_redislock import get_redis

DONE = "test:done"
STARTED = "test:started"


@task()
def record(n: int) -> int:
    get_redis().rpush(DONE, json.dumps({"n": n, "at": time.time() * 1000}))
    return n


@task()
def slow(n: int, seconds: float) -> int:
    time.sleep(seconds)
    get_redis().rpush(DONE, json.dumps({"n": n, "at": time.time() * 1000}))
    return n


@task()
def tracked(n: int, seconds: float = 0.0) -> int:
    """Marks its start and its end with the worker's pid: a test can tell which process ran
    a job, and whether that process died in between."""
    client = get_redis()
    client.rpush(STARTED, json.dumps({"n": n, "pid": os.getpid(), "at": time.time() * 1000}))
    if seconds:
        time.sleep(seconds)
    client.rpush(DONE, json.dumps({"n": n, "pid": os.getpid(), "at": time.time() * 1000}))
    return n


@task()
def boom() -> None:
    raise ValueError("poison")


def not_a_task() -> None:
    raise AssertionError("must never run")


_HOARD: list[bytearray] = []


@task()
def hog(megabytes: int) -> int:
    """Keeps ``megabytes`` of memory in its process for good (a leak, for the tests of
    --max-memory), and records its pid as ``tracked`` does."""
    _HOARD.append(bytearray(megabytes * 1_048_576))
    for page in range(0, len(_HOARD[-1]), 4096):  # touched: resident, not just reserved
        _HOARD[-1][page] = 1
    get_redis().rpush(DONE, json.dumps({"n": -1, "pid": os.getpid(), "at": time.time() * 1000}))
    return megabytes
