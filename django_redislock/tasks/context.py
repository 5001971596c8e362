"""The context a task with ``takes_context=True`` is given: the framework's ``TaskContext``,
with what this backend adds for workflows and progress:

- ``dependency_results``: the ``TaskResult``s of the jobs it waited for (``depends_on``, a
  workflow's earlier steps), in ``depends_on`` order (None for one no longer kept);
- ``metadata`` (a dict) and ``save_metadata()``: publish it, read back as
  ``result.metadata``;
- ``set_progress(done, total)``: read back as ``result.progress``.

What is published is written to the job's hash while the worker holds its lease (a job
whose lease was lost publishes nothing more), and kept with its result.
"""

from __future__ import annotations

import json
from typing import Any

from ..exceptions import JobNotFound
from ..queue.jobs import Field, Job
from ..queue.outbox import split_ref
from ..queue.ran_before import ran_before
from ..queue.replies import text
from .results import TaskContext

MAX_METADATA = 65536  # bytes of a job's metadata as JSON


class RedisTaskContext(TaskContext):  # type: ignore[misc]
    __slots__ = ("_job", "_results", "metadata")

    def __init__(self, task_result: Any, job: Job) -> None:
        super().__init__(task_result=task_result)
        object.__setattr__(self, "_job", job)
        object.__setattr__(self, "_results", None)
        object.__setattr__(self, "metadata", dict(job.metadata))

    @property
    def dependency_results(self) -> tuple[Any, ...]:
        """The results of the jobs this one waited for, in ``depends_on`` order (None for
        one whose result is no longer kept). Read once, at the first access."""
        if self._results is None:
            job = self._job
            refs = job.depends_on
            if not refs and job.lease:  # a job as leased: its dependencies are read now
                queue = self._queue(job.queue)
                found = queue.client.hget(queue.keys.job(job.id), Field.DEPENDS)
                refs = tuple(ref for ref in text(found or "").split("\n") if ref)
            object.__setattr__(self, "_results", tuple(map(self._result, refs)))
        return self._results  # type: ignore[no-any-return]

    def _result(self, ref: str) -> Any:
        backend = self.task_result.task.get_backend()
        earlier = ran_before(ref)  # EAGER: it ran here, a moment ago
        if earlier is not None:
            return backend._result(earlier)
        name, job_id = split_ref(ref, self._job.queue)
        try:
            job = self._queue(name).get(job_id)
        except JobNotFound:
            return None
        return backend._result(job)

    def save_metadata(self) -> None:
        """Publish ``metadata`` (JSON: else ``TypeError``; at most ``MAX_METADATA`` bytes:
        else ``ValueError``), read back as ``result.metadata``."""
        if not isinstance(self.metadata, dict):
            raise TypeError(f"context.metadata must be a dict, not {type(self.metadata).__name__}.")
        try:
            text = json.dumps(self.metadata, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"context.metadata is not JSON-serializable ({exc}).") from exc
        if len(text.encode()) > MAX_METADATA:
            raise ValueError(
                f"context.metadata is {len(text.encode())} bytes as JSON; the limit is "
                f"{MAX_METADATA}."
            )
        self._publish(metadata=text)

    def set_progress(self, done: int, total: int) -> None:
        """Publish ``done`` of ``total`` (whole numbers, 0 <= done <= total), read back as
        ``result.progress``."""
        for name, value in (("done", done), ("total", total)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}.")
        if not 0 <= done <= total:
            raise ValueError(f"Progress must have 0 <= done <= total, not {done}/{total}.")
        self._publish(progress=f"{done}/{total}")

    def _publish(self, metadata: str = "", progress: str = "") -> None:
        self._queue(self._job.queue).publish(self._job, metadata, progress)

    def _queue(self, name: str) -> Any:
        return self.task_result.task.get_backend().queue_of(name)
