"""Workers under fire: real worker processes SIGKILLed and SIGTERMed mid-run, delayed jobs
by the thousand, and a redis-server killed with ``kill -9`` and brought back from its AOF.

The poison-job and pickled-payload cases live in ``test_worker.py``
(``test_poison_and_invalid_jobs_go_to_the_dead_set``)."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from django_redislock import get_queue, get_redis
from django_redislock.exceptions import RedisUnavailable
from django_redislock.queue.worker import keeping as keeping_module
from django_redislock.queue.worker import leases as leases_module
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import live_workers
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, Processes
from tests.support.servers import RedisServer

from ..tasks import DONE, STARTED

pytestmark = pytest.mark.processes

# A short lease, so that a killed worker's jobs come back within a second; attempts to spare,
# so that a job caught by several kills (or by Redis going away) is still run, never buried.
QUEUES = {"default": {"LEASE": 1, "MAX_ATTEMPTS": 50, "RETRY_BACKOFF": 0.05}}
EMPTY = job_counts()
TRACKED = "tests.tasks.tracked"


@pytest.fixture
def real(real_backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return real_backend


LOST = "test:lost"  # the jobs a worker reported it had lost the lease of


class ReportLost(logging.Handler):
    """Records, in Redis, each job a worker warns it lost the lease of: such a job may run
    again elsewhere while it still runs here (a worker stalled past its lease, as a loaded
    machine may do), and that warning is the worker's promise to say so."""

    def emit(self, record: logging.LogRecord) -> None:
        if "lost its lease" in record.msg:
            get_redis().rpush(LOST, str(record.args[0]))  # type: ignore[index]


def work(concurrency: int) -> None:
    leases_module.logger.addHandler(ReportLost(logging.WARNING))
    Worker(["default"], concurrency=concurrency).run()


def markers(key: str) -> list[dict[str, Any]]:
    return [json.loads(v) for v in get_redis().lrange(key, 0, -1)]


def done() -> list[dict[str, Any]]:
    return markers(DONE)


def started() -> list[dict[str, Any]]:
    return markers(STARTED)


def settled() -> bool:
    """Nothing left to run: every job acknowledged (or dead)."""
    counts = get_queue().counts()
    return counts["ready"] + counts["scheduled"] + counts["running"] == 0


def wait_for(predicate: Any, timeout: float = 30, every: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)


def pid_of(worker_id: str) -> int:
    return int(worker_id.split(":")[-2])  # host:pid:token


def stop_all(workers: list[Any]) -> None:
    for worker in workers:
        os.kill(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.join(10)
        assert worker.exitcode == 0, f"worker {worker.pid} exited with {worker.exitcode}"


# --- SIGKILL at random moments ----------------------------------------------------------

JOBS = 6_000
KILLS = 10
# Kills stop before the queue runs dry, so that every victim dies with work in hand.
KILL_WHILE_READY = 500
# Each job takes a little time, so that the run outlasts a dozen kills on any machine.
JOB_SECONDS = 0.002


@pytest.mark.timeout(120)
def test_workers_killed_at_random_lose_no_job(real: Backend, processes: Processes) -> None:
    queue = get_queue()
    rng = random.Random(20240611)
    ids: list[str] = []
    for first in range(0, JOBS, 1000):
        batch = range(first, first + 1000)
        jobs = queue.enqueue_many([{"task": TRACKED, "args": [n, JOB_SECONDS]} for n in batch])
        ids.extend(job.id for job in jobs)
    workers = [processes.start(work, 2) for _ in range(4)]
    killing_since = time.monotonic()
    killed: set[int] = set()
    orphaned: set[int] = set()  # jobs leased to a worker at the moment it died
    while len(killed) < KILLS and queue.counts()["ready"] > KILL_WHILE_READY:
        time.sleep(rng.uniform(0.2, 0.6))
        victim = workers.pop(rng.randrange(len(workers)))
        # Frozen first: the leases it holds now are exactly the ones it dies with.
        os.kill(victim.pid, signal.SIGSTOP)
        for job in queue.jobs("running", 0, 1000):
            if job.worker and pid_of(job.worker) == victim.pid:
                orphaned.add(job.args[0])
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(5)
        killed.add(victim.pid)
        workers.append(processes.start(work, 2))
    killing_for = time.monotonic() - killing_since
    wait_for(settled, 90)

    assert len(killed) >= 3, "the queue drained before the killer got going"
    assert orphaned, "no worker was killed in the middle of a job"
    assert queue.counts() == EMPTY
    runs = Counter(d["n"] for d in done())
    assert set(runs) == set(range(JOBS))  # none lost
    starts = Counter(s["n"] for s in started())
    started_on_killed = {s["n"] for s in started() if s["pid"] in killed}
    # A job runs again only when a worker died with it, or when the worker that ran it
    # said it had lost its lease (stalled past it); never silently.
    by_id = {job_id: n for n, job_id in enumerate(ids)}
    reported = {by_id[job_id.decode()] for job_id in get_redis().lrange(LOST, 0, -1)}
    explained = started_on_killed | reported
    duplicated = {n for n, count in runs.items() if count > 1}
    assert duplicated <= explained, sorted(duplicated - explained)
    assert {n for n, count in starts.items() if count > 1} <= explained
    survivor_starts = Counter(s["n"] for s in started() if s["pid"] not in killed)
    twice = {n for n, count in survivor_starts.items() if count > 1}
    assert twice <= reported  # a worker that lived ran each job at most once, or said so
    print(
        f"\n{len(killed)} kills in {killing_for:.1f}s, {len(orphaned)} jobs orphaned, "
        f"{len(duplicated)} run twice, {len(reported)} leases lost by live workers"
    )
    stop_all(workers)


# --- SIGTERM ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_sigterm_finishes_running_jobs_and_leases_nothing_more(
    real: Backend, processes: Processes
) -> None:
    queue = get_queue()
    total, concurrency = 10, 4
    worker = processes.start(work, concurrency)
    queue.enqueue_many([{"task": TRACKED, "args": [n, 1.0]} for n in range(total)])
    wait_for(lambda: len(started()) == concurrency)
    running = {job.args[0] for job in queue.jobs("running")}
    assert running == {s["n"] for s in started()}

    os.kill(worker.pid, signal.SIGTERM)
    worker.join(10)
    assert worker.exitcode == 0
    assert sorted(d["n"] for d in done()) == sorted(running)  # the running ones finished
    assert queue.counts() == {**EMPTY, "ready": total - concurrency}  # nothing left leased
    assert {job.args[0] for job in queue.jobs("ready")} == set(range(total)) - running

    successor = processes.start(work, concurrency)
    wait_for(lambda: settled() and len(done()) >= total)
    assert queue.counts() == EMPTY
    assert sorted(d["n"] for d in done()) == list(range(total))  # each exactly once
    assert sorted(s["n"] for s in started()) == list(range(total))
    stop_all([successor])


