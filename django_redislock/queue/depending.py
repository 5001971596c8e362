"""Jobs that wait for others (``enqueue(..., depends_on=[...])``). Mixed into ``Queue``.

A job's ``depends_on`` lists jobs of any queue: an id (of this queue), a ``Job``, or a
``TaskResult``. It waits ("waiting") until they end, then becomes ready at once, in the
script that ended the last one (``depend_lua``); ``run_when="succeeded"`` (the default)
ends it dead with ``DependencyFailed`` when one ends dead, cascading; ``"finished"`` runs it
anyway. A dependency that already ended counts as it ended (done or dead); one that does
not exist is a ``ValueError``, as is a cycle, before anything is written. A dependency in
another queue (on Redis Cluster, another slot) learns of its dependant through the outbox
(``outbox``), and tells it the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import redis
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from ..exceptions import RedisUnavailable
from ..redis.failures import UNAVAILABLE
from ..redis.scripts import LuaScript
from .arguments import Made, checked_job_id, new_id
from .depend_batches import chunks, gate_values, in_queue
from .depend_scripts import DEPEND
from .dependency_args import (
    MAX_DEPENDENCIES,
    Dependent,
    checked_run_when,
    dependency_of,
    topological,
)
from .eager import eager_job, run_unless_failed
from .job_factories import enqueued_job
from .jobs import Field, Job, JobState
from .keys import QueueKeys
from .on_commit import commit_alias, database, described, push_at_commit
from .outbox import deliver_now, ref_from, split_ref
from .replies import number, text

# What a job with dependencies may not say: they decide at enqueue whether a job is written.
_EXCLUDED = ("unique_for", "unique_by_args", "debounce")


class Depending:
    name: str
    client: Any
    using: str | None
    keys: QueueKeys
    result_ttl: float
    on_commit: bool
    eager: bool

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def checked_values(self, spec: Mapping[str, Any], job_id: str) -> tuple[Made, list[Any]]:
        raise NotImplementedError  # (Producing's)

    def enqueue_dependent(
        self,
        jobs: Iterable[Mapping[str, Any]],
        *,
        using: str | None = None,
        db: str | None = None,
    ) -> list[Job]:
        """``enqueue_many`` of jobs of which some have ``depends_on``: every job checked and
        its dependencies outside the batch looked up (``dependents``), then one DEPEND per
        ``MAX_BATCH`` jobs, and the registrations in other queues delivered (inside
        ``transaction.atomic()``, at commit)."""
        checked, ordered = self.dependents(jobs)
        alias = commit_alias(database(using, db)) if self.on_commit else None
        if self.eager:
            return self._run_eagerly(ordered, alias)
        push = partial(self.push_dependent, ordered)
        if alias is None:
            pushed = push()
        else:
            push_at_commit(alias, push, described([job.made[:4] for job in ordered]))
            pushed = {}
        return [self.dependent_job(job, pushed.get(job.made.id)) for job in checked]

    def dependents(
        self, jobs: Iterable[Mapping[str, Any]], written: frozenset[str] = frozenset()
    ) -> tuple[list[Dependent], list[Dependent]]:
        """``jobs`` checked (as given, and in the order they can be written): a
        TypeError/ValueError for a bad argument, an unknown dependency or a cycle, before
        anything is written. ``written``: refs (as this queue names them) of jobs the caller
        writes too, not looked up."""
        checked = [self._dependent(spec) for spec in jobs]
        ids = [job.made.id for job in checked]
        if len(set(ids)) < len(ids):
            raise ValueError("enqueue_many was given the same job_id twice.")
        ordered = topological(checked, self.name)
        batch = set(ids)
        outside = {ref for job in checked for ref in job.refs if ref not in batch} - written
        self._look_up(outside)
        return checked, ordered

    def _dependent(self, spec: Mapping[str, Any]) -> Dependent:
        for name in _EXCLUDED:
            if spec.get(name) not in (None, False):
                raise TypeError(f"A job with depends_on cannot take {name}.")
        spec = dict(spec)
        items = spec.pop("depends_on", None) or ()
        run_when = checked_run_when(spec.pop("run_when", "succeeded"))
        for name in _EXCLUDED:
            spec.pop(name, None)
        job_id = spec.get("job_id")
        job_id = new_id() if job_id is None else checked_job_id(job_id)
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise TypeError(
                f"depends_on must be a list of jobs, not {type(items).__name__} ({items!r:.60})."
            )
        refs = list(dict.fromkeys(self._ref(item) for item in items))
        if len(refs) > MAX_DEPENDENCIES:
            raise ValueError(
                f"depends_on lists {len(refs)} jobs; a job waits for at most {MAX_DEPENDENCIES}."
            )
        if job_id in refs:
            raise ValueError(f"Job {job_id!r} cannot depend on itself.")
        made, values = self.checked_values(spec, job_id)
        return Dependent(made, values, refs, run_when)

    def _ref(self, item: Any) -> str:
        queue, job_id = dependency_of(item)
        return ref_from(queue or self.name, job_id, self.name)

    def _look_up(self, refs: Iterable[str]) -> None:
        """A ValueError unless every job of ``refs`` exists (pending, dead or kept done)."""
        by_queue: dict[str, list[str]] = {}
        for ref in refs:
            name, job_id = split_ref(ref, self.name)
            by_queue.setdefault(name, []).append(job_id)
        for name, job_ids in by_queue.items():
            queue: Any = self if name == self.name else self._other(name)
            pipe = queue.client.pipeline(transaction=False)
            for job_id in job_ids:
                pipe.exists(queue.keys.job(job_id), queue.keys.result(job_id))
            try:
                founds = pipe.execute()
            except (*UNAVAILABLE, OSError) as exc:
                raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
            for job_id, found in zip(job_ids, founds, strict=True):
                if not found:
                    raise ValueError(
                        f"depends_on names job {job_id!r} of queue {name!r}, which does not "
                        "exist (or its result expired)."
                    )

    def other(self, name: str) -> Any:
        raise NotImplementedError  # (Queue's)

    def _other(self, name: str) -> Any:
        try:
            return self.other(name)
        except ImproperlyConfigured as exc:
            raise ValueError(f"depends_on names a job of queue {name!r}: {exc}") from exc

    def push_dependent(
        self,
        ordered: Sequence[Dependent],
        record: tuple[str, str] | None = None,
        delivered: bool = True,
        gate: tuple[str, Sequence[str]] | None = None,
    ) -> dict[str, list[Any]]:
        """Write ``ordered`` (as ``dependents`` gave them): one DEPEND per batch, the first
        writing ``record`` (a workflow's id and record) too, the last opening ``gate`` (a
        workflow's gate and its dependants in this queue, see ``open_gate``); then, with
        ``delivered``, the outbox (registrations in other queues). Returns each job's four
        values by id (and "" -> whether something was left in the outbox)."""
        replies: dict[str, list[Any]] = {}
        outboxed = False
        batches = chunks(ordered)
        for nth, chunk in enumerate(batches, 1):
            in_chunk = {job.made.id for job in chunk}
            outside = list(
                dict.fromkeys(
                    ref
                    for job in chunk
                    for ref in job.refs
                    if in_queue(ref) and ref not in in_chunk
                )
            )
            keys = self.keys.jobs([job.made.id for job in chunk])
            for ref in outside:
                keys += (self.keys.job(ref), self.keys.result(ref))
            args: list[Any] = [len(chunk), len(outside), "", "", 0]
            if record is not None:
                keys += (self.keys.workflow(record[0]), self.keys.workflows)
                args[2:5] = [*record, round(self.result_ttl * 1000)]
                record = None
            for job in chunk:
                args += (*job.values, job.run_when, "\n".join(job.refs))
            args += outside
            if gate is not None and nth == len(batches):
                gate_keys, gate_args = gate_values(self, *gate)
                keys += gate_keys
                args += gate_args
            try:
                reply = self.run(DEPEND, keys, args)
            except redis.ResponseError as exc:
                raise _refused(exc, self.name) from exc
            for n, job in enumerate(chunk):
                replies[job.made.id] = reply[4 * n : 4 * n + 4]
            outboxed = outboxed or bool(reply[-1])
        if outboxed and delivered:
            deliver_now(self)  # type: ignore[arg-type]
            self._restate(ordered, replies)
        replies[""] = [outboxed]
        return replies

    def _restate(self, ordered: Sequence[Dependent], replies: dict[str, list[Any]]) -> None:
        """The states of the jobs with a dependency in another queue, read again: one that
        had ended is told by the delivery just made (ready, or dead, by now)."""
        crossing = [job.made.id for job in ordered if any("\t" in ref for ref in job.refs)]
        pipe = self.client.pipeline(transaction=False)
        for job_id in crossing:
            pipe.hget(self.keys.job(job_id), Field.STATE)
        for job_id, state in zip(crossing, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(state, bytes) and replies[job_id][0]:  # (added, not kept)
                replies[job_id][2] = state

    def dependent_job(self, job: Dependent, reply: list[Any] | None) -> Job:
        """The Job enqueue returns for ``job``, from DEPEND's four values for it (None:
        pushed at commit, not known yet)."""
        job_id, task, args, kwargs, priority, meta = job.made
        if reply is None:
            state, due, enqueued = JobState.WAITING.value if job.refs else "ready", 0, 0
        else:
            state = JobState.of_letter(text(reply[2])).value
            due, enqueued = number(reply[1]), number(reply[3])
        made = enqueued_job(
            job_id, self.name, task, list(args), dict(kwargs), priority, dict(meta or {}),
            state, due, enqueued,
        )  # fmt: skip
        run_when = "finished" if job.run_when == "f" else "succeeded"
        return dataclasses.replace(made, depends_on=tuple(job.refs), run_when=run_when)

    def _run_eagerly(self, ordered: Sequence[Dependent], alias: str | None) -> list[Job]:
        """EAGER: each job run here in dependency order; one whose dependency (run here)
        ended dead does not run, unless run_when is "finished"."""

        def run_all() -> list[Job]:
            ended: dict[str, Job] = {}
            for job in ordered:
                made = dataclasses.replace(
                    eager_job(self.name, job.made), depends_on=tuple(job.refs)
                )
                before = {ref: ended[ref] for ref in job.refs if ref in ended}
                ended[job.made.id] = run_unless_failed(made, before, job.run_when == "f")
            return [ended[job.made.id] for job in ordered]

        if alias is None:
            return run_all()
        transaction.on_commit(run_all, using=alias)
        return [eager_job(self.name, job.made) for job in ordered]


def _refused(exc: redis.ResponseError, queue: str) -> Exception:
    message = str(exc)
    kind, _, job_id = message.partition(" ")
    if kind == "unknown":
        return ValueError(
            f"depends_on names job {job_id!r} of queue {queue!r}, which does not exist (or "
            "its result expired)."
        )
    if kind == "corrupt":
        return ValueError(f"Job {job_id!r} of queue {queue!r} is not a job's hash in Redis.")
    return exc
