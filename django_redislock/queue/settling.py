"""How a popped job's attempt ends when it did not succeed, mixed into ``Queue``: retried
after its backoff, failed (retried or dead, as its retry policy decides), snoozed
(``RetryLater``, not a failure) or buried. One SETTLE each; its dependants in this queue are
told in the same script if it dies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..redis.scripts import LuaScript
from .arguments import checked_delay
from .job_codec import attempt_error, error_text, trimmed
from .jobs import Job
from .keys import QueueKeys
from .lease_scripts import SETTLE
from .lua import MAX_BATCH
from .outbox import deliver_now
from .retry_policy import Outcome, after_failure, backoff_bound, backoff_delay, policy


class Settling:
    name: str
    keys: QueueKeys
    max_attempts: int
    retry_backoff: float

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def retry(self, job: Job, delay: float | None = None, error: str = "") -> bool:
        """Give a popped job back, due again after ``delay`` seconds (default: the backoff);
        a failed attempt."""
        failures = job.failures + 1
        if delay is None:
            delay = backoff_delay(policy(self, job), failures)
        else:
            delay = checked_delay(delay)
        return self._settle(job, round(delay * 1000), error, "", "", reason=f"retry {failures}")

    def fail(
        self,
        job: Job,
        error: str | BaseException,
        traceback: str = "",
        *,
        outcome: Outcome | None = None,
    ) -> bool:
        """Record a failure: retried after the backoff, or dead once the job's failures reach
        its ``max_attempts`` (its own, its task's, else the queue's ``MAX_ATTEMPTS``), or at
        once when ``retry_on`` does not list the exception. ``outcome``: as decided already
        (``retry_policy.after_failure``)."""
        if outcome is None:
            exc = error if isinstance(error, BaseException) else None
            outcome = after_failure(policy(self, job), job, exc)
        if outcome.dead:
            return self.bury(job, error, traceback)
        message, error_class = error_text(error)
        delay_ms = round(outcome.delay * 1000)
        return self._settle(job, delay_ms, message, traceback, error_class, reason=outcome.reason)

    def snooze(self, job: Job, delay: float) -> bool:
        """Give a popped job back to run again after ``delay`` s, as ``RetryLater`` asks: not
        a failure (no error stored, its failures unchanged)."""
        delay_ms = round(checked_delay(delay) * 1000)
        return self._settle(job, delay_ms, "", "", "", failed=False, reason="RetryLater")

    def backoff(self, job: Job) -> float:
        """The longest delay before ``job`` runs again after its next failure (the draw is
        uniform in ``[d/2, d]``): its ``retry_backoff`` doubled per failure, capped."""
        return backoff_bound(policy(self, job), job.failures + 1)

    def bury(self, job: Job, error: str | BaseException, traceback: str = "") -> bool:
        """Send a popped job straight to the dead set (it can never succeed)."""
        message, error_class = error_text(error)
        return self._settle(job, -1, message, traceback, error_class)

    def _settle(
        self,
        job: Job,
        delay_ms: int,
        error: str,
        traceback: str,
        error_class: str,
        *,
        failed: bool = True,
        reason: str = "",
    ) -> bool:
        traceback = trimmed(traceback)
        entry = attempt_error(error, error_class, traceback, job.worker or "")
        args: tuple[Any, ...] = (
            job.id,
            job.lease or "",
            delay_ms,
            error,
            traceback,
            error_class,
            entry,
            job.worker or "-",
            "1" if failed else "0",
            reason,
        )
        keys = [self.keys.job(job.id)]
        if job.dependants:  # those in this queue are told in the same script if it dies
            told = [ref for ref in job.dependants if "\t" not in ref][:MAX_BATCH]
            keys += self.keys.jobs(told)
            args += tuple(told)
        settled = self.run(SETTLE, keys, args)
        if settled == 2:  # it left something in the outbox: delivered now
            deliver_now(self)  # type: ignore[arg-type]
        return bool(settled)
