"""Eager mode (a queue's EAGER option): enqueue runs the job at once, here, without Redis."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks
from django.db import transaction

from django_redislock.queue.queue import get_queue
from django_redislock.redis.clients import reset_connections

from . import tasks
from .tasks import CALLS

try:  # Django 6
    from django.tasks import signals as framework_signals
except ImportError:  # Django 5.2: the backport
    from django_tasks import signals as framework_signals

# Nothing listens on port 1: any command sent to Redis would fail with RedisUnavailable.
NO_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
def eager(settings: Any) -> None:
    settings.REDISLOCK = {"URL": NO_REDIS, "QUEUES": {"default": {"EAGER": True}}}
    reset_connections()
    CALLS.clear()


@pytest.mark.usefixtures("eager")
def test_enqueue_runs_the_job_at_once_and_returns_its_outcome() -> None:
    job = get_queue().enqueue("tests.testing.tasks.add", args=[2, 3], delay=900)
    assert CALLS == [("add", (2, 3))]
    assert (job.state, job.result, job.attempts, job.error) == ("done", "5", 1, "")
    assert job.started
    assert job.finished >= job.started
    # as a worker would hand them over: through JSON (a tuple comes as a list)
    echoed = get_queue().enqueue("tests.testing.tasks.echo", args=[(1, 2)], kwargs={"k": 1})
    assert echoed.result == '{"args":[[1,2]],"kwargs":{"k":1},"arg_type":"list"}'


@pytest.mark.usefixtures("eager")
def test_a_failure_is_recorded_not_raised() -> None:
    job = get_queue().enqueue("tests.testing.tasks.fails", args=["nope"])
    assert (job.state, job.error, job.error_class) == (
        "dead",
        "ValueError: nope",
        "builtins.ValueError",
    )
    assert "raise ValueError(message)" in job.traceback
    assert [e.error for e in job.errors] == ["ValueError: nope"]
    # what the worker refuses to run is refused here too
    refused = get_queue().enqueue("tests.testing.tasks.CALLS")
    assert refused.state == "dead"
    assert refused.error_class == "django_redislock.exceptions.InvalidTask"


@pytest.mark.usefixtures("eager")
def test_enqueue_many_runs_each_and_bad_input_still_raises() -> None:
    jobs = get_queue().enqueue_many(
        [{"task": "tests.testing.tasks.add", "args": [i, i]} for i in range(3)]
    )
    assert [job.result for job in jobs] == ["0", "2", "4"]
    with pytest.raises(TypeError, match="JSON-serializable"):
        get_queue().enqueue("tests.testing.tasks.add", args=[object()])
    assert len(CALLS) == 3


@pytest.mark.usefixtures("eager")
@pytest.mark.django_db
def test_inside_a_transaction_the_job_runs_at_commit(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        job = get_queue().enqueue("tests.testing.tasks.add", args=[1, 1])
        assert job.state == "ready"
        assert CALLS == []
    assert CALLS == [("add", (1, 1))]
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        get_queue().enqueue("tests.testing.tasks.add", args=[5, 5])
        transaction.set_rollback(True)
    assert CALLS == [("add", (1, 1))]  # rolled back: never ran


def test_a_queue_without_eager_still_needs_redis(settings: Any) -> None:
    from django_redislock.exceptions import RedisUnavailable

    settings.REDISLOCK = {"URL": NO_REDIS, "QUEUES": {"default": {"EAGER": False}}}
    reset_connections()
    with pytest.raises(RedisUnavailable):
        get_queue().enqueue("tests.testing.tasks.add", args=[1, 1])


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_the_eager_option_is_checked(settings: Any, value: Any) -> None:
    settings.REDISLOCK = {"QUEUES": {"default": {"EAGER": value}}}
    errors = [e for e in run_checks() if e.id.startswith("django_redislock")]
    assert [e.id for e in errors] == ["django_redislock.E009"]
    assert "EAGER" in errors[0].msg
    assert "EAGER: True runs each job at once" in (errors[0].hint or "")


@pytest.fixture
def signalled() -> Any:
    """The Tasks framework's signals as sent: (signal, status, result id), in order."""
    sent: list[tuple[str, str, str]] = []
    receivers = []
    for name in ("task_enqueued", "task_started", "task_finished"):

        def receiver(sender: Any, task_result: Any, name: str = name, **kwargs: Any) -> None:
            sent.append((name, str(task_result.status), task_result.id))

        getattr(framework_signals, name).connect(receiver)
        receivers.append((name, receiver))
    yield sent
    for name, receiver in receivers:
        getattr(framework_signals, name).disconnect(receiver)


@pytest.mark.usefixtures("eager")
def test_a_task_enqueued_on_an_eager_queue_runs_at_once(signalled: Any) -> None:
    """Through the Tasks API too, as the framework's ImmediateBackend does: announced, run,
    and returned as it ended; a failure recorded in the result, not raised."""
    result = tasks.add.enqueue(2, 3)
    assert CALLS == [("add", (2, 3))]
    assert (str(result.status), result.return_value) == ("SUCCESSFUL", 5)
    assert result.enqueued_at is not None
    assert result.finished_at is not None
    assert [(name, status) for name, status, _ in signalled] == [
        ("task_enqueued", "READY"),
        ("task_started", "RUNNING"),
        ("task_finished", "SUCCESSFUL"),
    ]
    assert {id_ for _, _, id_ in signalled} == {result.id}

    failed = tasks.fails.enqueue("nope")
    assert str(failed.status) == "FAILED"
    assert failed.errors[0].exception_class_path == "builtins.ValueError"
    assert "raise ValueError(message)" in failed.errors[0].traceback


@pytest.mark.usefixtures("eager")
@pytest.mark.django_db
def test_a_task_enqueued_on_an_eager_queue_in_a_transaction_runs_at_commit(
    django_capture_on_commit_callbacks: Any, signalled: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        result = tasks.add.enqueue(1, 1)
        assert str(result.status) == "READY"
        assert (CALLS, signalled) == ([], [])
    assert CALLS == [("add", (1, 1))]
    assert [name for name, _, _ in signalled] == ["task_enqueued", "task_started", "task_finished"]
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        tasks.add.enqueue(5, 5)
        transaction.set_rollback(True)
    assert CALLS == [("add", (1, 1))]  # rolled back: never ran, never announced
    assert len(signalled) == 3
