"""A queue job seen as a Django task: the framework's classes (``django.tasks`` on Django 6,
the ``django-tasks`` backport on Django 5.2), a job's ``TaskResult`` and the task it was
enqueued as. Which task a job names is ``queue.execution.resolve_task``'s; its arguments
and return value as JSON are ``values``'.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timezone
from functools import lru_cache
from importlib import import_module
from typing import Any

import django
from django.core.exceptions import ImproperlyConfigured

from ..exceptions import InvalidTask
from ..queue.jobs import AttemptError, Job, JobState
from ..queue.options import option_changes

FRAMEWORK = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
try:
    _framework: Any = import_module(FRAMEWORK)
    _base: Any = import_module(f"{FRAMEWORK}.base")
    framework_backends: Any = import_module(f"{FRAMEWORK}.backends.base")
    signals: Any = import_module(f"{FRAMEWORK}.signals")
    _exceptions: Any = import_module(f"{FRAMEWORK}.exceptions")
    _json: Any = import_module(
        "django.utils.json" if FRAMEWORK == "django.tasks" else "django_tasks.utils"
    )
except ImportError as exc:  # Django 5.2 without the backport
    raise ImproperlyConfigured(
        "The django-redislock job queue runs Django Tasks; on Django 5.2 install the "
        "backport: pip install 'django-redislock[tasks]'."
    ) from exc

framework: Any = _framework  # the Tasks framework's package, and its base module
framework_base: Any = _base
Task = _base.Task
TaskResult = _base.TaskResult
TaskResultStatus = _base.TaskResultStatus
TaskContext = _base.TaskContext
TaskError = _base.TaskError
TaskResultDoesNotExist = _exceptions.TaskResultDoesNotExist
# The framework's own "this task cannot be enqueued" (renamed InvalidTask in Django 6).
FrameworkInvalidTask = getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError
normalize_json = _json.normalize_json

_STATUS: dict[str, Any] = {
    JobState.READY: TaskResultStatus.READY,
    JobState.SCHEDULED: TaskResultStatus.READY,
    JobState.RUNNING: TaskResultStatus.RUNNING,
    JobState.DEAD: TaskResultStatus.FAILED,
    JobState.DONE: TaskResultStatus.SUCCESSFUL,
    JobState.UNKNOWN: TaskResultStatus.FAILED,  # not a hash in Redis: the worker buries it
}
NOT_A_TASK = "The job's payload is not a JSON task description."
# Types JSON gives back as they went in (exact types: a subclass comes back as its base).
SCALARS = frozenset({str, int, float, bool, type(None)})


class RedisTaskResult(TaskResult):  # type: ignore[misc,valid-type]
    """The framework's ``TaskResult``, with what this backend adds: waiting for the end
    (``join``, ``ajoin``: woken by it, no polling) and what the task published while it ran
    (``metadata``, ``progress``: read from Redis at each access)."""

    __slots__ = ()

    def _queue(self) -> Any:
        return self.task.get_backend().queue_of(self.task.queue_name)

    def join(self, timeout: float | None = None) -> RedisTaskResult:
        """Wait until the task ends (done or dead), then refresh this result and return it.
        ``TimeoutError`` after ``timeout`` seconds (None: no limit)."""
        self._queue().join(self.id, timeout)
        self.refresh()
        return self

    async def ajoin(self, timeout: float | None = None) -> RedisTaskResult:
        """``join`` for asyncio."""
        await self._queue().ajoin(self.id, timeout)
        await self.arefresh()
        return self

    @property
    def metadata(self) -> dict[str, Any]:
        """What the task published with ``context.save_metadata()`` ({} for nothing)."""
        return self._queue().published(self.id)[0]  # type: ignore[no-any-return]

    @property
    def progress(self) -> tuple[int, int] | None:
        """(done, total) as the task set it with ``context.set_progress``, else None."""
        return self._queue().published(self.id)[1]  # type: ignore[no-any-return]


def when(epoch_ms: int) -> datetime | None:
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc) if epoch_ms else None


def attempt_errors(job: Job) -> list[Any]:
    """One ``TaskError`` per failed attempt, oldest first. An attempt that raised nothing
    (its lease ran out; a failure recorded as text) has no class: ``Exception`` stands in,
    as ``TaskError.exception_class`` must import one; its text is the traceback."""
    errors = job.errors
    if not errors and job.error:  # buried before any attempt ran, or stored without history
        errors = (AttemptError(job.error, job.error_class, job.traceback),)
    return [
        TaskError(
            exception_class_path=error.error_class or "builtins.Exception",
            traceback=error.traceback or error.error,
        )
        for error in errors
    ]


def task_result(job: Job, task: Any, backend: str, status: Any = None) -> Any:
    """The ``TaskResult`` of ``job`` as the queue holds it."""
    result = RedisTaskResult(
        task=task,
        id=job.id,
        status=status or _STATUS.get(job.state, TaskResultStatus.READY),
        enqueued_at=when(job.enqueued),
        started_at=when(job.started),
        finished_at=when(job.finished),
        last_attempted_at=when(job.started),
        args=job.args,
        kwargs=job.kwargs,
        backend=backend,
        errors=attempt_errors(job),
        worker_ids=list(job.workers),
    )
    if job.result is not None:
        try:
            object.__setattr__(result, "_return_value", json.loads(job.result))
        except ValueError as exc:  # damaged in Redis: the value is lost, say so
            object.__setattr__(result, "status", TaskResultStatus.FAILED)
            result.errors.append(
                TaskError(
                    exception_class_path="builtins.ValueError",
                    traceback=f"The return value kept in Redis is not JSON ({exc}).",
                )
            )
    return result


def restored(task: Any, job: Job, fallback: str | None) -> Any:
    """``task`` as ``job`` was enqueued: priority, queue, and from the job's metadata the
    backend alias, ``run_after`` and the task's options. If that alias is gone or no longer
    takes the queue, the ``fallback`` alias's; if nothing validates, the task as declared."""
    meta = job.meta
    changes: dict[str, Any] = option_changes(task, meta) if meta else {}
    if (
        job.priority == task.priority
        and job.queue == task.queue_name
        and "run_after" not in meta
        and meta.get("backend", task.backend) == task.backend
        and not changes
    ):
        return task  # as enqueued: the usual job
    if job.priority != task.priority:
        changes["priority"] = job.priority
    if job.queue != task.queue_name:
        changes["queue_name"] = job.queue
    alias, run_after = job.meta.get("backend"), job.meta.get("run_after")
    if isinstance(alias, str) and alias != task.backend:
        changes["backend"] = alias
    if isinstance(run_after, str):
        with suppress(ValueError):
            changes["run_after"] = datetime.fromisoformat(run_after)
    if not changes:
        return task
    tries = [changes]
    if fallback is not None and fallback != changes.get("backend", task.backend):
        tries.append({**changes, "backend": fallback})
    for attempt in tries:
        try:
            return task.using(**attempt)
        except (FrameworkInvalidTask, ImproperlyConfigured):
            continue
    return task


@lru_cache(maxsize=256)
def stand_in(path: str, reason: str) -> Callable[..., Any]:
    """A stand-in for the function of a job the worker refuses: named after the job's path
    (so its result's ``task.module_path`` is what was enqueued), raising why if called.
    Cached: the results of one job compare equal."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise InvalidTask(reason)

    module, _, name = path.rpartition(".")
    refused.__module__ = module
    refused.__name__ = refused.__qualname__ = name or "<no task>"
    return refused
