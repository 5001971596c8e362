"""The Django Tasks backend on the django-redislock queues: ``RedisTaskBackend``, the import
path for ``TASKS[...]["BACKEND"]`` (``"django_redislock.tasks.RedisTaskBackend"``), in
``backend``; ``task``, the ``@task`` that takes the per-task options on every supported
Django; a job seen as a task and its ``TaskResult`` in ``results``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["RedisTaskBackend", "task"]

if TYPE_CHECKING:
    from .backend import RedisTaskBackend
    from .decorator import task


def __getattr__(name: str) -> Any:
    # Lazy: the worker runs jobs through ``results`` without ever importing the backend.
    if name == "RedisTaskBackend":
        from .backend import RedisTaskBackend

        return RedisTaskBackend
    if name == "task":  # the framework's @task, taking this backend's options everywhere
        from .decorator import task

        return task
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
