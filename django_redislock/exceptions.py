"""Every error django-redislock raises on purpose derives from :class:`RedisLockError`."""

from __future__ import annotations

# The longest RetryLater delay, as the longest delay a job may be given (``queue.arguments``).
MAX_RETRY_LATER = 100 * 365.25 * 86400


class RedisLockError(Exception):
    """Base of every error the app raises on purpose."""


class RedisUnavailable(RedisLockError):
    """Redis could not be reached (connection refused, timed out, or lost mid-command)."""


class LockError(RedisLockError):
    """Base of lock errors; ``lock_name`` names the lock concerned."""

    def __init__(self, message: str, lock_name: str | None = None) -> None:
        super().__init__(message)
        self.lock_name = lock_name


class LockTimeout(LockError):
    """The lock was not acquired within its timeout."""


class LockNotOwned(LockError):
    """Release or extend of a lock this owner does not hold (any more)."""


class ReplicasNotConfirmed(LockError):
    """The lock was acquired but fewer than ``wait_replicas`` replicas confirmed it; it was
    released again."""


class QueueError(RedisLockError):
    """Base of queue errors."""


class JobNotFound(QueueError):
    """No job with that id in that queue (or not in the state asked for)."""


class InvalidTask(QueueError):
    """A job the worker refuses to run as a task (not a ``@task`` of an installed app, a
    payload that is not JSON, or a return value that is not JSON): it goes to the dead set,
    never retried."""


class TaskImportFailed(InvalidTask):
    """The module of a job's task exists but raised while being imported (a deploy mistake:
    a syntax error, a missing dependency): the worker logs it once, with its traceback, and
    gives the job back for later instead of burying it."""

    def __init__(self, module: str, cause: BaseException) -> None:
        super().__init__(f"importing {module} failed: {type(cause).__name__}: {cause}")
        self.module = module


class RetryLater(QueueError):
    """Raised by a task to run again after ``delay`` seconds: not a failure (no error is
    stored, ``MAX_ATTEMPTS`` counts failures only), though the run counts as an attempt.
    ``delay`` must be a number of seconds from 0 to a century: else ``ValueError`` (or
    ``TypeError``) is raised where ``RetryLater`` is made, and that attempt fails with it."""

    def __init__(self, delay: float) -> None:
        if not isinstance(delay, (int, float)) or isinstance(delay, bool):
            raise TypeError(f"RetryLater delay must be a number of seconds, not {delay!r}.")
        if not 0 <= delay <= MAX_RETRY_LATER:  # NaN and infinity fail too
            raise ValueError(
                f"RetryLater delay must be from 0 to {MAX_RETRY_LATER:.0f} s (a century), "
                f"not {delay!r}."
            )
        super().__init__(f"run again in {delay} s")
        self.delay = float(delay)


class DependencyFailed(QueueError):
    """A job that waited for others (``depends_on``, a workflow's step) ended dead because
    one of them ended dead: it never ran. Its error names that dependency. A step with
    ``run_when="finished"`` runs however its dependencies ended instead."""


class StockError(RedisLockError):
    """Base of stock errors; ``stock_name`` names the stock concerned."""

    def __init__(self, message: str, stock_name: str | None = None) -> None:
        super().__init__(message)
        self.stock_name = stock_name


class ReservationError(StockError):
    """Confirm or release of a reservation whose ``state`` forbids it: "confirmed" (its units
    are sold), "released", "expired", or "unknown" (never made, or forgotten)."""

    def __init__(
        self, message: str, stock_name: str | None, reservation_id: str, state: str
    ) -> None:
        super().__init__(message, stock_name)
        self.reservation_id = reservation_id
        self.state = state


class ReservationExpired(ReservationError):
    """Confirm of a reservation whose TTL ran out first: its units went back to the stock."""


class JobTimeLimitExceeded(BaseException):
    """Raised inside a job's thread when it runs past its time limit (``TIME_LIMIT``, or
    ``enqueue(time_limit=...)``), so that it can clean up: its ``finally`` blocks run. A
    ``BaseException``, as ``KeyboardInterrupt`` and ``asyncio.CancelledError`` are: the
    ``except Exception`` of a job's own retry or per-item loop must not swallow it and run
    on. The attempt is recorded as failed with it (retried, or dead after MAX_ATTEMPTS)."""

    def __str__(self) -> str:
        return super().__str__() or "The job ran past its time limit."


class JobCancelled(BaseException):
    """Raised inside a running job that ``queue.cancel(job_id)`` asked to stop (at its
    worker's next lease renewal), so that it can clean up. A ``BaseException`` for the same
    reason as ``JobTimeLimitExceeded``. The job ends dead as cancelled (who asked is in its
    error), and is never run again."""

    def __str__(self) -> str:
        return super().__str__() or "The job was cancelled."
