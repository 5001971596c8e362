"""BullMQ's deduplication and debounce tests (``tests/deduplication.test.ts``), ported in our
own words and code: its throttle mode is our ``unique_for``; its debounce mode (``ttl`` with
``extend`` and ``replace``) is our ``debounce``; ``keepLastIfActive`` is our coalescing of a
running id (one follow-up run). On fakeredis, a real server and Cluster, with a real worker
process for the "never in parallel" case.

Left out, and why:

- The "deduplicated" event, ``removeDeduplicationKey`` and ``getDeduplicationJobId``: there
  is no event stream and no API to inspect or clear a window apart from the job; the
  returned job being the existing one is what a caller sees.
- ``extend`` without ``replace`` (the window is extended but the first data kept): our
  debounce always keeps the last values.
- A fixed ttl mixed with ``replace`` (throttle + replace): ``unique_for`` returns the job
  unchanged; combined with ``replace=True`` or ``debounce`` it is refused.
- The follow-up waiting until the running job's retries are exhausted: here the follow-up
  supersedes a pending retry (issue 15's coalescing), a deliberate difference.
- The follow-up going to a paused list: pausing is the next issue's.
- A queue-default delay and a custom job id apart from the dedup id: our dedup id *is* the
  job id, and a debounce sets the due time itself (``delay``/``at`` are refused with it).

Removing the deduplicated job frees its key there; here, deleting a job (or cancelling it
before it started) takes its ``unique_for`` window with it, as ported below. A finished
job's window outlives its hash by design (the window holds after the result expired).
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from tests.support.fixtures import Backend, Processes
from tests.support.waiting import server_now, wait_for

from ..tasks import DONE, STARTED

TASK = "tests.tasks.record"
DEDUP = "dedup"


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"MAX_ATTEMPTS": 1}}}
    return get_queue("default")


def add(queue: Queue, data: int, **mode: Any) -> Any:
    return queue.enqueue(TASK, args=[data], job_id=DEDUP, **mode)


def next_popped(queue: Queue) -> Any:
    popped: list[Any] = []
    wait_for(lambda: popped.extend(queue.pop()) or popped, 10, "a job became ready")
    [job] = popped
    return job


def test_throttle_keeps_the_first_job_for_the_window_then_makes_a_new_run(queue: Queue) -> None:
    first = add(queue, 0, unique_for=1)
    assert [add(queue, n, unique_for=1).args for n in (1, 2)] == [[0], [0]]
    job = next_popped(queue)
    queue.ack(job)
    wait_for(lambda: add(queue, 3, unique_for=1).args == [3], 10, "the window ended")
    assert next_popped(queue).enqueued > first.enqueued


def test_removing_the_throttled_job_frees_its_id_for_a_new_one(queue: Queue) -> None:
    assert add(queue, 0, unique_for=60).args == [0]
    assert add(queue, 1, unique_for=60).args == [0]
    assert queue.delete(DEDUP)
    assert add(queue, 2, unique_for=60).args == [2]
    assert next_popped(queue).args == [2]


def test_ten_adds_debounced_run_once_with_the_last_data(queue: Queue) -> None:
    made = [add(queue, n, debounce=0.3) for n in range(9)]
    last = server_now()
    made.append(add(queue, 9, debounce=0.3))
    assert {job.id for job in made} == {DEDUP}
    assert sum(queue.counts().values()) == 1
    job = next_popped(queue)
    assert server_now() - last >= 0.3 - 0.002
    assert job.args == [9]
    queue.ack(job)
    assert queue.pop() == []


def test_the_first_add_is_debounced_too(queue: Queue) -> None:
    before = server_now()
    job = add(queue, 1, debounce=5)
    assert job.state == "scheduled"
    assert job.score >= before * 1000 + 5000 - 2
    assert queue.pop() == []


def test_a_later_add_moves_the_due_time_and_replaces_the_data(queue: Queue) -> None:
    first = add(queue, 1, debounce=5)
    second = add(queue, 2, debounce=5)
    assert second.score >= first.score
    stored = queue.get(DEDUP)
    assert (stored.args, stored.score) == ([2], second.score)


def running(queue: Queue) -> Any:
    add(queue, 1)
    [job] = queue.pop()
    return job


def test_adds_while_active_keep_the_last_data_for_one_run_after_it(queue: Queue) -> None:
    active = running(queue)
    for n in (2, 3):
        assert add(queue, n, debounce=0.05).state == "running"
    assert queue.pop() == []
    queue.ack(active)
    follow_up = next_popped(queue)
    assert follow_up.args == [3]
    queue.ack(follow_up)
    assert queue.pop() == []
    add(queue, 4, debounce=0.05)  # a fresh cycle once both are done
    assert next_popped(queue).args == [4]


def test_an_add_while_waiting_returns_the_same_job(queue: Queue) -> None:
    waiting = add(queue, 1, debounce=5)
    again = add(queue, 2, debounce=5)
    assert again.id == waiting.id
    assert sum(queue.counts().values()) == 1


def test_the_follow_up_honours_the_debounce_after_the_active_run(queue: Queue) -> None:
    active = running(queue)
    asked = add(queue, 2, debounce=5)
    queue.ack(active)  # ends well before the debounce has passed
    follow_up = queue.get(DEDUP)
    assert (follow_up.state, follow_up.score) == ("scheduled", asked.score)


def test_the_follow_up_runs_when_the_active_run_fails_for_good(queue: Queue) -> None:
    active = running(queue)
    add(queue, 2, debounce=0.05)
    queue.fail(active, "fails for good")  # MAX_ATTEMPTS 1
    assert next_popped(queue).args == [2]


def test_without_a_window_a_waiting_id_keeps_its_first_job(queue: Queue) -> None:
    add(queue, 1)
    assert add(queue, 2).id == DEDUP
    assert queue.get(DEDUP).args == [1]
    assert sum(queue.counts().values()) == 1


def run_worker() -> None:
    Worker(["default"], concurrency=5).run()


def test_never_two_runs_of_one_id_at_once_on_a_worker_of_five(
    redis_backend: Backend, settings: Any, processes: Processes
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 5}}}
    queue = get_queue()
    client = get_redis()
    client.delete(DONE, STARTED)
    worker = processes.start(run_worker)
    queue.enqueue("tests.tasks.tracked", args=[1, 0.3], job_id=DEDUP)
    wait_for(lambda: client.llen(STARTED) == 1, 30, "the first run started")
    for n in (2, 3, 4):
        queue.enqueue("tests.tasks.tracked", args=[n, 0.05], job_id=DEDUP, debounce=0.01)
    wait_for(lambda: client.llen(DONE) == 2, 30, "the run and its one follow-up")
    os.kill(worker.pid, signal.SIGTERM)
    worker.join(20)
    starts = [json.loads(v) for v in client.lrange(STARTED, 0, -1)]
    ends = [json.loads(v) for v in client.lrange(DONE, 0, -1)]
    assert [s["n"] for s in starts] == [1, 4]
    assert starts[1]["at"] >= ends[0]["at"]  # the follow-up began after the first ended
