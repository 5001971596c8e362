"""What an operator does with a running job its worker left (the admin's flag and its
"requeue" button): whether its lease's renewal is overdue, and giving it back to ready.
Mixed into ``Queue`` (through ``Operations``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..exceptions import InvalidTask
from ..redis.scripts import LuaScript
from .admin_scripts import REQUEUE_RUNNING
from .job_codec import attempt_error
from .jobs import Job
from .keys import QueueKeys
from .retry_policy import policy


class LeftJobs:
    name: str
    keys: QueueKeys
    max_attempts: int
    retry_backoff: float
    lease: float

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def renewal_overdue(self, expiry_ms: float, now: float) -> bool:
        """Whether a lease running out at ``expiry_ms`` was last renewed so long before
        ``now`` that its worker cannot be alive: a worker renews its leases every beat,
        min(5 s, LEASE / 3), and its registry entry lasts three beats; so does this."""
        return expiry_ms - self.lease * 1000 <= (now - self._silence()) * 1000

    def _silence(self) -> float:
        return 3 * min(5.0, self.lease / 3)

    def requeue_running(self, job: Job, *, lease_ran_out: bool) -> bool:
        """Give back to ready at once a running ``job`` (as read, with its lease) whose lease
        ran out (``lease_ran_out``), or whose worker the caller found gone from the
        registry; either is checked again in Redis (gone: its lease not renewed for three
        beats). Its started attempt is recorded as failed. False when it is no longer
        running under that lease, or looks alive after all."""
        why = "its lease ran out" if lease_ran_out else "its worker is gone"
        try:  # the job's own, else its task's, else the queue's
            limit = policy(self, job).max_attempts
        except InvalidTask:  # an option of its own is corrupt: the worker sets it aside
            limit = self.max_attempts
        error = (
            f"Attempt {job.attempts} of {limit} ended without an outcome: "
            f"{why}; requeued from the admin."
        )
        entry = attempt_error(error, "", "", job.worker or "")
        args = [
            job.id,
            job.lease or "",
            "1" if lease_ran_out else "0",
            error,
            entry,
            round(self.lease * 1000),
            round(self._silence() * 1000),
        ]
        return bool(self.run(REQUEUE_RUNNING, [self.keys.job(job.id)], args))
