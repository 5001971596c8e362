"""Recording job runs into the per-task history. The worker times each run with
``timed_run``: the run is counted in this process's memory (a few µs, under a lock), and a
daemon thread sends what was gathered once every ``FLUSH_EVERY`` seconds, one pipeline per
queue, whatever the number of jobs (a busy worker sends less than one round trip a job, an
idle one nothing). A flush that fails is logged and its counts are dropped: the history
is a statistic, and recording it never fails or delays a job. What a process gathered and
had not sent when it was killed (at most ``FLUSH_EVERY``) is lost; an ordinary exit sends it.

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

from ..exceptions import RetryLater, TaskImportFailed
from ..queue.queue import Job, Queue
from ..queue.retry_policy import registered_task
from .durations import bucket
from .keys import KEEP, MARGIN, SPAN_MINUTES, HistoryKeys, hour_expiry, span_expiry

logger = logging.getLogger(__name__)

OTHER = "(other)"  # the history of the jobs that name no registered task
FLUSH_EVERY = 1.0
WARN_EVERY = 60.0  # a flush failing again is logged at most this often (else DEBUG)
MAX_KNOWN = 10_000  # task paths remembered as registered (more are looked up each time)

T = TypeVar("T")


@dataclass
class Counts:
    """Runs of one task in one minute: how many, how many failed, and their durations."""

    runs: int = 0
    failures: int = 0
    buckets: dict[int, int] = field(default_factory=dict)

    def add(self, other: Counts) -> None:
        self.runs += other.runs
        self.failures += other.failures
        for index, count in other.buckets.items():
            self.buckets[index] = self.buckets.get(index, 0) + count


# (queue name, connection alias) -> (the queue, {(task, epoch minute): counts})
Pending = dict[tuple[str, "str | None"], tuple[Queue, dict[tuple[str, int], Counts]]]

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
        self, queue: Queue, task: str, seconds: float, *, failed: bool, now: float | None = None
    ) -> None:
        """Count a run of ``task`` (a label: see ``task_label``) in ``queue`` that took
        ``seconds`` and ended at ``now`` (epoch s)."""
        minute = int((time.time() if now is None else now) // 60)
        index = bucket(seconds)
        with self.lock:
            found = self.pending.get((queue.name, queue.using))
            if found is None:
                found = self.pending[(queue.name, queue.using)] = (queue, {})
            counts = found[1].get((task, minute))
            if counts is None:
                counts = found[1][(task, minute)] = Counts()
            counts.runs += 1
            counts.failures += failed
            counts.buckets[index] = counts.buckets.get(index, 0) + 1
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="redislock-history", daemon=True
                )
                self.thread.start()

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
        for queue, minutes in taken.values():
            try:
                send(queue, minutes)
                sent += len(minutes)
            except Exception as exc:  # Redis away, read-only, out of memory: never a job's
                now = time.monotonic()
                level = logging.WARNING if now - self.warned >= WARN_EVERY else logging.DEBUG
                if level == logging.WARNING:
                    self.warned = now
                logger.log(level, "Could not record the task history of %r: %s", queue.name, exc)
        return sent


def send(queue: Queue, minutes: dict[tuple[str, int], Counts], now: float | None = None) -> None:
    """Add ``minutes`` to the history of ``queue`` in Redis: one pipeline."""
    keys = HistoryKeys(queue.keys)
    hours: dict[tuple[str, int], Counts] = {}
    spans: set[tuple[str, int]] = set()
    pipe = queue.client.pipeline(transaction=False)
    for (task, minute), counts in minutes.items():
        span, offset = divmod(minute, SPAN_MINUTES)
        spans.add((task, span))
        key = keys.span(task, span)
        _increments(pipe, key, f"{offset}:", counts)
        hours.setdefault((task, minute // 60), Counts()).add(counts)
    for (task, hour), counts in hours.items():
        key = keys.hour(task, hour)
        _increments(pipe, key, "", counts)
        pipe.expireat(key, hour_expiry(hour))
    for task, span in spans:
        pipe.expireat(keys.span(task, span), span_expiry(span))
    now_ms = int((time.time() if now is None else now) * 1000)
    pipe.zadd(keys.tasks, {task: now_ms for task, _ in hours})
    pipe.zremrangebyscore(keys.tasks, "-inf", now_ms - (KEEP + MARGIN) * 1000)
    pipe.expire(keys.tasks, KEEP + MARGIN)
    pipe.execute()


def _increments(pipe: Any, key: str, prefix: str, counts: Counts) -> None:
    pipe.hincrby(key, prefix + "n", counts.runs)
    if counts.failures:
        pipe.hincrby(key, prefix + "f", counts.failures)
    for index, count in counts.buckets.items():
        pipe.hincrby(key, f"{prefix}h{index}", count)


RECORDER = Recorder()


def timed_run(queue: Queue, job: Job, run: Callable[[Job, Any], T], watch: Any) -> T:
    """``run(job, watch)``, its duration and outcome recorded in the task history of
    ``queue`` (a ``RetryLater`` is no run, nor a job given back because its task's module
    failed to import: neither is recorded)."""
    start = time.monotonic()
    try:
        value = run(job, watch)
    except (RetryLater, TaskImportFailed):
        raise
    except BaseException:
        _record(queue, job, time.monotonic() - start, failed=True)
        raise
    _record(queue, job, time.monotonic() - start, failed=False)
    return value


def _record(queue: Queue, job: Job, seconds: float, *, failed: bool) -> None:
    try:
        RECORDER.add(queue, task_label(job.task), seconds, failed=failed)
    except Exception:  # a bug here must not fail the job
        logger.exception("Could not count a job run in the task history")
