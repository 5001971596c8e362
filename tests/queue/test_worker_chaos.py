"""The queue and its workers under a chaos suite's attacks, on real redis-servers and real
worker processes: Redis refusing scripts (out of memory), connections killed from outside,
scripts flushed, the server restarted, workers frozen past their leases and killed at
random. Whatever happens, every job ends done or dead (dead only after failing itself
MAX_ATTEMPTS times) and no worker stops because of Redis or of a task."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from django_redislock import get_queue, get_redis
from django_redislock.exceptions import RedisUnavailable
from django_redislock.queue.queue import MAX_DELAY, Queue
from django_redislock.queue.worker.channel import Channel
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import live_workers
from tests.support.counts import job_counts
from tests.support.fixtures import Processes
from tests.support.servers import RedisServer

from ..tasks import STARTED

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

pytestmark = pytest.mark.processes

NAP = "tests.queue.test_worker_chaos.nap"


@task()
def nap(n: int, seconds: float = 0.001) -> int:
    """Takes a little time and writes nothing (a write refused by Redis would fail it)."""
    time.sleep(seconds)
    return n


@pytest.fixture
def server(settings: Any) -> Iterator[RedisServer]:
    """A redis-server of the test's own (the attacks reconfigure, flush and restart it)."""
    with RedisServer() as own:
        settings.REDISLOCK = {
            "URL": own.url,
            "QUEUES": {"default": {"LEASE": 2, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.01}},
        }
        yield own


def wait_for(predicate: Any, timeout: float = 60, every: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)


def run_worker(concurrency: int = 1) -> None:
    Worker(["default"], concurrency=concurrency).run()


def naps(n: int, seconds: float = 0.001) -> list[dict[str, Any]]:
    return [{"task": NAP, "args": [i, seconds], "job_id": f"j{i}"} for i in range(n)]


def states(queue: Queue, ids: list[str]) -> dict[str, str]:
    """Each job's state letter: k done (result kept), d dead, r/s/x pending, - missing."""
    client = get_redis()
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(queue.key("j:" + job_id), "s")
        pipe.hget(queue.key("result:" + job_id), "s")
    replies = pipe.execute()
    found = {}
    for i, job_id in enumerate(ids):
        pending, result = replies[2 * i], replies[2 * i + 1]
        found[job_id] = (pending or result or b"-").decode()
    return found


def settled(queue: Queue) -> bool:
    counts = queue.counts()
    return counts["ready"] + counts["scheduled"] + counts["running"] == 0


def all_done(queue: Queue, ids: list[str], dead: int = 0) -> None:
    found = states(queue, ids)
    assert {s for s in found.values()} == {"k"}, [
        (job.id, job.attempts, job.errors) for job in queue.jobs("dead", 0, 5)
    ]
    assert queue.counts() == job_counts(dead=dead)


def stop(worker: Any) -> None:
    assert worker.is_alive(), f"worker exited with {worker.exitcode}"
    # A worker just started may not have its signal handlers yet (it registers first).
    wait_for(lambda: worker.pid in {w["pid"] for w in live_workers()}, 30)
    time.sleep(0.2)
    os.kill(worker.pid, signal.SIGTERM)
    worker.join(15)
    assert worker.exitcode == 0


# --- Redis refuses the worker's scripts (maxmemory reached) --------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("concurrency", [1, 4])
def test_scripts_refused_for_a_while_stop_no_worker_and_lose_no_job(
    server: RedisServer, processes: Processes, concurrency: int
) -> None:
    """Every write refused (OOM) now and then while a worker drains: error replies come in
    the middle of the worker's unread replies, and its outcomes cannot be recorded."""
    queue = get_queue()
    ids = [f"j{i}" for i in range(3000)]
    queue.enqueue_many(naps(3000))
    worker = processes.start(run_worker, concurrency)
    # Started: a worker that finds Redis refusing writes as it starts stops at once (its
    # first heartbeat fails), which is not what this test is about.
    wait_for(lambda: len(live_workers()) == 1, 30)
    admin = server.client()
    for _ in range(15):
        time.sleep(0.1)
        admin.config_set("maxmemory", 1)  # every script that may write: OOM
        time.sleep(0.1)
        admin.config_set("maxmemory", 0)
        if settled(queue):
            break
    wait_for(lambda: settled(queue), 90)
    assert worker.is_alive(), f"the worker died: exit code {worker.exitcode}"
    all_done(queue, ids)
    stop(worker)


