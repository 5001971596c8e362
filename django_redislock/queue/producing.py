"""The producing half of ``Queue``: ``enqueue`` (``enqueue_many`` and a schedule's ticks
are ``enqueue_many``'s). Everything is checked before anything is written; inside
``transaction.atomic()`` the jobs are pushed when the transaction commits (``on_commit``),
else at once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from ..metrics.tracing import traced_enqueue
from ..redis.clients import run_script
from ..redis.scripts import LuaScript
from .arguments import Made, checked_job_id, job_values, new_id
from .eager import run_eagerly
from .enqueue_many import EnqueueMany
from .enqueue_scripts import ADD, ENQUEUE
from .enqueued import Enqueued
from .job_keys import LIMIT_OPTIONS, with_limits
from .job_options import with_expires
from .jobs import Job, JobState
from .keys import QueueKeys
from .on_commit import commit_alias, database, described, push_at_commit
from .options import OWN_OPTIONS, with_options
from .time_limits import with_time_limit

READY, SCHEDULED = JobState.READY.letter, JobState.SCHEDULED.letter
_UNKNOWN = Enqueued(0, 0, READY, 0)  # for a job not pushed yet
# A job's own retry options, as enqueue and enqueue_many items take them.
_UNSET = (None, None, None, None)


def _stamped(job: Job, reply: Enqueued) -> Job:
    """``job``, built before ENQUEUE's four values for it came, with its state and times."""
    fields = vars(job)  # a frozen dataclass's, set before anyone else has seen the job
    fields["state"], fields["score"], fields["enqueued"] = reply.placed()
    return job


