"""How jobs retry: the delay's jitter bounds (real workers), ``retry_on``, ``RetryLater``
(not a failure), the precedence job > task > queue, a lapsed lease as a failure, and a job
whose options are corrupt set aside alone."""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import time
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.exceptions import RetryLater
from django_redislock.queue.jobs import Field
from django_redislock.queue.worker.loop import Worker
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, Processes
from tests.support.waiting import Stalls, wait_for

from .. import retry_tasks as tasks
from .retrying import QUEUES, drain

# The worker run here closes stale database connections, as after each job: a database
# test that ran before left one open, which a test without database access may not touch.
pytestmark = pytest.mark.django_db(transaction=True)


def result_of(task: Any, result_id: str) -> Any:
    return task.get_result(result_id)


# --- retry_on ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "runs", "dead_with"),
    [
        ("ValueError", 1, "builtins.ValueError"),  # not listed: dead at once, with its error
        ("ZeroDivisionError", 4, "builtins.ZeroDivisionError"),  # an ArithmeticError
        ("RuntimeError", 4, "builtins.RuntimeError"),  # the second class listed
    ],
)
def test_retry_on_retries_only_the_classes_it_lists(
    retrying: Backend, error: str, runs: int, dead_with: str
) -> None:
    result = tasks.picky.enqueue(error, error)
    drain()
    assert len(tasks.run_times(error)) == runs
    found = result_of(tasks.picky, result.id)
    assert found.status == "FAILED"
    assert [e.exception_class_path for e in found.errors] == [dead_with] * runs
    assert get_queue().get(result.id).failures == runs


def test_retry_on_a_nested_exception_class_retries_it(retrying: Backend) -> None:
    """``Gateway.Busy`` is kept as "tests.retry_tasks.Gateway.Busy", a path no plain import
    of a module attribute resolves: the worker finds the class through its enclosing one."""
    result = tasks.nested_retry_on.enqueue("nested", 2)
    assert get_queue().get(result.id).meta["retry_on"] == ["tests.retry_tasks.Gateway.Busy"]
    drain()
    assert len(tasks.run_times("nested")) == 3
    assert result_of(tasks.nested_retry_on, result.id).status == "SUCCESSFUL"


# --- RetryLater ---------------------------------------------------------------------------


def test_a_retry_later_run_sends_no_task_finished(retrying: Backend) -> None:
    """Snoozing is not finishing, nor failing: the framework's ``task_finished`` (whose own
    receiver logs a failure as an ERROR with its traceback) goes out once, when it ends."""
    from django_redislock.tasks.results import signals

    seen: list[str] = []

    def finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result.status)

    signals.task_finished.connect(finished)
    try:
        tasks.snoozing.enqueue("quiet", 2, 0)
        drain()
    finally:
        signals.task_finished.disconnect(finished)
    assert len(tasks.run_times("quiet")) == 3
    assert seen == ["SUCCESSFUL"]


def test_a_job_started_thousands_of_times_keeps_its_latest_workers_only(
    retrying: Backend,
) -> None:
    """A task that keeps asking to run later starts again and again: the workers of its
    runs stay bounded (4 KB, the oldest dropped), the newest last."""
    queue = get_queue()
    job = queue.enqueue("tests.retry_tasks.flaky", args=["w", 0])
    many = ",".join(f"host-{i}:{i}:w" for i in range(1000))
    get_redis().hset(queue.keys.job(job.id), Field.WORKERS, many)
    [popped] = queue.pop(worker="box:42:1")
    workers = get_redis().hget(queue.keys.job(job.id), Field.WORKERS).decode()
    assert len(workers) <= 4096
    assert workers.split(",")[-1] == popped.worker == "box:42:1"
    assert workers.split(",")[-2] == "host-999:999:w"
    assert many.endswith(workers.rsplit(",", 1)[0])  # whole entries, the oldest dropped


@pytest.mark.parametrize("delay", [-1, math.inf, math.nan, 3.2e9 + 1])
def test_retry_later_refuses_a_delay_outside_zero_to_a_century(delay: float) -> None:
    with pytest.raises(ValueError, match="RetryLater delay"):
        RetryLater(delay)


def test_retry_later_is_not_a_failure(retrying: Backend) -> None:
    """The task allows one attempt; three RetryLater runs do not use it up. They count as
    attempts (starts), store no error and leave the failures at 0."""
    result = tasks.snoozing_once.enqueue("snooze", 3, 0)
    drain()
    found = result_of(tasks.snoozing_once, result.id)
    assert found.status == "SUCCESSFUL"
    assert found.return_value == 4
    assert found.errors == []
    assert found.attempts == 4
    assert len(tasks.run_times("snooze")) == 4


def test_a_job_snoozed_says_why_it_runs_next(retrying: Backend) -> None:
    result = tasks.snoozing.enqueue("why", 1, 60)
    drain()
    job = get_queue().get(result.id)
    assert (job.state, job.reason, job.failures, job.attempts) == ("scheduled", "RetryLater", 0, 1)
    assert job.error == ""
    assert 59_000 <= job.score - tasks.run_times("why")[0] <= 61_000


