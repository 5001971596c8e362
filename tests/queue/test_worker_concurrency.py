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
from django_redislock.queue.worker.registry import live_workers
from tests import keyed_tasks
from tests.keyed_tasks import SPANS
from tests.support.counts import job_counts
from tests.support.fixtures import Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_for

from .test_worker_chaos import command_worker

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
    for _ in range(3):
        processes.start(run_worker, 4)
    # (all three waiting for jobs first: on a busy machine the first would take them all)
    wait_for(lambda: len(live_workers()) == 3, what="the three workers registered")
    for n in range(8):
        for user in (1, 2, 3):
            queue.enqueue(EXPORT, [user, n], concurrency_key="export:{0}", concurrency_limit=2)
    for n in range(12):
        queue.enqueue(PLAIN, [n])
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


def most_in_a_window(times: list[float], period: float) -> int:
    """The most of ``times`` within any window [t, t + period)."""
    times = sorted(times)
    return max(
        (sum(1 for u in times[i:] if u < t + period) for i, t in enumerate(times)), default=0
    )


def test_the_rate_of_a_key_holds_in_every_window(
    queue: Any, processes: Processes, settings: Any
) -> None:
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}
    }
    # through the Tasks API: the task's rate_key and rate
    a_ids = [keyed_tasks.charge.enqueue("acct_a", n).id for n in range(9)]
    b_ids = [keyed_tasks.charge.enqueue("acct_b", n).id for n in range(100, 103)]
    for _ in range(3):
        processes.start(run_worker, 4)
    wait_for(lambda: len(spans()) == 12, timeout=60, what="every charge ran")
    # As Redis granted each start (epoch ms, the server's clock), not as the runs saw it: a
    # thread that stalls before it reads its clock would bunch its start with the next ones.
    runs = [queue.get(job_id).started for job_id in a_ids]
    assert most_in_a_window(runs, 1000) <= 3
    assert max(runs) - min(runs) >= 2000  # 9 starts at 3/s: the 7th a full 2 s after the 1st
    b_starts = [queue.get(job_id).started for job_id in b_ids]
    # The other account was not held up behind the first: its starts came before the first
    # account's window had room again.
    assert max(b_starts) <= sorted(runs)[3]


@pytest.mark.timeout(120)
def test_two_worker_processes_keep_the_limit_of_each_key(queue: Any, settings: Any) -> None:
    """``run_queue_worker --processes 2 --concurrency 3``: two processes of three threads."""
    worker = command_worker(settings.REDISLOCK, "--processes", "2", "--concurrency", "3")
    try:
        wait_for(lambda: len(live_workers()) == 2, timeout=60, what="both processes started")
        for n in range(6):
            for user in (1, 2):
                options = {"concurrency_key": "e:{0}", "concurrency_limit": 2}
                queue.enqueue(EXPORT, [user, n, 0.1], **options)
        wait_for(lambda: len(spans()) == 12, timeout=60, what="every job ran")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    runs = spans()
    for user in (1, 2):
        mine = [r for r in runs if r["user"] == user]
        assert most_at_once(mine) <= 2


@pytest.mark.timeout(120)
def test_the_limits_hold_through_a_redis_restart_with_its_aof(
    processes: Processes, settings: Any
) -> None:
    """The server restarted from its AOF under two workers draining keyed jobs: every job
    ends done, no key ever ran over its limit, and no permit or parked job is left over."""
    with RedisServer("--appendonly", "yes", "--appendfsync", "always") as own:
        settings.REDISLOCK = {"URL": own.url, "QUEUES": {"default": {"LEASE": 1}}}
        queue = get_queue("default")
        for n in range(10):
            for user in (1, 2, 3):
                options = {"concurrency_key": "e:{0}", "concurrency_limit": 2}
                queue.enqueue(EXPORT, [user, n, 0.05], **options)
        for _ in range(2):
            processes.start(run_worker, 4)
        wait_for(lambda: len(spans()) >= 6, what="the workers are at it")
        own.restart()
        wait_for(lambda: len({(r["user"], r["n"]) for r in spans()}) == 30, timeout=60)
        wait_for(lambda: queue.counts()["running"] == 0, what="every run acknowledged")
        runs = spans()
        for user in (1, 2, 3):
            assert most_at_once([r for r in runs if r["user"] == user]) <= 2
        assert queue.counts() == {**queue.counts(), "ready": 0, "parked": 0, "dead": 0}
        assert queue.client.zcard(queue.keys.held) == 0


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_burst_worker_runs_every_parked_job_before_it_stops(queue: Any, concurrency: int) -> None:
    """A key's jobs are parked behind its running one, and let go by its end: a burst
    worker (``--burst``) must not take "nothing ready" for "nothing left" while its own
    last end, not yet sent, still holds the permit."""
    for n in range(40):
        queue.enqueue(PLAIN, [n, 0.0], concurrency_key="hot")
    for n in range(100, 120):
        queue.enqueue(PLAIN, [n, 0.0])
    Worker(["default"], concurrency=concurrency, burst=True).run()
    assert queue.counts() == job_counts()
    assert sorted(r["n"] for r in spans()) == [*range(40), *range(100, 120)]
