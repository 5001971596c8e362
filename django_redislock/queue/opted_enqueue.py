"""The enqueues that carry enqueue-decided options (``expires``, ``unique_for``,
``unique_by_args``, ``debounce``; see ``job_options``): checked, then pushed with
ENQUEUE_OPTED (at once, or when the transaction commits). ``Producing`` hands a job here
only when one of these options is set, so a plain enqueue costs what it did."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from ..redis.scripts import LuaScript
from .arguments import JOB_ARGUMENTS, Made, checked_job_id, job_values, new_id
from .eager import run_eagerly
from .job_codec import decoded, decoded_meta
from .job_keys import with_item_limits
from .job_options import (
    OPTION_ARGUMENTS,
    checked_options,
    unique_job_id,
    with_expires,
)
from .jobs import Job, JobState
from .keys import QueueKeys
from .lua import MAX_BATCH
from .on_commit import commit_alias, database, described, push_at_commit
from .option_scripts import ENQUEUE_OPTED, OPTED_VALUES
from .options import OWN_OPTIONS, with_options
from .replies import number, text
from .time_limits import with_time_limit

ARGUMENTS = JOB_ARGUMENTS | OPTION_ARGUMENTS
_REPLY = 9  # ENQUEUE_OPTED's values per job


class OptedEnqueue:
    name: str
    keys: QueueKeys
    on_commit: bool
    eager: bool

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def enqueue_opted(
        self,
        jobs: Iterable[Mapping[str, Any]],
        replace: bool,
        using: str | None,
        db: str | None,
    ) -> list[Job]:
        """``enqueue_many`` of jobs of which some carry options: every job checked, then one
        ENQUEUE_OPTED per ``MAX_BATCH`` jobs (inside ``transaction.atomic()``, at commit)."""
        flat: list[Any] = []
        made: list[Made] = []
        for spec in jobs:
            job, values = _checked(spec, replace)
            made.append(job)
            flat += values
        alias = commit_alias(database(using, db)) if self.on_commit else None
        if self.eager:
            return run_eagerly(self.name, made, alias)
        if alias is None:
            return self._push_opted(flat, made)
        push_at_commit(
            alias, partial(self._push_opted, flat, made), described([m[:4] for m in made])
        )
        due = flat[6::OPTED_VALUES]
        debounced = flat[9::OPTED_VALUES]
        return [
            _job(self.name, job, (1, 0, _letter(due[i] == 0 and not debounced[i]), 0))
            for i, job in enumerate(made)
        ]

    def _push_opted(self, flat: list[Any], made: list[Made]) -> list[Job]:
        keys, jobs = self.keys, []
        for start in range(0, len(made), MAX_BATCH):
            batch = made[start : start + MAX_BATCH]
            job_keys: list[str] = []
            for job in batch:
                i = job.id
                job_keys += (keys.job(i), keys.corrupt(i), keys.unique(i), keys.result(i))
            values = flat[OPTED_VALUES * start : OPTED_VALUES * (start + MAX_BATCH)]
            reply = self.run(ENQUEUE_OPTED, job_keys, values)
            for n, job in enumerate(batch):
                jobs.append(_job(self.name, job, reply[_REPLY * n : _REPLY * (n + 1)]))
        return jobs


def _checked(spec: Mapping[str, Any], replace: bool) -> tuple[Made, list[Any]]:
    """One job of ``enqueue_opted``: as ``Made``, and its ENQUEUE_OPTED values."""
    if not spec.keys() <= ARGUMENTS:
        unknown = ", ".join(sorted(set(spec) - ARGUMENTS))
        raise TypeError(f"Unknown job argument(s): {unknown}.")
    task, args, kwargs = spec.get("task"), spec.get("args", ()), spec.get("kwargs") or {}
    job_id, delay, at = spec.get("job_id"), spec.get("delay"), spec.get("at")
    by_args = spec.get("unique_by_args", False)
    options = checked_options(
        job_id, replace, delay, at, spec.get("unique_for"), by_args, spec.get("debounce")
    )
    if by_args:
        job_id = unique_job_id(task, args, kwargs)
    job_id = new_id() if job_id is None else checked_job_id(job_id)
    priority = spec.get("priority", 0)
    meta = with_time_limit(spec.get("meta"), spec.get("time_limit"))
    meta = with_options(meta, **{name: spec.get(name) for name in OWN_OPTIONS})
    meta = with_item_limits(meta, spec)
    meta = with_expires(meta, spec.get("expires"))
    values = job_values(job_id, task, args, kwargs, priority, meta, delay, at)
    values += ("1" if options.replace else "0", options.unique_ms, options.debounce_ms)
    return Made(job_id, task, args, kwargs, priority, meta), values


def _letter(ready: bool) -> str:
    return (JobState.READY if ready else JobState.SCHEDULED).letter


def _job(queue: str, made: Made, reply: Sequence[Any]) -> Job:
    """The Job an enqueue returns: as given, or, when it found the job kept (outcome 0,
    e.g. within its unique_for window), as stored, its arguments included."""
    outcome, due, state, enqueued = reply[:4]
    job_id, task, args, kwargs, priority, meta = made
    if number(outcome) == 0 and len(reply) > 4 and reply[4]:
        task, args, kwargs = decoded(*reply[4:7])
        meta = decoded_meta(reply[7]) if reply[7] else {}
        priority = number(reply[8])
    return Job(
        job_id,
        queue,
        task,
        list(args),
        dict(kwargs),
        priority,
        state=JobState.of_letter(text(state)).value,
        score=number(due),
        enqueued=number(enqueued),
        meta=dict(meta or {}),
    )
