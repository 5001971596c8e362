"""The admin's job pages: the jobs of a queue in one state (the finished ones too), and one
job in full. A running job that its worker left (lease run out, or worker gone from the
registry) is flagged, with "Requeue now"."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse

from ..conf import conf
from ..exceptions import JobNotFound
from ..queue.arguments import checked_job_id
from ..queue.job_options import job_expires_ms
from ..queue.jobs import LISTED_STATES, JobState
from ..queue.outbox import split_ref
from ..queue.queue import Job, Queue, get_queue
from ..queue.retry_policy import explained
from .actions import ACTIONS, JOB_ACTIONS, MANAGE, due_at
from .job_actions import ACTIONS as JOB_ACTIONS_MORE
from .job_actions import BULK, MAX_CHECKED, left_behind, live_worker_ids
from .paging import paginate
from .rendering import Rendering, can
from .shown import shown_name

SHOWN_LINKS = 50  # of a job's dependencies and dependants, on its page
# The states a queue's jobs are listed in, each a tab: the pending ones, then the finished.
STATES = (*LISTED_STATES, JobState.PARKED, JobState.DONE)
LABELS = {
    **{name: act.label for name, act in ACTIONS.items()},
    **{name: act.label for name, act in JOB_ACTIONS_MORE.items()},
}


class JobPages(Rendering):
    def jobs_view(self, request: HttpRequest, queue: str, state: str) -> HttpResponse:
        if queue not in conf.QUEUES or state not in STATES:
            raise Http404(f"No queue {queue!r} or no state {state!r}.")

        def load() -> dict[str, Any]:
            q = get_queue(queue)
            counts = q.counts(done=True)
            jobs, pager = paginate(
                request,
                lambda offset, limit: (q.scored_jobs(state, offset, limit), counts[state]),
                counts[state],
            )
            now = time.time()
            live = live_worker_ids() if state == JobState.RUNNING else None
            can_manage = can(request, MANAGE)
            rows = [self._row(request, q, job, score, live, now, can_manage) for job, score in jobs]
            dead = state == JobState.DEAD and can_manage and counts[JobState.DEAD] > 0
            return {
                "jobs": rows,
                "pager": pager,
                "tabs": [(s, counts[s], self._url("jobs", queue, s)) for s in STATES],
                "purge_url": self._confirm(request, "purge", queue=queue) if dead else "",
                "retry_all_url": self._confirm(request, "retry_all", queue=queue) if dead else "",
                "bulk": [
                    (name, label, self._url("bulk", name)) for name, (label, _) in BULK.items()
                ]
                if dead
                else [],
                "max_checked": MAX_CHECKED,
                "flagged": sum(1 for row in rows if row["left"]),
                # Listed but not shown: gone meanwhile, or an id that is no UTF-8 text
                "unread": max(0, pager.size - len(rows)),
            }

        shown = "finished" if state == JobState.DONE else state
        extra = {
            "tab": "queues",
            "queue": queue,
            "state": state,
            "job_nouns": f"{shown} job,{shown} jobs",
        }
        title = f"{shown.capitalize()} jobs of queue “{queue}”"
        return self._page(request, "jobs.html", title, load, extra)

    def _row(
        self,
        request: HttpRequest,
        q: Queue,
        job: Job,
        score: int,
        live: set[str] | None,
        now: float,
        can_manage: bool,
    ) -> dict[str, Any]:
        running = job.state == JobState.RUNNING
        left = left_behind(q, job, score, live, now) if running and score else ""
        shown = shown_name(job.id, checked_job_id)
        return {
            "job": job,
            "shown": shown,
            "worker": shown_name(job.worker) if job.worker else None,
            "url": self.job_url(q.name, job.id) if shown.linkable else "",
            "left": left,
            "actions": self._actions(request, q, job, left)
            if can_manage and shown.linkable
            else [],
            "due_at": due_at(job),
            "due_in": job.score / 1000 - now,
            "started_ago": now - job.started / 1000,
            "finished_ago": now - job.finished / 1000,
            "took": (job.finished - job.started) / 1000 if job.started else None,
            "lease_in": score / 1000 - now,
            "held": q.held_back(job) if job.state == JobState.PARKED else "",
        }

    def _linked(self, queue: str, refs: tuple[str, ...]) -> list[tuple[str, str]]:
        """The jobs ``refs`` name (as a job of ``queue`` names them), each with its page."""
        linked = []
        for ref in refs[:SHOWN_LINKS]:
            name, job_id = split_ref(ref, queue)
            url = self.job_url(name, job_id) if name in conf.QUEUES else ""
            linked.append((job_id if name == queue else f"{name}: {job_id}", url))
        return linked

    def _workflow_url(self, job: Job) -> str:
        workflow, home = job.meta.get("workflow"), job.meta.get("workflow_queue")
        if not isinstance(workflow, str) or home not in conf.QUEUES:
            return ""
        return f"{self._url('workflow', home)}?{urlencode({'id': workflow})}"

    def _actions(self, request: HttpRequest, q: Queue, job: Job, left: str) -> list[Any]:
        names = list(JOB_ACTIONS.get(job.state, ()))
        if left:
            names.insert(0, "requeue_running")
        fields = {"queue": q.name, "job": job.id}
        return [(LABELS[name], self._confirm(request, name, **fields)) for name in names]

    def job_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        job_id = request.GET.get("id", "")
        if queue not in conf.QUEUES or not job_id:
            raise Http404(f"No queue {queue!r}, or no job id.")

        def load() -> dict[str, Any]:
            q = get_queue(queue)
            try:
                job = q.get(job_id)
            except JobNotFound:
                return {"missing": True}
            now = time.time()
            expiry = q.lease_expiry(job_id) if job.state == JobState.RUNNING else None
            live = live_worker_ids() if job.state == JobState.RUNNING else None
            row = self._row(request, q, job, expiry or 0, live, now, can(request, MANAGE))
            if expiry is None:  # not running (or just ended): no lease to speak of
                row["lease_in"] = None
            return {
                "row": row,
                "job": job,
                "errors": list(enumerate(job.errors, start=1)),
                "options": explained(q, job),
                "enqueue_options": q.enqueue_options(job_id),
                "expires": (job_expires_ms(job.meta) or 0) / 1000,
                "settled": job.state in (JobState.DEAD, JobState.DONE),
                "state_url": self._url("jobs", queue, job.state) if job.state in STATES else "",
                "depends_on": self._linked(queue, job.depends_on),
                "dependants": self._linked(queue, job.dependants),
                "workflow_url": self._workflow_url(job),
            }

        shown = shown_name(job_id, checked_job_id)
        title = f"Job “{shown.text[:80]}{'…' if len(shown.text) > 80 else ''}”"
        extra = {"tab": "queues", "queue": queue, "job_id": job_id, "shown": shown}
        return self._page(request, "job.html", title, load, extra)
