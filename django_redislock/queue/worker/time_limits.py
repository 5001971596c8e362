"""Soft time limits of the jobs a worker runs (what a limit is, and where a job keeps its
own: ``time_limits``), and the cancels of running jobs, which take the same road.

When a job runs past its limit, ``JobTimeLimitExceeded`` is raised inside the thread that
runs it (CPython's ``PyThreadState_SetAsyncExc``), so that its ``finally`` blocks run; an
async task function's coroutine is cancelled instead. The exception is raised at the next
bytecode the thread runs: a job blocked in C (a long ``time.sleep``, a socket read without a
timeout, a C extension's loop) sees it only when that returns. Only a process can be stopped
for sure: a hard limit needs the job in a child process that can be killed.

A job still running its queue's ``TIME_LIMIT_GRACE`` seconds after its limit (it swallowed
the exception, or is stuck in C) is reported, and its lease is no longer renewed: the job is
delivered again once the lease runs out (at-least-once), as if its worker had died, instead
of being held forever by a thread that may never come back.

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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from asgiref.sync import async_to_sync, iscoroutinefunction

from ...exceptions import JobCancelled, JobTimeLimitExceeded
from ..jobs import Job
from ..time_limits import job_time_limit
from .background import Background

DEFAULT_GRACE = 10.0  # a queue's TIME_LIMIT_GRACE unless it says otherwise (conf.QUEUE_DEFAULTS)

if TYPE_CHECKING:
    from ..queue import Queue

logger = logging.getLogger("django_redislock.queue.limits")  # the name users' LOGGING knows

IDLE = 1.0  # longest sleep of the watcher with nothing to watch (it is woken on a new job)

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

    def fire(self, kind: type[BaseException] = JobTimeLimitExceeded) -> None:
        """In the watcher's (or the renewer's) thread: raise ``kind`` in the job, unless it
        just ended or another reason already fired."""
        if not self.gate.acquire(blocking=False):
            return
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


class TimeLimits:
    """The limits of the jobs a worker runs, watched by one thread. ``defaults``: each
    queue's ``TIME_LIMIT``; ``graces``: each queue's ``TIME_LIMIT_GRACE``; ``overdue(queue,
    job)`` is called for a job still running that long past its limit (or its cancel)."""

    def __init__(
        self,
        defaults: Mapping[str, float | None],
        overdue: Callable[[Queue, Job], None],
        graces: Mapping[str, float] | None = None,
    ) -> None:
        self.defaults, self.overdue = dict(defaults), overdue
        self.graces = dict(graces or {})
        self.watches: dict[int, Watch] = {}
        self.wakes_at = 0.0  # when the watcher wakes next (monotonic)
        # (held through the lock itself where nothing waits or is notified: cheaper)
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.stopped = threading.Event()
        self.thread = Background("redislock-limits", self._watch, stopped=self.stopped, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        with self.changed:
            self.changed.notify_all()
        self.thread.stop()

    def watch(self, queue: Queue, job: Job) -> Watch:
        """The watch ``job`` runs under: its time limit (``math.inf`` for none), and the
        way ``cancel`` reaches it."""
        seconds = job_time_limit(job, self.defaults.get(queue.name))
        grace = self.graces.get(queue.name, DEFAULT_GRACE)
        return Watch(self, queue, job, math.inf if seconds is None else seconds, grace)

    def cancel(self, queue: Queue, job_id: str) -> bool:
        """Raise ``JobCancelled`` in the running job ``job_id`` of ``queue`` (asked to stop
        by ``queue.cancel``); False when it is not running here."""
        with self.changed:
            found = [
                w
                for w in self.watches.values()
                if w.job.id == job_id and w.queue.name == queue.name
            ]
        for watch in found:
            logger.info(
                "Job %s (%s) in %r was cancelled: stopping it.", job_id, watch.job.task, queue.name
            )
            watch.fire(JobCancelled)
        return bool(found)

    def add(self, watch: Watch) -> None:
        with self.lock:
            self.watches[id(watch)] = watch
            if watch.deadline < self.wakes_at:  # else the watcher wakes in time: let it be
                self.changed.notify_all()

    def remove(self, watch: Watch) -> None:
        with self.lock:
            self.watches.pop(id(watch), None)

    def _watch(self, stopped: threading.Event) -> None:
        while not stopped.is_set():
            try:
                self._tick()
            except Exception:  # a bug: the limits must be watched all the same
                logger.exception("Watching the jobs' time limits failed")
                stopped.wait(IDLE)

    def _tick(self) -> None:
        now = time.monotonic()
        with self.changed:
            watches = list(self.watches.values())
        soonest = now + IDLE
        for watch in watches:
            if not watch.sent:
                if now >= watch.deadline:
                    watch.fire()
                else:
                    soonest = min(soonest, watch.deadline)
            elif not watch.warned:  # the grace after the limit fired, or a cancel was sent
                if now >= watch.sent_at + watch.grace:
                    watch.warned = True
                    self._overdue(watch)
                else:
                    soonest = min(soonest, watch.sent_at + watch.grace)
        with self.changed:  # a job added since the copy above is seen here, or notifies
            if self.stopped.is_set():
                return
            for watch in self.watches.values():
                if not watch.sent:
                    soonest = min(soonest, watch.deadline)
            self.wakes_at = soonest
            self.changed.wait(max(0.0, soonest - time.monotonic()))
            self.wakes_at = 0.0

    def _overdue(self, watch: Watch) -> None:
        with self.changed:
            if id(watch) not in self.watches:
                return  # it ended meanwhile
        logger.warning(
            "Job %s (%s) in %r is still running %g s after its %s: it ignores %s, or is "
            "blocked in C code. Its lease is no longer renewed (it will be delivered again "
            "when the lease runs out); in process mode its worker process is ended.",
            watch.job.id,
            watch.job.task,
            watch.queue.name,
            watch.grace,
            "time limit" if watch.kind is JobTimeLimitExceeded else "cancel",
            watch.kind.__name__,
        )
        self.overdue(watch.queue, watch.job)
