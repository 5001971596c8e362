"""A task's options on their way to its jobs: those the worker decides, carried in each
job's metadata (``enqueue_options``); those decided at enqueue (``expires``, uniqueness,
``debounce``: ``enqueue_decided``), for which the task's jobs go through the queue's own
enqueue with options (``enqueued_with_options``); and those a ``using()`` changed, kept so
that ``get_result`` rebuilds the task (``rebuilt_options``)."""

from __future__ import annotations

import json
from typing import Any

from django.utils import timezone

from ..queue.options import ENQUEUE_OPTIONS, TASK_OPTIONS, WORKER_OPTIONS, stored_value
from ..queue.queue import Queue
from .results import task_result


def enqueue_options(task: Any) -> dict[str, Any]:
    """``queue.enqueue``'s keyword arguments for ``task``'s options (those set): the job
    carries them, so that the worker decides with them however the job was enqueued."""
    given = {name: getattr(task, name, None) for name in WORKER_OPTIONS}
    # enqueue-decided options: wired at merge (expires, unique_for, unique_by_args, debounce)
    return {name: value for name, value in given.items() if value is not None}


def rebuilt_options(task: Any, declared: Any, kept: dict[str, Any]) -> dict[str, Any]:
    """The other options in which ``task`` differs from the task as ``declared`` (its
    ``using()``), kept with the job (None as null) so that ``get_result`` rebuilds it."""
    return {
        name: stored_value(name, getattr(task, name, None))
        for name in TASK_OPTIONS
        if name not in kept and getattr(task, name, None) != getattr(declared, name, None)
    }


def enqueue_decided(task: Any) -> dict[str, Any]:
    """``queue.enqueue``'s keyword arguments for ``task``'s options decided at enqueue but
    ``expires`` (kept in each job's metadata, as ``enqueue_options``' are): those set,
    ``unique_by_args`` when true; empty for the usual task. A task's caller
    names no job id, so ``unique_for`` and ``debounce`` key its jobs by their arguments,
    as ``unique_by_args`` does."""
    names = [name for name in ENQUEUE_OPTIONS if name != "expires"]
    if getattr(task, "concurrency_key", None) is not None:  # rendered from each call's args
        names += ["concurrency_key", "concurrency_limit"]
    if getattr(task, "rate_key", None) is not None:
        names += ["rate_key", "rate"]
    given = {name: getattr(task, name, None) for name in names}
    decided = {name: value for name, value in given.items() if value not in (None, False)}
    if "unique_for" in decided or "debounce" in decided:
        decided["unique_by_args"] = True
    return decided


def enqueued_with_options(
    task: Any,
    queue: Queue,
    path: str,
    args: list[Any],
    kwargs: dict[str, Any],
    meta: str,
    decided: dict[str, Any],
    alias: str,
) -> Any:
    """The result of ``task`` enqueued through ``queue.enqueue`` with its ``decided``
    options: the job it returns may be one enqueued before (``unique_for``), with that
    job's id and arguments."""
    run_after = task.run_after
    if run_after is not None and timezone.is_naive(run_after):
        run_after = timezone.make_aware(run_after)
    job = queue.enqueue(
        path,
        args,
        kwargs,
        priority=task.priority,
        meta=json.loads(meta) if meta else None,
        at=run_after,
        **decided,
    )
    return task_result(job, task, alias)
