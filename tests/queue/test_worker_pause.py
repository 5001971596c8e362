"""Pause and resume with real workers (issue 27): a paused queue's idle worker starts
nothing, a restarted worker keeps the pause (it lives in Redis), and resume wakes the
workers at once; a paused task's jobs wait while the others run. On a real server and a
real Cluster."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import live_workers
from tests.keyed_tasks import SPANS
from tests.support.fixtures import Processes
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

EXPORT, PLAIN = "tests.keyed_tasks.export", "tests.keyed_tasks.plain"
QUIET = 0.5  # how long a paused worker is watched for a start that must not come


def run_worker(concurrency: int) -> None:
    Worker(["default"], concurrency=concurrency).run()


def ran() -> list[int]:
    return [json.loads(s)["n"] for s in get_redis().lrange(SPANS, 0, -1)]


@pytest.fixture
def queue(real_backend: Any, settings: Any) -> Any:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 5}}}
    get_redis().delete(SPANS)
    return get_queue("default")


def test_a_paused_queue_starts_nothing_across_a_restart_and_resume_wakes_it(
    queue: Any, processes: Processes
) -> None:
    queue.pause()
    first = processes.start(run_worker, 2)
    wait_for(lambda: len(live_workers()) == 1, what="the worker registered")
    queue.enqueue(PLAIN, [1, 0.0])
    time.sleep(QUIET)
    assert ran() == []
    first.terminate()  # SIGTERM: a clean stop
    first.join(10)
    processes.start(run_worker, 2)  # a new worker: the pause is in Redis
    queue.enqueue(PLAIN, [2, 0.0])
    time.sleep(QUIET)
    assert ran() == []
    assert queue.counts()["ready"] == 2
    resumed = time.monotonic()
    queue.resume()
    wait_for(lambda: sorted(ran()) == [1, 2], timeout=10, what="both jobs ran")
    assert time.monotonic() - resumed < 5  # woken, not found at a poll


def test_a_paused_tasks_jobs_wait_while_the_others_run(queue: Any, processes: Processes) -> None:
    queue.pause(task=EXPORT)
    for n in range(3):
        queue.enqueue(EXPORT, [7, n, 0.0])
    for n in range(10, 13):
        queue.enqueue(PLAIN, [n, 0.0])
    processes.start(run_worker, 4)
    wait_for(lambda: sorted(ran()) == [10, 11, 12], what="the other task's jobs ran")
    wait_for(lambda: queue.counts()["parked"] == 3, what="the paused task's jobs parked")
    time.sleep(QUIET)
    assert sorted(ran()) == [10, 11, 12]
    queue.resume(task=EXPORT)
    wait_for(lambda: sorted(ran()) == [0, 1, 2, 10, 11, 12], what="the paused jobs ran")