class Producing(EnqueueMany):
    name: str
    client: Any
    keys: QueueKeys
    on_commit: bool
    eager: bool  # EAGER: run each job at once, here (see ``eager``)

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    @traced_enqueue
    def enqueue(
        self,
        task: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        job_id: str | None = None,
        delay: float | None = None,
        at: datetime | None = None,
        priority: int = 0,
        replace: bool = False,
        meta: Mapping[str, Any] | None = None,
        using: str | None = None,
        db: str | None = None,
        time_limit: float | None = None,
        max_attempts: int | None = None,
        retry_backoff: float | None = None,
        retry_backoff_max: float | None = None,
        retry_on: Sequence[str] | None = None,
        expires: float | None = None,
        unique_for: float | None = None,
        unique_by_args: bool = False,
        debounce: float | None = None,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
        rate_key: str | None = None,
        rate: Any = None,
        depends_on: Iterable[Any] | None = None,
        run_when: str = "succeeded",
    ) -> Job:
        """Add a job; with ``job_id`` already pending, keep that one (or ``replace=True``).
        Returns the job as queued (``.score`` is its due time in epoch ms). ``meta``: JSON
        kept with the job, for the code that enqueues and reads it (not passed to the task).

        Inside ``transaction.atomic()`` (on ``using``, a database alias, also accepted as
        ``db``; by default the default database, or the
        one database in a transaction) the job is pushed when the transaction commits, and
        never if it rolls back: the Job returned then has ``score`` and ``enqueued`` 0 (not
        known before the push). The queue's ``ON_COMMIT: False`` pushes at once.
        ``time_limit``: seconds the job may run (default: its task's, else the queue's
        ``TIME_LIMIT``); ``max_attempts``, ``retry_backoff``, ``retry_backoff_max``,
        ``retry_on`` (exception class paths): how it retries (default: its task's, else the
        queue's ``MAX_ATTEMPTS``, ``RETRY_BACKOFF``).

        ``expires`` (s): not started within that of becoming due, the job is never started
        (dead, "expired"). ``unique_for`` (s): within that of the enqueue that created the
        id, an enqueue of it returns the existing job unchanged, whatever its state.
        ``unique_by_args``: the id is derived from the task and its arguments
        (``job_options.unique_job_id``). ``debounce`` (s): each enqueue of the id sets its
        due time to that from now and keeps the last values (see ``job_options``).

        ``concurrency_key``: a template filled from ``args``/``kwargs`` ("export:{user_id}",
        "{0}"); at most ``concurrency_limit`` (default 1) jobs of the key it renders run at
        once, across every worker; the others wait in Redis, parked (see ``job_keys``).
        ``rate_key`` (a template too) and ``rate`` ("100/s", as ``RateLimit``'s): at most that
        many starts of the key it renders in any window of the period; a job over it is
        parked until the moment a start is allowed.

        ``depends_on``: jobs (ids of this queue, ``Job``s, ``TaskResult``s) it waits for: it
        is "waiting" until they end, then ready at once; with ``run_when="succeeded"`` (the
        default) one that ends dead ends it dead with ``DependencyFailed``, with
        ``"finished"`` it runs however they ended (see ``depending``)."""
        own = (max_attempts, retry_backoff, retry_backoff_max, retry_on)
        limits = (concurrency_key, concurrency_limit, rate_key, rate)
        if limits != _UNSET:
            given = dict(zip(LIMIT_OPTIONS, limits, strict=True))
            meta = with_limits(meta, given, args, kwargs, task)
        dependent = depends_on is not None or run_when != "succeeded"
        opted = unique_for is not None or debounce is not None or unique_by_args is not False
        if dependent or opted:
            spec: dict[str, Any] = {
                "task": task,
                "args": args,
                "kwargs": kwargs,
                "job_id": job_id,
                "delay": delay,
                "at": at,
                "priority": priority,
                "meta": meta,
                "time_limit": time_limit,
                "expires": expires,
                "unique_for": unique_for,
                "unique_by_args": unique_by_args,
                "debounce": debounce,
                **dict(zip(OWN_OPTIONS, own, strict=True)),
            }
            if not dependent:
                return self.enqueue_opted([spec], replace, using, db)[0]
            if replace:
                raise TypeError("A job with depends_on cannot take replace=True.")
            spec.update(depends_on=depends_on, run_when=run_when)
            return self.enqueue_dependent([spec], using=using, db=db)[0]
        kwargs = kwargs if kwargs is not None else {}
        meta = with_time_limit(meta, time_limit)
        if own != _UNSET or meta is not None:  # (the usual job: neither)
            meta = with_options(meta, **dict(zip(OWN_OPTIONS, own, strict=True)))
        if meta is not None or expires is not None:  # (a meta enqueued again: checked)
            meta = with_expires(meta, expires)
        fresh = job_id is None
        job_id = new_id() if job_id is None else checked_job_id(job_id)
        values = job_values(job_id, task, args, kwargs, priority, meta, delay, at)
        made = Made(job_id, task, args, kwargs, priority, meta)
        alias = commit_alias(database(using, db)) if self.on_commit else None
        if self.eager:
            return run_eagerly(self.name, [made], alias)[0]
        if alias is None and fresh:  # the Job is built while the script is on its way
            built: list[Job] = []
            reply = self.add_new(values, lambda: built.append(self._made(*made, _UNKNOWN)))
            return _stamped(built[0], reply)
        if alias is None:
            return self._made(*made, self._push(values, fresh, replace))
        push = partial(self._push, values, fresh, replace)
        push_at_commit(alias, push, described([made[:4]]))
        return self._made(*made, Enqueued(1, 0, READY if values[6] == 0 else SCHEDULED, 0))

    def _push(self, values: list[Any], fresh: bool, replace: bool) -> Enqueued:
        if fresh:  # a new id: no job of it is pending
            return self.add_new(values)
        job_keys = (self.keys.job(values[0]), self.keys.corrupt(values[0]))
        return Enqueued.of(
            self.run(ENQUEUE, job_keys, ("1" if replace else "0", "", 0, "0", *values))
        )

    def add_new(self, values: list[Any], meanwhile: Callable[[], Any] | None = None) -> Enqueued:
        """Add a job of a new id (``new_id``) from its seven checked values (``job_values``):
        one ADD script. Returns ENQUEUE's four values for it. ``meanwhile`` runs while the
        script is on its way to Redis (see ``run_script``)."""
        keys = self.keys
        now = run_script(
            self.client, ADD, (*keys.producing, keys.job_prefix + values[0]), values, meanwhile
        )
        due = values[6]
        due = due if due > 0 else abs(now) - due
        return Enqueued(1, due, READY if now > 0 else SCHEDULED, abs(now))
