"""The arguments of ``depends_on``, checked: what each item names, ``run_when``, and a
batch put in the order its jobs can be written (``Dependent``, ``topological``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .arguments import Made, checked_job_id
from .jobs import Job

RUN_WHEN = {"succeeded": "s", "finished": "f"}
MAX_DEPENDENCIES = 1000  # of one job


class Dependent:
    """One job of ``enqueue_dependent``, checked: its values, and its dependencies' refs."""

    __slots__ = ("made", "refs", "run_when", "values")

    def __init__(self, made: Made, values: list[Any], refs: list[str], run_when: str) -> None:
        self.made, self.values, self.refs, self.run_when = made, values, refs, run_when


def dependency_of(item: Any) -> tuple[str | None, str]:
    """(queue or None for the caller's own, id) of an item of ``depends_on``: a job id, a
    ``Job``, a ``TaskResult`` or a workflow's handle (its last steps)."""
    if isinstance(item, str):
        return None, checked_job_id(item)
    if isinstance(item, Job):
        return _queue_name(item.queue), checked_job_id(item.id)
    task = getattr(item, "task", None)
    queue_name = getattr(task, "queue_name", None)
    job_id = getattr(item, "id", None)
    if isinstance(queue_name, str) and isinstance(job_id, str):
        return _queue_name(queue_name), checked_job_id(job_id)
    raise TypeError(
        f"depends_on takes job ids, Jobs and TaskResults, not {type(item).__name__} ({item!r:.60})."
    )


def _queue_name(name: Any) -> str:
    if not isinstance(name, str) or not name or not name.isprintable():
        raise ValueError(f"depends_on names a job of queue {name!r}, which is no queue name.")
    return name


def checked_run_when(run_when: Any) -> str:
    if run_when not in RUN_WHEN:
        raise ValueError(f"run_when must be 'succeeded' or 'finished', not {run_when!r}.")
    return RUN_WHEN[run_when]


def topological(jobs: Sequence[Dependent], here: str) -> list[Dependent]:
    """``jobs`` ordered so that each comes after those of the batch it depends on; a
    ValueError for a cycle."""
    by_id = {job.made.id: job for job in jobs}
    order: list[Dependent] = []
    state: dict[str, int] = {}  # 1 visiting, 2 placed
    for root in jobs:
        if state.get(root.made.id):
            continue
        stack: list[tuple[Dependent, int]] = [(root, 0)]
        state[root.made.id] = 1
        while stack:
            job, at = stack[-1]
            if at < len(job.refs):
                stack[-1] = (job, at + 1)
                ref = job.refs[at]
                parent = by_id.get(ref) if "\t" not in ref else None
                if parent is None or state.get(ref) == 2:
                    continue
                if state.get(ref) == 1:
                    path = [j.made.id for j, _ in stack]
                    cycle = " -> ".join([*path[path.index(ref) :], ref])
                    raise ValueError(f"depends_on makes a cycle: {cycle} (in queue {here!r}).")
                state[ref] = 1
                stack.append((parent, 0))
            else:
                stack.pop()
                state[job.made.id] = 2
                order.append(job)
    return order
