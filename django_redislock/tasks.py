"""The Tasks backend's import path for ``TASKS[...]["BACKEND"]``:
``django_redislock.tasks.RedisTaskBackend`` (it lives with the queue, in ``queue.tasks``)."""

from __future__ import annotations

from .queue.tasks import RedisTaskBackend

__all__ = ["RedisTaskBackend"]