@task()
def fail_slowly(seconds: float) -> None:
    """Marks its start (if Redis takes writes), then fails once ``seconds`` have passed."""
    with contextlib.suppress(redis.ResponseError):
        get_redis().rpush(STARTED, "1")
    time.sleep(seconds)
    raise ValueError("failed on its own")


def test_a_failure_recorded_while_redis_refuses_writes_keeps_the_worker(
    server: RedisServer, processes: Processes
) -> None:
    """A job starts and fails while Redis refuses writes (out of memory): its START was
    refused, and reading that reply before recording the failure must not end the worker."""
    queue = get_queue()
    worker = processes.start(run_worker, 1)
    wait_for(lambda: len(live_workers()) == 1)
    queue.enqueue(
        "tests.queue.test_worker_chaos.fail_slowly", args=[0.5], job_id="failing", delay=0.5
    )
    admin = server.client()
    admin.config_set("maxmemory", 1)  # the job is leased, started and fails in it
    time.sleep(2.0)
    admin.config_set("maxmemory", 0)
    wait_for(lambda: queue.get("failing").state == "dead", 30)
    assert worker.is_alive(), f"the worker died: exit code {worker.exitcode}"
    failing = queue.get("failing")
    assert failing.attempts == 2
    assert [e.error for e in failing.errors] == ["ValueError: failed on its own"] * 2
    queue.enqueue_many(naps(20))
    wait_for(lambda: settled(queue), 30)
    all_done(queue, [f"j{i}" for i in range(20)], dead=1)
    stop(worker)


def test_a_refused_script_leaves_the_channel_in_step(server: RedisServer) -> None:
    """A script Redis refuses (out of memory) among the replies a worker reads later: the
    channel starts afresh, and the replies read next answer the commands sent next."""
    queue = get_queue()
    queue.enqueue_many(naps(3))
    ahead, _, _ = queue.fetch(2, worker="w1", charge=False)  # leased ahead, not started
    channel = Channel(queue, "w1", lambda lost: None, lambda q, finished: None)
    admin = server.client()
    admin.config_set("maxmemory", 1)
    channel.note([], [ahead[0]])  # its START is refused (its first write: out of memory)
    with pytest.raises(RedisUnavailable):
        channel.sync()
    admin.config_set("maxmemory", 0)
    assert not channel.fetching
    assert not channel.pending
    jobs = channel.fetch(1, []).jobs
    assert [job.id for job in jobs] == ["j2"]
    assert not channel.fetching
    assert not channel.pending
    channel.note([], [ahead[1]])
    channel.sync()
    assert queue.get("j1").attempts == 1
    channel.close()


# --- connections killed, scripts flushed, the server restarted ----------------------------


def counts_when_reachable(queue: Queue) -> dict[str, int] | None:
    """The queue's counts, or None when this test's own connection was just killed."""
    try:
        return queue.counts()
    except (redis.ConnectionError, RedisUnavailable):
        return None


