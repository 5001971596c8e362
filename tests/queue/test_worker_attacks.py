"""The queue and the worker under attack: batches of any size, malformed jobs in Redis, tasks
that kill their worker or raise what ``except Exception`` misses, and the worker command's
own manners. Real redis-servers (and Cluster where the path differs), real processes."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import time
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

try:  # Django 6
    from django.tasks.signals import task_finished
except ImportError:  # Django 5.2: the backport
    from django_tasks.signals import task_finished

from django_redislock import get_queue, get_redis
from django_redislock.exceptions import RedisUnavailable
from django_redislock.management.worker_logging import worker_logging
from django_redislock.queue.queue import MAX_BATCH, Queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import live_workers
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, Processes
from tests.support.waiting import Stalls

from ..tasks import DONE

pytestmark = pytest.mark.processes

QUICK = "tests.worker_tasks.quick"


@pytest.fixture
def queues(settings: Any) -> Any:
    def configure(**options: Any) -> Queue:
        settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": options}}
        return get_queue()

    return configure


def done() -> list[dict[str, Any]]:
    return [json.loads(v) for v in get_redis().lrange(DONE, 0, -1)]


def wait_for(predicate: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def drain(concurrency: int = 1, timeout: float = 30) -> int:
    """Run burst workers in this process until nothing is pending; the failures they saw."""
    queue, failed = get_queue(), 0
    deadline = time.monotonic() + timeout
    while True:
        worker = Worker(["default"], concurrency=concurrency, burst=True)
        worker.run()
        failed += worker.failed
        counts = queue.counts()
        if counts["ready"] + counts["scheduled"] + counts["running"] == 0:
            return failed
        assert time.monotonic() < deadline, counts
        time.sleep(0.01)


def swept(queue: Queue) -> bool:
    """No job leased any more (expired leases are taken back by the next fetch)."""
    queue.fetch(0)
    return queue.counts()["running"] == 0


def run_worker(concurrency: int = 1) -> None:
    Worker(["default"], concurrency=concurrency).run()


def quick_jobs(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"task": QUICK, "args": [i], "job_id": f"q{i}"} for i in range(start, start + n)]


# --- 1. batches of any size ---------------------------------------------------------------


def test_a_pop_of_thousands_leases_every_job(real_backend: Backend, queues: Any) -> None:
    queue = queues(LEASE=60)
    made = queue.enqueue_many([{"task": QUICK, "args": [i]} for i in range(4500)])
    assert len(made) == 4500
    assert queue.counts()["ready"] == 4500
    popped = queue.pop(4500)
    assert len(popped) == 4500
    assert len({job.id for job in popped}) == 4500
    assert queue.counts() == job_counts(running=4500)
    assert queue.release(popped) == 4500  # given back, in one call of any size
    assert queue.counts()["ready"] == 4500
    assert {job.attempts for job in queue.jobs("ready", 0, 1000)} == {0}
    again = queue.pop(5000)  # more than there are
    assert len(again) == 4500
    for job in again[:10]:
        assert queue.ack(job)
    assert queue.counts()["running"] == 4490


def test_enqueue_many_of_a_hundred_thousand(redis_backend: Backend, queues: Any) -> None:
    queue = queues()
    made = queue.enqueue_many({"task": QUICK, "args": [i]} for i in range(100_000))
    assert len(made) == 100_000
    assert queue.counts()["ready"] == 100_000
    assert [job.args for job in queue.peek(3)] == [[0], [1], [2]]  # FIFO across batches
    assert queue.purge("ready", batch=MAX_BATCH) == 100_000


def test_bad_batch_sizes_are_refused_before_anything_is_written(
    real_backend: Backend, queues: Any
) -> None:
    queue = queues()
    queue.enqueue_many(quick_jobs(3))
    with pytest.raises(ValueError, match=str(MAX_BATCH)):
        queue.purge("ready", batch=MAX_BATCH + 1)
    with pytest.raises(ValueError, match=str(MAX_BATCH)):
        queue.jobs("ready", 0, MAX_BATCH + 1)
    with pytest.raises(ValueError, match="count"):
        queue.pop(-1)
    with pytest.raises(ValueError, match="concurrency must be an int from 1 to 1000"):
        Worker(["default"], concurrency=MAX_BATCH + 1)
    # A bad job anywhere in a batch: nothing of the batch is written.
    with pytest.raises(TypeError, match="JSON"):
        queue.enqueue_many([*quick_jobs(2000, 10), {"task": QUICK, "args": [object()]}])
    assert queue.counts()["ready"] == 3
    with pytest.raises(CommandError, match="concurrency must be an int from 1 to 1000"):
        call_command("run_queue_worker", "--concurrency", "5000", "--burst")


def test_a_worker_with_a_thousand_threads_runs_every_job(
    redis_backend: Backend, queues: Any
) -> None:
    queue = queues(LEASE=30, RESULT_TTL=600)
    queue.enqueue_many(
        [{"task": "tests.worker_tasks.noop", "args": [i], "job_id": f"n{i}"} for i in range(1500)]
    )
    drain(concurrency=MAX_BATCH)
    assert queue.counts() == job_counts()
    for i in range(1500):
        job = queue.get(f"n{i}")
        assert (job.state, job.result, job.attempts) == ("done", str(i), 1)


# --- 2. a malformed job is dead-lettered alone --------------------------------------------

CORRUPTIONS = {
    "priority": lambda c, key: c.hset(key, "pr", "high"),
    "attempts": lambda c, key: c.hset(key, "a", "many"),
    "due": lambda c, key: c.hset(key, "sc", "soon"),
    "enqueued": lambda c, key: c.hset(key, "e", "[]"),
    "task missing": lambda c, key: c.hdel(key, "t"),
    "args missing": lambda c, key: c.hdel(key, "ar"),
    "bad json": lambda c, key: c.hset(key, "ar", "[1, 2"),
    "hash gone": lambda c, key: c.delete(key),
    "not a hash": lambda c, key: (c.delete(key), c.set(key, "garbage")),
}


def corrupt(queue: Queue, job_id: str, how: str) -> None:
    CORRUPTIONS[how](get_redis(), queue.key("j:" + job_id))


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_pop_sets_a_malformed_job_aside_alone(
    real_backend: Backend, queues: Any, how: str, admin_client: Client
) -> None:
    queue = queues(LEASE=60)
    queue.enqueue_many(quick_jobs(10))
    corrupt(queue, "q4", how)
    popped = queue.pop(10)
    runnable = {job.id for job in popped if job.task}
    assert runnable == {f"q{i}" for i in range(10)} - {"q4"}
    counts = queue.counts()
    assert counts["running"] + counts["dead"] == 10
    if how != "bad json":  # that one is leased: the worker finds out and buries it
        assert [job.id for job in queue.jobs("dead")] == ["q4"]
        dead = queue.get("q4")
        assert dead.state == "dead"
        assert dead.error  # says what was wrong
    # Listing, reading and the admin pages never break on it.
    for state in ("ready", "running", "dead"):
        queue.jobs(state)
    queue.get("q4")
    pages = {}
    for state in ("dead", "ready", "running", "scheduled"):
        response = admin_client.get(reverse("admin:django_redislock_jobs", args=["default", state]))
        assert response.status_code == 200, state
        pages[state] = response.content.decode()
    if how != "bad json":  # the dead page lists it, with the others on their own pages
        assert "q4" in pages["dead"]
    assert "q5" in pages["running"]


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_worker_runs_every_batch_mate_of_a_malformed_job(
    redis_backend: Backend, queues: Any, how: str, processes: Processes
) -> None:
    queue = queues(LEASE=60, MAX_ATTEMPTS=1)
    queue.enqueue_many(quick_jobs(10))
    corrupt(queue, "q3", how)
    worker = processes.start(run_worker)
    wait_for(lambda: queue.counts()["dead"] == 1 and len(done()) == 9)
    os.kill(worker.pid, signal.SIGTERM)
    worker.join(10)
    assert worker.exitcode == 0
    assert sorted(d["n"] for d in done()) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert queue.counts() == job_counts(dead=1)
    dead = queue.jobs("dead")
    assert [job.id for job in dead] == ["q3"]
    assert dead[0].error


def test_a_ready_job_with_an_unparsable_priority_sweeps_cleanly(
    real_backend: Backend, queues: Any
) -> None:
    queue = queues(LEASE=60)
    queue.enqueue("tests.worker_tasks.quick", args=[1], job_id="later", delay=0.05)
    get_redis().hset(queue.key("j:later"), "pr", "urgent")
    queue.enqueue_many(quick_jobs(2))
    time.sleep(0.1)
    popped = queue.pop(10)  # moves the due job to ready, then meets it
    assert {job.id for job in popped} == {"q0", "q1"}
    assert [job.id for job in queue.jobs("dead")] == ["later"]
    assert queue.oldest_ready_age() is None


# --- 3. an attempt is charged when its job starts -----------------------------------------


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_job_that_kills_its_worker_buries_only_itself(
    real_backend: Backend, queues: Any, processes: Processes, concurrency: int
) -> None:
    queue = queues(LEASE=1, MAX_ATTEMPTS=3, RETRY_BACKOFF=0.05, RESULT_TTL=600)
    queue.enqueue_many(quick_jobs(12))
    queue.enqueue("tests.worker_tasks.kill_worker", job_id="killer")
    queue.enqueue_many(quick_jobs(30, start=12))
    deaths = 0
    while queue.get("killer").state != "dead":
        assert deaths < 6, "the killer was never buried"
        worker = processes.start(run_worker, concurrency)
        worker.join(30)
        assert worker.exitcode == -signal.SIGKILL
        deaths += 1
        wait_for(lambda: swept(queue), timeout=10)  # leases ran out
    assert deaths == 3
    killer = queue.get("killer")
    assert killer.attempts == 3
    assert "lease ran out" in killer.error
    assert len(killer.errors) == 3  # one per attempt its worker did not live to report
    assert all("lease ran out" in error.error for error in killer.errors)
    processes.start(run_worker, concurrency)
    wait_for(lambda: sum(queue.counts().values()) == queue.counts()["dead"])  # all settled
    dead = [job for job in queue.jobs("dead") if job.id != "killer"]
    assert {d["n"] for d in done()} >= set(range(42)) - {int(job.id[1:]) for job in dead}
    if concurrency == 1:
        assert dead == []  # no job leased ahead, or finished before it, was charged
    else:
        # The jobs that were running beside it in other threads when the process died were
        # interrupted (started, charged) each time; no other job was touched.
        assert len(dead) <= concurrency - 1
        assert all("lease ran out" in job.error for job in dead)
    for i in range(42):  # every other job finished
        job = queue.get(f"q{i}")
        assert job.state == "done" or job in dead, (i, job.state, job.error)
        assert job.attempts <= 3


def test_jobs_leased_ahead_of_a_killed_worker_come_back_uncharged(
    redis_backend: Backend, queues: Any, processes: Processes
) -> None:
    queue = queues(LEASE=1, MAX_ATTEMPTS=5)
    queue.enqueue_many(quick_jobs(40))
    queue.enqueue("tests.worker_tasks.kill_worker", job_id="killer")
    queue.enqueue_many(quick_jobs(40, start=40))
    worker = processes.start(run_worker)
    worker.join(30)
    assert worker.exitcode == -signal.SIGKILL
    wait_for(lambda: swept(queue), timeout=10)
    assert queue.get("killer").attempts == 1
    never_ran = set(range(80)) - {d["n"] for d in done()}
    assert never_ran  # some were leased ahead of the killer, or still ready
    for n in never_ran:
        assert queue.get(f"q{n}").attempts == 0, n


def test_pop_charges_and_release_gives_the_attempt_back(backend: Backend, queues: Any) -> None:
    queue = queues(LEASE=60)
    queue.enqueue(QUICK, args=[1], job_id="a")
    (job,) = queue.pop()
    assert job.attempts == 1
    assert queue.get("a").attempts == 1  # pop is for callers that run the job now
    assert queue.release([job]) == 1
    assert queue.get("a").attempts == 0
    (ahead,) = queue.fetch(1, charge=False)[0]  # what a worker leases ahead
    assert (ahead.attempts, queue.get("a").attempts) == (1, 0)
    queue.fetch(0, started=[ahead])
    assert queue.get("a").attempts == 1
    assert queue.fail(ahead, ValueError("x"))
    assert queue.get("a").attempts == 1  # charged once


# --- 4. no task can stop the worker -------------------------------------------------------

KINDS = ["exit0", "exit3", "interrupt", "cancelled", "custom"]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_no_exception_a_task_raises_stops_the_worker(
    real_backend: Backend, queues: Any, concurrency: int
) -> None:
    queue = queues(LEASE=30, MAX_ATTEMPTS=2, RETRY_BACKOFF=0.01)
    finished: list[Any] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        finished.append(task_result)

    task_finished.connect(receiver)
    try:
        for kind in KINDS:
            queue.enqueue("tests.worker_tasks.raise_it", args=[kind], job_id=kind)
            queue.enqueue("tests.worker_tasks.raise_async", args=[kind], job_id=f"async-{kind}")
        queue.enqueue_many(quick_jobs(5))
        failures = drain(concurrency)
    finally:
        task_finished.disconnect(receiver)
    assert sorted(d["n"] for d in done()) == list(range(5))
    dead = {job.id: job for job in queue.jobs("dead")}
    assert set(dead) == set(KINDS) | {f"async-{k}" for k in KINDS}
    for job in dead.values():
        assert job.attempts == 2
        assert len(job.errors) == 2
        assert job.error_class in {
            "builtins.SystemExit",
            "builtins.KeyboardInterrupt",
            "asyncio.exceptions.CancelledError",
            "tests.worker_tasks.Custom",
        }, job.error_class
        assert "Traceback" in job.traceback
    failed = [r for r in finished if r.status.name == "FAILED"]
    assert len(failed) == 2 * len(dead)
    assert failures == 2 * len(dead)


def test_a_worker_process_survives_sys_exit_in_a_task(
    redis_backend: Backend, queues: Any, processes: Processes
) -> None:
    queue = queues(LEASE=30, MAX_ATTEMPTS=1)
    queue.enqueue("tests.worker_tasks.raise_it", args=["exit0"], job_id="exit")
    queue.enqueue_many(quick_jobs(3))
    worker = processes.start(run_worker)
    wait_for(lambda: len(done()) == 3)
    assert worker.is_alive()
    assert queue.get("exit").state == "dead"
    os.kill(worker.pid, signal.SIGTERM)
    worker.join(10)
    assert worker.exitcode == 0


# --- 6. the worker command speaks clearly -------------------------------------------------


def test_an_unknown_queue_is_a_command_error(real_backend: Backend) -> None:
    with pytest.raises(CommandError, match="nope"):
        call_command("run_queue_worker", "--queue", "nope", "--burst")


def test_an_idle_worker_exits_promptly_on_sigterm_and_sigint(
    real_backend: Backend, queues: Any, processes: Processes
) -> None:
    queues()
    for signum in (signal.SIGTERM, signal.SIGINT):
        worker = processes.start(run_worker)
        wait_for(lambda w=worker: any(x["pid"] == w.pid for x in live_workers()))
        time.sleep(0.2)  # blocked on Redis, idle
        with Stalls() as stalls:
            start = time.monotonic()
            os.kill(worker.pid, signum)
            worker.join(30)
            end = time.monotonic()
            assert worker.exitcode == 0
            # (Later only if this process stood still meanwhile.)
            assert end - start < 0.3 or stalls.between(start, end), end - start


def test_a_failure_is_logged_once(
    real_backend: Backend, queues: Any, caplog: pytest.LogCaptureFixture
) -> None:
    queue = queues(MAX_ATTEMPTS=1)
    queue.enqueue("tests.worker_tasks.raise_it", args=["kaboom"], job_id="bad")
    # As run_queue_worker logs: its own line per job, not the Tasks framework's too.
    with caplog.at_level(logging.INFO), worker_logging(1, io.StringIO()):
        drain()
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1, [r.getMessage() for r in tracebacks]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]


def test_redis_errors_are_not_wrapped_twice(caplog: pytest.LogCaptureFixture) -> None:
    worker = Worker(["default"])

    def step() -> None:
        raise RedisUnavailable("Redis is unreachable (Connection refused)")

    worker.stopping.set()  # no backoff sleep
    with caplog.at_level(logging.WARNING):
        assert worker.guard.attempt(step) is False
    (record,) = caplog.records
    assert record.getMessage().count("unreachable") == 1


def test_the_worker_warns_at_start_when_redis_may_evict(
    redis_backend: Backend, queues: Any, caplog: pytest.LogCaptureFixture
) -> None:
    queues()
    client = get_redis()
    before = client.config_get("maxmemory-policy")["maxmemory-policy"]
    client.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with caplog.at_level(logging.WARNING, logger="django_redislock"):
            drain()
    finally:
        client.config_set("maxmemory-policy", before)
    warnings = [r.getMessage() for r in caplog.records if "W001" in r.getMessage()]
    assert len(warnings) == 1
    assert "allkeys-lru" in warnings[0]
    assert "noeviction" in warnings[0]  # the hint: what to set instead
    # The test servers run without persistence (--save "" --appendonly no): said too, once.
    [persistence] = [r.getMessage() for r in caplog.records if "W002" in r.getMessage()]
    assert "appendonly" in persistence  # the hint
