"""The counters and histograms a process keeps, fed by signals: job runs (the Tasks
framework's ``task_finished``, as the worker sends it) and lock events (``lock_acquired``,
``lock_busy``, ``lock_lost``).

Labels are bounded: a job's queue, task and outcome (the task of a finished run is one that
ran, so a ``@task`` of an installed app; a snoozed job's path that names none counts as
``history.recording.OTHER``), a lock's kind (its class: ``Lock``,
``AsyncLock``, ``Semaphore``, ...); never a job id or a lock name. In prometheus_client's
multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set before the process starts) each process
writes its counts to that directory and the view sums them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from prometheus_client import CollectorRegistry, Counter, Histogram

from ..conf import QUEUE_DEFAULTS, conf
from ..history.recording import task_label
from ..signals import job_snoozed, lock_acquired, lock_busy, lock_lost

logger = logging.getLogger(__name__)

#: This process's counts (in multiprocess mode the view reads the directory instead).
REGISTRY = CollectorRegistry(auto_describe=True)

JOB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
WAIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

JOB_RUNS = Counter(
    "redislock_job_runs",
    "Job runs by the worker, by outcome: succeeded, retried (failed, will run again), "
    "snoozed (raised RetryLater: runs again, not a failure) or dead (failed for good: "
    "attempts used up, not in its retry_on, cancelled, or it cannot run).",
    ["queue", "task", "outcome"],
    registry=REGISTRY,
)
JOB_DURATION = Histogram(
    "redislock_job_duration_seconds",
    "How long job runs took, whatever their outcome.",
    ["queue", "task"],
    buckets=JOB_BUCKETS,
    registry=REGISTRY,
)
LOCK_ACQUIRED = Counter(
    "redislock_lock_acquisitions",
    "Locks acquired (a hand-off included), by kind.",
    ["kind"],
    registry=REGISTRY,
)
LOCK_BUSY = Counter(
    "redislock_lock_busy",
    "Acquires that gave up: the lock stayed busy for the whole timeout.",
    ["kind"],
    registry=REGISTRY,
)
LOCK_LOST = Counter(
    "redislock_lock_lost",
    "Held locks found lost (TTL ran out, or force-released).",
    ["kind"],
    registry=REGISTRY,
)
LOCK_WAIT = Histogram(
    "redislock_lock_wait_seconds",
    "From acquire() to holding the lock: a round trip when free, the wait for the holder's "
    "release (the hand-off) when busy.",
    ["kind"],
    buckets=WAIT_BUCKETS,
    registry=REGISTRY,
)

# A task's failure that never runs again, whatever attempts are left.
FOR_GOOD = frozenset(
    {"django_redislock.exceptions.InvalidTask", "django_redislock.exceptions.JobCancelled"}
)


def outcome(result: Any) -> str:
    """What became of a job run, from its ``TaskResult`` as ``task_finished`` carries it:
    succeeded, retried or dead, as the worker decides it (the task's options, then the
    queue's settings). A ``RetryLater`` run sends no ``task_finished``: ``job_snoozed``."""
    if result.status == "SUCCESSFUL":  # TaskResultStatus, a TextChoices
        return "succeeded"
    last = result.errors[-1]
    if last.exception_class_path in FOR_GOOD:
        return "dead"
    task = result.task
    retry_on = getattr(task, "retry_on", None)
    if retry_on and not issubclass(last.exception_class, retry_on):
        return "dead"
    options = conf.QUEUES.get(task.queue_name, QUEUE_DEFAULTS)
    limit = getattr(task, "max_attempts", None) or int(options["MAX_ATTEMPTS"])
    # Each failed attempt leaves its error (RetryLater runs leave none): this run's included,
    # they are the failures the worker compares with the limit.
    return "dead" if len(result.errors) >= limit else "retried"


def never_raises(receiver: Callable[..., None]) -> Callable[..., None]:
    """A receiver that logs its own failure: the signals are sent with ``send``, and counting
    must never fail a job or an acquire."""

    @functools.wraps(receiver)
    def guarded(sender: Any, **kwargs: Any) -> None:
        try:
            receiver(sender, **kwargs)
        except Exception:
            logger.exception("Counting a metric failed")

    return guarded


@never_raises
def job_finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
    if not issubclass(sender, _backend()):  # another backend's task (an immediate one...)
        return
    queue, task = task_result.task.queue_name, task_result.task.module_path
    JOB_RUNS.labels(queue, task, outcome(task_result)).inc()
    started, finished = task_result.started_at, task_result.finished_at
    if started is not None and finished is not None:
        seconds = max(0.0, (finished - started).total_seconds())
        JOB_DURATION.labels(queue, task).observe(seconds)


@never_raises
def job_was_snoozed(sender: Any, queue: str, job: Any = None, **kwargs: Any) -> None:
    JOB_RUNS.labels(queue, task_label(getattr(job, "task", "")), "snoozed").inc()


@never_raises
def lock_was_acquired(sender: Any, waited: float | None = None, **kwargs: Any) -> None:
    kind = sender.__name__
    LOCK_ACQUIRED.labels(kind).inc()
    if waited is not None:
        LOCK_WAIT.labels(kind).observe(waited)


@never_raises
def lock_was_busy(sender: Any, **kwargs: Any) -> None:
    LOCK_BUSY.labels(sender.__name__).inc()


@never_raises
def lock_was_lost(sender: Any, **kwargs: Any) -> None:
    LOCK_LOST.labels(sender.__name__).inc()


def _backend() -> type:
    from ..tasks.backend import RedisTaskBackend

    return RedisTaskBackend


def _task_signals() -> Any:
    """The Tasks framework's signals, None when it is not installed (Django 5.2 without the
    backport): then only locks are counted."""
    try:
        from ..tasks.results import signals
    except ImproperlyConfigured:
        return None
    return signals


_LOCK_RECEIVERS = (
    (lock_acquired, lock_was_acquired),
    (lock_busy, lock_was_busy),
    (lock_lost, lock_was_lost),
    (job_snoozed, job_was_snoozed),
)
_UID = "django_redislock.metrics"


def connect() -> None:
    """Count from now on in this process (idempotent)."""
    for signal, receiver in _LOCK_RECEIVERS:
        signal.connect(receiver, dispatch_uid=_UID)
    signals = _task_signals()
    if signals is not None:
        signals.task_finished.connect(job_finished, dispatch_uid=_UID)


def disconnect() -> None:
    """Stop counting in this process."""
    for signal, _ in _LOCK_RECEIVERS:
        signal.disconnect(dispatch_uid=_UID)
    signals = _task_signals()
    if signals is not None:
        signals.task_finished.disconnect(dispatch_uid=_UID)
