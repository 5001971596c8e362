"""``task``: the framework's ``@task`` taking this backend's per-task options on every
supported Django. Django 6.1 and the backport (0.12+) forward ``@task(**options)`` to the
backend's ``task_class``: theirs is used. Django 6.0's forwards nothing: the task is made
here, as the framework makes it, with the options."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .results import framework, framework_base

_framework_task = framework_base.task
FORWARDS = any(
    p.kind is inspect.Parameter.VAR_KEYWORD
    for p in inspect.signature(_framework_task).parameters.values()
)


def task(
    function: Callable[..., Any] | None = None,
    *,
    priority: int = framework_base.DEFAULT_TASK_PRIORITY,
    queue_name: str = framework_base.DEFAULT_TASK_QUEUE_NAME,
    backend: str = framework_base.DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    **options: Any,
) -> Any:
    """``@task``, ``@task(...)`` or ``task(func, ...)``, with the framework's arguments and
    the backend's options (``max_attempts=...``, ...): an option its backend's task does not
    take is a TypeError naming it."""
    standard = {
        "priority": priority,
        "queue_name": queue_name,
        "backend": backend,
        "takes_context": takes_context,
    }
    if FORWARDS or not options:
        return _framework_task(function, **standard, **options)

    def wrapper(func: Callable[..., Any]) -> Any:
        return framework.task_backends[backend].task_class(func=func, **standard, **options)

    return wrapper(function) if function is not None else wrapper
