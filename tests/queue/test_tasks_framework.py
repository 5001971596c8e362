"""The Django Tasks framework's own backend tests (Django 6's ``tests/tasks/`` and the
``django-tasks`` backport's dummy, immediate and database backend tests), ported onto
``RedisTaskBackend`` on a real redis-server, with our worker running the jobs; plus what
the framework expects of a backend that it does not test itself (results read back equal
to the ones returned, every attempt's error, arguments as the framework normalises them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

import django
import pytest
from django.utils import timezone

try:  # Django 6
    from django.tasks import TaskResultStatus, default_task_backend, task, task_backends
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2: the backport
    from django_tasks import TaskResultStatus, default_task_backend, task, task_backends
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
    from django_tasks.signals import task_enqueued, task_finished, task_started

from django_redislock import get_queue
from django_redislock.exceptions import InvalidTask as Refused
from django_redislock.queue.execution import run_job
from django_redislock.queue.worker.loop import Worker
from django_redislock.tasks.backend import RedisTaskBackend
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, Processes

from .. import task_examples as examples

BACKEND = "django_redislock.tasks.RedisTaskBackend"
LOGGER = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
# "default" fails a task at its first error, "queue-1" retries it once.
QUEUES = {"default": {"MAX_ATTEMPTS": 1}, "queue-1": {"MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.01}}


def configure_backend(settings: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    settings.TASKS = {
        "default": {"BACKEND": BACKEND, "QUEUES": ["default", "queue-1"]},
        "any": {"BACKEND": BACKEND, "QUEUES": []},  # the framework's "any queue"
    }


@pytest.fixture
def tasks(redis_backend: Backend, settings: Any) -> Backend:
    configure_backend(settings)
    return redis_backend


@pytest.fixture
def tasks_everywhere(real_backend: Backend, settings: Any) -> Backend:
    """A real standalone server, then a real Cluster."""
    configure_backend(settings)
    return real_backend


def run_worker(*queues: str) -> Worker:
    """Our worker until nothing is ready; in a thread, so that it installs no signal
    handlers in the test process."""
    worker = Worker(list(queues or ["default"]), burst=True)
    thread = threading.Thread(target=worker.run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return worker


class Received:
    """The (signal, sender, result) of each framework signal sent while in the block, and
    the result's status then (the result sent on enqueue is the one refresh() updates)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any, Any]] = []
        self.statuses: list[tuple[Any, Any]] = []

    def __enter__(self) -> Received:
        for signal in (task_enqueued, task_started, task_finished):
            signal.connect(self.receive)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signal in (task_enqueued, task_started, task_finished):
            signal.disconnect(self.receive)

    def receive(self, signal: Any, sender: Any, task_result: Any, **kwargs: Any) -> None:
        self.sent.append((signal, sender, task_result))
        self.statuses.append((signal, task_result.status))


def assert_not_started(result: Any) -> None:
    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert (result.started_at, result.last_attempted_at, result.finished_at) == (None,) * 3
    assert (result.attempts, result.errors, result.worker_ids) == (0, [], [])
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018


def assert_ran(result: Any, status: Any) -> None:
    assert result.status == status
    assert result.is_finished is True
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at


# --- the backend, enqueue, get_result, refresh ---------------------------------------------


def test_the_configured_backend(tasks: Backend) -> None:
    assert isinstance(task_backends["default"], RedisTaskBackend)
    assert default_task_backend.alias == "default"
    assert default_task_backend.options == {}
    assert list(default_task_backend.check()) == []
    assert list(task_backends["any"].check()) == []


@pytest.mark.parametrize("task_", [examples.noop, examples.anoop], ids=["sync", "async"])
def test_enqueue(tasks: Backend, task_: Any) -> None:
    with Received() as received:
        result = task_.enqueue(1, two=3)
    assert_not_started(result)
    assert result.task == task_
    assert (result.args, result.kwargs, result.backend) == ([1], {"two": 3}, "default")
    assert received.sent == [(task_enqueued, RedisTaskBackend, result)]
    job = get_queue().get(result.id)
    assert (job.task, job.args, job.kwargs, job.meta) == (task_.module_path, [1], {"two": 3}, {})


@pytest.mark.parametrize("task_", [examples.noop, examples.anoop], ids=["sync", "async"])
def test_aenqueue_and_aget_result(tasks: Backend, task_: Any) -> None:
    async def go() -> tuple[Any, Any]:
        result = await task_.aenqueue()
        return result, await default_task_backend.aget_result(result.id)

    result, again = asyncio.run(go())
    assert_not_started(result)
    assert (result.task, result.args, result.kwargs) == (task_, [], {})
    assert again == result


