"""Soft time limits: a queue's ``TIME_LIMIT`` and a job's ``time_limit``. A job past its
limit gets ``JobTimeLimitExceeded`` in its thread (its finally blocks run), its attempt
fails with the limit as its error, and the worker carries on; jobs ending right at their
limit never leave an exception behind in the worker."""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
import traceback
from typing import Any, cast

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.checks import check_settings
from django_redislock.exceptions import JobTimeLimitExceeded
from django_redislock.queue.jobs import Job
from django_redislock.queue.queue import Queue
from django_redislock.queue.time_limits import META_KEY
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import live_workers
from django_redislock.queue.worker.time_limits import TimeLimits
from django_redislock.tasks.results import signals
from tests.support.fixtures import Backend, Processes

from .. import limit_tasks
from ..limit_tasks import CLEANED, FINISHED, SWALLOWED

SPIN, BUSY = "tests.limit_tasks.spin", "tests.limit_tasks.busy"
STUBBORN, ASLEEP = "tests.limit_tasks.stubborn", "tests.limit_tasks.asleep"
LOGS = "test:limits:logs"  # the worker's warnings and errors
STATUS = "test:limits:status"  # task_finished: "<id> <status>"
LIMIT_ERROR = "django_redislock.exceptions.JobTimeLimitExceeded"


