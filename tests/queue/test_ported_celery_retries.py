"""Celery's autoretry and retry tests (``t/unit/tasks/test_tasks.py::test_task_retries``,
``t/unit/utils/test_time.py::test_get_exponential_backoff_interval``, the time-limit
integration tests), ported onto our task options, in our own code. Celery's numbers are
translated: its ``max_retries=N`` is N + 1 runs, our ``max_attempts=N + 1``.

Left out, and why:

* ``test_retry``, ``test_retry_no_args``, ``test_retry_with_kwargs``, the eager retry tests
  and ``test_retry_task_max_retries_override``: Celery's bound ``self.retry()`` is charged
  and may change the arguments; our only lever inside a task is ``RetryLater``, which is not
  charged and re-runs with the same arguments (``test_retry_later_is_not_charged`` below).
* ``dont_autoretry_for`` (``test_autoretry_arith``'s deny-list half): we have no deny-list,
  only ``retry_on``.
* ``test_autoretry_backoff`` rows ``True``, ``-1``, ``0.1``, ``1.9``, ``False``, ``0``:
  Celery casts the factor to ``int(max(1, x))`` and treats 0 as "no backoff"; we take float
  seconds, refuse bools and negatives (naming the option), and 0 retries at once.
* The class-based task tests, ``test_signature_from_request__*`` (AMQP headers),
  ``test_retry_with_unpickleable_exception`` (we never pickle exceptions) and
  ``test_retry_wrong_eta_when_not_enable_utc`` (our due times are epoch ms): no counterpart.
* Celery's jitter is [0, d] ("full jitter"); ours is [d/2, d]: the bounds asserted are ours.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.queue.arguments import MAX_DELAY
from django_redislock.queue.retry_policy import RetryPolicy, backoff_bound, backoff_delay
from tests.support.fixtures import Backend

from .. import retry_tasks as tasks
from .retrying import drain

FLAKY = "tests.retry_tasks.flaky"


def test_autoretry_runs_max_retries_plus_one_times(retrying: Backend) -> None:
    """Celery ``max_retries=5`` runs 6 times: ``max_attempts=6``."""
    get_queue().enqueue(FLAKY, args=["six", 99], max_attempts=6)
    drain()
    assert len(tasks.run_times("six")) == 6


def test_autoretry_for_a_base_class_retries_its_subclasses(retrying: Backend) -> None:
    queue = get_queue()
    queue.enqueue(
        FLAKY,
        args=["arith", 99, "ZeroDivisionError"],
        retry_on=["builtins.ArithmeticError"],
        max_attempts=3,
    )
    queue.enqueue(
        FLAKY, args=["other", 99, "KeyError"], retry_on=["builtins.ArithmeticError"], max_attempts=3
    )
    drain()
    assert len(tasks.run_times("arith")) == 3
    assert len(tasks.run_times("other")) == 1


def test_the_retried_job_keeps_its_id_and_priority(retrying: Backend) -> None:
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["keep", 1], priority=7, retry_backoff=60, max_attempts=2)
    drain()
    again = queue.get(job.id)
    assert (again.state, again.priority, again.reason) == ("scheduled", 7, "retry 1")


@pytest.mark.parametrize(
    ("base", "cap", "expected"),
    [
        (1, 16, [1, 2, 4, 8, 16, 16]),  # bound by the maximum
        (1, 0.5, [0.5] * 6),  # a cap below the base just clamps
        (0, 600, [0] * 6),  # no backoff: at once
    ],
)
def test_the_delay_before_jitter(base: float, cap: float, expected: list[float]) -> None:
    rules = RetryPolicy(9, base, cap, None)
    assert [backoff_bound(rules, n) for n in range(1, 7)] == expected


def test_the_jitter_draws_from_half_to_whole(monkeypatch: Any) -> None:
    rules = RetryPolicy(9, 2, 600, None)
    monkeypatch.setattr(random, "uniform", lambda low, high: (low, high))
    assert backoff_delay(rules, 3) == (4, 8)  # d = 2 x 2^2 = 8
    monkeypatch.undo()
    draws = [backoff_delay(rules, 3) for _ in range(500)]
    assert all(4 <= d <= 8 for d in draws)
    assert max(draws) - min(draws) > 2  # spread, not a constant


def test_many_failures_never_overflow() -> None:
    rules = RetryPolicy(1000, 0.001, MAX_DELAY, None)
    bounds = [backoff_bound(rules, n) for n in range(1, 1001)]
    assert bounds == sorted(bounds)
    assert bounds[-1] == MAX_DELAY


def test_a_negative_backoff_is_refused_not_clamped(retrying: Backend) -> None:
    with pytest.raises(ValueError, match="retry_backoff"):
        get_queue().enqueue(FLAKY, args=["neg", 0], retry_backoff=-1)


def test_time_limit_from_the_task_from_the_job_and_from_the_queue(
    retrying: Backend,
    settings: Any,
) -> None:
    """The task's ``time_limit`` (0.3 s) applies to a job enqueued by path; the job's own
    beats it; without either, the queue's (none here) applies, read at run time."""
    queue = get_queue()
    limited = queue.enqueue("tests.retry_tasks.limited", args=["task", 0.6], max_attempts=1)
    own = queue.enqueue(
        "tests.retry_tasks.limited", args=["job", 0.6], max_attempts=1, time_limit=5
    )
    unlimited = queue.enqueue(FLAKY, args=["queue", 0])
    drain()
    assert queue.get(limited.id).error_class == ("django_redislock.exceptions.JobTimeLimitExceeded")
    assert tasks.flaky.get_result(unlimited.id).status == "SUCCESSFUL"
    assert tasks.limited.get_result(own.id).status == "SUCCESSFUL"
