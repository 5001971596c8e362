"""Soft time limits of the jobs a worker runs (what a limit is, and where a job keeps its
own: ``time_limits``), and the cancels of running jobs, which take the same road.

When a job runs past its limit, ``JobTimeLimitExceeded`` is raised inside the thread that
runs it (CPython's ``PyThreadState_SetAsyncExc``), so that its ``finally`` blocks run; an
async task function's coroutine is cancelled instead. The exception is raised at the next
bytecode the thread runs: a job blocked in C (a long ``time.sleep``, a socket read without a
timeout, a C extension's loop) sees it only when that returns. Only a process can be stopped
for sure: a hard limit needs the job in a child process that can be killed.

A job still running its queue's ``TIME_LIMIT_GRACE`` seconds after its limit (it swallowed
the exception, or is stuck in C) is reported, and its lease is no longer renewed: the job is
delivered again once the lease runs out (at-least-once), as if its worker had died, instead
of being held forever by a thread that may never come back.

Each running job is under a ``Watch`` (``watch``), whose limit this module's one thread
looks at; a cancel reaches a job through it too.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ...exceptions import JobCancelled, JobTimeLimitExceeded
from ..jobs import Job
from ..retry_policy import declared
from ..time_limits import META_KEY, job_time_limit
from .background import Background
from .watch import Watch

DEFAULT_GRACE = 10.0  # a queue's TIME_LIMIT_GRACE unless it says otherwise (conf.QUEUE_DEFAULTS)

if TYPE_CHECKING:
    from ..queue import Queue

logger = logging.getLogger("django_redislock.queue.limits")  # the name users' LOGGING knows

IDLE = 1.0  # longest sleep of the watcher with nothing to watch (it is woken on a new job)


class TimeLimits:
    """The limits of the jobs a worker runs, watched by one thread. ``defaults``: each
    queue's ``TIME_LIMIT``; ``graces``: each queue's ``TIME_LIMIT_GRACE``; ``overdue(queue,
    job)`` is called for a job still running that long past its limit (or its cancel)."""

    def __init__(
        self,
        defaults: Mapping[str, float | None],
        overdue: Callable[[Queue, Job], None],
        graces: Mapping[str, float] | None = None,
    ) -> None:
        self.defaults, self.overdue = dict(defaults), overdue
        self.graces = dict(graces or {})
        self.watches: dict[int, Watch] = {}
        self.wakes_at = 0.0  # when the watcher wakes next (monotonic)
        # (held through the lock itself where nothing waits or is notified: cheaper)
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.stopped = threading.Event()
        self.thread = Background("redislock-limits", self._watch, stopped=self.stopped, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        with self.changed:
            self.changed.notify_all()
        self.thread.stop()

    def watch(self, queue: Queue, job: Job) -> Watch:
        """The watch ``job`` runs under: its time limit (``math.inf`` for none), and the
        way ``cancel`` reaches it."""
        default = self.defaults.get(queue.name)
        if META_KEY not in job.meta:  # none of its own: its task's, else its queue's
            own = declared(job.task, "time_limit")
            default = default if own is None else own
        seconds = job_time_limit(job, default)
        grace = self.graces.get(queue.name, DEFAULT_GRACE)
        return Watch(self, queue, job, math.inf if seconds is None else seconds, grace)

    def cancel(self, queue: Queue, job_id: str) -> bool:
        """Raise ``JobCancelled`` in the running job ``job_id`` of ``queue`` (asked to stop
        by ``queue.cancel``); False when it is not running here."""
        with self.changed:
            found = [
                w
                for w in self.watches.values()
                if w.job.id == job_id and w.queue.name == queue.name
            ]
        for watch in found:  # asked at each renewal until it stops; its outcome line says it
            if watch.fire(JobCancelled):
                logger.debug(
                    "%s: %s (%s) cancelled while running: stopping it.",
                    queue.name,
                    watch.job.task,
                    job_id,
                )
        return bool(found)

    def add(self, watch: Watch) -> None:
        with self.lock:
            self.watches[id(watch)] = watch
            if watch.deadline < self.wakes_at:  # else the watcher wakes in time: let it be
                self.changed.notify_all()

    def remove(self, watch: Watch) -> None:
        with self.lock:
            self.watches.pop(id(watch), None)

    def _watch(self, stopped: threading.Event) -> None:
        while not stopped.is_set():
            try:
                self._tick()
            except Exception:  # a bug: the limits must be watched all the same
                logger.exception("Watching the jobs' time limits failed")
                stopped.wait(IDLE)

    def _tick(self) -> None:
        now = time.monotonic()
        with self.changed:
            watches = list(self.watches.values())
        soonest = now + IDLE
        for watch in watches:
            if not watch.sent:
                if now >= watch.deadline:
                    watch.fire()
                else:
                    soonest = min(soonest, watch.deadline)
            elif not watch.warned:  # the grace after the limit fired, or a cancel was sent
                if now >= watch.sent_at + watch.grace:
                    watch.warned = True
                    self._overdue(watch)
                else:
                    soonest = min(soonest, watch.sent_at + watch.grace)
        with self.changed:  # a job added since the copy above is seen here, or notifies
            if self.stopped.is_set():
                return
            for watch in self.watches.values():
                if not watch.sent:
                    soonest = min(soonest, watch.deadline)
            self.wakes_at = soonest
            self.changed.wait(max(0.0, soonest - time.monotonic()))
            self.wakes_at = 0.0

    def _overdue(self, watch: Watch) -> None:
        with self.changed:
            if id(watch) not in self.watches:
                return  # it ended meanwhile
        # A cancelled job is buried when its lease runs out, never delivered again.
        then = (
            "delivered again"
            if watch.kind is JobTimeLimitExceeded
            else "buried as cancelled, not run again"
        )
        logger.warning(
            "%s: %s (%s) is still running %g s after its %s: it ignores %s, or is blocked in "
            "C code. Its lease is no longer renewed (when it runs out the job is %s); in "
            "process mode its worker process is ended.",
            watch.queue.name,
            watch.job.task,
            watch.job.id,
            watch.grace,
            "time limit" if watch.kind is JobTimeLimitExceeded else "cancel",
            watch.kind.__name__,
            then,
        )
        self.overdue(watch.queue, watch.job)
