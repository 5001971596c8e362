"""Django's own ``tests/tasks/`` (test_tasks.py, test_immediate_backend.py,
test_dummy_backend.py, test_custom_backend.py, and the task helpers of tests/tasks/tasks.py),
ported onto ``RedisTaskBackend``: only what ``test_tasks_framework.py`` and ``test_tasks.py``
do not already cover. Each test names the Django test it comes from. Jobs run in our worker
(a burst ``Worker`` in a thread) wherever Django's backend would have produced a result.

Left out, and why:

* test_immediate_backend: ``test_cannot_get_result``, ``test_cannot_refresh_result``,
  ``test_cannot_pass_run_after``; test_custom_backend: ``test_backend_does_not_support_priority``:
  our backend supports results, run_after and priority (the opposite is tested below, in
  ``test_capability_flags_drive_validation``).
* test_immediate_backend: ``test_throws_keyboard_interrupt`` (no ERROR log, nothing recorded):
  our runner records a KeyboardInterrupt as a FAILED attempt, on purpose, so that a worker
  interrupted mid-task leaves a result; ``test_tasks_framework.py`` tests that.
* Both transaction test cases (the immediate and dummy backends do not wait for the commit):
  our queues push at the commit by default (``ON_COMMIT``); ``test_on_commit.py`` tests both.
* test_tasks: ``test_call_task*``, ``test_name``, ``test_module_path``, ``test_using_*_backend``,
  ``test_no_backends``, ``test_unpickle_*``, the ``TaskResult`` ordering, equality and hash
  tests: the framework's own objects and connection handler, where no backend is involved
  (the ordering, equality and hash methods exist in neither Django 6.1 nor the backport).
* test_custom_backend: ``test_options``, ``test_no_enqueue``: our backend takes no OPTIONS
  (``test_tasks.py::test_backend_checks``: E014) and is not abstract.
* test_dummy_backend: ``test_clear`` (the dummy's test helper), ``test_errors``,
  ``test_check``, ``test_takes_context`` (already in ``test_tasks_framework.py``).
* test_metadata.py: task metadata is newer than Django 6.1 and the backport; neither line has it.
* test_utils.py: the framework's helpers (``is_module_level_function``, JSON normalising,
  exception serialising), not a backend's behaviour.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import threading
from datetime import timedelta
from typing import Any
from unittest import mock

import django
import pytest
from django.utils import timezone

try:  # Django 6
    from django.tasks import TaskResultStatus, default_task_backend, task, task_backends
    from django.tasks.base import Task
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2: the backport
    from django_tasks import (  # type: ignore[assignment, no-redef]
        TaskResultStatus,
        default_task_backend,
        task,
        task_backends,
    )
    from django_tasks.base import Task  # type: ignore[assignment]
    from django_tasks.exceptions import InvalidTaskError as InvalidTask  # type: ignore[assignment]
    from django_tasks.exceptions import (  # type: ignore[assignment]
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )
    from django_tasks.signals import task_enqueued, task_finished, task_started

from django_redislock import get_queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.tasks.backend import RedisTaskBackend

from .. import task_examples as examples
from ..conftest import Backend

FRAMEWORK_LOGGER = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
BACKEND_PATH = "django_redislock.tasks.RedisTaskBackend"
# Django's tests hand the backends a tuple of arguments (typed as a list by the stubs).
NO_ARGS: Any = ()


@task
def from_bare_decorator(*args: Any, **kwargs: Any) -> str:
    """Declared with ``@task`` and no parentheses (Django's noop_task_from_bare_decorator)."""
    return "bare"


@pytest.fixture
def redis_tasks(redis_backend: Backend, settings: Any) -> Backend:
    """A real redis-server; "default" gives up at the first failure, "other" is a second
    queue; the "open" alias takes any queue (``QUEUES: []``)."""
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"MAX_ATTEMPTS": 1}, "other": {"MAX_ATTEMPTS": 1}},
    }
    settings.TASKS = {
        "default": {"BACKEND": BACKEND_PATH, "QUEUES": ["default", "other"]},
        "open": {"BACKEND": BACKEND_PATH, "QUEUES": []},
    }
    return redis_backend


def work(*queues: str) -> Worker:
    """Drain ``queues`` with a burst worker, in a thread (no signal handlers installed here)."""
    worker = Worker(list(queues) or ["default"], burst=True)
    runner = threading.Thread(target=worker.run)
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), "the burst worker did not stop"
    return worker


