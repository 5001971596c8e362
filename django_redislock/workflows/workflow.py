"""The handle of an enqueued workflow (``Workflow``), and the clean-up of its record.

The handle reads the steps' states from Redis each time it is asked. The record (its steps,
in order, and the gate of one written in several scripts, see ``enqueueing``) is kept while
the workflow runs, and for the first queue's ``RESULT_TTL`` after it ended; the workers
clean it up then (``sweep``), and cancel a workflow whose gate never opened.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

from ..exceptions import InvalidTask, JobNotFound
from ..queue.depend_scripts import CANCEL_STEPS
from ..queue.jobs import Job, JobState
from ..queue.lua import MAX_BATCH
from ..queue.outbox import deliver_now
from ..queue.queue import Queue, asker, get_queue
from ..queue.replies import text
from ..redis.failures import unavailable_as_error
from ..tasks.results import framework

if TYPE_CHECKING:
    pass

logger = logging.getLogger("django_redislock.workflows")

# A gate still waiting this long after it was written will never open (see ``enqueueing``).
GATE_GRACE_MS = 60_000
_PENDING = {
    JobState.WAITING.value: "waiting",
    JobState.READY.value: "ready",
    JobState.SCHEDULED.value: "ready",
    JobState.PARKED.value: "ready",
    JobState.RUNNING.value: "running",
    JobState.DONE.value: "done",
    JobState.DEAD.value: "dead",
}


class Workflow:
    """A workflow enqueued: its id, the queue of its first step (where its record is) and
    its steps (queue, job id, task path), in the order they were given. Everything else is
    read from Redis when asked."""

    def __init__(
        self,
        workflow_id: str,
        queue: str,
        steps: Sequence[tuple[str, str, str]],
        gate: str | None = None,
    ) -> None:
        self.id, self.queue = workflow_id, queue
        self.steps: list[tuple[str, str, str]] = [(q, i, t) for q, i, t in steps]
        self.gate = gate  # a job of ``queue`` the first steps wait for (see ``enqueueing``)
        self.ran_here: list[Job] | None = None  # EAGER: the steps as they ended, here

    def __repr__(self) -> str:
        return f"<Workflow {self.id} of {len(self.steps)} steps in {self.queue!r}>"

    @classmethod
    @unavailable_as_error()
    def get(cls, workflow_id: str, queue: str = "default") -> Workflow:
        """The workflow ``workflow_id`` whose first step is in ``queue``; ``JobNotFound``
        when there is none (or it was cleaned up, ``RESULT_TTL`` after it ended)."""
        home = get_queue(queue)
        raw = home.client.get(home.keys.workflow(workflow_id))
        if raw is None:
            raise JobNotFound(f"No workflow {workflow_id!r} in queue {queue!r}.")
        try:
            record = json.loads(raw)
            steps, gate = record["steps"], record.get("gate")
            if not isinstance(steps, list) or not all(
                isinstance(s, list) and len(s) == 3 and all(isinstance(v, str) for v in s)
                for s in steps
            ):
                raise TypeError("its steps are not a list of [queue, job id, task]")
            if gate is not None and not isinstance(gate, str):
                raise TypeError("its gate is not a job id")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise JobNotFound(
                f"The record of workflow {workflow_id!r} is corrupt ({exc})."
            ) from exc
        return cls(workflow_id, queue, steps, gate)

    def jobs(self) -> list[Job | None]:
        """Each step's job as it stands (None for one no longer kept, or of a queue no longer
        configured), in step order."""
        if self.ran_here is not None:
            return list(self.ran_here)
        found: dict[tuple[str, str], Job | None] = {}
        by_queue: dict[str, list[str]] = {}
        for name, job_id, _ in self.steps:
            by_queue.setdefault(name, []).append(job_id)
        for name, job_ids in by_queue.items():
            try:
                queue = get_queue(name)
            except ImproperlyConfigured:  # a queue no longer configured: its steps are gone
                found.update(((name, job_id), None) for job_id in job_ids)
                continue
            for start in range(0, len(job_ids), MAX_BATCH):
                batch = job_ids[start : start + MAX_BATCH]
                for job_id, job in zip(batch, queue.get_many(batch), strict=True):
                    found[(name, job_id)] = job
        return [found[(name, job_id)] for name, job_id, _ in self.steps]

    def progress(self) -> dict[str, int]:
        """How many steps are waiting, ready (scheduled and parked too), running, done and
        dead (one no longer kept counts as dead)."""
        counts = dict.fromkeys(("waiting", "ready", "running", "done", "dead"), 0)
        for job in self.jobs():
            counts[_PENDING.get(job.state, "dead") if job is not None else "dead"] += 1
        return counts

    @property
    def status(self) -> str:
        """ "pending" (no step started yet), "running", "succeeded" (every step done) or
        "failed" (every step ended, one dead)."""
        counts = self.progress()
        if counts["waiting"] + counts["ready"] + counts["running"]:
            started = counts["running"] + counts["done"] + counts["dead"]
            return "running" if started else "pending"
        return "failed" if counts["dead"] else "succeeded"

    def results(self) -> list[Any]:
        """The steps' ``TaskResult`` objects, in step order (None for one no longer kept)."""
        return [None if job is None else _task_result(job) for job in self.jobs()]

    def cancel(self, *, by: str | None = None) -> int:
        """Stop the workflow: steps that have not started end dead as cancelled (never run),
        running ones are asked to stop. Returns how many steps it reached."""
        who = asker(by)
        reached = 0
        by_queue: dict[str, list[str]] = {}
        for name, job_id, _ in self.steps:
            by_queue.setdefault(name, []).append(job_id)
        touched = []
        for name, job_ids in by_queue.items():
            try:
                queue = get_queue(name)
            except ImproperlyConfigured:  # a queue no longer configured: nothing to stop
                continue
            for start in range(0, len(job_ids), MAX_BATCH):
                batch = job_ids[start : start + MAX_BATCH]
                ended, stopping, outboxed = queue.run(
                    CANCEL_STEPS, queue.keys.jobs(batch), [who, *batch]
                )
                reached += int(ended) + int(stopping)
                if outboxed:
                    touched.append(queue)
        if self.gate is not None:  # a gate not opened yet goes last (its steps are gone)
            home = get_queue(self.queue)
            if home.run(CANCEL_STEPS, home.keys.jobs([self.gate]), [who, self.gate])[2]:
                touched.append(home)
        for queue in dict.fromkeys(touched):
            deliver_now(queue)
        return reached

    def join(self, timeout: float | None = None) -> Workflow:
        """Wait until every step ended (woken by each end, no polling); ``TimeoutError``
        after ``timeout`` seconds."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        for name, job_id, _ in self.steps if self.ran_here is None else ():
            left = None if timeout is None else max(0.0, deadline - time.monotonic())
            try:
                get_queue(name).join(job_id, left)
            except JobNotFound:  # no longer kept: it ended long ago
                continue
        return self

    async def ajoin(self, timeout: float | None = None) -> Workflow:
        """``join`` for asyncio."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        for name, job_id, _ in self.steps if self.ran_here is None else ():
            left = None if timeout is None else max(0.0, deadline - time.monotonic())
            try:
                await get_queue(name).ajoin(job_id, left)
            except JobNotFound:
                continue
        return self