@pytest.mark.parametrize("delay", [-1, float("nan"), float("inf")])
def test_retry_later_with_a_bad_delay_fails_that_attempt(retrying: Backend, delay: float) -> None:
    """RetryLater(-1) raises ValueError inside the task: a failure (1 of the queue's 2)."""
    result = tasks.snoozing.enqueue("bad", 1, delay)
    drain()
    found = result_of(tasks.snoozing, result.id)
    assert found.status == "SUCCESSFUL"
    assert [e.exception_class_path for e in found.errors] == ["builtins.ValueError"]
    assert "RetryLater delay" in found.errors[0].traceback
    assert get_queue().get(result.id).failures == 1


# --- precedence: the job's own, then its task's, then its queue's -------------------------------


def test_the_queue_setting_applies_without_options(retrying: Backend) -> None:
    tasks.flaky.enqueue("queue", 9)
    drain()
    assert len(tasks.run_times("queue")) == 2  # MAX_ATTEMPTS


def test_the_tasks_option_beats_the_queues(retrying: Backend) -> None:
    tasks.once.enqueue("task", 9)
    get_queue().enqueue("tests.retry_tasks.once", args=["by-path", 9])  # however enqueued
    drain()
    assert len(tasks.run_times("task")) == 1
    assert len(tasks.run_times("by-path")) == 1


def test_the_jobs_own_option_beats_its_tasks(retrying: Backend) -> None:
    get_queue().enqueue("tests.retry_tasks.once", args=["job", 9], max_attempts=3)
    tasks.once.using(max_attempts=5).enqueue("using", 9)
    tasks.once.using(max_attempts=None).enqueue("unset", 9)  # unset: the queue's 2
    drain()
    assert len(tasks.run_times("job")) == 3
    assert len(tasks.run_times("using")) == 5
    assert len(tasks.run_times("unset")) == 2


def test_per_job_retry_on_is_a_list_of_class_paths(retrying: Backend) -> None:
    queue = get_queue()
    kept = queue.enqueue(
        "tests.retry_tasks.flaky", args=["kept", 9], max_attempts=3, retry_on=["builtins.KeyError"]
    )
    queue.enqueue_many(
        [
            {"task": "tests.retry_tasks.flaky", "args": ["many", 9], "max_attempts": 4},
            {"task": "tests.retry_tasks.flaky", "args": ["plain", 9]},
        ]
    )
    assert queue.get(kept.id).meta == {"max_attempts": 3, "retry_on": ["builtins.KeyError"]}
    drain()
    assert len(tasks.run_times("kept")) == 1  # ValueError: not in its retry_on
    assert len(tasks.run_times("many")) == 4
    assert len(tasks.run_times("plain")) == 2  # one item's options never leak into the next


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("max_attempts", 0, ValueError),
        ("max_attempts", 2.5, TypeError),
        ("max_attempts", True, TypeError),
        ("retry_backoff", -1, ValueError),
        ("retry_backoff", float("nan"), ValueError),
        ("retry_backoff_max", "10", TypeError),
        ("retry_on", ["builtins.len"], TypeError),
        ("retry_on", ["no.such.Error"], ValueError),
        ("time_limit", 0, ValueError),
    ],
)
def test_bad_per_job_options_are_refused_naming_them(
    retrying: Backend, option: str, value: Any, error: type[Exception]
) -> None:
    queue = get_queue()
    with pytest.raises(error, match=option):
        queue.enqueue("tests.retry_tasks.flaky", args=["x", 0], **{option: value})
    with pytest.raises(error, match=option):
        queue.enqueue_many(
            [
                {"task": "tests.retry_tasks.flaky", "args": ["y", 0]},
                {"task": "tests.retry_tasks.flaky", "args": ["x", 0], option: value},
            ]
        )
    assert queue.counts() == job_counts()


# --- a lapsed lease ---------------------------------------------------------------------------


def test_a_lapsed_lease_is_a_failure(retrying: Backend) -> None:
    """Its worker died: the attempt failed (retry_on cannot apply: nothing was raised), and
    the job's own max_attempts (2) ends it once the failures reach it."""
    queue = get_queue()
    job = queue.enqueue(
        "tests.retry_tasks.flaky", args=["lapse", 0], max_attempts=2, retry_on=["builtins.KeyError"]
    )
    assert [j.id for j in queue.pop(lease=0.05)] == [job.id]
    again: list[Any] = []
    wait_for(lambda: again.extend(queue.pop(lease=0.05)) or again, what="redelivered")
    assert (again[0].attempts, again[0].failures) == (2, 1)
    assert queue.get(job.id).reason == "retry 1 (lease ran out)"
    wait_for(lambda: queue.pop() or queue.counts()["dead"] == 1, what="dead")
    dead = queue.get(job.id)
    assert (dead.state, dead.failures, dead.attempts) == ("dead", 2, 2)
    assert "lease ran out" in dead.error


