"""What an operator does with a queue (the admin, management code): counts, pages of jobs
(the finished ones too), one job, requeue, delete, purge (what to do with a job its worker
left is ``left_jobs``'s). Mixed into ``Queue``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..exceptions import JobNotFound
from ..redis.failures import unavailable_as_error
from ..redis.scripts import LuaScript
from .admin_scripts import CANCEL, PURGE, READY_HEADS, REQUEUE, RETRY_DEAD
from .job_codec import from_hash, not_a_hash
from .job_options import EnqueueOptions
from .jobs import LISTED_STATES, Field, Job, JobState
from .keys import QueueKeys
from .left_jobs import LeftJobs
from .lua import MAX_BATCH
from .outbox import deliver_now
from .parked import ParkedJobs
from .replies import number, text

CANCELLABLE = (
    JobState.READY.letter
    + JobState.SCHEDULED.letter
    + JobState.PARKED.letter
    + JobState.WAITING.letter
)
DELETABLE = CANCELLABLE + JobState.DEAD.letter


class Operations(LeftJobs, ParkedJobs):
    name: str
    client: Any
    keys: QueueKeys
    max_attempts: int
    retry_backoff: float
    result_ttl: float
    lease: float

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    @unavailable_as_error()
    def counts(self, *, done: bool = False) -> dict[str, int]:
        """Jobs per state: ready, scheduled, running, dead, parked (held back by their
        concurrency key's limit) and waiting (for their dependencies to end); with ``done``, also
        the finished jobs kept with their result (those finished within RESULT_TTL)."""
        pipe = self.client.pipeline(transaction=False)
        for state in LISTED_STATES:
            pipe.zcard(self.keys.of_state(state))
        pipe.zcard(self.keys.parked)
        states = [*(s.value for s in LISTED_STATES), JobState.PARKED.value]
        if done:
            pipe.zcount(self.keys.done, self._done_since(), "+inf")
            states.append(JobState.DONE.value)
        counted = dict(zip(states, pipe.execute(), strict=True))
        return counted

    def _done_since(self) -> int:
        """The finish time (epoch ms) of the oldest result RESULT_TTL still keeps."""
        return int((time.time() - self.result_ttl) * 1000)

    @unavailable_as_error()
    def expired_count(self) -> int:
        """How many jobs of this queue were buried as expired (never started) so far."""
        return number(self.client.get(self.keys.expired))

    @unavailable_as_error()
    def oldest_ready_age(self) -> float | None:
        """Seconds the longest-waiting ready job has been due (None: nothing is ready)."""
        now, *heads = self.run(READY_HEADS, (), ())
        if not heads:
            return None
        pipe = self.client.pipeline(transaction=False)
        for job_id in heads:
            pipe.hget(self.keys.job(text(job_id)), Field.DUE)
        dues = []
        for due in pipe.execute(raise_on_error=False):
            if isinstance(due, Exception):  # not a hash: POP buries it
                continue
            try:
                dues.append(float(due) if due is not None else 0.0)
            except ValueError:
                continue
        return None if not dues else max(0, int(now) - min(dues)) / 1000

    def jobs(self, state: str, offset: int = 0, limit: int = 50) -> list[Job]:
        """One page of jobs in ``state``, in the order they will run (dead: oldest first;
        done: the finished jobs kept with their result, newest first)."""
        return [job for job, _ in self.scored_jobs(state, offset, limit)]

    @unavailable_as_error()
    def scored_jobs(self, state: str, offset: int = 0, limit: int = 50) -> list[tuple[Job, int]]:
        """``jobs``, each with its score in its state's set (epoch ms): running, when its
        lease runs out; dead, when it died; done, when it finished."""
        for name, value in (("offset", offset), ("limit", limit)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, not {value!r}.")
        if limit > MAX_BATCH:
            raise ValueError(f"limit must be at most {MAX_BATCH}, not {limit}.")
        listed = [s.value for s in (*LISTED_STATES, JobState.PARKED, JobState.DONE)]
        if state not in listed:
            raise ValueError(f"state must be one of {', '.join(listed)}, not {state!r}.")
        if limit == 0:
            return []
        if state == JobState.PARKED:
            return self._parked_jobs(offset, limit)
        done = state == JobState.DONE
        state_set = self.keys.done if done else self.keys.of_state(state)
        # Newest first for the finished: by rank, so that a deep page costs no more than the
        # first (the expired entries not trimmed yet come last, and are skipped below).
        ranged = self.client.zrevrange if done else self.client.zrange
        ids = [text(i) for i in ranged(state_set, offset, offset + limit - 1)]
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.keys.result(job_id) if done else self.keys.job(job_id))
            pipe.zscore(state_set, job_id)  # read after the hash: None if it left meanwhile
        replies = pipe.execute(raise_on_error=False)
        jobs = []
        for job_id, fields, score in zip(ids, replies[::2], replies[1::2], strict=True):
            if score is None or (done and not fields):  # gone meanwhile, or expired
                continue
            ready = state == JobState.READY  # (in the ready set: ready, whatever it says)
            jobs.append((self._job(job_id, fields, ready=ready), int(score)))
        return jobs

    def peek(self, count: int = 1) -> list[Job]:
        """The next ready jobs, not removed."""
        return self.jobs(JobState.READY, 0, count)

    def get(self, job_id: str) -> Job:
        """One job by id, in whatever state (done: kept for RESULT_TTL after it ran);
        JobNotFound if it is not in the queue."""
        if not isinstance(job_id, str):
            raise TypeError(f"job_id must be a str, not {type(job_id).__name__}.")
        job = self.get_many([job_id])[0]
        if job is None:
            raise JobNotFound(f"No job {job_id!r} in queue {self.name!r}.")
        return job

    @unavailable_as_error()
    def get_many(self, job_ids: Sequence[str]) -> list[Job | None]:
        """``get`` of each of ``job_ids`` in one round trip: None for one not in the queue."""
        pipe = self.client.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hgetall(self.keys.job(job_id))
            pipe.hgetall(self.keys.result(job_id))
            pipe.zscore(self.keys.ready, job_id)
        replies = pipe.execute(raise_on_error=False)
        jobs: list[Job | None] = []
        for n, job_id in enumerate(job_ids):
            pending, result, ready = replies[3 * n : 3 * n + 3]
            for fields in (pending, result):  # a pending job first
                if isinstance(fields, Exception) or fields:
                    jobs.append(
                        self._job(job_id, fields, ready=ready is not None and fields is pending)
                    )
                    break
            else:
                jobs.append(None)
        return jobs

    @unavailable_as_error()
    def enqueue_options(self, job_id: str) -> EnqueueOptions:
        """What a job's enqueue-decided options left in Redis (for the admin): how long its
        ``unique_for`` window still holds, and the debounce that set its due time."""
        pipe = self.client.pipeline(transaction=False)
        for key in (self.keys.job(job_id), self.keys.result(job_id)):
            pipe.hget(key, Field.DEBOUNCED)
        pipe.pttl(self.keys.unique(job_id))
        pending, done, ttl = pipe.execute(raise_on_error=False)
        debounce = next((d for d in (pending, done) if isinstance(d, bytes | str)), None)
        left = ttl / 1000 if isinstance(ttl, int) and ttl > 0 else None
        return EnqueueOptions(left, number(debounce) / 1000 if debounce is not None else None)

    def _job(self, job_id: str, fields: Any, *, ready: bool = False) -> Job:
        """The job of hash ``fields``; ``ready``: it is in the ready set, where a freed
        permit, a resume or its rate sent it back from the parked set without touching its
        hash (``limit_lua``), which still says parked until a fetch takes it."""
        if isinstance(fields, Exception):  # not a hash: POP sets such a key aside
            return not_a_hash(job_id, self.name)
        job = from_hash(job_id, self.name, {text(k): v for k, v in fields.items()})
        if ready and job.state == JobState.PARKED:
            return dataclasses.replace(job, state=JobState.READY.value)
        return job

    def requeue(self, job_id: str) -> bool:
        """Run a scheduled or dead job now (a dead one with its attempts reset)."""
        return bool(self.run(REQUEUE, [self.keys.job(job_id)], [job_id]))

    @unavailable_as_error()
    def lease_expiry(self, job_id: str) -> int | None:
        """When the lease of running job ``job_id`` runs out (epoch ms); None: not running."""
        score = self.client.zscore(self.keys.run, job_id)
        return None if score is None else int(score)

    @unavailable_as_error()
    def still_dead(self, job_ids: Sequence[str]) -> list[str]:
        """Those of ``job_ids`` in the dead set."""
        pipe = self.client.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.zscore(self.keys.dead, job_id)
        return [i for i, score in zip(job_ids, pipe.execute(), strict=True) if score is not None]

    def retry_dead(self, job_ids: Sequence[str]) -> int:
        """Run these dead jobs again now, their attempts reset (those no longer dead are
        left alone); returns how many were requeued."""
        retried = 0
        for start in range(0, len(job_ids), MAX_BATCH):
            batch = list(job_ids[start : start + MAX_BATCH])
            retried += int(self.run(RETRY_DEAD, self.keys.jobs(batch), batch))
        return retried

    @unavailable_as_error()
    def retry_all_dead(self, batch: int = MAX_BATCH) -> int:
        """``retry_dead`` of every dead job, ``batch`` per atomic step; returns how many."""
        retried = skipped = 0
        while True:
            ids = [
                text(i) for i in self.client.zrange(self.keys.dead, skipped, skipped + batch - 1)
            ]
            done = self.retry_dead(ids)
            retried += done
            skipped += len(ids) - done  # not a hash: it stays dead, and is stepped over
            if len(ids) < batch:
                return retried

    def delete_dead(self, job_ids: Sequence[str]) -> int:
        """Delete these dead jobs (those no longer dead are left alone); returns how many."""
        removed = 0
        for start in range(0, len(job_ids), MAX_BATCH):
            ids = list(job_ids[start : start + MAX_BATCH])
            keys = [k for i in ids for k in self._deleted(i)]
            removed += int(self.run(PURGE, [self.keys.dead, *keys], ids))
        return removed

    def delete(self, job_id: str) -> bool:
        """Delete a ready, scheduled or dead job; False when it is missing or running."""
        return self._cancel(job_id, "", DELETABLE)

    def _cancel(self, job_id: str, score: int | str, states: str, by: str = "") -> bool:
        cancelled = self.run(CANCEL, self._deleted(job_id), [job_id, score, states, by])
        if cancelled == 3:  # its dependants: some to tell through the outbox
            deliver_now(self)  # type: ignore[arg-type]
        return bool(cancelled)

    def _deleted(self, job_id: str) -> tuple[str, str, str]:
        """The keys that go when job ``job_id`` is deleted: its hash, what was set aside of
        it, and its ``unique_for`` marker (a deleted job no longer holds its window)."""
        keys = self.keys
        return keys.job(job_id), keys.corrupt(job_id), keys.unique(job_id)

    @unavailable_as_error()
    def purge(
        self, state: str, batch: int = 1000, progress: Callable[[int], object] | None = None
    ) -> int:
        """Delete every job in ``state``, ``batch`` per atomic step; returns how many.
        ``progress(removed so far)`` is called after each step."""
        if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= MAX_BATCH:
            raise ValueError(f"batch must be an int from 1 to {MAX_BATCH}, not {batch!r}.")
        state_set = self.keys.of_state(state)
        removed = 0
        while True:
            # Read first, so that the script is given every key it deletes; it deletes only
            # the ids still in the set.
            ids = [text(i) for i in self.client.zrange(state_set, 0, batch - 1)]
            if ids:
                keys = [k for i in ids for k in self._deleted(i)]
                removed += int(self.run(PURGE, [state_set, *keys], ids))
                if progress is not None:
                    progress(removed)
            if len(ids) < batch:
                if removed and state != JobState.DEAD:  # their dependants were told
                    deliver_now(self)  # type: ignore[arg-type]
                return removed