@pytest.mark.timeout(180)
@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("attack", ["client kill", "script flush"])
def test_a_drain_under_fire_completes_every_job(
    server: RedisServer, processes: Processes, concurrency: int, attack: str
) -> None:
    """Every normal connection killed (``CLIENT KILL TYPE normal``), or every script flushed,
    every 100 ms while a worker drains 5,000 jobs: each one ends done, none dead."""
    queue = get_queue()
    total = 5000
    ids = [f"j{i}" for i in range(total)]
    queue.enqueue_many(naps(total, 0.0002))
    admin = server.client()
    worker = processes.start(run_worker, concurrency)
    attacks = 0
    deadline = time.monotonic() + 150
    while True:
        time.sleep(0.1)
        if attack == "client kill":
            admin.execute_command("CLIENT", "KILL", "TYPE", "normal")
        else:
            admin.script_flush()
        attacks += 1
        counts = counts_when_reachable(queue)
        if counts is not None and counts["ready"] + counts["scheduled"] + counts["running"] == 0:
            break
        assert time.monotonic() < deadline, counts
    assert attacks >= 3, "the drain was over before the attacks began"
    assert worker.is_alive(), f"the worker died: exit code {worker.exitcode}"
    all_done(queue, ids)
    stop(worker)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("aof", [False, True])
def test_workers_carry_on_after_redis_restarts(
    settings: Any, processes: Processes, concurrency: int, aof: bool
) -> None:
    """The server restarted (with its AOF, or forgetting everything) under two workers and
    a producer: the workers reconnect by themselves (channel, waiter, kept connection) and
    run every job enqueued after; with the AOF, every job enqueued before ends done too."""
    args = ("--appendonly", "yes", "--appendfsync", "always") if aof else ()
    with RedisServer(*args) as own:
        settings.REDISLOCK = {
            "URL": own.url,
            "QUEUES": {"default": {"LEASE": 1, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.01}},
        }
        queue = get_queue()
        workers = [processes.start(run_worker, concurrency) for _ in range(2)]
        wait_for(lambda: len(live_workers()) == 2)
        before = [{"task": NAP, "args": [i, 0.002], "job_id": f"b{i}"} for i in range(1000)]
        queue.enqueue_many(before)
        time.sleep(0.3)  # the workers are at it
        own.restart()
        time.sleep(0.5)  # idle workers reconnect, or find the server empty
        after = [{"task": NAP, "args": [i, 0.0], "job_id": f"a{i}"} for i in range(500)]
        for spec in after:  # one by one: each wakes a blocked worker
            queue.enqueue(**spec)
        ids = [spec["job_id"] for spec in after]
        if aof:
            ids += [spec["job_id"] for spec in before]
        wait_for(lambda: settled(queue), 60)
        found = states(queue, ids)
        assert {s for s in found.values()} == {"k"}, {i: s for i, s in found.items() if s != "k"}
        assert queue.counts()["dead"] == 0
        for worker in workers:
            stop(worker)


# --- a worker frozen past its leases ------------------------------------------------------


def freeze_holding_jobs(pid: int, queue: Queue) -> set[str]:
    """SIGSTOP the worker ``pid`` at a moment it holds running jobs, and return their ids.
    Between two jobs it holds none, so a stop that lands there is undone and tried again."""
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        frozen = {job.id for job in queue.jobs("running", 0, 1000)}
        if frozen:
            return frozen
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.005)
    return set()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_worker_frozen_past_its_leases_wakes_without_harm(
    server: RedisServer, processes: Processes, settings: Any, concurrency: int
) -> None:
    """SIGSTOP a worker holding leases (running and leased ahead) until they run out; another
    worker takes its jobs; SIGCONT: its late starts, acknowledgements and renewals find
    their leases lost and change nothing. Every job ends done, none dead."""
    settings_queues = {"default": {"LEASE": 1, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.01}}
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": settings_queues}
    queue = get_queue()
    total = 400
    ids = [f"j{i}" for i in range(total)]
    queue.enqueue_many(naps(total, 0.01))
    sleeper = processes.start(run_worker, concurrency)
    wait_for(lambda: queue.counts()["ready"] < total - 20)
    frozen = freeze_holding_jobs(sleeper.pid, queue)
    assert frozen
    time.sleep(2.5)  # its leases run out
    other = processes.start(run_worker, concurrency)
    wait_for(lambda: settled(queue), 60)
    all_done(queue, ids)
    os.kill(sleeper.pid, signal.SIGCONT)
    time.sleep(2.0)  # it finishes what it held, and finds nothing more
    all_done(queue, ids)
    queue.enqueue_many(naps(50))  # both still work
    wait_for(lambda: settled(queue), 30)
    all_done(queue, ids)
    stop(sleeper)
    stop(other)