@pytest.mark.parametrize(
    ("task", "queue_max", "after"),
    [
        ("stalls_once", 2, "dead"),  # the task allows 1 attempt: the queue's 2 would retry
        ("stalls_thrice", 1, "ready"),  # the task allows 3: the queue's 1 would bury it
    ],
)
def test_a_lapse_of_a_job_enqueued_by_path_is_judged_by_its_tasks_max_attempts(
    real_backend: Backend,
    settings: Any,
    processes: Processes,
    task: str,
    queue_max: int,
    after: str,
) -> None:
    """The job carries no max_attempts (enqueued by path, not through its task); its
    worker is killed while it runs. Redis judges the lapse by the task's max_attempts, which
    the worker noted as the job started: job, then task, then queue, as for a failure."""
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {**QUEUES["default"], "LEASE": 1, "MAX_ATTEMPTS": queue_max}},
    }
    queue = get_queue()
    job = queue.enqueue(f"tests.retry_tasks.{task}", args=[task])
    worker = processes.start(work)
    wait_for(lambda: len(tasks.run_times(task)) == 1, what="the job started")
    assert get_redis().hget(queue.keys.job(job.id), Field.MAX_ATTEMPTS) is not None
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(10)
    popped: list[Any] = []
    wait_for(lambda: popped.extend(queue.pop()) or popped or queue.get(job.id).state == "dead")
    found = queue.get(job.id)
    assert (found.state, found.failures) == (("dead", 1) if after == "dead" else ("running", 1))
    assert [j.id for j in popped] == ([] if after == "dead" else [job.id])
    assert "lease ran out" in found.error
    assert f"failure 1 of {1 if after == 'dead' else 3})" in found.error


def test_a_corrupt_noted_max_attempts_sets_the_lapsed_job_aside_alone(retrying: Backend) -> None:
    queue = get_queue()
    bad, fine = (queue.enqueue("tests.retry_tasks.flaky", args=[k, 0]) for k in ("bad", "fine"))
    assert {j.id for j in queue.pop(2, lease=0.05)} == {bad.id, fine.id}
    get_redis().hset(queue.keys.job(bad.id), Field.MAX_ATTEMPTS, "lots")
    again: list[Any] = []
    wait_for(lambda: again.extend(queue.pop(lease=5)) or again, what="the other redelivered")
    assert [j.id for j in again] == [fine.id]
    dead = queue.get(bad.id)
    assert dead.state == "dead"
    assert f"field {Field.MAX_ATTEMPTS}" in dead.error


# --- corrupt options --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        (Field.META, json.dumps({"max_attempts": "many"}), "max_attempts"),
        (Field.META, json.dumps({"retry_on": ["no.such.Error"]}), "retry_on"),
        (Field.META, json.dumps({"retry_backoff": -5}), "retry_backoff"),
        (Field.FAILURES, "lots", "failures"),
    ],
)
def test_a_job_with_corrupt_options_is_set_aside_alone(
    retrying: Backend, field: str, value: str, reason: str
) -> None:
    queue = get_queue()
    before = tasks.flaky.enqueue("before", 0)
    bad = tasks.flaky.enqueue("bad", 0)
    after = tasks.flaky.enqueue("after", 0)
    get_redis().hset(queue.keys.job(bad.id), field, value)
    drain()
    assert tasks.run_times("bad") == []  # never run
    dead = queue.get(bad.id)
    assert dead.state == "dead"
    assert reason in dead.error
    for fine in (before, after):
        assert result_of(tasks.flaky, fine.id).status == "SUCCESSFUL"


# --- the delay, on real workers ----------------------------------------------------------------


def work() -> None:
    Worker(["default"], concurrency=2).run()


def test_retry_delays_stay_within_the_jitter_bounds(
    real_backend: Backend, settings: Any, processes: Processes
) -> None:
    """backing_off: base 0.4 s. Its first retry waits d/2..d of d = 0.4 s, its second
    d = 0.8 s; then it is dead (max_attempts 3). Never early; late by a scheduling slack."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    processes.start(work)
    with Stalls() as stalls:
        for i in range(3):
            began = time.monotonic()
            result_id = tasks.backing_off.enqueue(f"gap{i}").id
            dead = lambda: result_of(tasks.backing_off, result_id).status == "FAILED"  # noqa: B023, E731
            wait_for(dead, what="dead")
            times = tasks.run_times(f"gap{i}")
            assert len(times) == 3
            first, second = [(b - a) / 1000 for a, b in itertools.pairwise(times)]
            assert first >= 0.2 - 0.005  # never early
            assert second >= 0.4 - 0.005
            # Late by a scheduling slack at most, unless the machine stood still meanwhile.
            on_time = first <= 0.4 + 1.0 and second <= 0.8 + 1.0
            assert on_time or stalls.between(began, time.monotonic()), (first, second)


def test_retry_later_waits_its_delay(
    real_backend: Backend, settings: Any, processes: Processes
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    processes.start(work)
    result = tasks.snoozing.enqueue("later", 1, 0.3)
    wait_for(lambda: tasks.snoozing.get_result(result.id).status == "SUCCESSFUL", what="done")
    first, second = tasks.run_times("later")
    assert 0.3 - 0.005 <= (second - first) / 1000 <= 0.3 + 1.0  # exact: no jitter
