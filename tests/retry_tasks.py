"""Tasks the retry-policy tests run: each records its runs in Redis (where every process sees
them), under a key the test names."""

from __future__ import annotations

import time

from django_redislock import get_redis
from django_redislock.exceptions import RetryLater
from django_redislock.tasks import task

ERRORS = {
    "ValueError": ValueError,
    "RuntimeError": RuntimeError,
    "ZeroDivisionError": ZeroDivisionError,
    "KeyError": KeyError,
}


def runs_key(key: str) -> str:
    return f"test:runs:{key}"


def _run(key: str) -> int:
    """Record this run's start (server time, ms); returns how many runs there were."""
    seconds, micros = get_redis().time()
    return int(get_redis().rpush(runs_key(key), int(seconds) * 1000 + micros // 1000))


def run_times(key: str) -> list[int]:
    return [int(v) for v in get_redis().lrange(runs_key(key), 0, -1)]


@task()
def flaky(key: str, fails: int, error: str = "ValueError") -> int:
    """Fails its first ``fails`` runs with ``error``, then returns its run number."""
    n = _run(key)
    if n <= fails:
        raise ERRORS[error](f"run {n}")
    return n


@task()
def snoozing(key: str, times: int, delay: float) -> int:
    """Asks ``times`` times to run again after ``delay`` s, then returns its run number."""
    n = _run(key)
    if n <= times:
        raise RetryLater(delay)
    return n


@task(max_attempts=4, retry_backoff=0, retry_on=(ArithmeticError, RuntimeError))
def picky(key: str, error: str) -> int:
    """Always fails with ``error``; only ArithmeticError (and subclasses) and RuntimeError
    are retried."""
    n = _run(key)
    raise ERRORS[error](f"run {n}")


@task(max_attempts=3, retry_backoff=0.4, retry_backoff_max=10)
def backing_off(key: str) -> None:
    """Always fails: its retries wait 0.2-0.4 s, then 0.4-0.8 s."""
    n = _run(key)
    raise ValueError(f"run {n}")


@task(max_attempts=9, retry_backoff=0, time_limit=0.3)
def limited(key: str, seconds: float) -> int:
    n = _run(key)
    time.sleep(seconds)
    return n


@task(max_attempts=1, retry_backoff=0)
def once(key: str, fails: int) -> int:
    """As ``flaky``, but its task allows a single attempt."""
    n = _run(key)
    if n <= fails:
        raise ValueError(f"run {n}")
    return n


class Gateway:
    class Busy(Exception):
        """An exception class nested in a class (as a model's DoesNotExist is)."""


@task(max_attempts=3, retry_backoff=0, retry_on=(Gateway.Busy,))
def nested_retry_on(key: str, fails: int) -> int:
    """Fails its first ``fails`` runs with ``Gateway.Busy``, which it retries."""
    n = _run(key)
    if n <= fails:
        raise Gateway.Busy(f"run {n}")
    return n


@task(max_attempts=1)
def stalls_once(key: str) -> None:
    """Records its run, then sleeps until its worker is killed; one attempt allowed."""
    _run(key)
    time.sleep(120)


@task(max_attempts=3)
def stalls_thrice(key: str) -> None:
    """As ``stalls_once``, with three attempts allowed."""
    _run(key)
    time.sleep(120)


@task(max_attempts=1)
def snoozing_once(key: str, times: int, delay: float) -> int:
    """As ``snoozing``, with a single attempt allowed: RetryLater runs do not use it up."""
    n = _run(key)
    if n <= times:
        raise RetryLater(delay)
    return n


@task(
    max_attempts=8,
    retry_backoff=2,
    retry_backoff_max=600,
    retry_on=(ConnectionError,),
    time_limit=30,
    expires=3600,
    unique_for=60,
    debounce=None,
    unique_by_args=False,
    concurrency_key=None,
    concurrency_limit=1,
    rate_key=None,
    rate=None,
)
def charge(order_id: int) -> int:
    """The example of DESIGN's "Per-task options and retry policy"."""
    return order_id