# --- workers killed at random -------------------------------------------------------------


def charged_on(queue: Queue, worker_pid: int) -> set[str]:
    """The jobs leased to the (frozen) worker ``worker_pid`` whose attempt was charged:
    started, as far as Redis knows."""
    client = get_redis()
    charged = set()
    for job in queue.jobs("running", 0, 1000):
        if job.worker and int(job.worker.split(":")[-2]) == worker_pid:
            lease, started = client.hmget(queue.key("j:" + job.id), "l", "sl")
            if lease is not None and lease == started:
                charged.add(job.id)
    return charged


@pytest.mark.timeout(180)
@pytest.mark.parametrize("concurrency", [1, 3])
def test_workers_killed_at_random_bury_no_innocent_job(
    server: RedisServer, processes: Processes, concurrency: int
) -> None:
    """MAX_ATTEMPTS=2, quick jobs, workers SIGKILLed at random moments (mid-job, with START
    notes unread, mid-fetch, in the middle of a SIGTERM's drain): no job is lost, and a job
    is dead only if two of the kills caught it started."""
    rng = random.Random(4242 + concurrency)
    queue = get_queue()
    total = 8000
    ids = [f"j{i}" for i in range(total)]
    queue.enqueue_many(naps(total, 0.001))
    workers = [processes.start(run_worker, concurrency) for _ in range(3)]
    caught: Counter[str] = Counter()
    kills = 0
    while kills < 20 and queue.counts()["ready"] > 300:
        time.sleep(rng.uniform(0.05, 0.3))
        victim = workers.pop(rng.randrange(len(workers)))
        if rng.random() < 0.4:  # killed while draining after a SIGTERM
            os.kill(victim.pid, signal.SIGTERM)
            time.sleep(rng.uniform(0, 0.03))
        os.kill(victim.pid, signal.SIGSTOP)
        time.sleep(0.05)  # what it had sent reaches Redis
        caught.update(charged_on(queue, victim.pid))
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(5)
        kills += 1
        workers.append(processes.start(run_worker, concurrency))
    assert kills >= 5, "the queue drained before the killer got going"
    wait_for(lambda: settled(queue), 90)
    found = states(queue, ids)
    assert set(found.values()) <= {"k", "d"}, "a job was lost"
    dead = {job_id for job_id, state in found.items() if state == "d"}
    assert caught, "no kill caught a job started"
    assert dead <= {job_id for job_id, n in caught.items() if n >= 2}
    print(f"\n{kills} kills caught {len(caught)} started jobs; {len(dead)} dead")
    for worker in workers:
        stop(worker)


# --- tasks that end their worker, or hang -------------------------------------------------