class ToRedis(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "django_redislock.worker" and record.levelno <= logging.ERROR:
            return  # a job's line (dead: ERROR), as expected; anything else is a surprise
        line = f"{record.levelname} {record.getMessage()}"
        if record.exc_info:  # shown when a test finds an unexpected error
            line += "\n" + "".join(traceback.format_exception(*record.exc_info))
        get_redis().rpush(LOGS, line)


def on_finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
    get_redis().rpush(STATUS, f"{task_result.id} {task_result.status}")


def work(concurrency: int) -> None:
    """A worker process that reports its warnings and each task_finished in Redis."""
    logging.getLogger("django_redislock").addHandler(ToRedis(logging.WARNING))
    signals.task_finished.connect(on_finished)
    Worker(["default"], concurrency=concurrency).run()


def wait_for(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def strings(key: str) -> list[str]:
    return [v.decode() for v in get_redis().lrange(key, 0, -1)]


def settled() -> bool:
    counts = get_queue().counts()
    return counts["ready"] + counts["scheduled"] + counts["running"] == 0


def stop(worker: Any) -> None:
    os.kill(worker.pid, signal.SIGTERM)
    worker.join(30)
    assert worker.exitcode == 0


def configure(settings: Any, **options: Any) -> None:
    queue = {"LEASE": 3, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.05, **options}
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": queue}}


# --- the soft limit, in a real worker ---------------------------------------------------


@pytest.mark.processes
@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_job_past_its_limit_is_interrupted_retried_then_dead(
    redis_backend: Backend, settings: Any, processes: Processes, concurrency: int
) -> None:
    configure(settings, TIME_LIMIT=0.3)
    queue = get_queue()
    over = queue.enqueue(SPIN, [1, 30])  # sleeps in a Python loop far past 0.3 s
    under = queue.enqueue(SPIN, [2, 0.05])
    own_longer = queue.enqueue(SPIN, [3, 0.8], time_limit=5)  # its own limit beats 0.3
    own_shorter = queue.enqueue(SPIN, [4, 30], time_limit=0.2)
    coroutine = queue.enqueue(ASLEEP, [5, 30])  # an async task: its coroutine is cancelled
    task = limit_tasks.spin.enqueue(7, 30)  # through the Tasks framework: the queue's limit
    worker = processes.start(work, concurrency)
    wait_for(settled)

    assert queue.get(under.id).result == "2"
    assert queue.get(own_longer.id).result == "3"
    assert sorted(strings(FINISHED)) == ["2", "3"]
    for job, limit in ((over, "0.3"), (own_shorter, "0.2"), (coroutine, "0.3")):
        dead = queue.get(job.id)
        assert dead.state == "dead"
        assert len(dead.errors) == 2  # retried once, then dead (MAX_ATTEMPTS 2)
        for error in dead.errors:
            assert error.error_class == LIMIT_ERROR
            assert error.error == (
                f"JobTimeLimitExceeded: Job {job.id} ({job.task}) in "
                f"'default' ran past its time limit of {limit} s."
            )
        assert strings(STATUS).count(f"{job.id} FAILED") == 2  # task_finished, each attempt
    # Each attempt's finally block ran, interrupted or not.
    assert sorted(strings(CLEANED)) == sorted(["1", "1", "2", "3", "4", "4", "5", "5", "7", "7"])
    assert f"{under.id} SUCCESSFUL" in strings(STATUS)
    task.refresh()
    assert task.status == "FAILED"
    assert [e.exception_class for e in task.errors] == [JobTimeLimitExceeded] * 2
    assert not [line for line in strings(LOGS) if line.startswith(("ERROR", "CRITICAL"))]
    assert worker.is_alive()  # and still working
    assert queue.get(queue.enqueue(SPIN, [6, 0]).id)
    wait_for(lambda: "6" in strings(FINISHED))
    stop(worker)


@pytest.mark.processes
def test_one_slow_job_leaves_the_other_threads_working(
    redis_backend: Backend, settings: Any, processes: Processes
) -> None:
    configure(settings, MAX_ATTEMPTS=1)
    queue = get_queue()
    slow = queue.enqueue(SPIN, [0, 60], time_limit=5)
    worker = processes.start(work, 3)
    wait_for(lambda: queue.get(slow.id).state == "running")
    quick = queue.enqueue_many([{"task": SPIN, "args": [n, 0.01]} for n in range(1, 31)])
    wait_for(lambda: len(strings(FINISHED)) == 30)
    assert queue.get(slow.id).state == "running"  # the others ran while it still ran
    assert all(queue.get(job.id).state == "done" for job in quick)
    wait_for(lambda: queue.get(slow.id).state == "dead")
    assert queue.get(slow.id).error_class == LIMIT_ERROR
    stop(worker)


@pytest.mark.processes
@pytest.mark.parametrize(("concurrency", "task"), [(1, BUSY), (3, SPIN)])
def test_jobs_ending_right_at_their_limit_leave_no_stray_exception(
    redis_backend: Backend, settings: Any, processes: Processes, concurrency: int, task: str
) -> None:
    """120 jobs each running about as long as its limit: the limit fires just before, just
    after, or as the job returns. Each ends done or dead, never anything else, and the
    worker's own code never sees the exception: it keeps running and counting."""
    configure(settings, MAX_ATTEMPTS=1, TIME_LIMIT=0.05)
    queue = get_queue()
    rng = random.Random(15)
    jobs = queue.enqueue_many(
        [{"task": task, "args": [n, 0.05 * rng.uniform(0.9, 1.1)]} for n in range(120)]
    )
    worker = processes.start(work, concurrency)
    wait_for(settled)
    states = [queue.get(job.id) for job in jobs]
    done = [job for job in states if job.state == "done"]
    dead = [job for job in states if job.state == "dead"]
    assert len(done) + len(dead) == 120
    assert dead
    assert all(job.error_class == LIMIT_ERROR for job in dead)
    assert all(job.result == str(job.args[0]) for job in done)
    last = queue.enqueue(SPIN, [1000, 0])
    wait_for(lambda: queue.get(last.id).state == "done")

    def counted() -> bool:  # every job recorded by the worker, as its registry entry says
        [entry] = live_workers()
        return bool(entry["processed"] + entry["failed"] == 121 and entry["jobs"] == [])

    wait_for(counted)
    assert not [line for line in strings(LOGS) if line.startswith(("ERROR", "CRITICAL"))]
    stop(worker)


@pytest.mark.processes
def test_a_job_ignoring_its_limit_loses_its_lease_after_the_grace(
    redis_backend: Backend, settings: Any, processes: Processes
) -> None:
    """A job that swallows JobTimeLimitExceeded is named in a warning its queue's
    TIME_LIMIT_GRACE after its limit,
    and its lease is no longer renewed: it is delivered again (at-least-once) while the
    stuck attempt still runs, instead of holding the job forever."""
    configure(settings, LEASE=1, TIME_LIMIT=0.2, MAX_ATTEMPTS=3, TIME_LIMIT_GRACE=0.2)
    queue = get_queue()
    job = queue.enqueue(STUBBORN, [1, 6])
    worker = processes.start(work, 2)
    wait_for(lambda: len(strings(SWALLOWED)) >= 2)  # a second attempt was limited too
    assert strings(FINISHED) == []  # while the first still runs
    warnings = [line for line in strings(LOGS) if "after its time limit" in line]
    assert warnings
    assert job.id in warnings[0]
    assert "no longer renewed" in warnings[0]
    stop(worker)


# --- the handshake, many times over ------------------------------------------------------


def busy_for(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "ok"


def sleep_for(seconds: float) -> str:
    time.sleep(seconds)  # in C: the exception arrives in the caller's frame, as it returns
    return "ok"


class SlowGate:
    """A watch's gate that pauses before each try (in Python): the limit fires while the
    job's thread is on its way out of the call, as it does on a loaded machine."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def acquire(self, blocking: bool = True) -> bool:
        time.sleep(random.uniform(0, 0.001))
        return self.lock.acquire(blocking)


@pytest.mark.parametrize("slow_gate", [False, True])
def test_no_exception_ever_reaches_the_caller_after_the_call(slow_gate: bool) -> None:
    """1000 calls each ending about when its limit fires: each returns, or raises
    JobTimeLimitExceeded from the call, and nothing arrives afterwards."""
    limits = TimeLimits({"q": 0.002}, lambda queue, job: None)
    queue = cast(Queue, type("Q", (), {"name": "q"})())
    limits.start()
    returned = 0
    messages: list[str] = []
    try:
        for n in range(1000):
            watch = limits.watch(queue, Job(str(n), "q", "t"))
            assert watch is not None
            if slow_gate:
                watch.gate = cast(Any, SlowGate())
            func = (busy_for, sleep_for)[n % 2]
            try:
                assert watch.call(func, (0.002 * random.uniform(0.7, 1.3),), {}) == "ok"
                returned += 1
            except JobTimeLimitExceeded as exc:
                messages.append(str(exc))
            for _ in range(5000):  # a stray exception would be raised in this loop
                pass
    finally:
        limits.stop()
    assert messages
    assert returned > 0
    assert all(m.endswith("ran past its time limit of 0.002 s.") for m in messages)
    assert limits.watches == {}


def test_a_call_blocked_in_c_sees_the_limit_only_when_it_returns() -> None:
    """The soft limit's known limit: a thread in a C call (here time.sleep) cannot be
    interrupted; the exception comes as the call returns. Only a process can be stopped."""
    limits = TimeLimits({"q": 0.05}, lambda queue, job: None)
    limits.start()
    try:
        watch = limits.watch(cast(Queue, type("Q", (), {"name": "q"})()), Job("c", "q", "t"))
        assert watch is not None
        start = time.monotonic()
        with pytest.raises(JobTimeLimitExceeded, match=r"time limit of 0\.05 s"):
            watch.call(sleep_for, (0.3,), {})
        assert time.monotonic() - start >= 0.3  # the sleep ran to its end
    finally:
        limits.stop()


# --- enqueue and the system check -------------------------------------------------------


def test_time_limit_is_checked_before_anything_is_written(backend: Backend) -> None:
    queue = get_queue()
    for bad, error in (
        ("5", TypeError),
        (True, TypeError),
        (0, ValueError),
        (-1, ValueError),
        (float("nan"), ValueError),
        (10**9, ValueError),
    ):
        with pytest.raises(error, match="time_limit"):
            queue.enqueue(SPIN, [1, 0], time_limit=bad)
        with pytest.raises(error, match="time_limit"):
            queue.enqueue_many([{"task": SPIN, "args": [1, 0], "time_limit": bad}])
    with pytest.raises(TypeError, match=r"meta\['time_limit'\]"):  # as enqueue would read it
        queue.enqueue(SPIN, [1, 0], meta={META_KEY: "3"})
    assert queue.counts()["ready"] == 0
    one = queue.enqueue(SPIN, [1, 0], time_limit=2.5, meta={"a": 1})
    [many] = queue.enqueue_many([{"task": SPIN, "args": [1, 0], "time_limit": 7}])
    assert queue.get(one.id).meta == one.meta == {"a": 1, META_KEY: 2.5}
    assert queue.get(many.id).meta == {META_KEY: 7}
    assert queue.enqueue(SPIN, [1, 0]).meta == {}
    # A job's meta enqueued again keeps its limit; time_limit= replaces it.
    assert queue.enqueue(SPIN, [1, 0], meta=one.meta).meta == {"a": 1, META_KEY: 2.5}
    assert queue.enqueue(SPIN, [1, 0], meta=one.meta, time_limit=1).meta == {"a": 1, META_KEY: 1}


@pytest.mark.parametrize("value", [0, -1, "10", True, float("inf"), 10**400, [5]])
def test_check_reports_a_wrong_time_limit(settings: Any, value: Any) -> None:
    settings.REDISLOCK = {"QUEUES": {"default": {"TIME_LIMIT": value}}}
    [error] = check_settings()
    assert error.id == "django_redislock.E009"
    assert "TIME_LIMIT" in error.msg
    assert "None" in error.msg
    assert error.hint


@pytest.mark.parametrize("value", [None, 0.5, 30, 365 * 86400])
def test_check_accepts_a_time_limit(settings: Any, value: Any) -> None:
    settings.REDISLOCK = {"QUEUES": {"default": {"TIME_LIMIT": value}}}
    assert check_settings() == []


def test_a_worker_refuses_a_wrong_time_limit(settings: Any) -> None:
    settings.REDISLOCK = {"QUEUES": {"default": {"TIME_LIMIT": -2}}}
    with pytest.raises(ValueError, match=r"REDISLOCK\['QUEUES'\]\['default'\]\['TIME_LIMIT'\]"):
        Worker(["default"])