SLOW = 5


def leased_ahead_of_a_slow_job(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Quick jobs with a slow one (n=SLOW, 1.5 s) among them. One worker at a time leases
    ahead while jobs are quick (here: under 1 s, whatever the machine's load), so the slow
    one is leased with others behind it."""
    monkeypatch.setattr(leases_module, "QUICK", 1.0)
    return [{"task": TRACKED, "args": [n, 1.5 if n == SLOW else 0]} for n in range(41)]


def accounted_for(counts: dict[str, int], total: int) -> bool:
    """Every finished job acknowledged: the others are ready or leased."""
    return counts["ready"] + counts["running"] + len(done()) == total


def test_jobs_leased_ahead_go_back_at_once_on_sigterm(
    real: Backend, processes: Processes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeping_module, "GIVE_BACK_AFTER", 60.0)  # only the stop gives back
    queue = get_queue()
    queue.enqueue_many(leased_ahead_of_a_slow_job(monkeypatch))
    worker = processes.start(work, 1)
    wait_for(lambda: SLOW in {s["n"] for s in started()})
    # The slow one runs with jobs leased behind it; the quick ones before it have finished,
    # acknowledged within ACK_HOLD though no fetch follows them.
    wait_for(lambda: accounted_for(queue.counts(), 41))
    assert queue.counts()["running"] > 1
    assert {d["n"] for d in done()} == set(range(SLOW))
    os.kill(worker.pid, signal.SIGTERM)
    # Back at once: while the slow job still runs, only it is leased.
    wait_for(lambda: queue.counts() == {**EMPTY, "ready": 40 - SLOW, "running": 1}, timeout=1)
    assert SLOW not in {d["n"] for d in done()}
    worker.join(10)
    assert worker.exitcode == 0
    assert sorted(d["n"] for d in done()) == list(range(SLOW + 1))  # the slow one finished
    ready = queue.jobs("ready")
    assert [job.args[0] for job in ready] == list(range(SLOW + 1, 41))  # in order, in front
    assert {(job.attempts, job.workers) for job in ready} == {(0, ())}  # not an attempt

    successor = processes.start(work, 1)
    wait_for(lambda: settled() and len(done()) >= 41)
    assert sorted(d["n"] for d in done()) == list(range(41))  # each exactly once
    stop_all([successor])


def test_jobs_leased_ahead_keep_their_leases_behind_a_long_job(
    real: Backend, processes: Processes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeping_module, "GIVE_BACK_AFTER", 60.0)  # they stay leased ahead
    queue = get_queue()
    queue.enqueue_many(leased_ahead_of_a_slow_job(monkeypatch))  # the slow job > LEASE
    worker = processes.start(work, 1)
    wait_for(lambda: settled() and len(done()) >= 41)
    # Renewed while they waited: not one lease ran out, so each ran once, in order.
    assert [d["n"] for d in done()] == list(range(41))
    stop_all([worker])


def test_a_long_job_gives_back_the_jobs_leased_behind_it(
    real: Backend, processes: Processes, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = get_queue()
    queue.enqueue_many(leased_ahead_of_a_slow_job(monkeypatch))
    worker = processes.start(work, 1)
    wait_for(lambda: SLOW in {s["n"] for s in started()})
    # Within GIVE_BACK_AFTER (and a keeper round) of its start, only the slow job is leased
    # and the rest are there for any worker.
    wait_for(lambda: queue.counts() == {**EMPTY, "ready": 40 - SLOW, "running": 1}, timeout=1)
    assert SLOW not in {d["n"] for d in done()}
    wait_for(lambda: settled() and len(done()) >= 41)
    assert sorted(d["n"] for d in done()) == list(range(41))  # each exactly once
    assert [d["n"] for d in done()] == list(range(41))  # in order
    stop_all([worker])


# --- delayed jobs -------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_thousand_delayed_jobs_never_start_early(real: Backend, processes: Processes) -> None:
    queue = get_queue()
    rng = random.Random(7)
    workers = [processes.start(work, 2) for _ in range(2)]
    wait_for(lambda: len(live_workers()) == 2)
    jobs = queue.enqueue_many(
        [{"task": TRACKED, "args": [n], "delay": rng.uniform(0, 3)} for n in range(1000)]
    )
    due = {job.args[0]: job.score for job in jobs}
    # Polled rarely: any command wakes redis-server's event loop, which ends blocking calls
    # that timed out sooner (else ~1/hz late), and would flatter the lateness reported.
    wait_for(lambda: settled() and len(done()) >= 1000, every=0.5)

    starts = started()
    assert sorted(s["n"] for s in starts) == list(range(1000))  # every job ran, once
    # Due times are whole ms of the Redis clock (this machine's); a start time is not rounded.
    early = [(s["n"], due[s["n"]] - s["at"]) for s in starts if s["at"] < due[s["n"]] - 1]
    assert early == []
    lateness = sorted(s["at"] - due[s["n"]] for s in starts)
    p50, p99 = lateness[len(lateness) // 2], lateness[len(lateness) * 99 // 100]
    print(f"\nlateness: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {lateness[-1]:.1f} ms")
    stop_all(workers)


# --- Redis killed and restarted from its AOF ------------------------------------------------

# Enqueues acknowledged before the kill, and after the restart, before the producer stops.
PRODUCE_BEFORE = PRODUCE_AFTER = 400


@pytest.fixture
def aof_redis(settings: Any) -> Iterator[RedisServer]:
    with RedisServer("--appendonly", "yes", "--appendfsync", "always") as server:
        settings.REDISLOCK = {"URL": server.url, "QUEUES": QUEUES}
        yield server


def produce(stop: Any, reports: Any) -> None:
    """Enqueue jobs one by one until ``stop``; report each n whose enqueue returned, then
    None and how many calls failed."""
    queue = get_queue()
    n = failed = 0
    while not stop.is_set():
        try:
            queue.enqueue(TRACKED, args=[n], job_id=f"job-{n}")
        except (RedisUnavailable, redis.ConnectionError):
            failed += 1
            time.sleep(0.01)
            continue
        reports.put(n)
        n += 1
        time.sleep(0.001)
    reports.put(None)
    reports.put(failed)


@pytest.mark.timeout(90)
def test_redis_killed_and_restarted_from_aof_loses_no_acknowledged_job(
    aof_redis: RedisServer, processes: Processes
) -> None:
    queue = get_queue()
    workers = [processes.start(work, 2) for _ in range(2)]
    wait_for(lambda: len(live_workers()) == 2)
    stop, reports = processes.event(), processes.queue()
    producer = processes.start(produce, stop, reports)
    acknowledged = [reports.get(timeout=30) for _ in range(PRODUCE_BEFORE)]
    wait_for(lambda: len(done()) >= 50)  # the workers are at it too
    done_before = len(done())

    aof_redis.kill()  # SIGKILL: no shutdown, no last write
    time.sleep(0.5)  # workers and producer run into the dead server
    aof_redis.start()  # same port, same directory: it loads its AOF
    done_after_restart = {d["n"] for d in done()}
    assert len(done()) >= done_before  # every acknowledged write survived (fsync always)
    acknowledged += [reports.get(timeout=30) for _ in range(PRODUCE_AFTER)]
    stop.set()
    while (n := reports.get(timeout=30)) is not None:
        acknowledged.append(n)
    failed_calls = reports.get(timeout=10)
    producer.join(10)
    assert producer.exitcode == 0
    assert failed_calls > 0, "the producer never met the dead server"
    wait_for(lambda: settled() and set(acknowledged) <= {d["n"] for d in done()}, 60)

    assert queue.counts() == EMPTY
    assert acknowledged == list(range(len(acknowledged)))
    assert {d["n"] for d in done()} == set(acknowledged)  # every acknowledged job ran
    assert {d["n"] for d in done()} - done_after_restart  # workers ran jobs after the restart
    assert all(worker.is_alive() for worker in workers)
    wait_for(lambda: {w["pid"] for w in live_workers()} == {w.pid for w in workers})
    print(f"\n{len(acknowledged)} enqueues acknowledged, {failed_calls} failed calls")
    stop_all(workers)
