"""Tasks for the time-limit tests: each records in Redis what it did (where every process
sees it), its ``finally`` blocks included."""

from __future__ import annotations

import asyncio
import time

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

from django_redislock import get_redis
from django_redislock.exceptions import JobTimeLimitExceeded

CLEANED = "test:limits:cleaned"  # a finally block ran
FINISHED = "test:limits:finished"  # ran to its end
SWALLOWED = "test:limits:swallowed"


def _loop_until(end: float) -> None:
    while time.monotonic() < end:  # Python code between short sleeps: interruptible
        time.sleep(0.005)


@task()
def spin(n: int, seconds: float) -> int:
    """Sleeps in a Python loop for ``seconds``."""
    try:
        _loop_until(time.monotonic() + seconds)
        get_redis().rpush(FINISHED, n)
        return n
    finally:
        get_redis().rpush(CLEANED, n)


@task()
def busy(n: int, seconds: float) -> int:
    """Busy for ``seconds`` (no sleep): ends right at a limit of about as long."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    get_redis().rpush(FINISHED, n)
    return n


@task()
def stubborn(n: int, seconds: float) -> int:
    """Swallows JobTimeLimitExceeded and runs on for ``seconds`` in all."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            _loop_until(end)
        except JobTimeLimitExceeded:
            get_redis().rpush(SWALLOWED, n)
    get_redis().rpush(FINISHED, n)
    return n


@task()
async def asleep(n: int, seconds: float) -> int:
    try:
        await asyncio.sleep(seconds)
        get_redis().rpush(FINISHED, n)
        return n
    finally:
        get_redis().rpush(CLEANED, n)


@task()
def deaf(n: int, seconds: float) -> int:
    """Swallows whatever is raised in it (a cancel too) and runs on for ``seconds`` in all,
    then returns as if nothing happened."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            _loop_until(end)
        except BaseException:
            get_redis().rpush(SWALLOWED, n)
    get_redis().rpush(FINISHED, n)
    return n
