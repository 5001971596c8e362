"""Dramatiq's Retries middleware tests (``tests/middleware/test_retries.py``), ported onto
our task options and ``RetryLater``, in our own code. Dramatiq's ``max_retries=N`` is N + 1
runs: ``max_attempts=N+1``.

Left out, and why:

* ``test_actors_retry_for_a_max_time``: ``max_age`` bounds the whole life of a message; our
  ``expires`` (the enqueue half of issue 26) counts from each due time.
* ``test_message_contains_requeue_time_after_retry``: no ``requeue_timestamp``; the job's
  ``reason`` and due time say when and why it runs next (``test_retry_policy``).
* ``test_on_retry_exhausted_is_sent*``: no exhaustion callback; and Dramatiq's ``Retry`` is
  charged, ours (``RetryLater``) is not: the inverse is tested below.
* ``retry_when`` predicates and ``throws`` as a deny-list: we only have the ``retry_on``
  allow-list (its cases are ported inverted).
* Dramatiq's backoff arithmetic (ms, [d, 2d] jitter, 15 s minimum, 7-day cap): ours is in
  seconds with [d/2, d] jitter.
"""

from __future__ import annotations

import logging
import time

import pytest

from django_redislock import get_queue
from tests.support.fixtures import Backend

from .. import retry_tasks as tasks
from .retrying import drain

FLAKY = "tests.retry_tasks.flaky"


def test_a_job_is_retried_after_a_failure(retrying: Backend) -> None:
    result = tasks.flaky.enqueue("once", 1)
    drain()
    found = tasks.flaky.get_result(result.id)
    assert (found.status, found.attempts, len(found.errors)) == ("SUCCESSFUL", 2, 1)


def test_a_job_runs_at_most_max_attempts_times(retrying: Backend) -> None:
    tasks.flaky.using(max_attempts=4).enqueue("four", 99)
    drain()
    assert len(tasks.run_times("four")) == 4


def test_retry_later_logs_no_error_and_stores_none(
    retrying: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="django_redislock")
    result = tasks.snoozing.enqueue("quiet", 1, 0)
    drain()
    assert tasks.snoozing.get_result(result.id).errors == []
    # (the worker's start-up warnings about the Redis it runs on are not the job's)
    jobs = ("django_redislock.worker", "django_redislock.queue.runner")
    assert [r for r in caplog.records if r.name in jobs and r.levelno >= logging.WARNING] == []
    assert any("RetryLater" in r.getMessage() for r in caplog.records)


def test_retry_later_with_max_attempts_exhausted_still_succeeds(retrying: Backend) -> None:
    """Dramatiq's ``Retry`` counts toward ``max_retries``; ours does not."""
    result = tasks.snoozing.using(max_attempts=2).enqueue("thrice", 3, 0)
    drain()
    assert tasks.snoozing.get_result(result.id).status == "SUCCESSFUL"


@pytest.mark.parametrize(
    "options", [{"retry_backoff": 0}, {"retry_backoff": 10, "retry_backoff_max": 0}]
)
def test_a_zero_backoff_or_cap_retries_at_once(retrying: Backend, options: dict) -> None:
    start = time.monotonic()
    tasks.flaky.using(max_attempts=11, **options).enqueue("zero", 99)
    drain()
    assert len(tasks.run_times("zero")) == 11
    assert time.monotonic() - start < 10  # never waited out a 10 s backoff


def test_a_jobs_own_backoff_beats_its_tasks(retrying: Backend) -> None:
    """backing_off waits 0.2-0.8 s between runs; the job's ``retry_backoff=0`` none."""
    get_queue().enqueue("tests.retry_tasks.backing_off", args=["own"], retry_backoff=0)
    drain()  # a drain stops at the first retry still scheduled
    assert len(tasks.run_times("own")) == 3


@pytest.mark.parametrize("own", [1, 5])
def test_a_jobs_own_max_attempts_beats_its_tasks(retrying: Backend, own: int) -> None:
    get_queue().enqueue(FLAKY, args=[f"own{own}", 99], max_attempts=own)
    tasks.flaky.using(max_attempts=99).enqueue("task99", 3)
    drain()
    assert len(tasks.run_times(f"own{own}")) == own
    assert len(tasks.run_times("task99")) == 4


@pytest.mark.parametrize(
    ("retry_on", "raised", "runs"),
    [
        (["builtins.RuntimeError"], "ValueError", 1),  # one class, not it: dead at once
        (["builtins.KeyError", "builtins.ValueError"], "ValueError", 3),  # the second listed
        (["builtins.RuntimeError"], "RuntimeError", 3),
    ],
)
def test_retry_on_as_one_class_or_several(
    retrying: Backend, retry_on: list[str], raised: str, runs: int
) -> None:
    queue = get_queue()
    job = queue.enqueue(FLAKY, args=["on", 99, raised], max_attempts=3, retry_on=retry_on)
    drain()
    assert len(tasks.run_times("on")) == runs
    assert queue.get(job.id).error_class == f"builtins.{raised}"
