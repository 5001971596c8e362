"""What a process counts once ``REDISLOCK['METRICS']`` is True, seen through the view: lock
acquisitions (and how long each waited), busy and lost locks, job runs by outcome and their
durations. With METRICS False nothing is counted (no receiver is connected)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from django_redislock import AsyncLock, Lock, get_queue
from django_redislock.exceptions import LockNotOwned
from django_redislock.queue.worker.loop import Worker
from django_redislock.signals import lock_acquired
from tests.support.counts import job_counts
from tests.support.fixtures import Backend

from .scraping import TOKEN, Samples, scrape, summed

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]


def counting(settings: Any, **more: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "METRICS": True, "METRICS_TOKEN": TOKEN, **more}


def grown(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return summed(after, name, **labels) - summed(before, name, **labels)


def connected() -> bool:
    """Whether the metrics' receiver of ``lock_acquired`` is connected (by its uid)."""
    return any(entry[0][0] == "django_redislock.metrics" for entry in lock_acquired.receivers)


def test_lock_events_and_waits_are_counted(redis_backend: Backend, settings: Any) -> None:
    counting(settings)
    before = scrape()
    with Lock("metrics:free", ttl=5):
        pass
    held, seen_busy = threading.Event(), threading.Event()

    def hold() -> None:
        with Lock("metrics:busy", ttl=5):
            held.set()
            seen_busy.wait(30)  # (not a time: a stalled test would find it free)
            time.sleep(0.2)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    assert not Lock("metrics:busy", timeout=0).acquire()  # busy
    seen_busy.set()
    waiter = Lock("metrics:busy", ttl=5)
    assert waiter.acquire(timeout=5)  # handed over when the holder releases
    holder.join()
    assert Lock.force_release("metrics:busy")
    with pytest.raises(LockNotOwned):
        waiter.release()  # found lost

    async def take() -> None:
        async with AsyncLock("metrics:async", ttl=5):
            pass

    asyncio.run(take())
    after = scrape()

    def grew(name: str, **labels: str) -> float:
        return grown(before, after, name, **labels)

    assert grew("redislock_lock_acquisitions_total", kind="Lock") == 3
    assert grew("redislock_lock_acquisitions_total", kind="AsyncLock") == 1
    assert grew("redislock_lock_wait_seconds_count", kind="AsyncLock") == 1
    assert grew("redislock_lock_busy_total", kind="Lock") == 1
    assert grew("redislock_lock_lost_total", kind="Lock") == 1
    assert grew("redislock_lock_wait_seconds_count", kind="Lock") == 3
    assert grew("redislock_lock_wait_seconds_bucket", kind="Lock", le="0.05") == 2
    assert grew("redislock_lock_wait_seconds_bucket", kind="Lock", le="+Inf") == 3
    assert 0.1 < grew("redislock_lock_wait_seconds_sum", kind="Lock") < 5  # not the TTL


def test_nothing_is_counted_without_metrics(fake: Backend, settings: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "METRICS_TOKEN": TOKEN}
    assert not connected()
    before = scrape()
    with Lock("metrics:quiet", ttl=5):
        pass
    assert grown(before, scrape(), "redislock_lock_acquisitions_total", kind="Lock") == 0
    counting(settings)  # switched on by changing the setting (override_settings included)
    assert connected()


def test_job_runs_are_counted_by_outcome(fake: Backend, settings: Any) -> None:
    counting(settings, QUEUES={"default": {"MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 60}})
    queue = get_queue()
    before = scrape()
    queue.enqueue_many([{"task": "tests.tasks.record", "args": [n]} for n in range(3)])
    queue.enqueue("tests.tasks.boom")  # fails: retried in 60 s
    queue.enqueue("tests.tasks.boom", meta={"time_limit": 5})
    Worker(["default"], burst=True).run()
    after = scrape()
    assert (
        grown(before, after, "redislock_job_runs_total", queue="default", outcome="succeeded") == 3
    )
    assert grown(before, after, "redislock_job_runs_total", queue="default", outcome="retried") == 2
    assert grown(before, after, "redislock_job_duration_seconds_count", queue="default") == 5
    # by task too: a registered task's path, never an id or a path that names no task
    record, boom = "tests.tasks.record", "tests.tasks.boom"
    assert grown(before, after, "redislock_job_runs_total", task=record, outcome="succeeded") == 3
    assert grown(before, after, "redislock_job_runs_total", task=boom, outcome="retried") == 2
    assert grown(before, after, "redislock_job_duration_seconds_count", task=boom) == 2
    assert queue.counts() == job_counts(scheduled=2)


def test_retried_snoozed_and_dead_runs_follow_the_tasks_options(
    fake: Backend, settings: Any
) -> None:
    """RetryLater runs are counted apart ("snoozed"); a task's max_attempts and retry_on
    decide between "retried" and "dead" as the worker does."""
    counting(settings, QUEUES={"default": {"MAX_ATTEMPTS": 5, "RETRY_BACKOFF": 60}})
    queue = get_queue()
    before = scrape()
    queue.enqueue("tests.retry_tasks.snoozing", args=["m-snooze", 1, 60])  # snoozed
    queue.enqueue("tests.retry_tasks.once", args=["m-once", 9])  # max_attempts 1: dead
    queue.enqueue("tests.retry_tasks.picky", args=["m-picky", "ValueError"])  # not in retry_on
    queue.enqueue("tests.retry_tasks.flaky", args=["m-flaky", 9])  # retried (queue: 5)
    Worker(["default"], burst=True).run()
    after = scrape()

    def runs(outcome: str) -> float:
        return grown(before, after, "redislock_job_runs_total", queue="default", outcome=outcome)

    assert (runs("snoozed"), runs("dead"), runs("retried")) == (1, 2, 1)
    assert queue.counts() == job_counts(scheduled=2, dead=2)
