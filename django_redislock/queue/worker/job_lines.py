"""The worker's line per job, at its outcome, on ``django_redislock.worker`` (the logger
``run_queue_worker`` shows)::

    default: shop.tasks.close (close:42) succeeded in 3.1 ms                        INFO
    default: shop.tasks.mail (r7) failed in 212.0 ms: SMTPException: timed out;
        attempt 1 of 3, runs again in 10 s  + the task's traceback                   WARNING
    default: shop.tasks.mail (r7) failed in 201.3 ms: SMTPException: timed out;
        dead after 3 attempts  + the task's traceback                                ERROR
    default: shop.tasks.gone (x) refused: 'shop.tasks.gone' does not exist (…); dead ERROR
    default: shop.tasks.sync (s1) cancelled after 12.97 s; not run again             WARNING
    default: shop.tasks.poll (p1) asked to run again in 30 s (RetryLater)            INFO
    default: shop.tasks.close (c9) not run: importing shop.tasks failed; runs again
        in 60 s                                                                      WARNING

A task module that fails to import is logged once (ERROR, with its traceback) on
``django_redislock.worker`` too: "importing shop.tasks failed: …".
"""

from __future__ import annotations

import logging
import threading

from ...exceptions import TaskImportFailed
from ..job_codec import error_text
from ..queue import Job, Queue
from ..retry_policy import NOT_RETRIED, Outcome, RetryPolicy
from .tracebacks import task_traceback

log = logging.getLogger("django_redislock.worker")

# How long a job whose task module fails to import waits before it is tried again: a
# deploy mistake is fixed by a new deploy, which restarts the workers.
IMPORT_RETRY = 60.0


def took(seconds: float) -> str:
    """A duration as the worker's lines show it: "3.1 ms" below a second, else "12.97 s",
    "10.5 s", "60 s"."""
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f}".rstrip("0").rstrip(".") + " s"


def _named(queue: Queue, job: Job) -> str:
    return f"{queue.name}: {job.task or '?'} ({job.id})"


def succeeded(queue: Queue, job: Job, ran: float) -> None:
    if log.isEnabledFor(logging.INFO):  # (the drain's hot path otherwise)
        log.info("%s succeeded in %s", _named(queue, job), took(ran))


def snoozed(queue: Queue, job: Job, delay: float) -> None:
    log.info("%s asked to run again in %s (RetryLater)", _named(queue, job), took(delay))


def refused(queue: Queue, job: Job, exc: BaseException) -> None:
    log.error("%s refused: %s; dead", _named(queue, job), str(exc).rstrip("."))


def cancelled(queue: Queue, job: Job, ran: float) -> None:
    # Redis buries a cancelled job as such: it never runs again, whatever its attempts.
    log.warning("%s cancelled after %s; not run again", _named(queue, job), took(ran))


def failed(
    queue: Queue, job: Job, exc: BaseException, ran: float, rules: RetryPolicy, outcome: Outcome
) -> None:
    """The line of a failed attempt, with the task's traceback: WARNING when it runs again,
    ERROR when it is dead."""
    level = logging.ERROR if outcome.dead else logging.WARNING
    if not log.isEnabledFor(level):
        return
    why = error_text(exc)[0].rstrip(".")  # "Class: text", even when str(exc) fails
    # A time limit's message names the job, as the admin shows it; the line already does.
    why = why.replace(f"Job {job.id} ({job.task}) in {queue.name!r} ", "", 1)
    log.log(
        level,
        "%s failed in %s: %s; %s",
        _named(queue, job),
        took(ran),
        why,
        _next(rules, outcome),
        exc_info=(type(exc), exc, task_traceback(exc)),
    )


def _next(rules: RetryPolicy, outcome: Outcome) -> str:
    """What happens next to a job that failed (attempts: failed ones; ``RetryLater`` runs
    are not counted)."""
    if outcome.dead and outcome.reason == NOT_RETRIED:
        return "dead at once (not in its retry_on)"
    if outcome.dead:
        return f"dead after {outcome.failures} attempt{'s' if outcome.failures != 1 else ''}"
    return (
        f"attempt {outcome.failures} of {rules.max_attempts}, runs again in {took(outcome.delay)}"
    )


_reported: dict[str, str] = {}  # module: the import error last logged for it
_reporting = threading.Lock()


def not_imported(queue: Queue, job: Job, exc: TaskImportFailed, delay: float) -> None:
    """A job whose task module fails to import: the import error once per module (again
    if it changes), with its traceback; the job's own line each time."""
    cause = exc.__cause__ or exc
    with _reporting:
        first = _reported.get(exc.module) != str(exc)
        _reported[exc.module] = str(exc)
    if first:
        log.error(
            "%s; its jobs wait, each tried again after %s",
            exc,
            took(delay),
            exc_info=(type(cause), cause, task_traceback(cause, whole=False)),
        )
    log.warning(
        "%s not run: importing %s failed; runs again in %s",
        _named(queue, job),
        exc.module,
        took(delay),
    )
