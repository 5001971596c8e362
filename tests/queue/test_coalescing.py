"""Coalescing (issue 15): ``replace=True`` on the id of a running job keeps the new values for
one follow-up run, after the current attempt ends, however it ends (done, failed, retried,
dead, its lease run out, given back unstarted); the last values asked for win. A
"reindex:<pk>" job never misses an update made while it ran. On fakeredis, a real server
and Cluster; with a real worker process at the end."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, Processes

from ..tasks import DONE
from .test_worker import done, wait_for

TASK = "tests.tasks.record"


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.05}},
    }
    return get_queue("default")


def running(queue: Queue, version: int) -> Any:
    queue.enqueue(TASK, args=[version], job_id="reindex:1")
    [job] = queue.pop()
    assert job.args == [version]
    return job


def ask_again(queue: Queue, *versions: int, **options: Any) -> Any:
    made = None
    for version in versions:
        made = queue.enqueue(TASK, args=[version], job_id="reindex:1", replace=True, **options)
    return made


def test_the_last_values_asked_for_run_once_after_the_running_attempt(queue: Queue) -> None:
    job = running(queue, 1)
    made = ask_again(queue, 2, 3, 4)
    assert made.state == "running"  # the current run goes on; one more is to come
    assert queue.counts() == job_counts(running=1)
    assert queue.pop() == []  # never two runs of one id at once
    assert queue.ack(job, json.dumps("first"))
    [follow_up] = queue.pop()
    assert (follow_up.id, follow_up.args, follow_up.attempts) == ("reindex:1", [4], 1)
    assert queue.ack(follow_up)
    assert queue.pop() == []  # one follow-up, not one per enqueue
    assert queue.counts() == job_counts()


def test_the_first_run_keeps_its_result_and_the_follow_up_its_own_values(
    queue: Queue,
) -> None:
    job = running(queue, 1)
    ask_again(queue, 2, priority=5, meta={"why": "edited"})
    assert queue.ack(job, json.dumps({"indexed": 1}))
    kept = queue.get("reindex:1")  # the pending follow-up first
    assert (kept.state, kept.args, kept.priority, kept.meta) == ("ready", [2], 5, {"why": "edited"})
    assert kept.attempts == 0
    result = get_redis().hgetall(queue.key("result:reindex:1"))
    fields = {(k.decode() if isinstance(k, bytes) else k) for k in result}
    assert not any(field.startswith("n") and len(field) == 2 for field in fields)  # no nt/na…
    assert queue.get("reindex:1").enqueued >= job.enqueued


@pytest.mark.parametrize("how", ["retry", "fail at the last attempt", "lease ran out", "release"])
def test_the_follow_up_runs_however_the_attempt_ended(queue: Queue, how: str) -> None:
    job = running(queue, 1)
    ask_again(queue, 2)
    if how == "retry":
        assert queue.retry(job, delay=60, error="flaky")
    elif how == "fail at the last attempt":
        assert queue.bury(job, "broken")  # would be dead: the follow-up supersedes it
    elif how == "lease ran out":
        assert queue.renew([job], lease=0.05) == []
        time.sleep(0.1)
    else:  # given back unstarted (a worker's job leased ahead)
        assert queue.release([job]) == 1
    [follow_up] = queue.pop()
    assert (follow_up.args, follow_up.attempts) == ([2], 1)
    assert not follow_up.error  # a fresh job: the ended attempt's error is not carried
    assert queue.counts()["dead"] == 0


def test_a_follow_up_with_a_delay_waits_for_it(queue: Queue) -> None:
    job = running(queue, 1)
    made = ask_again(queue, 2, delay=60)
    assert made.score > time.time() * 1000 + 50_000
    assert queue.ack(job)
    follow_up = queue.get("reindex:1")
    assert follow_up.state == "scheduled"
    assert follow_up.score == made.score


def test_without_replace_a_running_job_is_kept_and_nothing_follows(queue: Queue) -> None:
    job = running(queue, 1)
    kept = queue.enqueue(TASK, args=[2], job_id="reindex:1")
    assert kept.state == "running"
    assert queue.ack(job)
    assert queue.pop() == []


def test_pending_jobs_are_still_replaced_in_place(queue: Queue) -> None:
    queue.enqueue(TASK, args=[1], job_id="reindex:1")
    ask_again(queue, 2)
    [job] = queue.pop()
    assert job.args == [2]
    assert queue.ack(job)
    assert queue.pop() == []


def run_worker() -> None:
    Worker(["default"], concurrency=2).run()


def test_a_reindex_job_never_misses_an_update_made_while_it_ran(
    redis_backend: Backend, settings: Any, processes: Processes
) -> None:
    """A real worker process runs "reindex:1" (0.3 s each); versions 1…8 are enqueued with
    replace=True while it runs: the last version always runs after the last enqueue, and
    far fewer runs than enqueues happen."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 5}}}
    queue = get_queue()
    get_redis().delete(DONE)
    worker = processes.start(run_worker)
    queue.enqueue("tests.tasks.slow", args=[0, 0.3], job_id="reindex:1")
    for version in range(1, 9):
        time.sleep(0.1)
        queue.enqueue("tests.tasks.slow", args=[version, 0.3], job_id="reindex:1", replace=True)
    wait_for(lambda: bool(done()) and done()[-1]["n"] == 8, 30)
    time.sleep(0.5)  # nothing more runs after the last version
    os.kill(worker.pid, signal.SIGTERM)
    worker.join(10)
    runs = [d["n"] for d in done()]
    assert runs[-1] == 8
    assert runs == sorted(runs)  # never an older version after a newer one
    assert len(runs) < 9  # coalesced
    assert queue.counts() == job_counts()
