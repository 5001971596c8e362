"""The ``TaskResult``s the hot paths build, field by field: a job's as it is enqueued
(``RedisTaskBackend.enqueue``) and as it starts running (the worker, once per job)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..queue.jobs import Job
from .results import (
    SCALARS,
    RedisTaskResult,
    TaskResult,
    TaskResultStatus,
    attempt_errors,
    normalize_json,
    task_result,
    when,
)

# A new job's result is built field by field: the dataclass's own __init__ would normalise
# args and kwargs once more (``arguments`` did), a third of an enqueue's Python. Only while
# the framework's TaskResult has exactly these fields; else through __init__.
_NEW_RESULT = (
    "task",
    "id",
    "status",
    "enqueued_at",
    "started_at",
    "finished_at",
    "last_attempted_at",
    "args",
    "kwargs",
    "backend",
    "errors",
    "worker_ids",
    "_return_value",
)
FIELD_BY_FIELD = tuple(field.name for field in dataclasses.fields(TaskResult)) == _NEW_RESULT


def _setter(name: str) -> Callable[[Any, Any], None]:
    """How a field of a ``TaskResult`` is set: its slot's own setter where the dataclass has
    slots (``object.__setattr__``, a frozen dataclass's way, looks the slot up each time)."""
    slot = vars(TaskResult).get(name)
    if type(slot).__name__ == "member_descriptor":
        return slot.__set__  # type: ignore[no-any-return]
    return lambda result, value: object.__setattr__(result, name, value)


_new = object.__new__
(
    _task,
    _id,
    _status,
    _enqueued_at,
    _started_at,
    _finished_at,
    _last_attempted_at,
    _args,
    _kwargs,
    _backend,
    _errors_,
    _worker_ids,
    _return_value,
) = (_setter(name) for name in _NEW_RESULT)


def new_result(
    task: Any, job_id: str, args: list[Any], kwargs: dict[str, Any], backend: str
) -> Any:
    """The READY ``TaskResult`` of a job being enqueued, ``enqueued_at`` None until Redis
    says; ``args`` and ``kwargs`` as ``arguments`` gave them."""
    if not FIELD_BY_FIELD:
        return RedisTaskResult(
            task=task,
            id=job_id,
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=backend,
            errors=[],
            worker_ids=[],
        )
    result = _new(RedisTaskResult)
    _task(result, task)
    _id(result, job_id)
    _status(result, TaskResultStatus.READY)
    _enqueued_at(result, None)
    _started_at(result, None)
    _finished_at(result, None)
    _last_attempted_at(result, None)
    _args(result, args)
    _kwargs(result, kwargs)
    _backend(result, backend)
    _errors_(result, [])
    _worker_ids(result, [])
    _return_value(result, None)
    return result


def running_result(job: Job, task: Any, backend: str, now: datetime) -> Any:
    """``task_result``'s RUNNING result of ``job``, started ``now`` (its ``started_at`` and
    ``last_attempted_at``): the worker's, one per job run, built field by field."""
    if not FIELD_BY_FIELD or job.result is not None:
        result = task_result(job, task, backend, TaskResultStatus.RUNNING)
        object.__setattr__(result, "started_at", now)
        object.__setattr__(result, "last_attempted_at", now)
        return result
    args, kwargs = job.args, job.kwargs
    for value in args:  # normalised as TaskResult's __post_init__ does: scalars stay
        if type(value) not in SCALARS:
            args = normalize_json(args)
            break
    else:
        args = list(args)
    for value in kwargs.values():
        if type(value) not in SCALARS:
            kwargs = normalize_json(kwargs)
            break
    else:
        kwargs = dict(kwargs)
    result = _new(RedisTaskResult)
    _task(result, task)
    _id(result, job.id)
    _status(result, TaskResultStatus.RUNNING)
    _enqueued_at(result, when(job.enqueued))
    _started_at(result, now)
    _finished_at(result, when(job.finished) if job.finished else None)
    _last_attempted_at(result, now)
    _args(result, args)
    _kwargs(result, kwargs)
    _backend(result, backend)
    _errors_(result, attempt_errors(job) if job.errors or job.error else [])
    _worker_ids(result, list(job.workers))
    _return_value(result, None)
    return result
