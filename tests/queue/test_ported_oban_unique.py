"""Oban's unique-job tests (``test/oban/engine_test.exs`` and ``job_test.exs``), ported to
``unique_for``/``unique_by_args`` on ``Queue.enqueue`` in our own words and code. On
fakeredis, a real server and Cluster.

Left out, and why:

- Scoping uniqueness to chosen fields, argument keys or meta keys (``fields:``, ``keys:``):
  our identity is the job id; ``unique_by_args`` hashes the task path and *all* arguments.
  A caller who wants key-subset uniqueness builds ``job_id`` from those keys.
- Explicit ``states:`` lists: there is no such option; the window covers every state.
- Periods compared to the scheduled time (``timestamp: :scheduled_at``): our window always
  counts from the enqueue that created the id.
- Replacing fields on a unique conflict (``replace:``): within its window a job comes back
  unchanged; ``unique_for`` with ``replace=True`` is refused.
- Deep-merged unique options, time units (``{1, :hour}``) and ``unique: true`` meaning
  forever: seconds only, and a finite window (``inf`` is refused).
- Per-job ``max_attempts``, timeouts, backoff properties and snooze (engine "integration",
  ``worker_test``, ``backoff_test``, ``executor_test``): the worker-decided half of issue 26,
  ported beside the retry policy. Decoration-time validation of the same options belongs to
  the Tasks side; here their ``Queue.enqueue`` counterpart is checked.
- Custom prefixes and the inline engine: engine specifics with no counterpart.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import transaction

from django_redislock import get_queue
from django_redislock.queue.queue import Queue
from tests.support.fixtures import Backend
from tests.support.waiting import server_now, wait_for

WORKER = "tests.tasks.record"


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"MAX_ATTEMPTS": 1}}}
    return get_queue("default")


def insert(queue: Queue, args: list[Any], **unique: Any) -> Any:
    return queue.enqueue(WORKER, args=args, **unique)


def test_a_second_insert_in_the_period_gets_the_first_job(queue: Queue) -> None:
    first = insert(queue, [1], job_id="j", unique_for=60, delay=5)
    second = insert(queue, [2], job_id="j", unique_for=60)
    assert (second.id, second.args, second.score, second.enqueued) == (
        first.id,
        [1],
        first.score,
        first.enqueued,
    )
    assert queue.counts()["scheduled"] == 1


def test_inserts_racing_from_three_threads_make_one_job(queue: Queue) -> None:
    gate, made = threading.Barrier(3), []

    def race(n: int) -> None:
        gate.wait()
        made.append(insert(queue, [n], job_id="raced", unique_for=60))

    threads = [threading.Thread(target=race, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {job.id for job in made} == {"raced"}
    [creator_args] = {tuple(job.args) for job in made}  # one caller's values, never a mix
    assert len({job.enqueued for job in made}) == 1
    assert queue.get("raced").args == list(creator_args)
    assert queue.counts()["ready"] == 1


def test_empty_arguments_differ_from_some(queue: Queue) -> None:
    empty = queue.enqueue(WORKER, unique_by_args=True, unique_for=60)
    some = queue.enqueue(WORKER, kwargs={"id": 1}, unique_by_args=True, unique_for=60)
    again = queue.enqueue(WORKER, unique_by_args=True, unique_for=60)
    assert empty.id != some.id
    assert again.id == empty.id
    assert queue.counts()["ready"] == 2


def test_every_argument_counts_but_not_the_order_of_keys(queue: Queue) -> None:
    def job_id(**kwargs: Any) -> str:
        return queue.enqueue(WORKER, kwargs=kwargs, unique_by_args=True).id

    assert job_id(id=1) != job_id(id=1, extra="x")
    assert job_id(a=1, b=2) == job_id(b=2, a=1)
    assert job_id(n={"x": 1, "y": 2}) == job_id(n={"y": 2, "x": 1})
    assert job_id(n=[1, 2]) != job_id(n=[2, 1])


def test_the_period_counts_from_the_insert_that_made_the_job(queue: Queue) -> None:
    made_at = server_now()
    insert(queue, [1], job_id="p", unique_for=1)
    [job] = queue.pop()
    queue.ack(job)  # finished: the period still holds
    assert insert(queue, [2], job_id="p", unique_for=1).args == [1]
    wait_for(lambda: insert(queue, [3], job_id="p", unique_for=1).args == [3], 10)
    assert server_now() - made_at >= 1 - 0.002  # not before its period from the first insert


@pytest.mark.parametrize("state", ["scheduled", "ready", "running", "done", "dead"])
def test_every_state_is_covered_by_the_period(queue: Queue, state: str) -> None:
    insert(queue, [1], job_id="s", unique_for=60, **({"delay": 30} if state == "scheduled" else {}))
    if state in ("running", "done", "dead"):
        [job] = queue.pop()
        if state == "done":
            queue.ack(job, "1")
        elif state == "dead":
            queue.fail(job, "discarded")  # unlike Oban's defaults, a dead job still counts
    found = insert(queue, [2], job_id="s", unique_for=60)
    assert (found.state, found.args) == (state, [1])


def test_duplicates_within_one_batch_and_one_transaction(queue: Queue) -> None:
    spec = {"task": WORKER, "unique_by_args": True, "unique_for": 60}
    made = queue.enqueue_many([{**spec, "args": [1]}, {**spec, "args": [2]}, {**spec, "args": [1]}])
    assert made[2].id == made[0].id != made[1].id
    assert queue.counts()["ready"] == 2


@pytest.mark.django_db(transaction=True)
def test_duplicates_within_one_transaction_push_one_job(queue: Queue) -> None:
    with transaction.atomic():
        insert(queue, [1], job_id="t", unique_for=60)
        insert(queue, [2], job_id="t", unique_for=60)
    assert [job.args for job in queue.pop(2)] == [[1]]


@pytest.mark.parametrize(
    ("period", "error"), [(0, ValueError), (-3, ValueError), ("soon", TypeError)]
)
def test_a_period_that_is_no_positive_number_is_refused(
    queue: Queue, period: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match="unique_for"):
        insert(queue, [1], job_id="v", unique_for=period)
