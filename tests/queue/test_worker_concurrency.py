"""Keyed concurrency limits with real workers (issue 27): worker processes of several
threads each drain jobs of a few keys; every run records its start and end in Redis, and
the overlaps of each key's runs are counted here, outside the workers. A SIGKILLed worker's
permit comes back when its lease runs out. On a real server and a real Cluster."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.worker.loop import Worker
from tests.keyed_tasks import SPANS
from tests.support.fixtures import Processes
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

EXPORT, PLAIN = "tests.keyed_tasks.export", "tests.keyed_tasks.plain"


def run_worker(concurrency: int) -> None:
    Worker(["default"], concurrency=concurrency).run()


def spans() -> list[dict[str, Any]]:
    return [json.loads(s) for s in get_redis().lrange(SPANS, 0, -1)]


def most_at_once(runs: list[dict[str, Any]]) -> int:
    """The most runs that overlapped in time."""
    edges = sorted([(r["start"], 1) for r in runs] + [(r["end"], -1) for r in runs])
    now = most = 0
    for _, step in edges:  # an end before a start at the same instant
        now += step
        most = max(most, now)
    return most


@pytest.fixture
def queue(real_backend: Any, settings: Any) -> Any:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 2, "MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 0.01}},
    }
    get_redis().delete(SPANS)
    return get_queue("default")


def test_three_workers_of_four_threads_never_run_more_than_the_limit_of_a_key(
    queue: Any, processes: Processes
) -> None:
    for n in range(8):
        for user in (1, 2, 3):
            queue.enqueue(EXPORT, [user, n], concurrency_key="export:{0}", concurrency_limit=2)
    for n in range(12):
        queue.enqueue(PLAIN, [n])
    for _ in range(3):
        processes.start(run_worker, 4)
    wait_for(lambda: len(spans()) == 36, timeout=60, what="every job ran")
    runs = spans()
    for user in (1, 2, 3):
        mine = [r for r in runs if r["user"] == user]
        assert sorted(r["n"] for r in mine) == list(range(8))
        assert most_at_once(mine) <= 2, f"user {user}'s exports overlapped beyond the limit"
    assert len({r["pid"] for r in runs}) > 1  # (several workers took part)
    wait_for(lambda: queue.counts()["running"] == 0, what="every job acknowledged")
    assert queue.client.zcard(queue.keys.parked) == 0
    assert queue.client.zcard(queue.keys.held) == 0


def test_a_killed_workers_permit_comes_back_after_its_lease(
    queue: Any, processes: Processes
) -> None:
    queue.enqueue(EXPORT, [9, 0, 30.0], concurrency_key="solo", concurrency_limit=1)
    victim = processes.start(run_worker, 1)
    wait_for(lambda: queue.counts()["running"] == 1, what="the long job started")
    queue.enqueue(EXPORT, [9, 1, 0.0], concurrency_key="solo", concurrency_limit=1)
    other = processes.start(run_worker, 1)
    wait_for(lambda: queue.client.zcard(queue.keys.parked) == 1, what="the second job parked")
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(5)
    killed_at = time.monotonic()
    wait_for(lambda: any(r["n"] == 1 for r in spans()), timeout=30, what="the parked job ran")
    assert time.monotonic() - killed_at < 15  # within its lease (2 s) and a fetch or so
    assert other.is_alive()
