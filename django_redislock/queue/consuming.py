"""What a worker does with the jobs it leases, mixed into ``Queue``: lease them (``pop``,
``fetch``), give back those that did not start, acknowledge those that finished, keep their
leases alive and publish their progress. How a failed attempt ends is ``settling``'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..redis.failures import unavailable_as_error
from .fetch_scripts import POP
from .fetching import Fetched, WorkerCalls
from .job_codec import decoded_metadata, decoded_progress
from .jobs import Field, Job
from .lease_scripts import NOTE_MAX_ATTEMPTS, PUBLISH, RELEASE, RENEW
from .lua import MAX_BATCH
from .outbox import OUTBOX_MARK, deliver_now
from .replies import text


class Consuming(WorkerCalls):
    client: Any

    def pop(self, count: int = 1, lease: float | None = None, *, worker: str = "") -> list[Job]:
        """Lease up to ``count`` ready jobs (highest priority first). ``ack``, ``retry`` or
        ``fail`` each; a job whose lease runs out is delivered again."""
        return self.pop_and_wait(count, lease, worker=worker)[0]

    def pop_and_wait(
        self, count: int, lease: float | None = None, *, worker: str = ""
    ) -> tuple[list[Job], float | None]:
        """``pop``, and the seconds until the next scheduled job or lease expiry (0 when
        more are ready, None when nothing is pending)."""
        jobs, wait, _ = self.fetch(count, lease, worker=worker)
        return jobs, wait

    def fetch(
        self,
        count: int,
        lease: float | None = None,
        *,
        worker: str = "",
        finished: Sequence[tuple[Job, str | None]] = (),
        started: Sequence[Job] = (),
        charge: bool = True,
    ) -> Fetched:
        """``pop_and_wait`` after acknowledging ``finished`` (jobs with their result, as
        ``ack`` takes them) and charging the attempt of ``started`` (jobs leased ahead that
        start now), in one round trip per ``MAX_BATCH`` jobs; also returns the ids of the
        finished and started jobs whose lease had run out (``"{expired}<id>"``: a started
        job that had expired, buried uncharged). ``charge=False`` leases jobs ahead: their
        attempt counts only once they are started."""
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be an int >= 0, not {count!r}.")
        jobs: list[Job] = []
        lost: list[str] = []
        first = True
        while True:
            take = min(count - len(jobs), MAX_BATCH)
            # Every fetch sweeps due and expired jobs, its first POP at least.
            candidates = self.candidates(take) if take or first else []
            first = False
            keys, args = self.fetch_args(
                take, lease, worker, finished[:MAX_BATCH], started[:MAX_BATCH], charge, candidates
            )
            found, wait, gone = self.fetched(self.run(POP, keys, args), worker)
            if OUTBOX_MARK in gone:  # it left something in the outbox: delivered now
                gone.remove(OUTBOX_MARK)
                deliver_now(self)  # type: ignore[arg-type]
            finished, started = finished[MAX_BATCH:], started[MAX_BATCH:]
            jobs += found
            lost += gone
            more = len(found) == take and len(jobs) < count
            if not (more or finished or started):
                return Fetched(jobs, wait, lost)

    def release(self, jobs: Sequence[Job]) -> int:
        """Give back popped jobs that did not start: ready again at the front of their
        priority, their attempt not counted. Returns how many were still leased."""
        given = 0
        for start in range(0, len(jobs), MAX_BATCH):
            batch = jobs[start : start + MAX_BATCH]
            pairs = [v for job in batch for v in (job.id, job.lease or "")]
            given += int(self.run(RELEASE, self.keys.jobs([job.id for job in batch]), pairs))
        return given

    def ack(self, job: Job, result: str | None = None) -> bool:
        """Finish a popped job; with ``result`` (its return value as JSON text) the job is
        kept, done, for RESULT_TTL. False when its lease had run out (it may run again)."""
        return not self.fetch(0, finished=[(job, result)]).lost

    def note_max_attempts(self, job: Job, max_attempts: int) -> bool:
        """Note on a popped ``job`` that has no ``max_attempts`` of its own its task's, so
        that a lapse of its lease (its worker died) is judged by it, not by the queue's.
        False when the lease was lost."""
        args = (job.lease or "", max_attempts)
        return bool(self.run(NOTE_MAX_ATTEMPTS, [self.keys.job(job.id)], args))

    def publish(self, job: Job, metadata: str = "", progress: str = "") -> bool:
        """Publish what a popped ``job`` says of its progress: its metadata (JSON object
        text) and progress ("<done>/<total>"), each "" to leave it. False when the lease
        was lost (nothing is written then)."""
        args = (job.lease or "", metadata, progress)
        return bool(self.run(PUBLISH, [self.keys.job(job.id)], args))

    @unavailable_as_error()
    def published(self, job_id: str) -> tuple[dict[str, Any], tuple[int, int] | None]:
        """What job ``job_id`` published while it ran (``publish``): its metadata ({} for
        none) and progress (None for none), whether it is still pending or finished."""
        pipe = self.client.pipeline(transaction=False)
        for key in (self.keys.job(job_id), self.keys.result(job_id)):
            pipe.hmget(key, Field.METADATA, Field.PROGRESS)
        for found in pipe.execute(raise_on_error=False):
            if isinstance(found, list) and (found[0] or found[1]):
                return decoded_metadata(found[0]), decoded_progress(found[1])
        return {}, None

    def renew(self, jobs: Sequence[Job], lease: float | None = None) -> list[str]:
        """Extend the leases of popped jobs; returns the ids whose lease was already lost."""
        return self.renew_leases(jobs, lease)[0]

    def renew_leases(
        self, jobs: Sequence[Job], lease: float | None = None
    ) -> tuple[list[str], list[str]]:
        """``renew``; and the ids of the jobs asked to stop (cancelled while running)."""
        if not jobs:
            return [], []
        lease_ms = max(1, round((self.lease if lease is None else lease) * 1000))
        pairs = [v for job in jobs for v in (job.id, job.lease or "")]
        keys = self.keys.jobs([job.id for job in jobs])
        lost, asked = self.run(RENEW, keys, (lease_ms, *pairs))
        return [text(i) for i in lost], [text(i) for i in asked]
