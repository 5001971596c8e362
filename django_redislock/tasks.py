"""``RedisTaskBackend``: Django's Tasks framework on the django-redislock queues.

The framework is ``django.tasks`` on Django 6 and the ``django-tasks`` backport on Django 5.2
(``pip install "django-redislock[tasks]"``)::

    TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend",
                         "QUEUES": ["default"]}}

A task's ``queue_name`` is the name of a queue in ``REDISLOCK['QUEUES']``; ``run_queue_worker``
runs it. Results (return value, errors, times, the worker of each attempt) are kept for the
queue's ``RESULT_TTL`` after the task finishes.

This module is also where the worker turns a job into a task call (``run_job``): the only
thing it will ever call is a task object made by ``@task`` in an installed app.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterable
from datetime import datetime, timezone
from importlib import import_module
from typing import Any

import django
from django.apps import apps
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone as django_timezone

from .conf import conf
from .exceptions import JobNotFound
from .queue import Job, get_queue

FRAMEWORK = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
try:
    _base: Any = import_module(f"{FRAMEWORK}.base")
    _backends: Any = import_module(f"{FRAMEWORK}.backends.base")
    _signals: Any = import_module(f"{FRAMEWORK}.signals")
    _exceptions: Any = import_module(f"{FRAMEWORK}.exceptions")
except ImportError as exc:  # Django 5.2 without the backport
    raise ImproperlyConfigured(
        "The django-redislock job queue runs Django Tasks; on Django 5.2 install the "
        "backport: pip install 'django-redislock[tasks]'."
    ) from exc

Task = _base.Task
TaskResult = _base.TaskResult
TaskResultStatus = _base.TaskResultStatus
TaskContext = _base.TaskContext
TaskError = _base.TaskError
TaskResultDoesNotExist = _exceptions.TaskResultDoesNotExist

_STATUS = {
    "ready": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "dead": TaskResultStatus.FAILED,
    "done": TaskResultStatus.SUCCESSFUL,
}


class InvalidTask(Exception):
    """The job cannot be run as a task (not a registered task, not JSON, or a return value
    that is not JSON): it goes to the dead set, never retried."""


_resolved: dict[str, Any] = {}


def resolve_task(path: str) -> Any:
    """The task object at ``path``. Only an object that ``@task`` made, in a module of an
    installed app: a path read from Redis never imports or runs anything else."""
    found = _resolved.get(path)
    if found is None:
        found = _resolved[path] = _resolve(path)
    return found


def _resolve(path: str) -> Any:
    module_name, _, attr = path.rpartition(".")
    if not module_name or not any(
        module_name == app.name or module_name.startswith(app.name + ".")
        for app in apps.get_app_configs()
    ):
        raise InvalidTask(f"{path!r} is not in an installed app; the worker will not import it.")
    try:
        obj = getattr(import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidTask(f"{path!r} does not exist ({exc}).") from exc
    if not isinstance(obj, Task):
        raise InvalidTask(f"{path!r} is not a task: decorate the function with @task.")
    return obj


def _when(epoch_ms: int) -> datetime | None:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc) if epoch_ms else None


def _errors(job: Job) -> list[Any]:
    if not job.error:
        return []
    return [TaskError(exception_class_path=job.error_class or "builtins.Exception",
                      traceback=job.traceback or job.error)]  # fmt: skip


def task_result(job: Job, task: Any, backend: str, status: Any = None) -> Any:
    """The ``TaskResult`` of ``job`` as the queue holds it."""
    result = TaskResult(
        task=task,
        id=job.id,
        status=status or _STATUS.get(job.state, TaskResultStatus.READY),
        enqueued_at=_when(job.enqueued),
        started_at=_when(job.started),
        finished_at=_when(job.finished),
        last_attempted_at=_when(job.started),
        args=job.args,
        kwargs=job.kwargs,
        backend=backend,
        errors=_errors(job),
        worker_ids=list(job.workers),
    )
    if job.result is not None:
        object.__setattr__(result, "_return_value", json.loads(job.result))
    return result


def run_job(job: Job) -> str:
    """Run a leased job as its task, sending the framework's ``task_started`` and
    ``task_finished`` signals; returns the return value as JSON. Raises InvalidTask when it
    must not run (or its value cannot be kept), else whatever the task raised."""
    if not job.task:
        raise InvalidTask("The job's payload is not a JSON task description.")
    task = resolve_task(job.task)
    now = django_timezone.now()
    result = task_result(job, task, task.backend, TaskResultStatus.RUNNING)
    object.__setattr__(result, "started_at", now)
    object.__setattr__(result, "last_attempted_at", now)
    _signals.task_started.send(RedisTaskBackend, task_result=result)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *job.args, **job.kwargs)
        else:
            value = task.call(*job.args, **job.kwargs)
        try:
            text = json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise InvalidTask(
                f"{job.task} returned a value that is not JSON-serializable ({exc})."
            ) from exc
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, CancelledError too
        cls = type(exc)
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        object.__setattr__(result, "finished_at", django_timezone.now())
        path = f"{cls.__module__}.{cls.__qualname__}"
        trace = "".join(traceback.format_exception(cls, exc, exc.__traceback__))
        result.errors.append(TaskError(exception_class_path=path, traceback=trace))
        _signals.task_finished.send(RedisTaskBackend, task_result=result)
        raise
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", django_timezone.now())
    object.__setattr__(result, "_return_value", json.loads(text))
    _signals.task_finished.send(RedisTaskBackend, task_result=result)
    return text


class RedisTaskBackend(_backends.BaseTaskBackend):  # type: ignore[misc]
    """Tasks on the django-redislock queues: defer (``run_after``), priority, async task
    functions and ``get_result`` from any process."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        run_after = task.run_after
        if run_after is not None and django_timezone.is_naive(run_after):
            run_after = django_timezone.make_aware(run_after)
        job = get_queue(task.queue_name).enqueue(
            task.module_path, args, kwargs, at=run_after, priority=task.priority
        )
        result = TaskResult(
            task=task,
            id=job.id,
            status=TaskResultStatus.READY,
            enqueued_at=django_timezone.now(),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=job.args,
            kwargs=job.kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        _signals.task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        if not isinstance(result_id, str):
            raise TypeError(f"result_id must be a str, not {type(result_id).__name__}.")
        for name in sorted(self.queues):
            try:
                job = get_queue(name).get(result_id)
            except JobNotFound:
                continue
            try:
                task = resolve_task(job.task).using(priority=job.priority, queue_name=name)
            except InvalidTask as exc:
                raise TaskResultDoesNotExist(f"{result_id}: {exc}") from exc
            return task_result(job, task, self.alias)
        raise TaskResultDoesNotExist(result_id)

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        # The framework builds backends inside its own system check: a QUEUES of the wrong
        # shape must reach check() (E013), not raise a TypeError here.
        self._queues_setting = params.get("QUEUES", ["default"])
        if not isinstance(self._queues_setting, (list, tuple)) or not all(
            isinstance(name, str) for name in self._queues_setting
        ):
            params = {**params, "QUEUES": []}
        super().__init__(alias, params)

    def check(self, **kwargs: Any) -> Iterable[CheckMessage]:
        yield from super().check(**kwargs)
        where = f"TASKS[{self.alias!r}]"
        configured = conf.QUEUE_NAMES  # never raises: REDISLOCK's own check reports its shape
        names = self._queues_setting
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            yield Error(
                f"{where}['QUEUES'] must be a list of queue names, not {names!r:.60}.",
                hint=f"For example {configured[:3] or ['default']!r}: names of queues in "
                "REDISLOCK['QUEUES'].",
                id="django_redislock.E013",
            )
            names = []
        for name in sorted(set(names) - set(configured)):
            yield Error(
                f"{where}['QUEUES'] names {name!r}, which is not a queue in REDISLOCK['QUEUES'].",
                hint=f"Add {name!r} to REDISLOCK['QUEUES'] (configured: "
                f"{', '.join(configured) or 'none'}).",
                id="django_redislock.E013",
            )
        if not isinstance(self.options, dict):
            yield Error(
                f"{where}['OPTIONS'] must be a dict, not {self.options!r:.60}.",
                hint="RedisTaskBackend takes no options: leave OPTIONS out. Queue options "
                "(LEASE, MAX_ATTEMPTS, ...) go in REDISLOCK['QUEUES'].",
                id="django_redislock.E014",
            )
        elif self.options:
            yield Error(
                f"{where}['OPTIONS'] has {', '.join(map(repr, self.options))}; "
                "RedisTaskBackend takes no options.",
                hint="Queue options (LEASE, MAX_ATTEMPTS, ...) go in REDISLOCK['QUEUES'].",
                id="django_redislock.E014",
            )
