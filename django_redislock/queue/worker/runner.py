"""Running leased jobs one by one and recording each outcome (``Runner``): acknowledged,
failed (retried later, or dead), or buried when it cannot run. Running a job's task is
``execution.run_job``'s, under this worker's time limit.

Whatever a task raises (``SystemExit`` and ``KeyboardInterrupt`` included) is a failed
attempt of that job, as is running past its time limit (``time_limits``); the worker carries
on.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import redis

from ...exceptions import InvalidTask, JobCancelled, RedisUnavailable, RetryLater
from ...signals import job_snoozed
from ..execution import run_job
from ..job_codec import error_text
from ..queue import Job, Queue
from ..retry_policy import (
    NOT_RETRIED,
    Outcome,
    RetryPolicy,
    after_failure,
    check_own_options,
    lapse_max_attempts,
    policy,
)
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

    # One line per job, on the logger that ``run_queue_worker`` shows by default.
    log = logging.getLogger("django_redislock.worker")

    def __init__(
        self, leases: Leases, *, patience: float, inline: bool, limits: TimeLimits | None = None
    ) -> None:
        self.leases, self.patience, self.inline = leases, patience, inline
        self.limits = limits
        self.processed = self.failed = 0

    def run(self, queue: Queue, job: Job) -> float:
        """Run one job and record its outcome; returns how long it ran (s). Logs one line
        per job on ``django_redislock.worker``: INFO when it succeeded, WARNING when it
        failed (ERROR when it was refused: it is not a task)."""
        if not self.leases.begin(queue, job):  # expired while leased ahead: never started
            self.leases.end(queue, job)
            return 0.0
        start = time.monotonic()
        close_stale_connections()
        noted = lapse_max_attempts(queue, job)
        if noted is not None:  # a job by path of a task with its own: Redis must know it
            self._note_max_attempts(queue, job, noted)
        if self.log.isEnabledFor(logging.DEBUG):
            self.log.debug("%s: %s (%s) started", queue.name, job.task, job.id)
        try:
            try:
                if job.meta:  # options of its own: a corrupt one sets the job aside
                    check_own_options(job)
                watch = None if self.limits is None else self.limits.watch(queue, job)
                value = run_job(job, watch)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: the task's own
                self._failed(queue, job, exc, traceback.format_exc(), time.monotonic() - start)
            else:
                if self.log.isEnabledFor(logging.INFO):  # (the drain's hot path otherwise)
                    ran = took(time.monotonic() - start)
                    self.log.info("%s: %s (%s) OK in %s", queue.name, job.task, job.id, ran)
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
        line = f"{queue.name}: {job.task or '?'} ({job.id})"
        if isinstance(exc, RetryLater):  # not a failure: runs again, nothing stored
            self.log.info("%s asked to run again in %s (RetryLater)", line, took(exc.delay))
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
            self.log.error("%s refused: %s; dead", line, str(exc).rstrip("."))
            record = partial(queue.bury, job, exc, trace)
        else:
            # the Tasks framework logs the traceback (task_finished); a cancelled job is
            # buried as such by Redis, whatever is recorded here
            how = "cancelled" if isinstance(exc, JobCancelled) else "failed"
            why = error_text(exc)[0].rstrip(".")  # "Class: text", even when str(exc) fails
            rules = policy(queue, job)
            outcome = after_failure(rules, job, exc)
            self.log.warning(
                "%s %s in %s: %s; %s", line, how, took(ran), why, _next(exc, rules, outcome)
            )
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


def _next(exc: BaseException, rules: RetryPolicy, outcome: Outcome) -> str:
    """What happens next to a job that failed, as its line says (attempts: failed ones;
    ``RetryLater`` runs are not counted)."""
    if isinstance(exc, JobCancelled):
        return "dead"
    if outcome.dead and outcome.reason == NOT_RETRIED:
        return "dead at once (not in its retry_on)"
    if outcome.dead:
        return f"dead after {outcome.failures} attempt(s)"
    return (
        f"attempt {outcome.failures} of {rules.max_attempts}, runs again in {took(outcome.delay)}"
    )


def took(seconds: float) -> str:
    """A duration as the worker's lines show it: in ms below a second."""
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