def test_enqueue_logs(tasks: Backend, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        result = examples.noop.enqueue()
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert "enqueued" in record.getMessage()
    assert result.id in record.getMessage()


def using_variants() -> list[dict[str, Any]]:
    later = timezone.now() + timedelta(hours=1)
    return [
        {},
        {"priority": 7},
        {"queue_name": "queue-1"},
        {"run_after": later},
        {"run_after": later.astimezone(timezone.get_fixed_timezone(-300))},
        {"backend": "any", "priority": -3, "run_after": later},
    ]


@pytest.mark.parametrize("changes", using_variants(), ids=lambda c: "+".join(c) or "plain")
def test_get_result_equals_the_enqueued_result(tasks_everywhere: Backend, changes: Any) -> None:
    """Field by field, the task included (priority, queue, run_after, backend alias), and
    ``enqueued_at`` is Redis's clock both times (issue 12, points 8 and 10)."""
    task_ = examples.echo.using(**changes)
    result = task_.enqueue((1, 2), n={"k": None})
    again = task_backends[task_.backend].get_result(result.id)
    assert again == result
    assert dataclasses.asdict(again) == dataclasses.asdict(result)
    assert again.task == task_
    assert again.backend == task_.backend
    assert result.enqueued_at == get_queue(task_.queue_name).get(result.id).enqueued_at
    assert examples.echo.get_result(result.id) == result  # through the declared task too
    fetched = examples.echo.get_result(result.id)
    fetched.refresh()  # through the alias it was enqueued with, restored
    assert dataclasses.asdict(fetched) == dataclasses.asdict(result)


def test_refresh_changes_nothing_while_nothing_changed(tasks: Backend) -> None:
    result = examples.answer.using(run_after=timezone.now() + timedelta(hours=1)).enqueue()
    before = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == before
    asyncio.run(result.arefresh())
    assert dataclasses.asdict(result) == before


def test_job_metadata_is_kept_small(tasks: Backend) -> None:
    later = timezone.now() + timedelta(minutes=5)
    plain = examples.noop.enqueue()
    deferred = examples.noop.using(run_after=later).enqueue()
    other = examples.noop.using(backend="any").enqueue()
    assert get_queue().get(plain.id).meta == {}
    assert get_queue().get(deferred.id).meta == {"run_after": later.isoformat()}
    assert get_queue().get(other.id).meta == {"backend": "any"}


def test_missing_results(tasks: Backend) -> None:
    for backend in (task_backends["default"], task_backends["any"]):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result("123")
        with pytest.raises(TaskResultDoesNotExist):
            asyncio.run(backend.aget_result("no-such-id"))
    with pytest.raises(TaskResultDoesNotExist):
        examples.noop.get_result("123")


def test_get_result_of_another_task(tasks: Backend) -> None:
    result = examples.anoop.enqueue()
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        examples.noop.get_result(result.id)


def test_validation_on_enqueue(tasks: Backend) -> None:
    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        examples.noop.using(queue_name="unknown_queue")
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        examples.noop.using(run_after=datetime.now())
    for priority in (101, -101, 3.1):
        with pytest.raises(InvalidTask, match="priority must be a whole number"):
            examples.noop.using(priority=priority)
    with pytest.raises(InvalidTask, match="must be defined at a module level"):
        task()(lambda: None)


def test_validation_on_enqueue_with_other_settings(tasks: Backend, settings: Any) -> None:
    task_ = examples.noop.using(queue_name="queue-1")
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": ["default"]}}
    with pytest.raises(InvalidTask, match="Queue 'queue-1' is not valid for backend"):
        task_.enqueue()
    with pytest.raises(InvalidTask, match="Queue 'queue-1' is not valid for backend"):
        asyncio.run(task_.aenqueue())


def test_a_capability_switched_off_refuses_tasks_already_enqueued(
    tasks: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As Django's own backend tests do: a capability patched off on the live backend holds
    # for the next enqueue, even of a task this backend accepted (and remembered) before.
    backend = default_task_backend
    examples.anoop.enqueue()
    examples.noop.using(priority=5).enqueue()
    monkeypatch.setattr(backend, "supports_async_task", False)
    with pytest.raises(InvalidTask, match=r"(?i)async tasks"):
        examples.anoop.enqueue()
    examples.noop.enqueue()  # still fine
    monkeypatch.setattr(backend, "supports_priority", False)
    with pytest.raises(InvalidTask, match=r"(?i)priority"):
        examples.noop.using(priority=5).enqueue()
    monkeypatch.undo()
    assert examples.anoop.enqueue().status == TaskResultStatus.READY


@pytest.mark.processes
def test_results_from_another_process(tasks: Backend, processes: Processes) -> None:
    """A result read in one process equals the one returned in another."""
    sent = processes.queue()
    child = processes.start(_enqueue_and_send, sent)
    result_id, enqueued_at, args = sent.get(timeout=30)
    child.join(30)
    assert child.exitcode == 0
    result = examples.echo.get_result(result_id)
    assert (result.enqueued_at, result.args) == (enqueued_at, args)
    assert result.task == examples.echo.using(priority=4)


def _enqueue_and_send(sent: Any) -> None:
    result = examples.echo.using(priority=4).enqueue((1, "two"), {"3": 4.5})
    sent.put((result.id, result.enqueued_at, result.args))


def test_ready_order(tasks: Backend) -> None:
    """Priority first, and a run_after in the future keeps a task out of the ready set. In
    one priority, tasks run in the order they became ready (the database backend orders by
    run_after there)."""
    now = timezone.now()
    old = examples.noop.using(priority=20, run_after=now - timedelta(hours=2)).enqueue()
    older = examples.noop.using(priority=20, run_after=now - timedelta(hours=10)).enqueue()
    examples.noop.using(run_after=now + timedelta(hours=10)).enqueue()
    examples.noop.using(priority=10, run_after=now + timedelta(hours=10)).enqueue()
    high = examples.noop.using(priority=10).enqueue()
    low = examples.noop.using(priority=2).enqueue()
    lower = examples.noop.using(priority=-2).enqueue()
    ready = [job.id for job in get_queue().peek(10)]
    assert ready == [old.id, older.id, high.id, low.id, lower.id]
    assert get_queue().counts()["scheduled"] == 2


# --- QUEUES = [] (issue 12, point 7) -------------------------------------------------------


def test_any_queue_backend(tasks_everywhere: Backend) -> None:
    results = [
        examples.answer.using(backend="any", queue_name=name).enqueue()
        for name in ("default", "queue-1")
    ]
    for result in results:
        assert task_backends["any"].get_result(result.id) == result
    run_worker("default", "queue-1")
    for result in results:
        result.refresh()
        assert_ran(result, TaskResultStatus.SUCCESSFUL)
        assert result.return_value == 42
    with pytest.raises(InvalidTask, match="Unknown queue 'elsewhere'"):
        examples.answer.using(backend="any", queue_name="elsewhere").enqueue()
    assert get_queue().counts()["ready"] == get_queue("queue-1").counts()["ready"] == 0


# --- run by the worker ----------------------------------------------------------------------


def test_run_enqueued_task(tasks: Backend) -> None:
    with Received() as received:
        result = examples.answer.enqueue()
        worker = run_worker()
    assert_not_started(result)  # a result is a snapshot until refreshed
    result.refresh()
    assert_ran(result, TaskResultStatus.SUCCESSFUL)
    assert (result.return_value, result.attempts, result.worker_ids) == (42, 1, [worker.id])
    assert received.statuses == [
        (task_enqueued, TaskResultStatus.READY),
        (task_started, TaskResultStatus.RUNNING),
        (task_finished, TaskResultStatus.SUCCESSFUL),
    ]


def test_only_the_worker_of_its_queue_runs_it(tasks: Backend) -> None:
    result = examples.answer.using(queue_name="queue-1").enqueue()
    run_worker("default")
    result.refresh()
    assert result.status == TaskResultStatus.READY
    run_worker("queue-1")
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_run_after(tasks: Backend) -> None:
    result = examples.answer.using(run_after=timezone.now() + timedelta(hours=10)).enqueue()
    run_worker()
    result.refresh()
    assert_not_started(result)
    assert get_queue().requeue(result.id)  # as if it were due now
    run_worker()
    result.refresh()
    assert_ran(result, TaskResultStatus.SUCCESSFUL)
    assert result.task.run_after is not None  # still what it was enqueued with


def test_failing_task(tasks: Backend, caplog: pytest.LogCaptureFixture) -> None:
    result = examples.broken.enqueue()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        run_worker()
    [failed] = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]
    assert "state=FAILED" in failed.getMessage()
    assert result.id in failed.getMessage()
    result.refresh()
    assert_ran(result, TaskResultStatus.FAILED)
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    [error] = result.errors
    assert error.exception_class is ValueError
    assert error.traceback.endswith("ValueError: broken on purpose\n")


def test_complex_exception(tasks: Backend) -> None:
    result = examples.wrapped_error.enqueue()
    run_worker()
    result.refresh()
    assert_ran(result, TaskResultStatus.FAILED)
    assert result.errors[0].exception_class is ValueError
    assert 'raise ValueError(KeyError("inner cause"))' in result.errors[0].traceback


def test_return_value_normalised_or_refused(tasks: Backend) -> None:
    normalised = examples.returns_bytes_and_tuples.enqueue()
    refused = examples.returns_a_datetime.enqueue()
    run_worker()
    normalised.refresh()
    assert normalised.return_value == ["raw", [1, 2]]  # as the framework's backends keep it
    refused.refresh()
    assert_ran(refused, TaskResultStatus.FAILED)
    assert refused.errors[0].exception_class is Refused
    assert "not JSON-serializable" in refused.errors[0].traceback


def test_context(tasks: Backend) -> None:
    own = examples.own_id.enqueue()
    attempt = examples.attempt_is.enqueue(1)
    run_worker()
    assert examples.own_id.get_result(own.id).return_value == own.id
    assert examples.attempt_is.get_result(attempt.id).return_value is True


def test_every_failed_attempt_has_its_error(tasks: Backend) -> None:
    """One TaskError per failed attempt, oldest first, the lease running out included
    (issue 12, point 9)."""
    queue = get_queue("queue-1")
    result = examples.broken.using(queue_name="queue-1").enqueue()
    worker = run_worker("queue-1")  # attempt 1 raises; retried after 10 ms
    time.sleep(0.05)
    [job] = queue.pop(lease=0.05, worker="vanished")  # attempt 2: its worker dies
    assert job.id == result.id
    time.sleep(0.15)
    assert queue.pop() == []  # takes the lease back: that was the last attempt
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.worker_ids == [worker.id, "vanished"]
    first, second = result.errors
    assert first.exception_class is ValueError
    assert first.traceback.endswith("ValueError: broken on purpose\n")
    assert second.exception_class is Exception  # nothing was raised: no class of its own
    assert "lease ran out" in second.traceback


def test_retried_failures_keep_each_error(tasks: Backend) -> None:
    result = examples.broken.using(queue_name="queue-1").enqueue()
    run_worker("queue-1")
    time.sleep(0.05)
    run_worker("queue-1")
    result.refresh()
    assert (result.status, result.attempts, len(result.errors)) == (TaskResultStatus.FAILED, 2, 2)
    assert [e.exception_class for e in result.errors] == [ValueError, ValueError]


@pytest.mark.parametrize(
    ("task_", "raised"),
    [(examples.exits, SystemExit), (examples.interrupted, KeyboardInterrupt)],
    ids=["SystemExit", "KeyboardInterrupt"],
)
def test_base_exceptions_finish_the_task_as_failed(tasks: Backend, task_: Any, raised: Any) -> None:
    """``run_job`` reports a task that raised SystemExit or KeyboardInterrupt as FAILED, then
    lets the exception go on to the worker."""
    result = task_.enqueue()
    [job] = get_queue().pop()
    with Received() as received, pytest.raises(raised):
        run_job(job)
    assert received.statuses == [
        (task_started, TaskResultStatus.RUNNING),
        (task_finished, TaskResultStatus.FAILED),
    ]
    [_, (_, sender, finished)] = received.sent
    assert (sender, finished.id) == (RedisTaskBackend, result.id)
    assert finished.errors[-1].exception_class is raised
    assert finished.finished_at is not None


def test_the_worker_runs_the_task_as_enqueued(tasks: Backend) -> None:
    """The results the worker's signals carry name the backend alias it was enqueued with."""
    result = examples.answer.using(backend="any", priority=5).enqueue()
    with Received() as received:
        run_worker()
    assert [r.task for _, _, r in received.sent] == [result.task] * 2
    assert {r.backend for _, _, r in received.sent} == {"any"}


# --- what the worker refuses (issue 12, point 11) ----------------------------------------


def _orphan() -> None:
    raise AssertionError("must never run")


_orphan.__module__ = "not_an_installed_app"  # as if declared in a module of no installed app


def test_enqueue_refuses_what_the_worker_would_refuse(tasks: Backend) -> None:
    with pytest.raises(InvalidTask, match="is not a task"):
        examples.undecorated_task.enqueue()
    with pytest.raises(InvalidTask, match="not in an installed app"):
        task()(_orphan).enqueue()
    with pytest.raises(InvalidTask, match="names another task"):
        examples.first_redefined.enqueue()
    assert get_queue().counts() == job_counts()


REFUSED = ["subprocess.check_output", "missing.func", "tests.tasks.not_a_task", "tests.tasks.nope"]


@pytest.mark.parametrize("path", REFUSED)
def test_a_refused_job_has_a_failed_result(tasks: Backend, path: str) -> None:
    job = get_queue().enqueue(path, [["exit", "1"]])
    for backend in (task_backends["default"], task_backends["any"]):
        ready = backend.get_result(job.id)
        assert ready.status == TaskResultStatus.READY
        assert ready.task.module_path == path
    run_worker()
    result = default_task_backend.get_result(job.id)
    assert result.status == TaskResultStatus.FAILED
    assert result.task.module_path == path
    [error] = result.errors
    assert error.exception_class is Refused
    assert path in error.traceback
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert default_task_backend.get_result(job.id) == result


# --- arguments (issue 12, point 12) ----------------------------------------------------------


def test_arguments_as_the_framework_normalises_them(tasks: Backend) -> None:
    """What the framework accepts, through Redis and back, as its own backends keep it:
    tuples (nested too) become lists, bytes text, mappings dicts, dict keys strings."""
    args = ((1, (2, 3)), {1: "one", None: (4,)}, b"bytes", MappingProxyType({"m": range(2)}))
    result = examples.echo.enqueue(*args, opt=[("a", 1)])
    expected_args = [[1, [2, 3]], {"1": "one", "null": [4]}, "bytes", {"m": [0, 1]}]
    expected_kwargs = {"opt": [["a", 1]]}
    assert (result.args, result.kwargs) == (expected_args, expected_kwargs)
    assert examples.echo.get_result(result.id) == result
    run_worker()
    result.refresh()
    assert result.return_value == {"args": expected_args, "kwargs": expected_kwargs}


def test_arguments_the_framework_refuses(tasks: Backend) -> None:
    with pytest.raises(TypeError, match="Unsupported type"):
        examples.noop.enqueue(datetime.now())
    with pytest.raises(TypeError, match="Unsupported type"):
        asyncio.run(examples.noop.aenqueue(key={1, 2}))
    with pytest.raises(ValueError, match="Unsupported value"):
        examples.noop.enqueue(b"\xff")
    assert get_queue().counts()["ready"] == 0


# --- a damaged job in Redis never breaks get_result -----------------------------------------

DAMAGE = {
    "priority": lambda c, key: c.hset(key, "pr", "high"),
    "attempts": lambda c, key: c.hset(key, "a", "many"),
    "enqueued": lambda c, key: c.hset(key, "e", "yesterday"),
    "due": lambda c, key: c.hset(key, "sc", "soon"),
    "task missing": lambda c, key: c.hdel(key, "t"),
    "bad json args": lambda c, key: c.hset(key, "ar", "[1, 2"),
    "bad metadata": lambda c, key: c.hset(key, "m", "{nope"),
    "not a hash": lambda c, key: (c.delete(key), c.set(key, "garbage")),
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_get_result_of_a_damaged_job_answers(tasks: Backend, how: str) -> None:
    result = examples.add.enqueue(1, 2)
    key = get_queue().key("j:" + result.id)
    DAMAGE[how](tasks.client, key)
    again = examples.add.get_backend().get_result(result.id)
    assert again.id == result.id


def test_get_result_of_a_job_whose_hash_is_gone(tasks: Backend) -> None:
    """Its data gone, the job does not exist for get_result (an answer, not a crash); once a
    worker's pop met it, it is dead, and its result FAILED says why."""
    result = examples.add.enqueue(1, 2)
    tasks.client.delete(get_queue().key("j:" + result.id))
    backend = examples.add.get_backend()
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(result.id)
    assert get_queue().pop(10) == []  # nothing runnable: it is set aside
    buried = backend.get_result(result.id)
    assert buried.status.name == "FAILED"
    assert buried.errors
    assert "gone" in buried.errors[-1].traceback or "missing" in buried.errors[-1].traceback


def test_get_result_of_a_finished_job_whose_value_is_damaged(tasks: Backend) -> None:
    result = examples.add.enqueue(1, 2)
    run_worker("default")
    queue = get_queue()
    tasks.client.hset(queue.key("result:" + result.id), "v", "{not json")
    again = examples.add.get_backend().get_result(result.id)
    assert again.status.name == "FAILED"  # what it returned cannot be given back
    assert "not JSON" in again.errors[-1].traceback
    with pytest.raises(ValueError, match="failed"):
        again.return_value  # noqa: B018
