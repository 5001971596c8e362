"""The admin's destructive actions on jobs, and what every action needs, says before and
does (the force-releases are in ``releasing``).

An action's target is a few strings from the request (a lock name; a queue and a job id);
``describe`` says what confirming will do, ``perform`` does it. Both raise ``Gone`` when
there is nothing to do (the lock was released, the job ran meanwhile)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.admin.models import CHANGE, DELETION
from django.core.exceptions import BadRequest
from django.http import Http404, QueryDict
from django.utils.formats import date_format
from django.utils.timezone import localtime

from ..conf import conf
from ..exceptions import JobNotFound
from ..names import validate_name
from ..queue.jobs import LISTED_STATES, JobState
from ..queue.pausing import pause_target
from ..queue.queue import Job, Queue, get_queue
from ..templatetags.redislock_admin import duration

VIEW = "django_redislock.view_dashboard"
RELEASE = "django_redislock.release_lock"
MANAGE = "django_redislock.manage_queues"


class Gone(Exception):
    """Nothing to do: the target is no longer in the state the action needs."""


@dataclass(frozen=True)
class Action:
    label: str
    permission: str
    flag: int  # the admin log's action flag
    fields: tuple[str, ...]  # the request fields naming the target
    describe: Callable[[Mapping[str, str]], dict[str, Any]]
    perform: Callable[[Mapping[str, str]], str]
    # The admin log entry's object id and text
    logged_as: Callable[[Mapping[str, str]], tuple[str, str]]
    # Fields the confirmation form adds, checked when present: the state the job was
    # confirmed in (a job that changed state meanwhile is not the one confirmed)
    optional: tuple[str, ...] = ()


def target(action: Action, data: QueryDict) -> dict[str, str]:
    """The action's target read from GET or POST data; 404 when it is malformed, 400 when
    a field is given twice (which one was meant cannot be known)."""
    twice = [n for n in action.fields + action.optional if len(data.getlist(n)) > 1]
    if twice:
        raise BadRequest(f"{', '.join(twice)} given more than once.")
    found = {name: data.get(name, "") for name in action.fields}
    given = {name: data.get(name, "") for name in action.optional if data.get(name)}
    if not all(found.values()):
        raise Http404(f"Missing {', '.join(n for n, v in found.items() if not v)}.")
    if "queue" in found and found["queue"] not in conf.QUEUES:
        raise Http404(f"No queue {found['queue']!r} in REDISLOCK['QUEUES'].")
    if "name" in found:
        try:
            validate_name(found["name"])
        except ValueError as exc:
            raise Http404(str(exc)) from exc
    if given.get("state", JobState.READY) not in (*LISTED_STATES, JobState.PARKED):
        raise Http404(f"No state {given['state']!r}.")
    if "task" in given:
        try:
            pause_target(given["task"])
        except ValueError as exc:
            raise Http404(str(exc)) from exc
    return {**found, **given}


def due_at(job: Job) -> datetime | None:
    """When the job is due; None when its stored time is no date (corrupt)."""
    try:
        return job.due_at
    except (ValueError, OverflowError, OSError):
        return None


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "an unreadable time"
    seconds = moment.timestamp() - time.time()
    relative = f"in {duration(seconds)}" if seconds > 0 else f"{duration(seconds)} ago"
    return f"{date_format(localtime(moment), 'Y-m-d H:i:s')} ({relative})"


# --- jobs ---------------------------------------------------------------------------------


def job_in(t: Mapping[str, str], *states: str) -> tuple[Queue, Job]:
    """The queue and job the target names; Gone when the job is missing or in none of
    ``states``."""
    queue = get_queue(t["queue"])
    try:
        job = queue.get(t["job"])
    except JobNotFound:
        raise Gone(f"Job “{t['job']}” is not in queue “{queue.name}” any more.") from None
    if job.state not in states:
        raise Gone(f"Job “{job.id}” of queue “{queue.name}” is {job.state} now.")
    return queue, job


def _requeuer(
    state: JobState, summary: Callable[[Queue, Job], str], done: str
) -> tuple[Callable[[Mapping[str, str]], dict[str, Any]], Callable[[Mapping[str, str]], str]]:
    """The describe and perform of an action that makes a ``state`` job ready again."""

    def describe(t: Mapping[str, str]) -> dict[str, Any]:
        queue, job = job_in(t, state)
        return {"summary": summary(queue, job), "job": job}

    def perform(t: Mapping[str, str]) -> str:
        queue, job = job_in(t, state)
        if not queue.requeue(job.id):
            raise Gone(f"Job “{job.id}” was not {state} any more; nothing was done.")
        return done.format(job=job.id, queue=queue.name)

    return describe, perform


_describe_run, _run = _requeuer(
    JobState.SCHEDULED,
    lambda queue, job: (
        f"Run job “{job.id}” ({job.task}) of queue “{queue.name}” now instead "
        f"of at {_when(due_at(job))}."
    ),
    "Job “{job}” of queue “{queue}” was made ready to run now.",
)
_describe_retry, _retry = _requeuer(
    JobState.DEAD,
    lambda queue, job: (
        f"Run dead job “{job.id}” ({job.task}) of queue “{queue.name}” again "
        f"now, with its attempts reset (it failed after {job.attempts})."
    ),
    "Dead job “{job}” of queue “{queue}” was requeued.",
)


def _describe_delete(t: Mapping[str, str]) -> dict[str, Any]:
    queue, job = job_in(
        t, JobState.READY, JobState.SCHEDULED, JobState.PARKED, JobState.WAITING, JobState.DEAD
    )
    return {
        "summary": f"Delete {job.state} job “{job.id}” ({job.task}) of queue “{queue.name}”. "
        "It will not run.",
        "job": job,
    }


def _delete(t: Mapping[str, str]) -> str:
    if "state" in t:  # checked before, not with, the delete: a window of one round trip
        job_in(t, t["state"])
    queue = get_queue(t["queue"])
    if not queue.delete(t["job"]):
        raise Gone(f"Job “{t['job']}” is running or gone; nothing was deleted.")
    return f"Job “{t['job']}” of queue “{queue.name}” was deleted."


def _describe_cancel(t: Mapping[str, str]) -> dict[str, Any]:
    queue, job = job_in(t, JobState.RUNNING)
    return {
        "summary": f"Stop running job “{job.id}” ({job.task}) of queue “{queue.name}”: its "
        "worker raises JobCancelled in it at its next lease renewal; it ends dead as "
        "cancelled, and is never run again.",
        "job": job,
    }


def _cancel(t: Mapping[str, str]) -> str:
    queue, job = job_in(t, JobState.RUNNING)
    who = f"admin {t.get('user') or '?'}".replace("|", "/")[:200]
    if not queue.stop(job.id, by=who):
        raise Gone(f"Job “{job.id}” was not running any more; nothing was done.")
    return f"Job “{job.id}” of queue “{queue.name}” was asked to stop."


def dead_count(t: Mapping[str, str]) -> int:
    """How many dead jobs queue ``t["queue"]`` has; Gone when none."""
    dead: int = get_queue(t["queue"]).counts()[JobState.DEAD]
    if not dead:
        raise Gone(f"Queue “{t['queue']}” has no dead jobs.")
    return dead


def dead_done(t: Mapping[str, str], count: int, done: str) -> str:
    """What an action on all dead jobs of ``t["queue"]`` did to ``count`` of them; Gone
    when there were none any more."""
    if not count:
        raise Gone(f"Queue “{t['queue']}” had no dead jobs; nothing was {done}.")
    return f"{count} dead job{'s' if count != 1 else ''} of queue “{t['queue']}” {done}."


def _describe_purge(t: Mapping[str, str]) -> dict[str, Any]:
    dead = dead_count(t)
    return {"summary": f"Delete all {dead} dead jobs of queue “{t['queue']}”, with their errors."}


def _purge(t: Mapping[str, str]) -> str:
    return dead_done(t, get_queue(t["queue"]).purge(JobState.DEAD), "deleted")


def _paused_what(t: Mapping[str, str]) -> str:
    queue = f"queue “{t['queue']}”"
    return f"task “{t['task']}” of {queue}" if t.get("task") else queue


def _describe_pause(t: Mapping[str, str]) -> dict[str, Any]:
    if (t.get("task") or "*") in get_queue(t["queue"]).paused():
        raise Gone(f"The {_paused_what(t)} is paused already.")
    held = (
        "that task's jobs are parked as workers meet them"
        if t.get("task")
        else ("its ready jobs wait")
    )
    return {
        "summary": f"Pause the {_paused_what(t)}: enqueues are accepted and running jobs "
        f"finish, but nothing more starts ({held}) until it is resumed."
    }


def _pause(t: Mapping[str, str]) -> str:
    who = f"admin {t.get('user') or '?'}".replace("|", "/")[:200]
    if not get_queue(t["queue"]).pause(t.get("task") or None, by=who):
        raise Gone(f"The {_paused_what(t)} was paused already; nothing was done.")
    return f"The {_paused_what(t)} was paused."


def _describe_resume(t: Mapping[str, str]) -> dict[str, Any]:
    if (t.get("task") or "*") not in get_queue(t["queue"]).paused():
        raise Gone(f"The {_paused_what(t)} is not paused.")
    return {"summary": f"Resume the {_paused_what(t)}: its workers are woken at once."}


def _resume(t: Mapping[str, str]) -> str:
    if not get_queue(t["queue"]).resume(t.get("task") or None):
        raise Gone(f"The {_paused_what(t)} was not paused; nothing was done.")
    return f"The {_paused_what(t)} was resumed."


def _as_paused(t: Mapping[str, str]) -> tuple[str, str]:
    task = t.get("task")
    what = f"task {task} of queue {t['queue']}" if task else f"queue {t['queue']}"
    return (f"{t['queue']}:{task}" if task else t["queue"]), what


def as_job(t: Mapping[str, str]) -> tuple[str, str]:
    return f"{t['queue']}:{t['job']}", f"job {t['job']} of queue {t['queue']}"


def _as_dead(t: Mapping[str, str]) -> tuple[str, str]:
    return t["queue"], f"dead jobs of queue {t['queue']}"


JOB = ("queue", "job")
ACTIONS = {
    "run": Action("Run now", MANAGE, CHANGE, JOB, _describe_run, _run, as_job),
    "retry": Action("Retry", MANAGE, CHANGE, JOB, _describe_retry, _retry, as_job),
    "cancel": Action("Stop", MANAGE, CHANGE, JOB, _describe_cancel, _cancel, as_job),
    "delete": Action(
        "Delete", MANAGE, DELETION, JOB, _describe_delete, _delete, as_job, optional=("state",)
    ),
    "purge": Action(
        "Purge dead jobs", MANAGE, DELETION, ("queue",), _describe_purge, _purge, _as_dead
    ),
    "pause": Action(
        "Pause", MANAGE, CHANGE, ("queue",), _describe_pause, _pause, _as_paused, ("task",)
    ),
    "resume": Action(
        "Resume", MANAGE, CHANGE, ("queue",), _describe_resume, _resume, _as_paused, ("task",)
    ),
}
# The actions offered on a job in each state.
JOB_ACTIONS: dict[str, tuple[str, ...]] = {
    JobState.READY: ("delete",),
    JobState.SCHEDULED: ("run", "delete"),
    JobState.RUNNING: ("cancel",),
    JobState.DEAD: ("retry", "delete"),
    JobState.PARKED: ("delete",),
    JobState.WAITING: ("delete",),
}
