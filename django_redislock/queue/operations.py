"""What an operator does with a queue (the admin, management code): counts, pages of jobs,
one job, requeue, delete, purge. Mixed into ``Queue``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..exceptions import JobNotFound
from ..redis.scripts import LuaScript
from .admin_scripts import CANCEL, PURGE, READY_HEADS, REQUEUE
from .jobs import LISTED_STATES, Field, Job, JobState, from_hash, not_a_hash, text
from .keys import QueueKeys
from .lua import MAX_BATCH

CANCELLABLE = JobState.READY.letter + JobState.SCHEDULED.letter
DELETABLE = CANCELLABLE + JobState.DEAD.letter


class Operations:
    name: str
    client: Any
    keys: QueueKeys

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def counts(self) -> dict[str, int]:
        """Jobs per state: ready, scheduled, running, dead."""
        pipe = self.client.pipeline(transaction=False)
        for state in LISTED_STATES:
            pipe.zcard(self.keys.of_state(state))
        return dict(zip((s.value for s in LISTED_STATES), pipe.execute(), strict=True))

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
        """One page of jobs in ``state``, in the order they will run (dead: oldest first)."""
        for name, value in (("offset", offset), ("limit", limit)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, not {value!r}.")
        if limit > MAX_BATCH:
            raise ValueError(f"limit must be at most {MAX_BATCH}, not {limit}.")
        if limit == 0:
            return []
        state_set = self.keys.of_state(state)
        ids = [text(i) for i in self.client.zrange(state_set, offset, offset + limit - 1)]
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.keys.job(job_id))
            pipe.zscore(state_set, job_id)  # read after the hash: None if it left meanwhile
        replies = pipe.execute(raise_on_error=False)
        jobs = []
        for job_id, fields, score in zip(ids, replies[::2], replies[1::2], strict=True):
            if score is None:
                continue
            jobs.append(self._job(job_id, fields))
        return jobs

    def peek(self, count: int = 1) -> list[Job]:
        """The next ready jobs, not removed."""
        return self.jobs(JobState.READY, 0, count)

    def get(self, job_id: str) -> Job:
        """One job by id, in whatever state (done: kept for RESULT_TTL after it ran);
        JobNotFound if it is not in the queue."""
        if not isinstance(job_id, str):
            raise TypeError(f"job_id must be a str, not {type(job_id).__name__}.")
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.job(job_id))
        pipe.hgetall(self.keys.result(job_id))
        for fields in pipe.execute(raise_on_error=False):  # a pending job first
            if isinstance(fields, Exception) or fields:
                return self._job(job_id, fields)
        raise JobNotFound(f"No job {job_id!r} in queue {self.name!r}.")

    def _job(self, job_id: str, fields: Any) -> Job:
        if isinstance(fields, Exception):  # not a hash: POP sets such a key aside
            return not_a_hash(job_id, self.name)
        return from_hash(job_id, self.name, {text(k): v for k, v in fields.items()})

    def requeue(self, job_id: str) -> bool:
        """Run a scheduled or dead job now (a dead one with its attempts reset)."""
        return bool(self.run(REQUEUE, [self.keys.job(job_id)], [job_id]))

    def delete(self, job_id: str) -> bool:
        """Delete a ready, scheduled or dead job; False when it is missing or running."""
        return self._cancel(job_id, "", DELETABLE)

    def _cancel(self, job_id: str, score: int | str, states: str, by: str = "") -> bool:
        keys = [self.keys.job(job_id), self.keys.corrupt(job_id)]
        return bool(self.run(CANCEL, keys, [job_id, score, states, by]))

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
                keys = [k for i in ids for k in (self.keys.job(i), self.keys.corrupt(i))]
                removed += int(self.run(PURGE, [state_set, *keys], ids))
                if progress is not None:
                    progress(removed)
            if len(ids) < batch:
                return removed