@task()
def exit_now() -> None:
    os._exit(0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_task_calling_os_exit_buries_only_itself(
    server: RedisServer, processes: Processes, concurrency: int
) -> None:
    """``os._exit(0)`` skips every handler: the worker is gone, as if killed. Its attempt
    was charged when it started: after MAX_ATTEMPTS such exits it is dead, and nothing else
    is lost."""
    queue = get_queue()
    queue.enqueue_many(naps(10))
    queue.enqueue("tests.queue.test_worker_chaos.exit_now", job_id="exit")
    queue.enqueue_many([{"task": NAP, "args": [i], "job_id": f"k{i}"} for i in range(30)])
    exits = 0
    while queue.get("exit").state != "dead":
        assert exits < 4, "the exiting job was never buried"
        worker = processes.start(run_worker, concurrency)
        worker.join(30)
        assert worker.exitcode == 0
        exits += 1
        wait_for(lambda: queue.fetch(0) is not None and queue.counts()["running"] == 0, 10)
    assert exits == 2
    assert queue.get("exit").attempts == 2
    worker = processes.start(run_worker, concurrency)
    wait_for(lambda: settled(queue), 30)
    found = states(queue, [f"j{i}" for i in range(10)] + [f"k{i}" for i in range(30)])
    assert set(found.values()) <= {"k", "d"}
    if concurrency == 1:
        assert set(found.values()) == {"k"}
    stop(worker)


@task()
def hang(n: int, seconds: float) -> int:
    get_redis().rpush(STARTED, str(n))
    time.sleep(seconds)
    return n


@pytest.mark.timeout(60)
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_task_hanging_past_its_lease_runs_once(
    server: RedisServer, processes: Processes, concurrency: int
) -> None:
    """A job running three leases long: its worker renews its lease, so the other worker
    never takes it; it runs once and ends done."""
    queue = get_queue()  # LEASE 2
    queue.enqueue("tests.queue.test_worker_chaos.hang", args=[1, 6.0], job_id="hung")
    queue.enqueue_many(naps(50))
    workers = [processes.start(run_worker, concurrency) for _ in range(2)]
    wait_for(lambda: queue.get("hung").state == "done", 30)
    wait_for(lambda: settled(queue), 30)
    assert get_redis().lrange(STARTED, 0, -1) == [b"1"]
    assert queue.get("hung").attempts == 1
    all_done(queue, ["hung"] + [f"j{i}" for i in range(50)])
    for worker in workers:
        stop(worker)


# --- the clock ------------------------------------------------------------------------------


def test_due_now_in_the_past_and_far_away(server: RedisServer, processes: Processes) -> None:
    """Jobs due exactly now (by Redis's clock), in the past, with delay=0 and a sub-ms delay
    run at once; one due in the year 9999 waits, scheduled, and the worker carries on."""
    queue = get_queue()
    seconds, micros = get_redis().time()
    now = datetime.fromtimestamp(seconds + micros / 1e6, tz=timezone.utc)
    far = datetime(9999, 12, 31, tzinfo=timezone.utc)
    worker = processes.start(run_worker, 1)
    wait_for(lambda: len(live_workers()) == 1)
    queue.enqueue(NAP, args=[1], job_id="now", at=now)
    queue.enqueue(NAP, args=[2], job_id="past", at=now - timedelta(days=400))
    queue.enqueue(NAP, args=[3], job_id="epoch", at=datetime(1969, 1, 1, tzinfo=timezone.utc))
    queue.enqueue(NAP, args=[4], job_id="zero", delay=0)
    queue.enqueue(NAP, args=[5], job_id="tiny", delay=0.0004)
    queue.enqueue(NAP, args=[6], job_id="far", at=far)
    ids = ["now", "past", "epoch", "zero", "tiny"]
    wait_for(lambda: set(states(queue, ids).values()) == {"k"}, 10)
    assert queue.counts() == job_counts(scheduled=1)
    assert queue.get("far").score == round(far.timestamp() * 1000)
    queue.enqueue_many(naps(20))
    wait_for(lambda: queue.counts()["ready"] + queue.counts()["running"] == 0, 10)
    assert set(states(queue, [f"j{i}" for i in range(20)]).values()) == {"k"}
    stop(worker)


# --- what a task may raise ------------------------------------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for this one")


@task()
def raise_odd(kind: str) -> None:
    if kind == "generator-exit":
        raise GeneratorExit
    if kind == "unprintable":
        raise Unprintable
    raise StopIteration  # a RuntimeError once it leaves a coroutine


@task()
async def raise_odd_async(kind: str) -> None:
    raise_odd.call(kind)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("concurrency", [1, 4])
def test_odd_exceptions_are_failed_attempts(server: RedisServer, concurrency: int) -> None:
    """GeneratorExit, StopIteration, an exception whose text cannot be made, from sync and
    async tasks: each is a failed attempt (dead after two), recorded; the worker works on."""
    queue = get_queue()
    kinds = ["generator-exit", "unprintable", "stop-iteration"]
    for kind in kinds:
        queue.enqueue("tests.queue.test_worker_chaos.raise_odd", args=[kind], job_id=kind)
        queue.enqueue(
            "tests.queue.test_worker_chaos.raise_odd_async", args=[kind], job_id=f"a-{kind}"
        )
    queue.enqueue_many(naps(5))
    deadline = time.monotonic() + 45
    while not settled(queue):
        Worker(["default"], concurrency=concurrency, burst=True).run()
        assert time.monotonic() < deadline, queue.counts()
        time.sleep(0.02)
    all_done(queue, [f"j{i}" for i in range(5)], dead=6)
    for job in queue.jobs("dead"):
        assert job.attempts == 2, job
        assert len(job.errors) == 2, job
        assert "lease ran out" not in job.error, job
    assert "Unprintable" in queue.get("unprintable").error


def test_delays_past_a_century_are_refused(server: RedisServer) -> None:
    """A delay of 1e20 s gave a due time Redis could not reply as an integer (the job came
    back with a score of -2**63, and its due_at could not be made): refused, naming delay.
    A failure's backoff after many attempts stays within the bound too."""
    queue = get_queue()
    for delay in (1e20, 1e300, MAX_DELAY + 1):
        with pytest.raises(ValueError, match="delay"):
            queue.enqueue(NAP, args=[1], delay=delay)
    job = queue.enqueue(NAP, args=[1], job_id="century", delay=MAX_DELAY)
    assert job.score == queue.get("century").score > 0
    assert job.due_at.year >= 2100
    assert queue.requeue("century")
    (leased,) = queue.pop()
    for delay in (1e20, float("nan"), -1):
        with pytest.raises(ValueError, match="delay"):
            queue.retry(leased, delay=delay)
    many = replace(leased, attempts=5000, failures=5000)  # the backoff counts failures
    assert queue.backoff(many) == MAX_DELAY
    before = time.time()
    assert queue.retry(many)
    # Its delay is drawn from [MAX_DELAY / 2, MAX_DELAY] (the jitter), as a score Redis keeps.
    due = queue.get("century").score / 1000
    assert before + MAX_DELAY / 2 - 1 <= due <= time.time() + MAX_DELAY + 1


# --- the command, with Redis gone under it ----------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def command_worker(
    redislock: dict[str, Any], *options: str, output: bool = False
) -> subprocess.Popen[str]:
    """``manage.py run_queue_worker`` in a process of its own; ``output``: its stdout is
    readable (lines), else discarded."""
    code = (
        "import django, json, os; django.setup(); from django.conf import settings;"
        "settings.REDISLOCK = json.loads(os.environ['REDISLOCK_TEST_SETTINGS']);"
        "from django.core.management import execute_from_command_line;"
        "execute_from_command_line(['manage.py', 'run_queue_worker', *json.loads("
        "os.environ['REDISLOCK_TEST_OPTIONS'])])"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "REDISLOCK_TEST_SETTINGS": json.dumps(redislock),
        "REDISLOCK_TEST_OPTIONS": json.dumps(list(options)),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
        "PYTHONUNBUFFERED": "1",  # each line as it is written, not at exit
    }
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if output else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_the_command_rides_out_a_restart_and_drains_with_redis_gone(
    server: RedisServer, settings: Any, concurrency: str
) -> None:
    """``run_queue_worker``: Redis restarted under it (it reconnects and runs what comes
    next), then Redis killed while a job runs and SIGTERM sent: it finishes the job, cannot
    record it, and still exits 0 within a lease or so."""
    queue = get_queue()
    worker = command_worker(settings.REDISLOCK, "--concurrency", concurrency)
    try:
        wait_for(lambda: len(live_workers()) == 1, 30)
        server.restart()
        queue.enqueue_many(naps(200))
        wait_for(lambda: settled(queue), 30)
        all_done(queue, [f"j{i}" for i in range(200)])
        queue.enqueue("tests.queue.test_worker_chaos.hang", args=[1, 1.0], job_id="hung")
        wait_for(lambda: get_redis().llen(STARTED) == 1, 30)
        server.kill()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_acknowledgements_piled_past_a_batch_are_all_sent(server: RedisServer) -> None:
    """More than MAX_BATCH finished jobs handed back at once (a thousand threads' notes on a
    connection killed under them): the keeper sends them all, in batches. One START of
    them all was refused, and the acknowledgements were dropped."""
    queue = get_queue()
    total = 2500
    queue.enqueue_many(naps(total))
    jobs, _, _ = queue.fetch(total, worker="w1")
    assert len(jobs) == total
    handed_back: list[Any] = []
    channel = Channel(queue, "w1", lambda lost: None, lambda q, f: handed_back.extend(f))
    channel.note([(job, None) for job in jobs])
    channel.sync()
    channel.close()
    assert handed_back == []
    assert queue.counts() == job_counts()