class Heard:
    """Every framework signal sent inside the block: (signal, sender, task_result), and the
    result's status and start time as they were when it was sent (like the framework's own
    backends, ours sends one result object to both task_started and task_finished)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any, Any]] = []
        self.seen: list[tuple[Any, Any]] = []

    def __enter__(self) -> Heard:
        for signal in (task_enqueued, task_started, task_finished):
            signal.connect(self._heard)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signal in (task_enqueued, task_started, task_finished):
            signal.disconnect(self._heard)

    def _heard(self, signal: Any, sender: Any, task_result: Any, **kwargs: Any) -> None:
        self.calls.append((signal, sender, task_result))
        self.seen.append((task_result.status, task_result.started_at))


def check_times(result: Any) -> None:
    """The timestamps of a finished result, in the order the framework promises."""
    assert result.is_finished is True
    assert None not in (result.started_at, result.last_attempted_at, result.finished_at)
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at


# --- tests/tasks/test_tasks.py ------------------------------------------------------------


def test_bare_decorator_task_is_enqueued_and_run(redis_tasks: Backend) -> None:
    # Origin: test_tasks.py::test_task_decorator (the bare ``@task`` form), here enqueued on
    # our backend and run by the worker.
    assert isinstance(from_bare_decorator, Task)
    result = from_bare_decorator.enqueue(5)
    work()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == "bare"
    assert result.task == from_bare_decorator


def test_using_validates_on_our_backend_and_leaves_the_original(redis_tasks: Backend) -> None:
    # Origin: test_tasks.py::test_using_priority, test_using_queue_name, test_using_run_after,
    # test_using_creates_new_instance, test_chained_using, test_get_backend.
    base = examples.noop
    moment = timezone.now() + timedelta(minutes=30)
    copy = base.using()
    assert copy == base
    assert copy is not base
    deferred = base.using(run_after=moment)
    chained = deferred.using(priority=10).using(queue_name="other")
    assert (chained.run_after, chained.priority, chained.queue_name) == (moment, 10, "other")
    assert (deferred.priority, deferred.queue_name) == (0, "default")
    assert (base.priority, base.queue_name, base.run_after) == (0, "default", None)
    assert isinstance(base.get_backend(), RedisTaskBackend)
    elsewhere = base.using(backend="open")
    assert elsewhere.backend == "open"
    assert isinstance(elsewhere.get_backend(), RedisTaskBackend)
    assert base.backend == "default"
    # What the chain built is what our backend gives back.
    result = chained.enqueue()
    assert default_task_backend.get_result(result.id).task == chained


def test_priority_bounds_are_accepted_and_ordered(redis_tasks: Backend) -> None:
    # Origin: test_tasks.py::test_invalid_priority (its second half: 100, -100 and 0 are
    # valid), enqueued on Redis, where the bounds must still order the ready jobs.
    lowest = examples.noop.using(priority=-100).enqueue()
    middle = examples.noop.using(priority=0).enqueue()
    highest = examples.noop.using(priority=100).enqueue()
    for result, priority in ((lowest, -100), (middle, 0), (highest, 100)):
        assert default_task_backend.get_result(result.id).task.priority == priority
    assert [job.id for job in get_queue().peek(3)] == [highest.id, middle.id, lowest.id]


def test_task_aget_result(redis_tasks: Backend) -> None:
    # Origin: test_tasks.py::test_get_result_async, the async half of
    # test_get_missing_result, and test_get_incorrect_result_async: through the Task's own
    # aget_result, not the backend's.
    async def scenario() -> None:
        result = await default_task_backend.aenqueue(examples.noop, NO_ARGS, {})
        assert await examples.noop.aget_result(result.id) == result
        with pytest.raises(TaskResultDoesNotExist):
            await examples.noop.aget_result("123")
        other = await default_task_backend.aenqueue(examples.anoop, NO_ARGS, {})
        with pytest.raises(TaskResultMismatch, match="Task does not match"):
            await examples.noop.aget_result(other.id)

    asyncio.run(scenario())


class _Holder:
    def method(self) -> None:
        return None


@pytest.mark.parametrize("function", [any, _Holder().method], ids=["builtin", "bound-method"])
def test_functions_not_at_module_level_are_refused(redis_tasks: Backend, function: Any) -> None:
    # Origin: test_tasks.py::test_invalid_function (a builtin, a bound method).
    with pytest.raises(InvalidTask, match="Task function must be defined at a module level"):
        task()(function)


def test_takes_context_needs_a_context_argument(redis_tasks: Backend) -> None:
    # Origin: test_tasks.py::test_takes_context_without_taking_context.
    with pytest.raises(InvalidTask, match="does not have a first argument of 'context'"):
        task(takes_context=True)(examples.answer.func)


def test_result_pickles_as_the_framework_allows(redis_tasks: Backend) -> None:
    # Origin: test_tasks.py::test_pickle_task and test_pickle_task_result. Django 6 pickles a
    # Task by its module path: a result read back from Redis, after a run, must round-trip.
    # The backport's Task has no such support (its function is shadowed by the Task object),
    # and pickling fails there as it fails for its own backends' results.
    result = examples.broken.using(priority=3).enqueue()
    work()
    result.refresh()
    if hasattr(Task, "_reconstruct"):
        assert pickle.loads(pickle.dumps(examples.answer)) == examples.answer
        again = pickle.loads(pickle.dumps(result))
        assert again == result
        assert again.errors[0].exception_class is ValueError
    else:
        with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
            pickle.dumps(result)


def test_error_class_path_that_is_no_exception(redis_tasks: Backend) -> None:
    # Origin: test_tasks.py::test_task_error_invalid_exception and
    # test_task_error_unknown_module, on an error our worker recorded.
    result = examples.broken.enqueue()
    work()
    result.refresh()
    [error] = result.errors
    assert error.exception_class is ValueError
    object.__setattr__(error, "exception_class_path", "subprocess.run")
    with pytest.raises(ValueError, match=r"'subprocess\.run' does not reference a valid exception"):
        error.exception_class  # noqa: B018
    object.__setattr__(error, "exception_class_path", "does.not.exist")
    with pytest.raises(ImportError):
        error.exception_class  # noqa: B018


# --- tests/tasks/test_immediate_backend.py --------------------------------------------------


@pytest.mark.parametrize("task_", [examples.noop, examples.anoop], ids=["sync", "async"])
def test_run_with_arguments(redis_tasks: Backend, task_: Any) -> None:
    # Origin: test_immediate_backend.py::test_enqueue_task, the run done by our worker.
    result = task_.enqueue(1, two=3)
    work()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    check_times(result)
    assert result.return_value is None
    assert (result.task, result.args, result.kwargs) == (task_, [1], {"two": 3})
    assert result.attempts == 1


@pytest.mark.parametrize("task_", [examples.noop, examples.anoop], ids=["sync", "async"])
def test_aenqueue_then_run(redis_tasks: Backend, task_: Any) -> None:
    # Origin: test_immediate_backend.py::test_enqueue_task_async, the run done by our worker.
    result = asyncio.run(task_.aenqueue())
    work()
    asyncio.run(result.arefresh())
    assert result.status == TaskResultStatus.SUCCESSFUL
    check_times(result)
    assert result.return_value is None
    assert (result.task, result.args, result.kwargs, result.attempts) == (task_, [], {}, 1)


@pytest.mark.parametrize(
    ("task_", "raised", "message"),
    [
        (examples.broken, ValueError, "broken on purpose"),
        (examples.exits, SystemExit, "the task called exit"),
    ],
    ids=["ValueError", "SystemExit"],
)
def test_failure_is_logged_and_recorded(
    redis_tasks: Backend, caplog: pytest.LogCaptureFixture, task_: Any, raised: Any, message: str
) -> None:
    # Origin: test_immediate_backend.py::test_catches_exception: one ERROR line on the
    # framework's logger that carries the exception (task_finished is sent while it is being
    # handled), and the traceback recorded ends with the exception's own line.
    result = task_.enqueue()
    with caplog.at_level(logging.DEBUG, logger=FRAMEWORK_LOGGER):
        work()
    errors = [r for r in caplog.records if r.name == FRAMEWORK_LOGGER and r.levelno >= 40]
    assert len(errors) == 1
    assert message in logging.Formatter().format(errors[0])
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    check_times(result)
    assert result.errors[0].exception_class is raised
    assert result.errors[0].traceback.endswith(f"{raised.__name__}: {message}\n")
    assert (result.task, result.args, result.kwargs) == (task_, [], {})


@pytest.mark.parametrize("asynchronous", [False, True], ids=["enqueue", "aenqueue"])
def test_backend_enqueue_called_directly(redis_tasks: Backend, asynchronous: bool) -> None:
    # Origin: test_immediate_backend.py::test_result and test_result_async (and
    # test_dummy_backend.py::test_get_result / test_get_result_async): the backend's own
    # enqueue, given a tuple or a list of arguments.
    backend = default_task_backend
    if asynchronous:
        result = asyncio.run(backend.aenqueue(examples.answer, NO_ARGS, {}))
    else:
        result = backend.enqueue(examples.answer, [], {})
    assert (result.args, result.kwargs) == ([], {})
    assert backend.get_result(result.id) == result
    work()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42


def test_log_lines_of_a_successful_run(
    redis_tasks: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    # Origin: test_immediate_backend.py::test_enqueue_logs and
    # test_successful_task_no_none_type_in_logs: enqueued, RUNNING, SUCCESSFUL, each with the
    # result's id, and no "NoneType" (no empty exc_info turned into text).
    with caplog.at_level(logging.DEBUG, logger=FRAMEWORK_LOGGER):
        result = examples.noop.enqueue()
        work()
    lines = [logging.Formatter().format(r) for r in caplog.records if r.name == FRAMEWORK_LOGGER]
    assert len(lines) == 3
    expected_words = ("enqueued", "state=RUNNING", "state=SUCCESSFUL")
    for line, expected in zip(lines, expected_words, strict=True):
        assert expected in line
        assert result.id in line
        assert "NoneType" not in line


def test_log_lines_of_a_failed_run(redis_tasks: Backend, caplog: pytest.LogCaptureFixture) -> None:
    # Origin: test_immediate_backend.py::test_failed_logs.
    with caplog.at_level(logging.DEBUG, logger=FRAMEWORK_LOGGER):
        result = examples.broken.enqueue()
        work()
    records = [r for r in caplog.records if r.name == FRAMEWORK_LOGGER]
    assert len(records) == 3
    assert "state=RUNNING" in records[1].getMessage()
    assert "state=FAILED" in records[2].getMessage()
    assert all(result.id in r.getMessage() for r in records)


def test_signals_of_an_async_enqueue_and_its_run(redis_tasks: Backend) -> None:
    # Origin: test_immediate_backend.py::test_enqueue_logs, whose log lines are written by
    # the framework's receivers of task_enqueued, task_started and task_finished: here each
    # signal's sender (the backend's class) and the result it carries, for aenqueue and for
    # the run in our worker.
    with Heard() as heard:
        result = asyncio.run(examples.answer.aenqueue())
        work()
    assert [signal for signal, _, _ in heard.calls] == [task_enqueued, task_started, task_finished]
    assert {sender for _, sender, _ in heard.calls} == {RedisTaskBackend}
    enqueued, started, finished = (sent for _, _, sent in heard.calls)
    assert enqueued is result
    assert {started.id, finished.id} == {result.id}
    assert heard.seen[0] == (TaskResultStatus.READY, None)
    assert heard.seen[1][0] == TaskResultStatus.RUNNING
    assert heard.seen[1][1] is not None
    assert heard.seen[2][0] == TaskResultStatus.SUCCESSFUL
    assert finished.return_value == 42


# --- tests/tasks/test_dummy_backend.py and test_custom_backend.py ---------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["refresh", "arefresh"])
def test_refresh_sees_what_the_worker_did(redis_tasks: Backend, asynchronous: bool) -> None:
    # Origin: test_dummy_backend.py::test_refresh_result and test_refresh_result_async; the
    # stored result is changed by a worker run rather than by hand.
    result = default_task_backend.enqueue(examples.answer, NO_ARGS, {})
    work()
    assert result.status == TaskResultStatus.READY  # a snapshot until refreshed
    if asynchronous:
        asyncio.run(result.arefresh())
    else:
        result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42


def test_capability_flags_drive_validation(redis_tasks: Backend) -> None:
    # Origin: test_custom_backend.py::test_enqueue_async_task_on_non_async_backend,
    # test_dummy_backend.py::test_validate_disallowed_async_task, and the checks behind
    # test_immediate_backend.py::test_cannot_pass_run_after and
    # test_custom_backend.py::test_backend_does_not_support_priority: our backend claims all
    # four capabilities, and the framework's validation follows each claim.
    backend = task_backends["default"]
    flags = ("supports_defer", "supports_async_task", "supports_get_result", "supports_priority")
    assert all(getattr(backend, flag) is True for flag in flags)
    with (
        mock.patch.object(backend, "supports_async_task", False),
        pytest.raises(InvalidTask, match=r"(?i)Backend does not support async tasks"),
    ):
        backend.validate_task(examples.anoop)
    with (
        mock.patch.object(backend, "supports_priority", False),
        pytest.raises(InvalidTask, match="Backend does not support setting priority"),
    ):
        examples.noop.using(priority=10)
    with (
        mock.patch.object(backend, "supports_defer", False),
        pytest.raises(InvalidTask, match="Backend does not support run_after"),
    ):
        examples.noop.using(run_after=timezone.now())