def _task_result(job: Job) -> Any:
    """``job``'s TaskResult, as its task's backend gives it."""
    from ..queue.execution import resolve_task
    from ..tasks.backend import RedisTaskBackend

    try:
        backend = resolve_task(job.task).get_backend()
    except InvalidTask:
        backend = None
    if not isinstance(backend, RedisTaskBackend):
        backend = next(b for b in framework.task_backends.all() if isinstance(b, RedisTaskBackend))
    return backend._result(job)


def sweep(queue: Queue, limit: int = 50) -> int:
    """Clean up the records of workflows of ``queue`` that ended more than its
    ``RESULT_TTL`` ago (at most ``limit`` looked at); those still running are looked at
    again later. Returns how many were deleted."""
    client, keys = queue.client, queue.keys
    now_ms = int(time.time() * 1000)
    due = [text(i) for i in client.zrangebyscore(keys.workflows, "-inf", now_ms, 0, limit)]
    deleted = 0
    for workflow_id in due:
        try:
            workflow = Workflow.get(workflow_id, queue.name)
            _cancel_if_never_opened(queue, workflow, now_ms)
            jobs = workflow.jobs()
        except JobNotFound as exc:  # gone, or corrupt: its record goes (and is logged)
            if "corrupt" in str(exc):
                logger.error("Deleted a workflow's record: %s", exc)
            jobs = []
        ends = [job.finished for job in jobs if job is not None]
        running = any(job is not None and not job.finished for job in jobs)
        ttl_ms = queue.result_ttl * 1000
        if running:  # looked at again in a while
            client.zadd(keys.workflows, {workflow_id: now_ms + min(ttl_ms, 600_000)})
            continue
        if ends and max(ends) > now_ms - ttl_ms:  # ended lately: kept for its RESULT_TTL
            client.zadd(keys.workflows, {workflow_id: max(ends) + ttl_ms})
            continue
        pipe = client.pipeline(transaction=False)
        pipe.delete(keys.workflow(workflow_id))
        pipe.zrem(keys.workflows, workflow_id)
        pipe.execute()
        deleted += 1
    return deleted


def _cancel_if_never_opened(queue: Queue, workflow: Workflow, now_ms: int) -> None:
    """A workflow whose gate still waits, GATE_GRACE_MS after it was written: its enqueue
    failed before its last script (Redis lost meanwhile), and its caller was told so. It is
    cancelled: none of its steps ever started, none will."""
    if workflow.gate is None:
        return
    gate = queue.get_many([workflow.gate])[0]
    if gate is None or gate.state != JobState.WAITING or gate.enqueued > now_ms - GATE_GRACE_MS:
        return
    logger.warning(
        "Workflow %s of queue %r was not written whole (its gate never opened): cancelled, "
        "none of its steps having started.",
        workflow.id,
        queue.name,
    )
    workflow.cancel(by="the workflows' sweep")
