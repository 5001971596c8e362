"""The admin's actions on jobs a worker left behind and on dead jobs in bulk: "Requeue now" of
a running job whose lease ran out or whose worker is gone, "Retry all dead", and retry or
delete of the dead jobs checked on a page (at most ``MAX_CHECKED`` per action)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from django.contrib.admin.models import CHANGE, DELETION

from ..queue.jobs import JobState
from ..queue.queue import Job, Queue, get_queue
from ..queue.worker.registry import live_workers
from ..templatetags.redislock_admin import duration
from .actions import MANAGE, Action, Gone, as_job, dead_count, dead_done, job_in

logger = logging.getLogger("django_redislock.admin")

# The most jobs one bulk action takes: a page of them, checked one by one.
MAX_CHECKED = 100


def live_worker_ids() -> set[str] | None:
    """The ids of the workers with a registry entry; None when the registry cannot be read
    (then no job is flagged for its worker: only its lease can say it was left)."""
    try:
        return {str(info.get("id")) for info in live_workers() if isinstance(info, dict)}
    except ValueError as exc:
        logger.warning("Admin: the worker registry is unreadable: %s", exc)
        return None


def left_behind(
    queue: Queue, job: Job, expiry_ms: float | None, live: set[str] | None, now: float
) -> str:
    """Why running ``job`` (its lease running out at ``expiry_ms``) looks left by its worker:
    its lease ran out, or its worker has no registry entry and renews the lease no more;
    "" when neither. A job leased by a consumer that is no worker (``Queue.pop`` with no
    worker id) has only its lease to tell."""
    if expiry_ms is None:
        return ""
    if expiry_ms <= now * 1000:
        return f"its lease ran out {duration(now - expiry_ms / 1000)} ago"
    worker = job.worker or ""
    gone = live is not None and worker not in ("", "-") and worker not in live
    if gone and queue.renewal_overdue(expiry_ms, now):
        return f"its worker {worker} is gone (no heartbeat, its lease not renewed)"
    return ""


def _stale(t: Mapping[str, str]) -> tuple[Queue, Job, str, bool]:
    """The running job named, why it is left behind, and whether its lease ran out; Gone
    when it is not running or looks alive."""
    queue, job = job_in(t, JobState.RUNNING)
    expiry = queue.lease_expiry(job.id)
    now = time.time()
    why = left_behind(queue, job, expiry, live_worker_ids(), now)
    if not why:
        raise Gone(
            f"Job “{job.id}” of queue “{queue.name}” runs under a live worker that renews its "
            "lease; it is not requeued (it would run twice)."
        )
    return queue, job, why, expiry is not None and expiry <= now * 1000


def _describe_requeue_running(t: Mapping[str, str]) -> dict[str, Any]:
    queue, job, why, _ = _stale(t)
    return {
        "summary": f"Requeue running job “{job.id}” ({job.task}) of queue “{queue.name}” now: "
        f"{why}. It is made ready at once; an attempt it started counts as failed.",
        "warning": "Its worker, should it come back, finds its lease lost and cannot finish "
        "it; but what it did until then is not undone.",
        "job": job,
    }


def _requeue_running(t: Mapping[str, str]) -> str:
    queue, job, why, ran_out = _stale(t)
    if not queue.requeue_running(job, lease_ran_out=ran_out):
        raise Gone(f"Job “{job.id}” was not left behind any more; nothing was done.")
    return f"Job “{job.id}” of queue “{queue.name}” ({why}) was made ready again."


def _describe_retry_all(t: Mapping[str, str]) -> dict[str, Any]:
    dead = dead_count(t)
    return {
        "summary": f"Run all {dead} dead jobs of queue “{t['queue']}” again now, their "
        "attempts reset."
    }


def _retry_all(t: Mapping[str, str]) -> str:
    return dead_done(t, get_queue(t["queue"]).retry_all_dead(), "requeued")


def _as_all_dead(t: Mapping[str, str]) -> tuple[str, str]:
    return t["queue"], f"dead jobs of queue {t['queue']}"


JOB_FIELDS = ("queue", "job")
ACTIONS = {
    "requeue_running": Action(
        "Requeue now",
        MANAGE,
        CHANGE,
        JOB_FIELDS,
        _describe_requeue_running,
        _requeue_running,
        as_job,
    ),
    "retry_all": Action(
        "Retry all dead jobs",
        MANAGE,
        CHANGE,
        ("queue",),
        _describe_retry_all,
        _retry_all,
        _as_all_dead,
    ),
}


# --- the dead jobs checked on a page ------------------------------------------------------


BULK: dict[str, tuple[str, int]] = {  # the label and the admin log's flag of each
    "retry_dead": ("Retry", CHANGE),
    "delete_dead": ("Delete", DELETION),
}


def bulk_summary(action: str, queue: str, ids: list[str]) -> str:
    """What confirming ``action`` on the dead jobs ``ids`` of ``queue`` does."""
    still = get_queue(queue).still_dead(ids)
    if not still:
        raise Gone(f"None of the jobs checked is dead in queue “{queue}” any more.")
    jobs = f"{len(still)} dead job{'s' if len(still) != 1 else ''} of queue “{queue}”"
    if action == "retry_dead":
        return f"Run the {jobs} checked again now, their attempts reset."
    return f"Delete the {jobs} checked, with their errors. They will not run."


def bulk_perform(action: str, queue: str, ids: list[str]) -> str:
    q = get_queue(queue)
    done = q.retry_dead(ids) if action == "retry_dead" else q.delete_dead(ids)
    if not done:
        raise Gone("None of the jobs checked was dead any more; nothing was done.")
    verb = "requeued" if action == "retry_dead" else "deleted"
    return f"{done} dead job{'s' if done != 1 else ''} of queue “{queue}” {verb}."
