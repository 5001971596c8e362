"""``get_queue(name)``: a reliable delayed job queue on Redis (at-least-once delivery)."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..conf import conf
from ..redis.clients import get_redis, run_script
from ..redis.failures import unavailable_as_error
from ..redis.scripts import LuaScript
from .arguments import MAX_DELAY, checked_delay
from .fetch_scripts import POP
from .fetching import Fetched, WorkerCalls
from .job_codec import (
    attempt_error,
    decoded_metadata,
    decoded_progress,
    error_text,
    trimmed,
)
from .jobs import Field, Job, JobState, text
from .joining import Joining
from .keys import QueueKeys
from .lease_scripts import NOTE_MAX_ATTEMPTS, PUBLISH, RELEASE, RENEW, SETTLE
from .lua import MAX_BATCH
from .operations import CANCELLABLE, Operations
from .outbox import OUTBOX_MARK, deliver_now
from .pausing import Pausing
from .producing import Producing
from .retry_policy import Outcome, after_failure, backoff_bound, backoff_delay, policy

__all__ = ["MAX_BATCH", "MAX_DELAY", "Job", "Queue", "get_queue"]


class Queue(Producing, WorkerCalls, Pausing, Joining, Operations):
    """A named queue from ``REDISLOCK['QUEUES']``; docs/reference/queue.rst has the whole API."""

    def __init__(self, name: str, using: str | None = None) -> None:
        queues = conf.QUEUES
        if name not in queues:
            raise ImproperlyConfigured(
                f"Unknown queue {name!r}: add it to REDISLOCK['QUEUES'] (configured: "
                f"{', '.join(sorted(queues)) or 'none'})."
            )
        options = queues[name]
        self.name = name
        self.using = using
        self.lease = float(options["LEASE"])
        self.max_attempts = int(options["MAX_ATTEMPTS"])
        self.retry_backoff = float(options["RETRY_BACKOFF"])
        self.result_ttl = float(options["RESULT_TTL"])
        self.on_commit = bool(options["ON_COMMIT"])
        self.eager = bool(options["EAGER"])
        self.keys = QueueKeys(conf.KEY_PREFIX, name)
        self.base = self.keys.base
        self.client = get_redis(using)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    def other(self, name: str) -> Queue:
        """Queue ``name``, on the same Redis connection setting as this one."""
        return Queue(name, self.using)

    def key(self, suffix: str) -> str:
        """A raw key of this queue, for tests and debugging; the code names its keys
        through ``keys``."""
        return self.base + suffix

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run a queue script: the fixed keys, then ``keys`` (every one shares the queue's
        hash tag, so the script runs on Redis Cluster)."""
        return run_script(self.client, script, (*self.keys.fixed, *keys), args)

    def cancel(self, job_id: str, score: int | None = None, *, by: str | None = None) -> bool:
        """Delete a ready or scheduled job; with ``score``, only if still due at that time.
        A running job is asked to stop (``by``: who asks, kept with it; default this host
        and process): its worker raises ``JobCancelled`` in it at its next lease renewal,
        and it ends dead as cancelled, never run again. False when there was nothing to
        cancel."""
        if score is not None:
            return self._cancel(job_id, int(score), CANCELLABLE)
        return self._cancel(job_id, "", CANCELLABLE + JobState.RUNNING.letter, asker(by))

    def stop(self, job_id: str, *, by: str | None = None) -> bool:
        """Ask a running job to stop, as ``cancel`` does, but only a running one: False when
        the job is not running (any more), and then nothing is done."""
        return self._cancel(job_id, "", JobState.RUNNING.letter, asker(by))

    # --- consuming ---------------------------------------------------------------------

    def pop(self, count: int = 1, lease: float | None = None, *, worker: str = "") -> list[Job]:
        """Lease up to ``count`` ready jobs (highest priority first). ``ack``, ``retry`` or
        ``fail`` each; a job whose lease runs out is delivered again."""
        return self.pop_and_wait(count, lease, worker=worker)[0]

    def pop_and_wait(
        self, count: int, lease: float | None = None, *, worker: str = ""
    ) -> tuple[list[Job], float | None]:
        """``pop``, and the seconds until the next scheduled job or lease expiry (0 when
        more are ready, None when nothing is pending)."""
        jobs, wait, _ = self.fetch(count, lease, worker=worker)
        return jobs, wait

    def fetch(
        self,
        count: int,
        lease: float | None = None,
        *,
        worker: str = "",
        finished: Sequence[tuple[Job, str | None]] = (),
        started: Sequence[Job] = (),
        charge: bool = True,
    ) -> Fetched:
        """``pop_and_wait`` after acknowledging ``finished`` (jobs with their result, as
        ``ack`` takes them) and charging the attempt of ``started`` (jobs leased ahead that
        start now), in one round trip per ``MAX_BATCH`` jobs; also returns the ids of the
        finished and started jobs whose lease had run out (``"{expired}<id>"``: a started
        job that had expired, buried uncharged). ``charge=False`` leases jobs ahead: their
        attempt counts only once they are started."""
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be an int >= 0, not {count!r}.")
        jobs: list[Job] = []
        lost: list[str] = []
        first = True
        while True:
            take = min(count - len(jobs), MAX_BATCH)
            # Every fetch sweeps due and expired jobs, its first POP at least.
            candidates = self.candidates(take) if take or first else []
            first = False
            keys, args = self.fetch_args(
                take, lease, worker, finished[:MAX_BATCH], started[:MAX_BATCH], charge, candidates
            )
            found, wait, gone = self.fetched(self.run(POP, keys, args), worker)
            if OUTBOX_MARK in gone:  # it left something in the outbox: delivered now
                gone.remove(OUTBOX_MARK)
                deliver_now(self)
            finished, started = finished[MAX_BATCH:], started[MAX_BATCH:]
            jobs += found
            lost += gone
            more = len(found) == take and len(jobs) < count
            if not (more or finished or started):
                return Fetched(jobs, wait, lost)

    def release(self, jobs: Sequence[Job]) -> int:
        """Give back popped jobs that did not start: ready again at the front of their
        priority, their attempt not counted. Returns how many were still leased."""
        given = 0
        for start in range(0, len(jobs), MAX_BATCH):
            batch = jobs[start : start + MAX_BATCH]
            pairs = [v for job in batch for v in (job.id, job.lease or "")]
            given += int(self.run(RELEASE, self.keys.jobs([job.id for job in batch]), pairs))
        return given

    def ack(self, job: Job, result: str | None = None) -> bool:
        """Finish a popped job; with ``result`` (its return value as JSON text) the job is
        kept, done, for RESULT_TTL. False when its lease had run out (it may run again)."""
        return not self.fetch(0, finished=[(job, result)]).lost

    def retry(self, job: Job, delay: float | None = None, error: str = "") -> bool:
        """Give a popped job back, due again after ``delay`` seconds (default: the backoff);
        a failed attempt."""
        failures = job.failures + 1
        if delay is None:
            delay = backoff_delay(policy(self, job), failures)
        else:
            delay = checked_delay(delay)
        return self._settle(job, round(delay * 1000), error, "", "", reason=f"retry {failures}")

    def fail(
        self,
        job: Job,
        error: str | BaseException,
        traceback: str = "",
        *,
        outcome: Outcome | None = None,
    ) -> bool:
        """Record a failure: retried after the backoff, or dead once the job's failures reach
        its ``max_attempts`` (its own, its task's, else the queue's ``MAX_ATTEMPTS``), or at
        once when ``retry_on`` does not list the exception. ``outcome``: as decided already
        (``retry_policy.after_failure``)."""
        if outcome is None:
            exc = error if isinstance(error, BaseException) else None
            outcome = after_failure(policy(self, job), job, exc)
        if outcome.dead:
            return self.bury(job, error, traceback)
        message, error_class = error_text(error)
        delay_ms = round(outcome.delay * 1000)
        return self._settle(job, delay_ms, message, traceback, error_class, reason=outcome.reason)

    def snooze(self, job: Job, delay: float) -> bool:
        """Give a popped job back to run again after ``delay`` s, as ``RetryLater`` asks: not
        a failure (no error stored, its failures unchanged)."""
        delay_ms = round(checked_delay(delay) * 1000)
        return self._settle(job, delay_ms, "", "", "", failed=False, reason="RetryLater")

    def backoff(self, job: Job) -> float:
        """The longest delay before ``job`` runs again after its next failure (the draw is
        uniform in ``[d/2, d]``): its ``retry_backoff`` doubled per failure, capped."""
        return backoff_bound(policy(self, job), job.failures + 1)

    def bury(self, job: Job, error: str | BaseException, traceback: str = "") -> bool:
        """Send a popped job straight to the dead set (it can never succeed)."""
        message, error_class = error_text(error)
        return self._settle(job, -1, message, traceback, error_class)

    def _settle(
        self,
        job: Job,
        delay_ms: int,
        error: str,
        traceback: str,
        error_class: str,
        *,
        failed: bool = True,
        reason: str = "",
    ) -> bool:
        traceback = trimmed(traceback)
        entry = attempt_error(error, error_class, traceback, job.worker or "")
        args: tuple[Any, ...] = (
            job.id,
            job.lease or "",
            delay_ms,
            error,
            traceback,
            error_class,
            entry,
            job.worker or "-",
            "1" if failed else "0",
            reason,
        )
        keys = [self.keys.job(job.id)]
        if job.dependants:  # those in this queue are told in the same script if it dies
            told = [ref for ref in job.dependants if "\t" not in ref][:MAX_BATCH]
            keys += self.keys.jobs(told)
            args += tuple(told)
        settled = self.run(SETTLE, keys, args)
        if settled == 2:  # it left something in the outbox: delivered now
            deliver_now(self)
        return bool(settled)

    def note_max_attempts(self, job: Job, max_attempts: int) -> bool:
        """Note on a popped ``job`` that has no ``max_attempts`` of its own its task's, so
        that a lapse of its lease (its worker died) is judged by it, not by the queue's.
        False when the lease was lost."""
        args = (job.lease or "", max_attempts)
        return bool(self.run(NOTE_MAX_ATTEMPTS, [self.keys.job(job.id)], args))

    def publish(self, job: Job, metadata: str = "", progress: str = "") -> bool:
        """Publish what a popped ``job`` says of its progress: its metadata (JSON object
        text) and progress ("<done>/<total>"), each "" to leave it. False when the lease
        was lost (nothing is written then)."""
        args = (job.lease or "", metadata, progress)
        return bool(self.run(PUBLISH, [self.keys.job(job.id)], args))

    @unavailable_as_error()
    def published(self, job_id: str) -> tuple[dict[str, Any], tuple[int, int] | None]:
        """What job ``job_id`` published while it ran (``publish``): its metadata ({} for
        none) and progress (None for none), whether it is still pending or finished."""
        pipe = self.client.pipeline(transaction=False)
        for key in (self.keys.job(job_id), self.keys.result(job_id)):
            pipe.hmget(key, Field.METADATA, Field.PROGRESS)
        for found in pipe.execute(raise_on_error=False):
            if isinstance(found, list) and (found[0] or found[1]):
                return decoded_metadata(found[0]), decoded_progress(found[1])
        return {}, None

    def renew(self, jobs: Sequence[Job], lease: float | None = None) -> list[str]:
        """Extend the leases of popped jobs; returns the ids whose lease was already lost."""
        return self.renew_leases(jobs, lease)[0]

    def renew_leases(
        self, jobs: Sequence[Job], lease: float | None = None
    ) -> tuple[list[str], list[str]]:
        """``renew``; and the ids of the jobs asked to stop (cancelled while running)."""
        if not jobs:
            return [], []
        lease_ms = max(1, round((self.lease if lease is None else lease) * 1000))
        pairs = [v for job in jobs for v in (job.id, job.lease or "")]
        keys = self.keys.jobs([job.id for job in jobs])
        lost, asked = self.run(RENEW, keys, (lease_ms, *pairs))
        return [text(i) for i in lost], [text(i) for i in asked]


def get_queue(name: str = "default", using: str | None = None) -> Queue:
    """The queue ``name`` from ``REDISLOCK['QUEUES']``."""
    if not isinstance(name, str):
        raise TypeError(f"Queue name must be a str, not {type(name).__name__}.")
    return Queue(name, using)


def asker(by: str | None) -> str:
    """Who asks a running job to stop: ``by``, checked, or this host and process."""
    who = by if by is not None else f"{socket.gethostname()} pid {os.getpid()}"
    if not isinstance(who, str) or not who or "|" in who or len(who) > 200:
        raise ValueError("by must be a non-empty str of at most 200 characters, no '|'.")
    return who
