"""Tasks that misbehave, for the worker's attack tests: they kill their own process, exit,
or raise what ``except Exception`` does not catch."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

from django_redislock import get_redis

from .tasks import DONE


class Custom(BaseException):
    pass


@task()
def quick(n: int) -> int:
    get_redis().rpush(DONE, json.dumps({"n": n, "pid": os.getpid(), "at": time.time()}))
    return n


@task()
def noop(n: int) -> int:
    return n


@task()
def kill_worker() -> None:
    """What an OOM kill or a segfault does to the worker running the job."""
    os.kill(os.getpid(), signal.SIGKILL)


@task()
def raise_it(kind: str) -> None:
    if kind == "exit0":
        sys.exit(0)
    if kind == "exit3":
        raise SystemExit(3)
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "cancelled":
        raise asyncio.CancelledError
    if kind == "custom":
        raise Custom("custom base exception")
    raise ValueError(kind)


@task()
async def raise_async(kind: str) -> None:
    await asyncio.sleep(0)
    raise_it.call(kind)