@pytest.mark.parametrize("concurrency", [1, 4])
def test_connections_killed_under_an_idle_worker_are_remade_at_once(
    server: RedisServer, caplog: pytest.LogCaptureFixture, concurrency: int
) -> None:
    """``CLIENT KILL TYPE normal`` closes the waiter's, the channel's and the kept
    connection of an idle worker: it reconnects at once, without backing off as if Redis
    were away (a job enqueued just after waited up to a few hundred ms)."""
    queue = get_queue()
    worker = Worker(["default"], concurrency=concurrency)
    thread = threading.Thread(target=worker.run)
    admin = server.client()
    with caplog.at_level(logging.INFO, logger="django_redislock.queue.worker"):
        thread.start()
        try:
            wait_for(lambda: len(live_workers()) == 1)
            for i in range(5):
                time.sleep(0.2)  # idle, blocked on the wake-up list
                admin.execute_command("CLIENT", "KILL", "TYPE", "normal")
                job_id = f"j{i}"
                spec = {"task": NAP, "args": [i, 0], "job_id": job_id}
                for _ in range(5):  # this process's connections were killed too
                    with contextlib.suppress(RedisUnavailable, redis.ConnectionError):
                        queue.enqueue_many([spec])
                        break
                wait_for(lambda j=job_id: states(queue, [j]) == {j: "k"}, 10)
        finally:
            worker.stop()
            thread.join(10)
    backoffs = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert backoffs == []
    assert any("reconnecting" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_idle_command_exits_at_once_on_a_signal(
    server: RedisServer, settings: Any, signum: int
) -> None:
    """``manage.py run_queue_worker``, idle (blocked on Redis): stopped within 0.3 s of the
    signal (its last line), then gone with exit status 0, its registration removed. Best of
    five: a stall of a loaded machine is not the command being slow (it took a second
    before). Python's own teardown of the ~1,000 modules this settings module loads comes
    after the last line, about 0.3 s on this VM: given 2 s."""
    stopped, exited = [], []
    for _ in range(5):
        worker = command_worker(settings.REDISLOCK, output=True)
        try:
            wait_for(lambda: len(live_workers()) == 1, 30)
            time.sleep(0.3)  # idle, waiting for a job
            start = time.monotonic()
            worker.send_signal(signum)
            assert worker.stdout is not None
            last = ""
            for line in worker.stdout:  # to its end: the process closed its output
                last = line
                if "stopped:" in line:
                    stopped.append(time.monotonic() - start)
            assert worker.wait(10) == 0
            exited.append(time.monotonic() - start)
            assert "stopped: 0 done, 0 failed" in last
            assert live_workers() == []
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        if stopped[-1] < 0.3:
            break
    assert min(stopped) < 0.3, stopped
    assert max(exited) < 2, exited
