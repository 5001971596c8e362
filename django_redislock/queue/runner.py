"""Running one leased job: the task it names (``resolve_task``: only an object ``@task``
made in an installed app, never anything else a path read from Redis could name), called
with the Tasks framework's signals (``run_job``), and its outcome recorded (``Runner``).

Whatever a task raises (``SystemExit`` and ``KeyboardInterrupt`` included) is a failed
attempt of that job, as is running past its time limit (``limits``); the worker carries on.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

import redis
from django.apps import apps
from django.db import close_old_connections
from django.utils import timezone

from ..exceptions import InvalidTask, JobCancelled, RedisUnavailable
from ..metrics.tracing import traced_run
from .core import Job, Queue
from .jobs import error_text
from .task_jobs import (
    NOT_A_TASK,
    Task,
    TaskContext,
    TaskError,
    TaskResultStatus,
    restored,
    signals,
    task_result,
    to_json,
)

if TYPE_CHECKING:
    from .leases import Leases
    from .limits import TimeLimits, Watch

logger = logging.getLogger(__name__)

RETRY_MAX = 5.0  # longest pause between tries to record an outcome while Redis is away

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
        obj = getattr(import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidTask(f"{path!r} does not exist ({exc}).") from exc
    if not isinstance(obj, Task):
        raise InvalidTask(f"{path!r} is not a task: decorate the function with @task.")
    return obj


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
    sender = type(task.get_backend())
    now = timezone.now()
    result = task_result(job, task, task.backend, TaskResultStatus.RUNNING)
    object.__setattr__(result, "started_at", now)
    object.__setattr__(result, "last_attempted_at", now)
    signals.task_started.send(sender, task_result=result)
    try:
        args = (TaskContext(task_result=result), *job.args) if task.takes_context else job.args
        if watch is None:
            value = task.call(*args, **job.kwargs)
        else:  # as task.call does, under the limit
            value = watch.call(task.func, args, job.kwargs)
        try:  # normalised as the framework's own backends do (tuples, bytes, mappings)
            text = to_json(value)
        except (TypeError, ValueError) as exc:
            raise InvalidTask(
                f"{job.task} returned a value that is not JSON-serializable ({exc})."
            ) from exc
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, CancelledError too
        cls = type(exc)
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        object.__setattr__(result, "finished_at", timezone.now())
        path = f"{cls.__module__}.{cls.__qualname__}"
        trace = "".join(traceback.format_exception(cls, exc, exc.__traceback__))
        result.errors.append(TaskError(exception_class_path=path, traceback=trace))
        signals.task_finished.send(sender, task_result=result)
        raise
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "_return_value", json.loads(text))
    signals.task_finished.send(sender, task_result=result)
    return text


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
        self.leases.begin(queue, job)
        start = time.monotonic()
        close_old_connections()
        self.log.debug("%s: %s (%s) started", queue.name, job.task, job.id)
        try:
            try:
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
                close_old_connections()
            self.leases.end(queue, job)

    def _failed(self, queue: Queue, job: Job, exc: BaseException, trace: str, ran: float) -> None:
        # Logged before it is recorded: recording waits while Redis is away.
        line = f"{queue.name}: {job.task or '?'} ({job.id})"
        if isinstance(exc, InvalidTask):  # never retried
            self.log.error("%s refused: %s; dead", line, str(exc).rstrip("."))
            record = queue.bury
        else:
            # the Tasks framework logs the traceback (task_finished); a cancelled job is
            # buried as such by Redis, whatever is recorded here
            how = "cancelled" if isinstance(exc, JobCancelled) else "failed"
            why = error_text(exc)[0].rstrip(".")  # "Class: text", even when str(exc) fails
            self.log.warning("%s %s in %s: %s; %s", line, how, took(ran), why,
                             self._next(queue, job, exc))  # fmt: skip
            record = queue.fail
        self._settle(queue, lambda: record(job, exc, trace))
        self.failed += 1

    @staticmethod
    def _next(queue: Queue, job: Job, exc: BaseException) -> str:
        """What happens next to a job that failed, as its line says."""
        if isinstance(exc, JobCancelled):
            return "dead"
        if job.attempts >= queue.max_attempts:
            return f"dead after {job.attempts} attempt(s)"
        return (f"attempt {job.attempts} of {queue.max_attempts}, runs again in "
                f"{took(queue.backoff(job))}")  # fmt: skip

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


def took(seconds: float) -> str:
    """A duration as the worker's lines show it: in ms below a second."""
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
