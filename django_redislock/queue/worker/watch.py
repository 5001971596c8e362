"""One running job under its time limit (``Watch``): its function called in the job's own
thread, and the exception the ``TimeLimits`` watcher, or a cancel, raises in that thread.

The handshake: a watch's ``gate`` is taken once, either by the watcher (the limit fires) or
by the job's thread as its function ends (it can no longer fire). When the watcher took it,
the job's thread waits until the exception was sent, then clears it if it was not delivered:
nothing can reach the worker's own code after the job's function returned.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from asgiref.sync import async_to_sync, iscoroutinefunction

from ...exceptions import JobCancelled, JobTimeLimitExceeded
from ..jobs import Job

if TYPE_CHECKING:
    from ..queue import Queue
    from .time_limits import TimeLimits

logger = logging.getLogger("django_redislock.queue.limits")  # the name users' LOGGING knows

_set_async_exc: Any = None
_clear_async_exc: Any = None
if hasattr(ctypes, "pythonapi"):  # CPython
    _api = ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
    _set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(_api)
    _clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(_api)


_async: dict[Any, bool] = {}  # whether each task function run so far is async


def _is_async(func: Callable[..., Any]) -> bool:
    """``iscoroutinefunction(func)``, found once per function (a task's never changes)."""
    found = _async.get(func)
    if found is None:
        found = _async[func] = iscoroutinefunction(func)
    return found


class Watch:
    """One running job's limit: ``call`` runs its function under it, in the calling thread."""

    __slots__ = (
        "cancel",
        "deadline",
        "gate",
        "grace",
        "job",
        "kind",
        "limits",
        "queue",
        "seconds",
        "sent",
        "sent_at",
        "thread_id",
        "warned",
    )

    def __init__(
        self, limits: TimeLimits, queue: Queue, job: Job, seconds: float, grace: float
    ) -> None:
        self.limits, self.queue, self.job, self.seconds = limits, queue, job, seconds
        self.grace = grace  # how long the job may go on once the limit (or a cancel) fired
        self.deadline = time.monotonic() + seconds
        self.gate = threading.Lock()  # taken once: by the watcher, or as the function ends
        self.sent = False  # the watcher raised (or cancelled) in the job
        self.sent_at = math.inf  # when (monotonic)
        self.warned = False
        self.thread_id = 0
        self.cancel: Callable[[], Any] | None = None  # an async job's: cancels its coroutine
        self.kind: type[BaseException] = JobTimeLimitExceeded  # what fire() raised

    def message(self) -> str:
        return (
            f"Job {self.job.id} ({self.job.task}) in {self.queue.name!r} ran past its "
            f"time limit of {self.seconds:g} s."
        )

    def call(self, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        """``func(*args, **kwargs)`` under the limit; raises JobTimeLimitExceeded when the
        limit was reached, whatever the function did then."""
        if _is_async(func):
            return async_to_sync(self._call_async)(func, args, kwargs)
        self.thread_id = threading.get_ident()
        fired = False
        try:
            try:
                self.limits.add(self)
                value = func(*args, **kwargs)
            finally:
                # The exception may arrive anywhere until _settle returns (once at most):
                # here too, or on entering _settle; then it is settled again.
                while True:
                    try:
                        fired = self._settle()
                        break
                    except (JobTimeLimitExceeded, JobCancelled):
                        pass
        except BaseException as exc:
            if not fired:
                raise
            self._exceeded(exc)
        if fired:
            self._exceeded(None)
        return value

    def _settle(self) -> bool:
        """In the job's thread, its function done: True if the limit fired. No exception of
        the watcher's can reach the thread once this returned."""
        if self.gate.acquire(blocking=False):  # the limit can no longer fire
            self.limits.remove(self)
            return False
        while not self.sent:  # the watcher is sending it: microseconds
            time.sleep(0.0001)
        if _clear_async_exc is not None:  # if not delivered yet, it never will be
            _clear_async_exc(self.thread_id, None)
        self.limits.remove(self)
        return True

    async def _call_async(self, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        running = asyncio.ensure_future(func(*args, **kwargs))
        loop = asyncio.get_running_loop()
        self.cancel = lambda: loop.call_soon_threadsafe(running.cancel)
        self.limits.add(self)
        try:
            value = await running
        except BaseException as exc:
            if not self._settle_async():
                raise
            self._exceeded(exc)
        if self._settle_async():
            self._exceeded(None)
        return value

    def _settle_async(self) -> bool:  # a cancel arriving after the end does nothing
        fired = not self.gate.acquire(blocking=False)
        self.limits.remove(self)
        return fired

    def _exceeded(self, exc: BaseException | None) -> NoReturn:
        """Fail the attempt with what fired (the limit, or a cancel): the exception raised
        in the job, now saying which job, or a new one (the job swallowed it, or raised
        another)."""
        kind = self.kind
        message = (
            self.message()
            if kind is JobTimeLimitExceeded
            else (f"Job {self.job.id} ({self.job.task}) in {self.queue.name!r} was cancelled.")
        )
        if isinstance(exc, kind):
            exc.args = (message,)
            raise exc
        raise kind(message) from exc

    def fire(self, kind: type[BaseException] = JobTimeLimitExceeded) -> bool:
        """In the watcher's (or the renewer's) thread: raise ``kind`` in the job, unless it
        just ended or another reason already fired (then False)."""
        if not self.gate.acquire(blocking=False):
            return False
        self.kind = kind
        try:
            if self.cancel is not None:
                self.cancel()
            elif _set_async_exc is not None:
                _set_async_exc(self.thread_id, kind)
            else:
                logger.warning(
                    "Job %s was to be stopped (%s); only CPython can interrupt it.",
                    self.job.id,
                    kind.__name__,
                )
        except RuntimeError:  # an async job's loop closed: the job ended meanwhile
            pass
        finally:
            self.sent_at = time.monotonic()
            self.sent = True
        return True
