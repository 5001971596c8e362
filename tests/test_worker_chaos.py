"""The queue and its workers under a chaos suite's attacks, on real redis-servers and real
worker processes: Redis refusing scripts (out of memory), connections killed from outside,
scripts flushed, the server restarted, workers frozen past their leases and killed at
random. Whatever happens, every job ends done or dead (dead only after failing itself
MAX_ATTEMPTS times) and no worker stops because of Redis or of a task."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from django_redislock import get_queue, get_redis
from django_redislock.exceptions import RedisUnavailable
from django_redislock.queue import Queue
from django_redislock.queue_channel import Channel
from django_redislock.testing import RedisServer
from django_redislock.worker import Worker, live_workers

from .conftest import Processes
from .tasks import STARTED

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

pytestmark = pytest.mark.processes

NAP = "tests.test_worker_chaos.nap"


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
    assert queue.counts() == {"ready": 0, "scheduled": 0, "running": 0, "dead": dead}


def stop(worker: Any) -> None:
    assert worker.is_alive(), f"worker exited with {worker.exitcode}"
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
    queue.enqueue("tests.test_worker_chaos.fail_slowly", args=[0.5], job_id="failing", delay=0.5)
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
    jobs, _ = channel.fetch(1, [])
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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_worker_frozen_past_its_leases_wakes_without_harm(
    server: RedisServer, processes: Processes, concurrency: int
) -> None:
    """SIGSTOP a worker holding leases (running and leased ahead) until they run out; another
    worker takes its jobs; SIGCONT: its late starts, acknowledgements and renewals find
    their leases lost and change nothing. Every job ends done, none dead."""
    settings_queues = {"default": {"LEASE": 1, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.01}}
    from django.conf import settings

    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": settings_queues}
    queue = get_queue()
    total = 400
    ids = [f"j{i}" for i in range(total)]
    queue.enqueue_many(naps(total, 0.01))
    sleeper = processes.start(run_worker, concurrency)
    wait_for(lambda: queue.counts()["running"] > 0 and queue.counts()["ready"] < total - 20)
    os.kill(sleeper.pid, signal.SIGSTOP)
    frozen = {job.id for job in queue.jobs("running", 0, 1000)}
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
