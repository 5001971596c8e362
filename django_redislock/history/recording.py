"""Recording job runs into the per-task history. The worker times each run with
``timed_run``: the run is counted in this process's memory (a few µs, under a lock), and a
daemon thread sends what was gathered once every ``FLUSH_EVERY`` seconds, one pipeline per
queue, whatever the number of jobs (a busy worker sends less than one round trip a job, an
idle one nothing). A flush that fails is logged and its counts are dropped: the history
is a statistic, and recording it never fails or delays a job. What a process gathered and
had not sent when it was killed (at most ``FLUSH_EVERY``) is lost; an ordinary exit sends it.

The same flush (``sending``) keeps each task's index of recent jobs: the id of each job that
started or ended a run, by when, the ``RECENT`` latest. A job is noted as it starts, so the
index holds the running ones too.

Only registered tasks have a history of their own: a job whose path names no ``@task``
(hostile, or a task since removed) counts under ``OTHER``, so what Redis keeps is bounded by
the tasks the code defines, never by what was enqueued.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..conf import conf
from ..exceptions import RetryLater, TaskImportFailed
from ..queue.queue import Job, Queue
from ..queue.retry_policy import registered_task
from .durations import bucket
from .keys import RECENT
from .sending import Counts, Jobs, Minutes, send

logger = logging.getLogger(__name__)

OTHER = "(other)"  # the history of the jobs that name no registered task
FLUSH_EVERY = 1.0
WARN_EVERY = 60.0  # a flush failing again is logged at most this often (else DEBUG)
MAX_KNOWN = 10_000  # task paths remembered as registered (more are looked up each time)

T = TypeVar("T")


@dataclass
class Gathered:
    """What a process gathered for one queue since its last flush."""

    queue: Queue
    minutes: Minutes = field(default_factory=dict)
    jobs: Jobs = field(default_factory=dict)

    def note(self, task: str, job_id: str, at_ms: int) -> None:
        ids = self.jobs.get(task)
        if ids is None:
            ids = self.jobs[task] = {}
        ids.pop(job_id, None)  # (its latest moment last: the dict keeps insertion order)
        ids[job_id] = at_ms
        if len(ids) > RECENT:  # only the latest RECENT are kept in Redis anyway
            del ids[next(iter(ids))]


# (queue name, connection alias) -> what was gathered for that queue
Pending = dict[tuple[str, "str | None"], Gathered]

_known: set[str] = set()


def task_label(path: str) -> str:
    """What a job's task path is recorded under: itself when it names a registered task,
    else ``OTHER``."""
    if path in _known:
        return path
    if registered_task(path) is None:
        return OTHER
    if len(_known) < MAX_KNOWN:
        _known.add(path)
    return path


class Recorder:
    """Job runs counted in memory, sent to Redis by a daemon thread (any thread may add)."""

    def __init__(self, flush_every: float = FLUSH_EVERY) -> None:
        self.flush_every = flush_every
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the thread stays in the parent
        atexit.register(self.flush)

    def _reset(self) -> None:
        self.lock = threading.Lock()
        # One flush at a time: when ``flush`` returns, every run counted before it was sent
        # (or dropped), even when the thread's own flush had taken them first.
        self.sending = threading.Lock()
        self.pending: Pending = {}
        self.thread: threading.Thread | None = None
        self.warned = -WARN_EVERY

    def add(
        self,
        queue: Queue,
        task: str,
        seconds: float,
        *,
        failed: bool,
        now: float | None = None,
        job_id: str | None = None,
    ) -> None:
        """Count a run of ``task`` (a label: see ``task_label``) in ``queue`` that took
        ``seconds`` and ended at ``now`` (epoch s); with ``job_id``, that job ended then
        (the task's recent jobs)."""
        at = time.time() if now is None else now
        minute = int(at // 60)
        index = bucket(seconds)
        with self.lock:
            gathered = self._gathered(queue)
            counts = gathered.minutes.get((task, minute))
            if counts is None:
                counts = gathered.minutes[(task, minute)] = Counts()
            counts.runs += 1
            counts.failures += failed
            counts.buckets[index] = counts.buckets.get(index, 0) + 1
            if job_id is not None:
                gathered.note(task, job_id, int(at * 1000))

    def started(self, queue: Queue, task: str, job_id: str, now: float | None = None) -> None:
        """Note that job ``job_id`` of ``task`` (a label) started a run at ``now`` (epoch s),
        in the task's recent jobs."""
        at_ms = int((time.time() if now is None else now) * 1000)
        with self.lock:
            self._gathered(queue).note(task, job_id, at_ms)

    def _gathered(self, queue: Queue) -> Gathered:
        """(Under ``lock``.) What was gathered for ``queue``; the thread started if need be."""
        gathered = self.pending.get((queue.name, queue.using))
        if gathered is None:
            gathered = self.pending[(queue.name, queue.using)] = Gathered(queue)
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="redislock-history", daemon=True)
            self.thread.start()
        return gathered

    def discard(self) -> None:
        """Forget what was counted and not sent yet, once a send under way has ended (a
        test switching Redis servers)."""
        with self.sending, self.lock:
            self.pending = {}

    def _run(self) -> None:
        while True:
            time.sleep(self.flush_every)
            self.flush()

    def flush(self) -> int:
        """Send what was counted, one pipeline per queue; how many (task, minute) were
        sent. A queue whose pipeline fails is logged and its counts dropped."""
        with self.sending:
            return self._send_pending()

    def _send_pending(self) -> int:
        with self.lock:
            taken, self.pending = self.pending, {}
        sent = 0
        for gathered in taken.values():
            queue = gathered.queue
            try:
                send(queue, gathered.minutes, jobs=gathered.jobs)
                sent += len(gathered.minutes)
            except Exception as exc:  # Redis away, read-only, out of memory: never a job's
                now = time.monotonic()
                level = logging.WARNING if now - self.warned >= WARN_EVERY else logging.DEBUG
                if level == logging.WARNING:
                    self.warned = now
                logger.log(level, "Could not record the task history of %r: %s", queue.name, exc)
        return sent


RECORDER = Recorder()


def timed_run(queue: Queue, job: Job, run: Callable[[Job, Any], T], watch: Any) -> T:
    """``run(job, watch)``, its duration and outcome recorded in the task history of
    ``queue`` (a ``RetryLater`` is no run, nor a job given back because its task's module
    failed to import: neither is counted, though the job is among its task's recent jobs).
    With ``REDISLOCK["HISTORY"]`` False, nothing is recorded."""
    if not conf.HISTORY:
        return run(job, watch)
    label = _started(queue, job)
    start = time.monotonic()
    try:
        value = run(job, watch)
    except (RetryLater, TaskImportFailed):
        raise
    except BaseException:
        _record(queue, job, label, time.monotonic() - start, failed=True)
        raise
    _record(queue, job, label, time.monotonic() - start, failed=False)
    return value


def _started(queue: Queue, job: Job) -> str | None:
    """The job's label, once its start is noted (None: that failed, and was logged)."""
    try:
        label = task_label(job.task)
        RECORDER.started(queue, label, job.id)
    except Exception:  # a bug here must not fail the job
        logger.exception("Could not note a job's start in the task history")
        return None
    return label


def _record(queue: Queue, job: Job, label: str | None, seconds: float, *, failed: bool) -> None:
    try:
        task = task_label(job.task) if label is None else label
        RECORDER.add(queue, task, seconds, failed=failed, job_id=job.id)
    except Exception:  # a bug here must not fail the job
        logger.exception("Could not count a job run in the task history")
