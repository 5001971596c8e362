"""Eager mode, a queue's ``EAGER`` option (for tests and development): ``enqueue`` (and a
task's, through ``RedisTaskBackend``) runs the job at once, in the calling thread, through
``execution.run_job`` as the worker does (the same task lookup, signals and JSON result),
and returns the job as it ended. Nothing is written to Redis, so no server is needed.

As RQ's ``is_async=False`` and Django's ``ImmediateBackend`` do, a failure is recorded, not
raised: the job comes back dead with its error and traceback (the Tasks framework logs it).
One attempt only; ``delay``/``at`` and ``time_limit`` are not waited for, ids are not
de-duplicated. Inside ``transaction.atomic()`` (with ``ON_COMMIT``) the job runs when the
transaction commits, as a worker would only see it then; the job returned is then the one
queued (ready).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import traceback
from collections.abc import Mapping, Sequence
from functools import partial

from django.db import transaction

from ..exceptions import DependencyFailed
from .arguments import Made
from .job_codec import dumps, error_text, trimmed
from .jobs import AttemptError, Job, JobState
from .ran_before import running_after

logger = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


def finished(job: Job, result: str, started: int) -> Job:
    """``job`` (its attempt charged) done, with its return value as JSON text."""
    return dataclasses.replace(
        job,
        state=JobState.DONE.value,
        result=result,
        started=started,
        finished=_now_ms(),
        lease=None,
    )


def failed(job: Job, exc: BaseException, trace: str, state: JobState, started: int) -> Job:
    """``job`` (its attempt charged) after it raised ``exc``: in ``state`` with the error."""
    message, error_class = error_text(exc)
    trace = trimmed(trace)
    attempt = AttemptError(message, error_class, trace, job.worker or "")
    return dataclasses.replace(
        job,
        state=state.value,
        error=message,
        error_class=error_class,
        traceback=trace,
        errors=(*job.errors, attempt),
        started=started,
        finished=_now_ms(),
        lease=None,
    )


def run_now(job: Job) -> Job:
    """Run ``job`` once, here and now, and return it as it ended: done with its result, or
    dead with what it raised (``KeyboardInterrupt`` and ``SystemExit`` propagate: in the
    caller's own process they are the caller's)."""
    from .execution import run_job  # (imports the Tasks framework: only when a job runs)

    started = _now_ms()
    job = dataclasses.replace(job, attempts=job.attempts + 1, state=JobState.RUNNING.value)
    try:
        value = run_job(job)
    except Exception as exc:
        logger.info(
            "Job %s (%s) in %r failed (eager mode): %s",
            job.id,
            job.task,
            job.queue,
            type(exc).__name__,
        )
        return failed(job, exc, traceback.format_exc(), JobState.DEAD, started)
    return finished(job, value, started)


def run_unless_failed(job: Job, before: Mapping[str, Job], anyway: bool) -> Job:
    """``run_now``, for ``job`` (its ``depends_on`` set) whose dependencies ran here
    before it (``before``: by ref). Unless it runs ``anyway`` (run_when "finished"), one of
    them that ended dead ends it dead with ``DependencyFailed``, without running it."""
    dead = [ref for ref, ended in before.items() if ended.state == JobState.DEAD.value]
    if dead and not anyway:
        exc = DependencyFailed(f"Its dependency {dead[0]} ended dead.")
        return failed(job, exc, "", JobState.DEAD, 0)
    with running_after(before):
        return run_now(job)


def eager_job(queue_name: str, made: Made) -> Job:
    """The job ``made`` (id, task, args, kwargs, priority, meta, as checked), ready."""
    job_id, task, args, kwargs, priority, meta = made
    now = _now_ms()
    # Through JSON, as a worker reads them: the task sees lists, not tuples.
    return Job(
        job_id,
        queue_name,
        task,
        json.loads(dumps(list(args))),
        json.loads(dumps(dict(kwargs))),
        int(priority),
        score=now,
        enqueued=now,
        meta=dict(meta or {}),
    )


def run_eagerly(queue_name: str, made: Sequence[Made], commit_alias: str | None) -> list[Job]:
    """The eager ``enqueue``: each job ``made`` run now, or when the transaction on
    ``commit_alias`` commits."""
    jobs = []
    for one in made:
        job = eager_job(queue_name, one)
        if commit_alias is None:
            jobs.append(run_now(job))
        else:
            transaction.on_commit(partial(run_now, job), using=commit_alias)
            jobs.append(job)
    return jobs
