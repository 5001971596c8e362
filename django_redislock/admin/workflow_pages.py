"""The admin's workflow pages: the workflows recorded in a queue (those whose first step is
there), and one workflow in full: its steps with their states, what each waits for, their
progress; "Cancel" stops what has not ended."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django.contrib.admin.models import CHANGE
from django.http import Http404, HttpRequest, HttpResponse

from ..conf import conf
from ..exceptions import JobNotFound
from ..queue.jobs import JobState
from ..queue.outbox import split_ref
from ..queue.queue import get_queue
from ..queue.replies import text
from ..workflows import Workflow
from .actions import MANAGE, Action, Gone
from .paging import paginate
from .rendering import Rendering, can

SHOWN_STEPS = 1000  # a workflow's page shows its first steps, at most this many
_ENDED = (JobState.DONE.value, JobState.DEAD.value)


class WorkflowPages(Rendering):
    def workflows_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        if queue not in conf.QUEUES:
            raise Http404(f"No queue {queue!r}.")

        def load() -> dict[str, Any]:
            q = get_queue(queue)
            total = q.client.zcard(q.keys.workflows)

            def page(offset: int, limit: int) -> tuple[list[Any], int]:
                ids = q.client.zrevrange(q.keys.workflows, offset, offset + limit - 1)
                return [text(i) for i in ids], total

            ids, pager = paginate(request, page, total)
            pipe = q.client.pipeline(transaction=False)
            for workflow_id in ids:
                pipe.strlen(q.keys.workflow(workflow_id))
            rows = [
                {"id": workflow_id, "url": self.workflow_url(queue, workflow_id), "size": size}
                for workflow_id, size in zip(ids, pipe.execute(), strict=True)
            ]
            return {"workflows": rows, "pager": pager}

        extra = {"tab": "queues", "queue": queue, "job_nouns": "workflow,workflows"}
        return self._page(request, "workflows.html", f"Workflows of queue “{queue}”", load, extra)

    def workflow_url(self, queue: str, workflow_id: str) -> str:
        return f"{self._url('workflow', queue)}?{urlencode({'id': workflow_id})}"

    def workflow_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        workflow_id = request.GET.get("id", "")
        if queue not in conf.QUEUES or not workflow_id:
            raise Http404(f"No queue {queue!r}, or no workflow id.")

        def load() -> dict[str, Any]:
            try:
                workflow = Workflow.get(workflow_id, queue)
            except JobNotFound:
                return {"missing": True}
            shown = Workflow(workflow.id, workflow.queue, workflow.steps[:SHOWN_STEPS])
            jobs = shown.jobs()
            number = {(q, i): n for n, (q, i, _) in enumerate(shown.steps, start=1)}
            steps = []
            for n, ((name, job_id, task), job) in enumerate(
                zip(shown.steps, jobs, strict=True), start=1
            ):
                after = [
                    number.get(split_ref(ref, name))
                    for ref in (job.depends_on if job is not None else ())
                ]
                steps.append(
                    {
                        "n": n,
                        "queue": name,
                        "task": task,
                        "job": job,
                        "url": self.job_url(name, job_id),
                        "after": [a for a in after if a is not None],
                        "state": job.state if job is not None else "gone",
                    }
                )
            counts = (
                workflow.progress() if len(workflow.steps) > SHOWN_STEPS else shown_counts(jobs)
            )
            ended = counts["done"] + counts["dead"]
            cancellable = ended < len(workflow.steps) and can(request, MANAGE)
            return {
                "workflow": workflow,
                "steps": steps,
                "more": len(workflow.steps) - len(steps),
                "counts": counts,
                "ended": ended,
                "status": status_of(counts),
                "settled": ended == len(workflow.steps),
                "cancel_url": self._confirm(
                    request, "cancel_workflow", queue=queue, workflow=workflow_id
                )
                if cancellable
                else "",
            }

        title = f"Workflow “{workflow_id[:80]}”"
        extra = {
            "tab": "queues",
            "queue": queue,
            "workflow_id": workflow_id,
            "workflows_url": self._url("workflows", queue),
        }
        return self._page(request, "workflow.html", title, load, extra)


def shown_counts(jobs: list[Any]) -> dict[str, int]:
    counts = dict.fromkeys(("waiting", "ready", "running", "done", "dead"), 0)
    for job in jobs:
        state = job.state if job is not None else "dead"
        key = state if state in counts else ("dead" if state == "unknown" else "ready")
        counts[key] += 1
    return counts


def status_of(counts: Mapping[str, int]) -> str:
    if counts["waiting"] + counts["ready"] + counts["running"]:
        return "running" if counts["running"] + counts["done"] + counts["dead"] else "pending"
    return "failed" if counts["dead"] else "succeeded"


def _describe_cancel(t: Mapping[str, str]) -> dict[str, Any]:
    workflow = _workflow(t)
    counts = workflow.progress()
    left = counts["waiting"] + counts["ready"] + counts["running"]
    if not left:
        raise Gone(f"Workflow “{workflow.id}” has ended; there is nothing to cancel.")
    return {
        "summary": f"Cancel workflow “{workflow.id}”: its {left} step(s) not ended stop. Those "
        "not started end dead as cancelled and never run; running ones are asked to stop."
    }


def _cancel(t: Mapping[str, str]) -> str:
    workflow = _workflow(t)
    who = f"admin {t.get('user') or '?'}".replace("|", "/")[:200]
    reached = workflow.cancel(by=who)
    if not reached:
        raise Gone(f"Workflow “{workflow.id}” had no step left to stop; nothing was done.")
    return f"Workflow “{workflow.id}”: {reached} step(s) were cancelled or asked to stop."


def _workflow(t: Mapping[str, str]) -> Workflow:
    try:
        return Workflow.get(t["workflow"], t["queue"])
    except JobNotFound as exc:
        raise Gone(str(exc)) from None


def _as_workflow(t: Mapping[str, str]) -> tuple[str, str]:
    return f"{t['queue']}:{t['workflow']}", f"workflow {t['workflow']} of queue {t['queue']}"


ACTIONS = {
    "cancel_workflow": Action(
        "Cancel workflow",
        MANAGE,
        CHANGE,
        ("queue", "workflow"),
        _describe_cancel,
        _cancel,
        _as_workflow,
    ),
}
