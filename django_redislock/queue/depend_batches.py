"""How the jobs of one enqueue split into DEPEND calls: batches of at most ``MAX_BATCH``
jobs and outside dependencies each, and the values that open a workflow's gate."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .depend_lua import GATE_REF
from .dependency_args import Dependent
from .lua import MAX_BATCH


def gate_values(queue: Any, gate_id: str, given: Sequence[str]) -> tuple[list[str], list[Any]]:
    """The keys and arguments that open a workflow's gate (``open_gate``, in DEPEND or OPEN):
    its own, and those of its dependants in ``queue`` given (the first 1,000)."""
    given = list(given[:MAX_BATCH])
    keys = [queue.keys.job(gate_id), queue.keys.result(gate_id)]
    keys += [queue.keys.job(job_id) for job_id in given]
    return keys, [gate_id, round(queue.result_ttl * 1000), *given]


def chunks(ordered: Sequence[Dependent]) -> list[list[Dependent]]:
    """Batches of at most MAX_BATCH jobs and MAX_BATCH outside dependencies, in order (one
    DEPEND each)."""
    return list(_chunks(ordered))


def _chunks(ordered: Sequence[Dependent]) -> Iterable[list[Dependent]]:
    chunk: list[Dependent] = []
    ids: set[str] = set()
    outside: set[str] = set()
    for job in ordered:
        theirs = {ref for ref in job.refs if in_queue(ref) and ref not in ids}
        if chunk and (len(chunk) == MAX_BATCH or len(outside | theirs) > MAX_BATCH):
            yield chunk
            chunk, ids, outside = [], set(), set()
            theirs = {ref for ref in job.refs if in_queue(ref)}
        chunk.append(job)
        ids.add(job.made.id)
        outside |= theirs
    if chunk:
        yield chunk


def in_queue(ref: str) -> bool:
    """Whether ``ref`` names a job of this queue (not one of another, nor a gate's opening)."""
    return "\t" not in ref and ref != GATE_REF
