"""Running one job's task, for the worker and for eager mode alike: the task it names
(``resolve_task``: only an object ``@task`` made in an installed app, never anything else a
path read from Redis could name), called with the Tasks framework's signals (``run_job``).

A time limit is the caller's: the worker hands in its ``Watch``; eager mode has none.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from importlib import import_module
from typing import Any, Protocol

from django.apps import apps
from django.utils import timezone

from ..exceptions import InvalidTask, RetryLater, TaskImportFailed
from ..metrics.tracing import traced_run
from ..tasks.context import RedisTaskContext
from ..tasks.new_results import running_result
from ..tasks.receivers import Receivers, receivers
from ..tasks.results import (
    NOT_A_TASK,
    Task,
    TaskError,
    TaskResultStatus,
    restored,
    signals,
)
from ..tasks.values import returned, to_json
from .jobs import Job


class Watch(Protocol):
    """A running job's time limit, as the worker's ``TimeLimits`` gives it."""

    def call(self, func: Callable[..., Any], args: Any, kwargs: Any) -> Any: ...


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
        module = import_module(module_name)
    except ModuleNotFoundError as exc:
        if not _is_module_or_parent(exc.name, module_name):  # a module it imports is missing
            raise TaskImportFailed(module_name, exc) from exc
        raise InvalidTask(f"{path!r} does not exist ({exc}).") from exc
    except Exception as exc:  # the module is there but raised: a deploy mistake, not the job's
        raise TaskImportFailed(module_name, exc) from exc
    try:
        obj = getattr(module, attr)
    except AttributeError as exc:
        raise InvalidTask(f"{path!r} does not exist ({exc}).") from exc
    if not isinstance(obj, Task):
        raise InvalidTask(f"{path!r} is not a task: decorate the function with @task.")
    return obj


def _is_module_or_parent(missing: str | None, module_name: str) -> bool:
    return missing is not None and (module_name + ".").startswith(missing + ".")


_SUCCESSFUL, _FAILED = TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED
_signalled: dict[Any, tuple[Receivers, Receivers]] = {}


def _receivers(sender: Any) -> tuple[Receivers, Receivers]:
    """The receivers of ``task_started`` and ``task_finished`` for ``sender``."""
    found = _signalled.get(sender)
    if found is None:
        found = _signalled[sender] = (
            receivers(signals.task_started, sender),
            receivers(signals.task_finished, sender),
        )
    return found


@traced_run
def run_job(job: Job, watch: Watch | None = None) -> str:
    """Run a leased job as its task, sending the framework's ``task_started`` and
    ``task_finished`` signals; returns the return value as JSON. Raises InvalidTask when it
    must not run (or its value cannot be kept), JobTimeLimitExceeded when it reached the
    time limit of its ``watch``, else whatever the task raised."""
    if not job.task:
        raise InvalidTask(NOT_A_TASK)
    task = restored(resolve_task(job.task), job, None)
    # Sent by the class of the task's backend, as the framework's own backends send them.
    started, finished = _receivers(type(task.get_backend()))
    result = running_result(job, task, task.backend, timezone.now())
    started.send(task_result=result)
    try:
        args = (RedisTaskContext(result, job), *job.args) if task.takes_context else job.args
        if watch is None:
            value = task.call(*args, **job.kwargs)
        else:  # as task.call does, under the limit
            value = watch.call(task.func, args, job.kwargs)
        try:  # normalised as the framework's own backends do (tuples, bytes, mappings)
            text = "null" if value is None else to_json(value)
        except (TypeError, ValueError) as exc:
            raise InvalidTask(
                f"{job.task} returned a value that is not JSON-serializable ({exc})."
            ) from exc
    except RetryLater:  # not finished, nor failed: it runs again (no task_finished)
        raise
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, CancelledError too
        cls = type(exc)
        object.__setattr__(result, "status", _FAILED)
        object.__setattr__(result, "finished_at", timezone.now())
        path = f"{cls.__module__}.{cls.__qualname__}"
        trace = "".join(traceback.format_exception(cls, exc, exc.__traceback__))
        result.errors.append(TaskError(exception_class_path=path, traceback=trace))
        finished.send(task_result=result)
        raise
    object.__setattr__(result, "status", _SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "_return_value", returned(value, text))
    finished.send(task_result=result)
    return text
