"""Running leased jobs one by one and recording each outcome (``Runner``): acknowledged,
failed (retried later, or dead), or buried when it cannot run. Running a job's task is
``execution.run_job``'s, under this worker's time limit.

Whatever a task raises (``SystemExit`` and ``KeyboardInterrupt`` included) is a failed
attempt of that job, as is running past its time limit (``time_limits``); the worker carries
on. A task module that fails to import is no fault of the job: it is given back for later
(``job_lines.IMPORT_RETRY``), no failure charged.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import redis

from ...exceptions import (
    InvalidTask,
    JobCancelled,
    RedisUnavailable,
    RetryLater,
    TaskImportFailed,
)
from ...history.recording import timed_run
from ...signals import job_snoozed
from ..execution import run_job
from ..queue import Job, Queue
from ..retry_policy import after_failure, check_own_options, lapse_max_attempts, policy
from . import job_lines
from .connections import close_stale_connections

if TYPE_CHECKING:
    from .leases import Leases
    from .time_limits import TimeLimits

logger = logging.getLogger("django_redislock.queue.runner")  # the name users' LOGGING knows

RETRY_MAX = 5.0  # longest pause between tries to record an outcome while Redis is away


class Runner:
    """Runs leased jobs one by one (from any thread) and records each outcome: acknowledged
    through ``leases``, failed (retried later, or dead), or buried when it cannot run.
    ``patience``: how long an outcome is retried while Redis is away."""

    def __init__(
        self, leases: Leases, *, patience: float, inline: bool, limits: TimeLimits | None = None
    ) -> None:
        self.leases, self.patience, self.inline = leases, patience, inline
        self.limits = limits
        self.processed = self.failed = 0

    def run(self, queue: Queue, job: Job) -> float:
        """Run one job and record its outcome; returns how long it ran (s). Logs one line
        per job at its outcome (``job_lines``)."""
        if not self.leases.begin(queue, job):  # expired while leased ahead: never started
            self.leases.end(queue, job)
            return 0.0
        start = time.monotonic()
        close_stale_connections()
        noted = lapse_max_attempts(queue, job)
        if noted is not None:  # a job by path of a task with its own: Redis must know it
            self._note_max_attempts(queue, job, noted)
        if job_lines.log.isEnabledFor(logging.DEBUG):
            job_lines.log.debug("%s: %s (%s) started", queue.name, job.task, job.id)
        try:
            try:
                if job.meta:  # options of its own: a corrupt one sets the job aside
                    check_own_options(job)
                watch = None if self.limits is None else self.limits.watch(queue, job)
                value = timed_run(queue, job, run_job, watch)  # in the task history
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: the task's own
                self._failed(queue, job, exc, traceback.format_exc(), time.monotonic() - start)
            else:
                job_lines.succeeded(queue, job, time.monotonic() - start)
                self.leases.succeeded(queue, job, value)
                self.processed += 1
            return time.monotonic() - start
        finally:
            if not self.inline:  # inline, the next job's start or going idle closes them
                close_stale_connections()
            self.leases.end(queue, job)

    def _note_max_attempts(self, queue: Queue, job: Job, max_attempts: int) -> None:
        try:
            queue.note_max_attempts(job, max_attempts)
        except (RedisUnavailable, redis.ResponseError) as exc:  # its outcome will wait too
            logger.debug("Could not note a job's max_attempts: %s", exc)

    def _failed(self, queue: Queue, job: Job, exc: BaseException, trace: str, ran: float) -> None:
        # Logged before it is recorded: recording waits while Redis is away.
        if isinstance(exc, TaskImportFailed):  # a deploy mistake: not the job's, given back
            job_lines.not_imported(queue, job, exc, job_lines.IMPORT_RETRY)
            self._settle(queue, partial(queue.snooze, job, job_lines.IMPORT_RETRY))
            return
        if isinstance(exc, RetryLater):  # not a failure: runs again, nothing stored
            job_lines.snoozed(queue, job, exc.delay)
            self._settle(queue, partial(queue.snooze, job, exc.delay))
            if job_snoozed.receivers:
                for receiver, error in job_snoozed.send_robust(
                    type(queue), queue=queue.name, job=job, delay=exc.delay
                ):
                    if error is not None:
                        logger.error("job_snoozed receiver %r failed: %r", receiver, error)
            return
        record: Callable[[], bool]
        if isinstance(exc, InvalidTask):  # never retried
            job_lines.refused(queue, job, exc)
            record = partial(queue.bury, job, exc, trace)
        else:
            rules = policy(queue, job)
            outcome = after_failure(rules, job, exc)
            if isinstance(exc, JobCancelled):  # buried as such by Redis, whatever is recorded
                job_lines.cancelled(queue, job, ran)
            else:
                job_lines.failed(queue, job, exc, ran, rules, outcome)
            record = partial(queue.fail, job, exc, trace, outcome=outcome)
        self._settle(queue, record)
        self.failed += 1

    def _settle(self, queue: Queue, action: Callable[[], bool]) -> None:
        """Record a job's outcome, retrying while Redis is away (up to ``patience``), after
        what was sent of the job's start."""
        delay, deadline = 0.1, time.monotonic() + self.patience
        while True:
            try:
                self.leases.sync(queue)
                if not action():
                    logger.warning("A job's lease ran out before it finished; it may run again.")
                return
            except (RedisUnavailable, redis.ResponseError) as exc:
                # Redis away, or refusing writes for now (out of memory, a failover's
                # read-only replica): the outcome is retried, never the worker's end.
                logger.debug("Recording a job's outcome failed: %s", exc)
                if time.monotonic() > deadline:
                    logger.error("Could not record a job's outcome; it will run again.")
                    return
                time.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
            except Exception:  # a bug, or what a task left behind: never the worker's end
                logger.exception("Could not record a job's outcome; it will run again.")
                return
