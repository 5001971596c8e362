"""How a job retries: its policy (each option its own, else its task's, else its queue's
setting), the delay before its next run, and what becomes of a failed attempt.

The delay after failure n is ``d = min(retry_backoff * 2**(n-1), retry_backoff_max)``, drawn
uniformly from ``[d/2, d]``. ``RetryLater`` runs are not failures: they count neither toward
``max_attempts`` nor in n.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple, Protocol

from django.core.exceptions import ImproperlyConfigured

from ..conf import conf
from ..exceptions import InvalidTask
from .arguments import MAX_DELAY
from .jobs import Job
from .options import WORKER_OPTIONS, ExceptionClasses, read_option


class Settings(Protocol):
    """A queue, as far as its retry settings go."""

    name: str
    max_attempts: int
    retry_backoff: float


class RetryPolicy(NamedTuple):
    max_attempts: int
    retry_backoff: float
    retry_backoff_max: float
    retry_on: ExceptionClasses | None  # None or empty: every exception is retried


class Outcome(NamedTuple):
    """What becomes of a failed attempt: dead, or run again after ``delay`` s; ``failures``
    counts it; ``reason`` is why it runs next (or why it is dead)."""

    dead: bool
    delay: float
    failures: int
    reason: str


NOT_RETRIED = "not in retry_on"


def registered_task(path: str) -> Any:
    """The task a job's path names, or None when it names none (the worker buries it)."""
    from .execution import resolve_task  # (the producers never import the Tasks framework)

    try:
        return resolve_task(path) if path else None
    except (InvalidTask, ImproperlyConfigured):
        return None


def job_option(job: Job, name: str) -> Any:
    """Option ``name`` for ``job``: its own (in its metadata; null there: unset), else its
    task's. None: the queue's setting applies. InvalidTask when the job's own is corrupt."""
    meta = job.meta
    if name in meta:
        try:
            return read_option(name, meta[name])
        except (TypeError, ValueError) as exc:
            raise InvalidTask(f"The job's option {name} (its metadata) is corrupt: {exc}") from exc
    return declared(job.task, name)


# task path -> its task, once found (a path naming no task is looked up each time): the
# worker reads a declared option on every job it runs.
_declared: dict[str, Any] = {}


def declared(path: str, name: str) -> Any:
    """Option ``name`` as the task at ``path`` declares it (None: unset, or no such task)."""
    task = _declared.get(path)
    if task is None:
        task = registered_task(path)
        if task is not None:
            if len(_declared) >= 10_000:  # paths of many tasks must not grow it forever
                _declared.clear()
            _declared[path] = task
    return getattr(task, name, None)


def lapse_max_attempts(queue: Settings, job: Job) -> int | None:
    """The max_attempts by which a lapse of ``job``'s lease must be judged, when Redis
    cannot know it (see ``Queue.note_max_attempts``): its task's, when the job has none of
    its own and the task's differs from the queue's; else None."""
    if "max_attempts" in job.meta:
        return None
    found = declared(job.task, "max_attempts")
    return found if found is not None and found != queue.max_attempts else None


def check_own_options(job: Job) -> None:
    """InvalidTask when an option ``job`` carries (in its metadata) is corrupt."""
    for name in WORKER_OPTIONS:
        if name in job.meta:
            job_option(job, name)


def policy(queue: Settings, job: Job) -> RetryPolicy:
    """The retry policy ``job`` runs under (InvalidTask when an option of its own is
    corrupt: it can never run)."""
    values = [job_option(job, name) for name in RetryPolicy._fields]
    max_attempts, base, cap, retry_on = values
    return RetryPolicy(
        queue.max_attempts if max_attempts is None else max_attempts,
        queue.retry_backoff if base is None else float(base),
        MAX_DELAY if cap is None else float(cap),
        retry_on,
    )


def backoff_bound(rules: RetryPolicy, failures: int) -> float:
    """The longest delay after failure number ``failures``: d of the formula."""
    # The exponent is capped: many failures (or a damaged count) must not overflow.
    d = rules.retry_backoff * 2.0 ** min(max(0, failures - 1), 64)
    return min(d, rules.retry_backoff_max, MAX_DELAY)


def backoff_delay(rules: RetryPolicy, failures: int) -> float:
    """The delay after failure number ``failures``: uniform in ``[d/2, d]``."""
    d = backoff_bound(rules, failures)
    return random.uniform(d / 2, d)


def retried(rules: RetryPolicy, exc: BaseException | None) -> bool:
    """Whether ``exc`` may be retried (None, a lapsed lease: always)."""
    return exc is None or not rules.retry_on or isinstance(exc, rules.retry_on)


def after_failure(rules: RetryPolicy, job: Job, exc: BaseException | None) -> Outcome:
    """What becomes of ``job``'s attempt that failed with ``exc``."""
    failures = job.failures + 1
    if not retried(rules, exc):
        return Outcome(True, 0.0, failures, NOT_RETRIED)
    if failures >= rules.max_attempts:
        return Outcome(True, 0.0, failures, f"{failures} failure(s) of {rules.max_attempts}")
    return Outcome(False, backoff_delay(rules, failures), failures, f"retry {failures}")


def explained(queue: Settings, job: Job) -> list[tuple[str, Any, str]]:
    """Each option the worker decides for ``job``: its name, value and where it comes from
    ("job", "task", "queue"; a corrupt one of its own is shown as found, "job (corrupt)")."""
    task = registered_task(job.task)
    shown = []
    for name in WORKER_OPTIONS:
        value, source = job.meta.get(name), "job"
        if name in job.meta:
            try:
                read_option(name, value)
            except (TypeError, ValueError):
                source = "job (corrupt)"
        else:
            value, source = getattr(task, name, None), "task"
        if value is None:
            value, source = _QUEUE_SETTINGS[name](queue), "queue"
        if name == "retry_on" and isinstance(value, tuple):
            value = [f"{c.__module__}.{c.__qualname__}" for c in value]
        shown.append((name, value, source))
    return shown


_QUEUE_SETTINGS: dict[str, Any] = {
    "max_attempts": lambda q: q.max_attempts,
    "retry_backoff": lambda q: q.retry_backoff,
    "retry_backoff_max": lambda q: None,  # none: a century
    "retry_on": lambda q: None,  # none: every exception
    "time_limit": lambda q: conf.QUEUES.get(q.name, {}).get("TIME_LIMIT"),
}
