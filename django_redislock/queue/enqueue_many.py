"""``enqueue_many`` and a schedule's ticks, mixed into ``Queue`` (through ``Producing``):
every job checked first, then atomic batches of ``MAX_BATCH`` (one ENQUEUE each); a batch
whose jobs carry options decided at enqueue goes to ``OptedEnqueue``, one with dependencies
to ``Depending``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from ..metrics.tracing import traced_enqueue_many
from ..redis.scripts import LuaScript
from .arguments import JOB_ARGUMENTS, Made, checked_job_id, job_values, new_ids
from .depending import Depending
from .eager import run_eagerly
from .enqueue_scripts import ENQUEUE
from .enqueued import Enqueued
from .job_factories import enqueued_job
from .job_keys import with_item_limits
from .job_options import with_expires
from .jobs import Job, JobState
from .keys import QueueKeys
from .lua import MAX_BATCH
from .on_commit import commit_alias, database, described, push_at_commit
from .opted_enqueue import ARGUMENTS, OptedEnqueue
from .options import OWN_OPTIONS, with_options
from .time_limits import with_time_limit

READY, SCHEDULED = JobState.READY.letter, JobState.SCHEDULED.letter
# What a job of ADD and ENQUEUE may say: its expiry is kept in its metadata (the other
# options decided at enqueue need ENQUEUE_OPTED).
PLAIN_ARGUMENTS = JOB_ARGUMENTS | {"expires"}
_DEPENDING = frozenset({"depends_on", "run_when"})


class _Opted(TypeError):
    """A job of ``enqueue_many`` carries options: the batch goes to ``enqueue_opted``."""


class _Depends(TypeError):
    """A job of ``enqueue_many`` has dependencies: the batch goes to ``enqueue_dependent``."""


class EnqueueMany(OptedEnqueue, Depending):
    name: str
    client: Any
    keys: QueueKeys
    on_commit: bool
    eager: bool

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    @traced_enqueue_many
    def enqueue_many(
        self,
        jobs: Iterable[Mapping[str, Any]],
        *,
        replace: bool = False,
        using: str | None = None,
        db: str | None = None,
    ) -> list[Job]:
        """Add many jobs, each a dict of ``enqueue``'s arguments: all are checked before any
        is written, then sent in atomic batches of ``MAX_BATCH`` (one round trip each).
        Inside ``transaction.atomic()``, pushed when it commits, as ``enqueue``."""
        jobs = jobs if isinstance(jobs, (list, tuple)) else list(jobs)
        try:
            flat, made, fresh = self._checked(jobs)
        except _Depends:
            if replace:
                raise TypeError("Jobs with depends_on cannot take replace=True.") from None
            return self.enqueue_dependent(jobs, using=using, db=db)
        except _Opted:
            return self.enqueue_opted(jobs, replace, using, db)
        alias = commit_alias(database(using, db)) if self.on_commit else None
        if self.eager:
            return run_eagerly(self.name, made, alias)
        if alias is None:
            return self._push_many(flat, made, fresh, replace, "", 0)
        push = partial(self._push_many, flat, made, fresh, replace, "", 0)
        push_at_commit(alias, push, described([job[:4] for job in made]))
        due = flat[6::7]
        return [
            self._made(*job, Enqueued(1, 0, READY if due[i] == 0 else SCHEDULED, 0))
            for i, job in enumerate(made)
        ]

    def enqueue_tick(self, entry: str, tick_ms: int, job: Mapping[str, Any]) -> Job | None:
        """Enqueue ``job`` for a SCHEDULE entry's tick, unless that tick (or a later one) was
        already enqueued for it: then None. Never waits for a commit."""
        flat, made, fresh = self._checked([job])
        enqueued = self._push_many(flat, made, fresh, False, entry, tick_ms)
        return enqueued[0] if enqueued else None

    def _checked(self, jobs: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Made], str]:
        """ENQUEUE's values of ``jobs``, each job checked; and whether every id is new."""
        flat: list[Any] = []
        made: list[Made] = []
        fresh = "1"  # every id generated here: ENQUEUE need not look any up
        ids = new_ids(len(jobs))
        for spec in jobs:
            if not spec.keys() <= PLAIN_ARGUMENTS:
                if any(spec.get(name) is not None for name in _DEPENDING):
                    raise _Depends("(to enqueue_dependent)")
                unknown = ", ".join(sorted(set(spec) - PLAIN_ARGUMENTS))
                if spec.keys() <= ARGUMENTS | _DEPENDING:
                    raise _Opted(
                        f"A SCHEDULE entry takes no {unknown}."
                    )  # (only a tick lets it out)
                raise TypeError(f"Unknown job argument(s): {unknown}.")
            job_id = spec.get("job_id")
            if job_id is None:
                job_id = next(ids)
            else:
                job_id, fresh = checked_job_id(job_id), "0"
            job, values = self.checked_values(spec, job_id)
            flat += values
            made.append(job)
        return flat, made, fresh

    def checked_values(self, spec: Mapping[str, Any], job_id: str) -> tuple[Made, list[Any]]:
        """One job of ``enqueue_many`` (``job_id`` checked already): as ``Made``, and its
        seven ENQUEUE values, each checked."""
        task, args, kwargs = spec.get("task"), spec.get("args", ()), spec.get("kwargs") or {}
        priority = spec.get("priority", 0)
        meta = with_time_limit(spec.get("meta"), spec.get("time_limit"))
        meta = with_options(meta, **{n: spec.get(n) for n in OWN_OPTIONS})
        meta = with_item_limits(meta, spec)
        if meta is not None or spec.get("expires") is not None:
            meta = with_expires(meta, spec.get("expires"))
        values = job_values(
            job_id, task, args, kwargs, priority, meta, spec.get("delay"), spec.get("at")
        )
        return Made(job_id, task, args, kwargs, priority, meta), values

    def _push_many(
        self,
        flat: list[Any],
        made: list[Made],
        fresh: str,
        replace: bool,
        entry: str,
        tick_ms: int,
    ) -> list[Job]:
        reply: list[Any] = []
        keys = self.keys
        tick = [keys.tick(entry)] if entry else []
        for start in range(0, len(made), MAX_BATCH):
            batch = flat[7 * start : 7 * (start + MAX_BATCH)]
            named = [job[0] for job in made[start : start + MAX_BATCH]]
            if fresh == "1":
                job_keys = keys.jobs(named)
            else:  # a job found not to be a hash is set aside
                job_keys = [k for i in named for k in (keys.job(i), keys.corrupt(i))]
            args = ("1" if replace else "0", entry, tick_ms, fresh, *batch)
            answer = self.run(ENQUEUE, tick + job_keys, args)
            if not answer:  # the tick was already claimed
                return []
            reply += answer
        return [
            self._made(*job, Enqueued.of(reply[4 * i : 4 * i + 4])) for i, job in enumerate(made)
        ]

    def _made(
        self,
        job_id: str,
        task: str,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        priority: int,
        meta: Mapping[str, Any] | None,
        reply: Enqueued,
    ) -> Job:
        """The Job enqueued, from ENQUEUE's four values for it."""
        state, score, enqueued = reply.placed()
        return enqueued_job(
            job_id,
            self.name,
            task,
            list(args),
            dict(kwargs),
            priority,
            dict(meta or {}),
            state,
            score,
            enqueued,
        )
