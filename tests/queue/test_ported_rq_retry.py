"""RQ's ``Retry`` tests (``tests/test_retry.py``, ``tests/test_queue.py::
test_enqueue_with_retry``, ``tests/test_decorator.py::test_decorator_custom_retry``,
``tests/test_scheduler.py::test_enqueue_in_with_retry``), ported onto our per-job and
per-task options, in our own code. RQ's ``Retry(max=N)`` is N + 1 runs: ``max_attempts=N+1``.

Left out, and why:

* ``test_retry_class``, ``test_retry_repr``, ``test_get_retry_interval``,
  ``test_job_create_with_retry``: RQ's ``Retry`` value and its list of intervals; we have a
  base and a cap, doubled per failure (past the cap the last delay repeats, as RQ reuses
  the last interval: ``test_ported_celery_retries`` tests the cap).
* ``test_handle_retry_result`` and the other "return ``Retry``" tests: that retry is
  charged; ours, ``RetryLater``, is not (``test_ported_huey_retries`` ports the idea).
* ``test_worker_handles_enqueue_at_front_on_retry*``: no front of the queue; a retry keeps
  its priority instead (``test_ported_celery_retries``).
* The ``TestUniqueJob`` and rate-limit cases: the enqueue side of issue 26 and the next issue.
"""

from __future__ import annotations

import pytest

from django_redislock import get_queue
from tests.support.counts import job_counts
from tests.support.fixtures import Backend
from tests.support.waiting import server_now

from .. import retry_tasks as tasks
from .retrying import drain

FLAKY = "tests.retry_tasks.flaky"


def test_retry_options_persist_with_the_job(retrying: Backend) -> None:
    queue = get_queue()
    job = queue.enqueue(
        FLAKY, args=["p", 0], max_attempts=3, retry_backoff=5, retry_on=["builtins.ValueError"]
    )
    assert queue.get(job.id).meta == {
        "max_attempts": 3,
        "retry_backoff": 5,
        "retry_on": ["builtins.ValueError"],
    }


def test_enqueue_many_items_keep_their_own_options(retrying: Backend) -> None:
    queue = get_queue()
    first, second = queue.enqueue_many(
        [
            {"task": FLAKY, "args": ["a", 0], "max_attempts": 4, "retry_backoff_max": 1},
            {"task": FLAKY, "args": ["b", 0]},
        ]
    )
    assert queue.get(first.id).meta == {"max_attempts": 4, "retry_backoff_max": 1}
    assert queue.get(second.id).meta == {}


def test_a_decorated_tasks_options_land_on_its_job(retrying: Backend) -> None:
    plain = tasks.flaky.enqueue("plain", 0)
    once = tasks.once.enqueue("once", 0)
    assert get_queue().get(plain.id).meta == {}  # no option: the queue's apply at run time
    assert get_queue().get(once.id).meta == {"max_attempts": 1, "retry_backoff": 0}
    assert tasks.once.get_result(once.id).task.max_attempts == 1


def test_a_delayed_job_keeps_its_options(retrying: Backend) -> None:
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["d", 0], delay=30, max_attempts=3)
    assert (queue.get(job.id).state, queue.get(job.id).meta) == ("scheduled", {"max_attempts": 3})


@pytest.mark.parametrize(("backoff", "state"), [(5, "scheduled"), (0, "ready")])
def test_a_failed_job_waits_for_its_backoff(retrying: Backend, backoff: float, state: str) -> None:
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["w", 9], max_attempts=3, retry_backoff=backoff)
    [leased] = queue.pop()
    assert queue.fail(leased, ValueError("nope"))
    assert queue.get(job.id).state == state


@pytest.mark.parametrize("backoff", [5, 30])
def test_the_first_retry_is_due_within_the_jitter(retrying: Backend, backoff: float) -> None:
    """RQ checks "roughly 5 s from now"; ours is due between half the base and the base."""
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["i", 9], max_attempts=3, retry_backoff=backoff)
    [leased] = queue.pop()
    before = server_now()
    assert queue.fail(leased, ValueError("nope"))
    after = server_now()
    due = queue.get(job.id).score / 1000
    assert before + backoff / 2 - 0.002 <= due <= after + backoff + 0.002


def test_an_abandoned_job_is_retried_once_then_dead(retrying: Backend) -> None:
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["gone", 0], max_attempts=2)
    for _ in range(2):  # its worker dies twice
        [leased] = queue.pop(lease=0.01)
        assert leased.id == job.id
        while queue.get(job.id).state == "running":
            queue.pop(0)  # a POP sweeps the lapsed lease
    assert queue.get(job.id).state == "dead"


def test_the_worker_stops_at_max_attempts(retrying: Backend) -> None:
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["max", 9], max_attempts=3)
    drain()
    assert len(tasks.run_times("max")) == 3
    assert queue.get(job.id).state == "dead"
    assert queue.counts() == job_counts(dead=1)
