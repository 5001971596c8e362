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
from collections.abc import Callable, Iterable
from contextlib import suppress
from datetime import datetime, timezone
from functools import lru_cache
from importlib import import_module
from typing import Any

import django
from django.apps import apps
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone as django_timezone

from .conf import conf
from .exceptions import JobNotFound
from .queue import AttemptError, Job, get_queue

FRAMEWORK = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
try:
    _base: Any = import_module(f"{FRAMEWORK}.base")
    _backends: Any = import_module(f"{FRAMEWORK}.backends.base")
    _signals: Any = import_module(f"{FRAMEWORK}.signals")
    _exceptions: Any = import_module(f"{FRAMEWORK}.exceptions")
    _json: Any = import_module("django.utils.json" if FRAMEWORK == "django.tasks" else
                               "django_tasks.utils")  # fmt: skip
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
# The framework's own "this task cannot be enqueued" (renamed InvalidTask in Django 6).
FrameworkInvalidTask = getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError
normalize_json = _json.normalize_json

_STATUS = {
    "ready": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "dead": TaskResultStatus.FAILED,
    "done": TaskResultStatus.SUCCESSFUL,
    "unknown": TaskResultStatus.FAILED,  # not a hash in Redis: the worker buries it
}
NOT_A_TASK = "The job's payload is not a JSON task description."
_dumps = json.JSONEncoder(separators=(",", ":")).encode


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
    """One ``TaskError`` per failed attempt, oldest first. An attempt that raised nothing
    (its lease ran out; a failure recorded as text) has no class: ``Exception`` stands in,
    as ``TaskError.exception_class`` must import one; its text is the traceback."""
    errors = job.errors
    if not errors and job.error:  # buried before any attempt ran, or stored without history
        errors = (AttemptError(job.error, job.error_class, job.traceback),)
    return [TaskError(exception_class_path=error.error_class or "builtins.Exception",
                      traceback=error.traceback or error.error) for error in errors]  # fmt: skip


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


def _restored(task: Any, job: Job, fallback: str | None) -> Any:
    """``task`` as ``job`` was enqueued: priority, queue, and from the job's metadata the
    backend alias and ``run_after``. If that alias is gone or no longer takes the queue, the
    ``fallback`` alias's; if nothing validates, the task as declared."""
    changes: dict[str, Any] = {}
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
def _refused(path: str, reason: str) -> Callable[..., Any]:
    """A stand-in for the function of a job the worker refuses: named after the job's path
    (so its result's ``task.module_path`` is what was enqueued), raising why if called.
    Cached: the results of one job compare equal."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise InvalidTask(reason)

    module, _, name = path.rpartition(".")
    refused.__module__ = module
    refused.__name__ = refused.__qualname__ = name or "<no task>"
    return refused


def _arguments(args: Any, kwargs: Any) -> tuple[Any, Any]:
    """A task's arguments as the worker will receive them: what the framework's
    ``normalize_json`` accepts (tuples, bytes, any mapping or sequence), through JSON (dict
    keys become strings)."""
    try:
        try:  # plain JSON types, the usual case: json's C encoder checks them at once
            text = _dumps([args, kwargs])
        except TypeError:
            text = _dumps(normalize_json([args, kwargs]))
    except TypeError as exc:
        raise TypeError(f"Task arguments must be JSON-serializable: {exc}") from exc
    args, kwargs = json.loads(text)
    return args, kwargs


def run_job(job: Job) -> str:
    """Run a leased job as its task, sending the framework's ``task_started`` and
    ``task_finished`` signals; returns the return value as JSON. Raises InvalidTask when it
    must not run (or its value cannot be kept), else whatever the task raised."""
    if not job.task:
        raise InvalidTask(NOT_A_TASK)
    task = _restored(resolve_task(job.task), job, None)
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
        try:  # normalised as the framework's own backends do (tuples, bytes, mappings)
            text = _dumps(normalize_json(value))
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
    functions and ``get_result`` from any process. ``QUEUES: []`` takes any queue of
    ``REDISLOCK['QUEUES']``."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._validated: set[Any] = set()

    def validate_task(self, task: Any) -> None:
        # The framework inspects the function's signature every time: a task that passed is
        # remembered (not with run_after, whose check reads USE_TZ).
        if task in self._validated:
            return
        super().validate_task(task)
        if task.run_after is None and len(self._validated) < 1000:
            self._validated.add(task)

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        path = task.module_path
        try:  # what the worker would refuse is refused here, before anything is written
            declared = resolve_task(path)
        except InvalidTask as exc:
            raise FrameworkInvalidTask(f"The worker would not run this task: {exc}") from exc
        if declared.func is not task.func:
            raise FrameworkInvalidTask(
                f"{path!r} is another task than this one: the worker would run that one."
            )
        try:
            queue = get_queue(task.queue_name)
        except ImproperlyConfigured as exc:  # TASKS QUEUES [] lets any name through
            raise FrameworkInvalidTask(str(exc)) from exc
        args, kwargs = _arguments(args, kwargs)
        meta: dict[str, Any] = {}
        if self.alias != declared.backend:
            meta["backend"] = self.alias
        run_after = task.run_after
        if run_after is not None:
            meta["run_after"] = run_after.isoformat()
            if django_timezone.is_naive(run_after):
                run_after = django_timezone.make_aware(run_after)
        job = queue.enqueue(
            path, args, kwargs, at=run_after, priority=task.priority, meta=meta or None
        )
        result = TaskResult(
            task=task,
            id=job.id,
            status=TaskResultStatus.READY,
            enqueued_at=_when(job.enqueued),  # Redis's clock, as get_result reads it
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        _signals.task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        if not isinstance(result_id, str):
            raise TypeError(f"result_id must be a str, not {type(result_id).__name__}.")
        configured = conf.QUEUES
        names = self.queues & configured.keys() if self.queues else configured
        for name in sorted(names):
            try:
                job = get_queue(name).get(result_id)
            except JobNotFound:
                continue
            return self._result(job)
        raise TaskResultDoesNotExist(result_id)

    def _result(self, job: Job) -> Any:
        try:
            if not job.task:
                raise InvalidTask(NOT_A_TASK)
            task = _restored(resolve_task(job.task), job, self.alias)
        except InvalidTask as exc:  # a job the worker refuses: its result all the same
            task = self.task_class(func=_refused(job.task, str(exc)), priority=job.priority,
                                   backend=self.alias, queue_name=job.queue)  # fmt: skip
        return task_result(job, task, task.backend)

    def check(self, **kwargs: Any) -> Iterable[CheckMessage]:
        yield from super().check(**kwargs)
        configured = conf.QUEUES
        for name in sorted(self.queues - set(configured)):
            yield Error(
                f"TASKS[{self.alias!r}]['QUEUES'] names {name!r}, which is not a queue in "
                "REDISLOCK['QUEUES'].",
                hint=f"Add {name!r} to REDISLOCK['QUEUES'] (configured: "
                f"{', '.join(sorted(configured)) or 'none'}).",
                id="django_redislock.E013",
            )
        if self.options:
            yield Error(
                f"TASKS[{self.alias!r}]['OPTIONS'] has {', '.join(map(repr, self.options))}; "
                "RedisTaskBackend takes no options.",
                hint="Queue options (LEASE, MAX_ATTEMPTS, ...) go in REDISLOCK['QUEUES'].",
                id="django_redislock.E014",
            )
