"""Helpers for the tests of a project that uses django-redislock (as ``django.test`` is for
Django's): ``run_jobs`` runs the queued jobs inside a test, ``isolated_keys`` gives a test
keys of its own. See the testing how-to (docs/howto/testing.rst) for the whole recipe
(fakeredis, eager mode, the Tasks framework's immediate backend)."""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from secrets import token_hex
from typing import Any

from django.test.utils import TestContextDecorator, override_settings

from .checks import PREFIX_RE
from .conf import conf, user_settings
from .exceptions import InvalidTask, RetryLater
from .queue.eager import failed, finished
from .queue.execution import run_job
from .queue.jobs import JobState
from .queue.lua import MAX_BATCH
from .queue.queue import Job, Queue, get_queue
from .queue.retry_policy import after_failure, check_own_options, policy
from .redis.clients import get_redis, is_cluster

__all__ = ["JobsRun", "isolated_keys", "run_jobs"]


@dataclass
class JobsRun:
    """What ``run_jobs`` ran, in order: each job as it ended (``state`` done, with its
    ``result`` as JSON text; or dead / scheduled for a retry, with its ``error``)."""

    jobs: list[Job] = field(default_factory=list)

    @property
    def done(self) -> list[Job]:
        return [job for job in self.jobs if job.state == JobState.DONE]

    @property
    def failed(self) -> list[Job]:
        return [job for job in self.jobs if job.state != JobState.DONE]

    def __len__(self) -> int:
        return len(self.jobs)


def run_jobs(
    queues: str | Sequence[str] = "default",
    *,
    scheduled: bool = False,
    max_jobs: int = 1000,
    raise_errors: bool = False,
    using: str | None = None,
) -> JobsRun:
    """Run the ready jobs of ``queues`` here, in this thread (so a test's database
    transaction is theirs too), one by one until none is ready, as the worker runs them:
    only ``@task`` objects, the framework's signals, failures retried or dead-lettered as
    the queue says. Jobs that the jobs enqueue run too.

    ``scheduled=True`` also runs the jobs not yet due (a delayed job, a failed job's retry),
    as if their time had come. ``max_jobs`` bounds the run (a job that enqueues itself);
    ``raise_errors=True`` re-raises a task's exception, once its failure is recorded."""
    names = [queues] if isinstance(queues, str) else queues
    if (
        not isinstance(names, (list, tuple))
        or not names
        or not all(isinstance(name, str) for name in names)
    ):
        raise TypeError("queues must be a queue name or a list of queue names.")
    if not isinstance(max_jobs, int) or isinstance(max_jobs, bool) or max_jobs < 1:
        raise ValueError(f"max_jobs must be an int >= 1, not {max_jobs!r}.")
    worker = f"run_jobs:{os.getpid()}"
    run = JobsRun()
    todo = [get_queue(name, using) for name in names]
    while len(run) < max_jobs:
        job = None
        for queue in todo:
            if scheduled:
                _make_due(queue)
            popped = queue.pop(1, worker=worker)
            if popped:
                job = popped[0]
                run.jobs.append(_run(queue, job, raise_errors))
                break
        if job is None:
            return run
    return run


def _make_due(queue: Queue) -> None:
    """Make every scheduled job of ``queue`` ready now."""
    while True:
        waiting = queue.jobs(JobState.SCHEDULED, 0, MAX_BATCH)
        if not waiting:
            return
        for job in waiting:
            queue.requeue(job.id)


def _run(queue: Queue, job: Job, raise_errors: bool) -> Job:
    started = job.started or int(time.time() * 1000)
    try:
        if job.meta:
            check_own_options(job)
        value = run_job(job)
    except RetryLater as exc:  # as the worker does: runs again later, not a failure
        queue.snooze(job, exc.delay)
        return dataclasses.replace(
            job, state=JobState.SCHEDULED.value, reason="RetryLater", started=started, lease=None
        )
    except Exception as exc:
        trace = traceback.format_exc()
        if isinstance(exc, InvalidTask):  # as the worker does: it can never run
            queue.bury(job, exc, trace)
            state = JobState.DEAD
        else:
            outcome = after_failure(policy(queue, job), job, exc)
            queue.fail(job, exc, trace, outcome=outcome)
            state = JobState.DEAD if outcome.dead else JobState.SCHEDULED
        if raise_errors:
            raise
        return failed(job, exc, trace, state, started)
    queue.ack(job, value)
    return finished(job, value, started)


class isolated_keys(TestContextDecorator):  # lower case: used like override_settings
    """Give a test (a function, a ``TestCase`` class, or a ``with`` block) a
    ``REDISLOCK['KEY_PREFIX']`` of its own, and delete every key under it afterwards: its
    locks, queues and stocks start empty and leave nothing behind, whatever else uses the
    same Redis (a development server, other tests running at the same time).
    ``prefix``: the prefix to use (default: a random one); ``with`` gives it."""

    def __init__(self, prefix: str | None = None) -> None:
        if prefix is not None and (not isinstance(prefix, str) or not PREFIX_RE.match(prefix)):
            raise ValueError(
                f"prefix {prefix!r} is not a valid key prefix: 1-64 letters, digits, _ . : -"
            )
        self.prefix = prefix
        self.used = ""
        self.override: Any = None
        super().__init__()

    def enable(self) -> str:
        self.used = self.prefix or f"test-{token_hex(6)}"
        raw = user_settings()
        current = raw if isinstance(raw, dict) else {}
        self.override = override_settings(REDISLOCK={**current, "KEY_PREFIX": self.used})
        self.override.enable()
        return self.used

    def disable(self) -> None:
        try:
            delete_prefix(self.used)
        finally:
            self.override.disable()


def delete_prefix(prefix: str | None = None, using: str | None = None) -> int:
    """Delete every key under ``prefix`` (default: ``REDISLOCK['KEY_PREFIX']``) in the Redis
    of ``using``; returns how many. With ``SCAN`` (on every master of a Cluster): for tests,
    never for a production keyspace."""
    prefix = conf.KEY_PREFIX if prefix is None else prefix
    client = get_redis(using)
    nodes = (
        [node.redis_connection for node in client.get_primaries()]
        if is_cluster(client)
        else [client]
    )
    deleted = 0
    for node in nodes:
        for key in node.scan_iter(match=f"{prefix}:*", count=1000):
            deleted += node.delete(key)  # one key a call: each has its own slot
    return deleted
