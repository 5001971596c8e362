"""Tasks the worker tests run; each records what it did in Redis, where every process sees it."""

from __future__ import annotations

import json
import time

from django_tasks import task

from django_redislock import get_redis

DONE = "test:done"


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
def boom() -> None:
    raise ValueError("poison")


def not_a_task() -> None:
    raise AssertionError("must never run")
