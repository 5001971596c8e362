"""Pause and resume a queue, or one task of it (issue 27), mixed into ``Queue``. The pause
lives in Redis, in the queue's ``paused`` hash: every worker sees it at its next fetch, a
restarted one too. Enqueues are accepted meanwhile and running jobs finish; a paused queue
keeps its jobs ready, a paused task's jobs are parked as a worker meets them. Resume wakes
the workers at once."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import redis

from ..redis.failures import unavailable_as_error
from ..redis.scripts import LuaScript
from .keys import QueueKeys
from .lua import MAX_BATCH
from .pause_scripts import PAUSE, RESUME
from .replies import text

logger = logging.getLogger("django_redislock.queue")

WHOLE_QUEUE = "*"


def pause_target(task: str | None) -> str:
    """What ``pause(task)`` pauses: ``"*"`` for None, else the task path, checked."""
    if task is None:
        return WHOLE_QUEUE
    if not isinstance(task, str) or not task or task == WHOLE_QUEUE:
        raise ValueError(f"task must be a task's dotted path (str), not {task!r:.80}.")
    if len(task) > 1000 or not all(part.isidentifier() for part in task.split(".")):
        raise ValueError(f"task {task!r:.80} is not a dotted path.")
    return task


class Pausing:
    name: str
    keys: QueueKeys
    client: Any

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def pause(self, task: str | None = None, *, by: str | None = None) -> bool:
        """Start nothing more of this queue (``task``: of that task path only) until
        ``resume``; True when it was not paused yet. ``by``: who asked (shown in the admin)."""
        target = pause_target(task)
        paused = bool(self.run(PAUSE, (), (target, by or "")))
        logger.info("Queue %r: %s paused%s.", self.name, _what(target), f" by {by}" if by else "")
        return paused

    def resume(self, task: str | None = None) -> bool:
        """End ``pause(task)``: the workers are woken at once, and a task's parked jobs are
        ready again, oldest first. True when it was paused."""
        target = pause_target(task)
        was, let_go = self.run(RESUME, (), (target, MAX_BATCH))
        while let_go == MAX_BATCH:  # a task's parked jobs go back in batches
            _, let_go = self.run(RESUME, (), (target, MAX_BATCH))
        logger.info("Queue %r: %s resumed.", self.name, _what(target))
        return bool(was)

    @unavailable_as_error()
    def paused(self) -> set[str]:
        """What is paused: ``"*"`` for the whole queue, else task paths (nothing while the
        hash is corrupt: the next fetch deletes it, and says so in the worker's log)."""
        try:
            names = self.client.hkeys(self.keys.paused)
        except redis.ResponseError:  # not a hash
            return set()
        return {text(name) for name in names}


def _what(target: str) -> str:
    return "the whole queue" if target == WHOLE_QUEUE else f"task {target}"
