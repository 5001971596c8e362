"""huey's retry tests (``huey/tests/test_api.py``: ``test_retry``,
``test_retries_with_override``, ``test_retry_to_success``, ``test_retry_delay``,
``test_retry_backoff``, ``test_retrytask_explicit``, ``test_retrytask_eta_delay``;
``test_priority.py::test_priority_retry``), ported onto our options and ``RetryLater``
(huey's ``RetryTask``), in our own code. huey's ``retries=N`` is N + 1 runs:
``max_attempts=N+1``; its delays are exact, ours are drawn from [d/2, d].

Left out, and why:

* ``test_cancel_execution*``: no ``CancelExecution``; an exception outside ``retry_on``
  ends a job at once (``test_ported_dramatiq_retries``).
* ``test_reschedule_*``: huey revokes and re-enqueues under a new id; we keep one id.
* ``test_retry_periodic`` and ``test_retry_delay_periodic``: a schedule tick is an ordinary
  job of its task, retried by its task's options like any (``test_retry_policy``).
* The ``expires`` tests: the enqueue half of issue 26. The absolute-``eta`` rows of
  ``test_retrytask_eta_delay``: ``RetryLater`` takes seconds only, and requires them.
* Task locks, rate limits, chords and error callbacks: other features and issues.
"""

from __future__ import annotations

import pytest

from django_redislock import get_queue
from django_redislock.queue.queue import Job
from tests.support.counts import job_counts
from tests.support.fixtures import Backend
from tests.support.waiting import server_now

from .. import retry_tasks as tasks
from .retrying import drain

FLAKY = "tests.retry_tasks.flaky"


def fail_once(job: Job) -> tuple[float, float]:
    """Lease ``job`` and record a failure; the server's clock before and after, in ms."""
    queue = get_queue()
    [leased] = queue.pop()
    assert leased.id == job.id
    before = server_now() * 1000
    assert queue.fail(leased, ValueError("nope"))
    return before, server_now() * 1000


def test_a_retry_keeps_the_id_and_ends_after_its_attempts(retrying: Backend) -> None:
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["r", 9], max_attempts=2, retry_backoff=60)
    fail_once(job)
    first = tasks.flaky.get_result(job.id)
    assert (first.status, len(first.errors)) == ("READY", 1)
    assert queue.requeue(job.id)  # run it now rather than in a minute
    fail_once(job)
    last = tasks.flaky.get_result(job.id)
    assert (last.status, len(last.errors)) == ("FAILED", 2)
    assert queue.counts() == job_counts(dead=1)


@pytest.mark.parametrize(("own", "delay"), [(1, None), (3, None), (4, 0.001)])
def test_a_jobs_own_attempts_override_its_tasks(
    retrying: Backend, own: int, delay: float | None
) -> None:
    get_queue().enqueue("tests.retry_tasks.once", args=["o", 9], max_attempts=own, delay=delay)
    if delay:
        queue = get_queue()
        while queue.counts()["scheduled"]:  # due in a millisecond
            queue.pop(0)
    drain()
    assert len(tasks.run_times("o")) == own


def test_retried_to_success(retrying: Backend) -> None:
    result = tasks.flaky.using(max_attempts=3).enqueue("s", 2)
    drain()
    found = tasks.flaky.get_result(result.id)
    assert (found.status, found.return_value, found.attempts) == ("SUCCESSFUL", 3, 3)
    assert len(found.errors) == 2


def test_a_retry_is_scheduled_after_its_delay(retrying: Backend) -> None:
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["d", 9], max_attempts=3, retry_backoff=60)
    before, after = fail_once(job)
    again = queue.get(job.id)
    assert again.state == "scheduled"
    assert before + 30_000 - 2 <= again.score <= after + 60_000 + 2


def test_the_backoff_doubles_per_failure(retrying: Backend) -> None:
    """huey ``retry_delay=2, retry_backoff=2``: 2, 4, 8 s; ours [1, 2], [2, 4], [4, 8]."""
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["b", 9], max_attempts=4, retry_backoff=2)
    for d in (2_000, 4_000, 8_000):
        before, after = fail_once(job)
        assert before + d / 2 - 2 <= queue.get(job.id).score <= after + d + 2
        assert queue.requeue(job.id)
    fail_once(job)
    assert queue.get(job.id).state == "dead"


def test_retry_later_leaves_the_retries_alone(retrying: Backend) -> None:
    result = tasks.snoozing_once.enqueue("e", 1, 0)
    drain()
    found = tasks.snoozing_once.get_result(result.id)
    assert (found.status, found.attempts, found.errors) == ("SUCCESSFUL", 2, [])
    assert get_queue().get(result.id).failures == 0


@pytest.mark.parametrize("delay", [3, 300])
def test_retry_later_is_due_after_its_delay(retrying: Backend, delay: float) -> None:
    queue = get_queue()
    job = queue.enqueue("tests.retry_tasks.snoozing", args=["eta", 1, delay], priority=9)
    before = server_now() * 1000
    drain()
    again = queue.get(job.id)
    assert (again.state, again.id, again.priority) == ("scheduled", job.id, 9)
    assert before + delay * 1000 <= again.score <= server_now() * 1000 + delay * 1000 + 2
