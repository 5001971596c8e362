"""Reading a task's recent jobs back from its index (``keys.HistoryKeys.recent``, kept by
``recording``): the ``RECENT`` latest to start or end a run, each read as it is now, in two
round trips whatever the size of the queue (the index, then one pipeline of the jobs).

An id whose job is no longer kept (its result expired, deleted, purged), or is now another
task's, is counted in ``gone``; what the index holds that this app does not write (a member
that is no job id, a score that is no time, the key of another type) in ``skipped``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import redis

from ..queue.arguments import checked_job_id
from ..queue.jobs import Job, JobState
from ..queue.queue import Queue
from .keys import RECENT, HistoryKeys
from .recording import OTHER, task_label


class RecentJob(NamedTuple):
    job: Job  # as it is now
    at: int  # when it last started or ended a run (epoch ms)


@dataclass(frozen=True)
class RecentJobs:
    task: str
    jobs: list[RecentJob]  # the latest first
    gone: int  # ids of the index whose job is no longer there (or no longer this task's)
    skipped: int  # unreadable entries of the index (or the whole key) left out


def recent_jobs(queue: Queue, task: str) -> RecentJobs:
    """The recent jobs of ``task`` (a label: a registered task's path, or ``OTHER``) in
    ``queue``, the latest to start or end a run first."""
    if not isinstance(task, str) or not task:
        raise ValueError(f"task must be a non-empty str, not {task!r}.")
    key = HistoryKeys(queue.keys).recent(task)
    try:
        entries = queue.client.zrevrange(key, 0, RECENT - 1, withscores=True)
    except redis.ResponseError as exc:  # of another type: replaced at the task's next run
        if "WRONGTYPE" not in str(exc):
            raise
        return RecentJobs(task, [], 0, 1)
    ids: list[str] = []
    moments: list[int] = []
    for member, score in entries:
        job_id, at = _entry(member, score)
        if job_id is not None and at is not None:
            ids.append(job_id)
            moments.append(at)
    skipped = len(entries) - len(ids)
    found = []
    jobs = queue.get_many(ids) if ids else []
    for at, job in zip(moments, jobs, strict=True):
        if job is not None and _of_task(job, task):
            found.append(RecentJob(job, at))
    return RecentJobs(task, found, len(ids) - len(found), skipped)


def _entry(member: object, score: object) -> tuple[str | None, int | None]:
    """The job id and moment of an index entry; None for what is unreadable."""
    try:
        job_id = checked_job_id(member.decode() if isinstance(member, bytes) else member)
    except (UnicodeDecodeError, ValueError):
        job_id = None
    moment = score if isinstance(score, float) and math.isfinite(score) and score >= 0 else None
    return job_id, None if moment is None else int(moment)


def _of_task(job: Job, task: str) -> bool:
    if job.state == JobState.UNKNOWN:  # not a hash: whose it was is unknown, it is shown
        return True
    return task_label(job.task) == task if task == OTHER else job.task == task
