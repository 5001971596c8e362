"""Enqueueing a workflow (``Canvas.enqueue``).

Every step is checked first (its task as ``Task.enqueue`` would, its queue, the bounds);
then the steps are written, one DEPEND per queue and 1,000 steps. A workflow that fits in
one DEPEND is written whole, at once. One that takes several (steps on several queues, or
more than 1,000) is written behind a gate, so that a write lost half-way (Redis gone
between two of them) starts nothing: the gate is a job of the first step's queue (the
home queue) that waits for nothing but its opening, and the first steps wait for it. The
home queue's first DEPEND writes the gate and the workflow's record, the other queues
follow, and the home queue's last DEPEND (or, when it had only one, an OPEN) opens the
gate: one script, after everything else was written. A workflow whose gate never opened
is cancelled by the workers' sweep (``workflow.sweep``), none of its steps having started.

A step waits for its dependencies in other queues through the outboxes, which ``enqueue``
delivers once everything is written. Inside ``transaction.atomic()`` all of it happens when
the transaction commits, and nothing if it rolls back.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from ..queue.arguments import new_ids
from ..queue.depend_batches import chunks, gate_values
from ..queue.depend_lua import GATE_REF
from ..queue.depend_scripts import OPEN
from ..queue.dependency_args import Dependent
from ..queue.eager import eager_job, run_unless_failed
from ..queue.jobs import Job
from ..queue.lua import MAX_BATCH
from ..queue.on_commit import commit_alias, described, push_at_commit
from ..queue.outbox import deliver_now, ref_from
from ..queue.queue import Queue
from .workflow import Workflow

if TYPE_CHECKING:
    from .canvas import Canvas, Node

MAX_RECORD = 4 * 1024 * 1024  # bytes of a workflow's record (its steps' ids and tasks)
GATE_TASK = "django_redislock.workflows.gate"  # what the admin shows of a gate (never run)


def enqueue(canvas: Canvas) -> Workflow:
    nodes = canvas.nodes()
    workflow_id, gate_id, *ids = new_ids(len(nodes) + 2)
    queues: dict[str, Queue] = {}
    placed: list[tuple[str, dict[str, Any]]] = []
    for node in nodes:
        queue, spec = _job_spec(node)
        queues.setdefault(queue.name, queue)
        placed.append((queue.name, spec))
    home = placed[0][0]
    gated = len(queues) > 1 or len(nodes) > MAX_BATCH  # written in several scripts
    for n, (node, (_, spec)) in enumerate(zip(nodes, placed, strict=True)):
        spec["job_id"] = ids[n]
        spec["depends_on"] = [Job(ids[i], placed[i][0], "") for i in node.after]
        if gated and not node.after:
            spec["depends_on"] = [Job(gate_id, home, "")]
        spec["run_when"] = node.run_when
        spec["meta"] = {**(spec.get("meta") or {}), "workflow": workflow_id, "workflow_queue": home}
    steps = [(name, ids[n], spec["task"]) for n, (name, spec) in enumerate(placed)]
    workflow = Workflow(workflow_id, home, steps)
    if queues[home].eager:
        return _run_eagerly(workflow, nodes, placed, queues)
    if gated:
        workflow.gate = gate_id
    record = json.dumps(
        {"steps": steps, **({"gate": gate_id} if gated else {})}, separators=(",", ":")
    )
    if len(record) > MAX_RECORD:
        raise ValueError(
            f"The workflow's record would be {len(record)} bytes; at most {MAX_RECORD}."
        )
    ordered: dict[str, list[Any]] = {}
    for name, queue in queues.items():  # every step checked before any is written
        written = {ref_from(q, i, name) for q, i, _ in steps} | {ref_from(home, gate_id, name)}
        specs = [spec for (q, spec) in placed if q == name]
        ordered[name] = queue.dependents(specs, frozenset(written))[1]
    if not gated:
        write = _whole(queues[home], ordered[home], (workflow_id, record))
    else:
        made, values = queues[home].checked_values({"task": GATE_TASK}, gate_id)
        ordered[home].insert(0, Dependent(made, values, [GATE_REF], "s"))
        first = [ids[n] for n, node in enumerate(nodes) if not node.after and placed[n][0] == home]
        write = _behind_gate(queues, home, ordered, (workflow_id, record), (gate_id, first))
    alias = commit_alias(None) if queues[home].on_commit else None
    if alias is None:
        write()
    else:
        push_at_commit(alias, write, described([spec_job(spec) for _, spec in placed]))
    return workflow


def _whole(queue: Queue, ordered: list[Dependent], record: tuple[str, str]) -> Any:
    """A workflow of one queue and at most 1,000 steps: one DEPEND."""
    return lambda: queue.push_dependent(ordered, record, False)


def _behind_gate(
    queues: dict[str, Queue],
    home: str,
    ordered: dict[str, list[Dependent]],
    record: tuple[str, str],
    gate: tuple[str, list[str]],
) -> Any:
    """The writes of a workflow taking several scripts, its gate opened by the last."""

    def write() -> None:
        there = queues[home]
        first, *rest = chunks(ordered[home])
        outboxed = there.push_dependent(first, record, False)[""][0]
        for name, queue in queues.items():
            if name != home:
                queue.push_dependent(ordered[name], None, False)
        if rest:
            jobs = [job for chunk in rest for job in chunk]
            outboxed = there.push_dependent(jobs, None, False, gate)[""][0] or outboxed
        else:
            _open(there, *gate)
        for name, queue in queues.items():  # registrations across queues, and the told
            if name != home or outboxed:
                deliver_now(queue)

    return write


def _open(queue: Queue, gate_id: str, given: list[str]) -> None:
    """OPEN the gate (the home queue took one DEPEND); its dependants beyond the 1,000
    given are told through the outbox, delivered here."""
    keys, args = gate_values(queue, gate_id, given)
    if queue.run(OPEN, keys, args)[1]:
        deliver_now(queue)


def spec_job(spec: dict[str, Any]) -> tuple[str, Any, Any, Any]:
    return spec["job_id"], spec["task"], spec.get("args", ()), spec.get("kwargs") or {}


def _job_spec(node: Node) -> tuple[Queue, dict[str, Any]]:
    from ..tasks.backend import RedisTaskBackend

    task = node.step.task
    backend = task.get_backend()
    if not isinstance(backend, RedisTaskBackend):
        raise TypeError(
            f"{task.module_path} runs on {type(backend).__name__}: a workflow's steps must "
            "run on RedisTaskBackend."
        )
    return backend.job_spec(task, node.step.args, node.step.kwargs)


def _run_eagerly(
    workflow: Workflow,
    nodes: list[Node],
    placed: list[tuple[str, dict[str, Any]]],
    queues: dict[str, Queue],
) -> Workflow:
    """EAGER (the first step's queue): every step runs here, in order; one whose dependency
    ended dead ends dead without running, unless it runs when they finished."""
    ended: list[Job] = []
    for node, (name, spec) in zip(nodes, placed, strict=True):
        made, _ = queues[name].checked_values(spec, spec["job_id"])
        before = {ref_from(ended[i].queue, ended[i].id, name): ended[i] for i in node.after}
        job = dataclasses.replace(eager_job(name, made), depends_on=tuple(before))
        ended.append(run_unless_failed(job, before, node.run_when == "finished"))
    workflow.ran_here = ended
    return workflow
