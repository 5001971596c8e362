"""Process mode (issue 15): ``run_queue_worker --processes N`` supervises N worker processes:
each job runs once, in one of them; a child that dies is replaced and its jobs run again;
children are recycled after ``--max-jobs-per-child`` jobs or above ``--max-memory``; SIGTERM
drains them all. The command runs for real, in a process of its own, on a real server."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from django_redislock import get_queue, get_redis
from tests.support.counts import job_counts
from tests.support.servers import RedisServer

from ..tasks import DONE, STARTED
from .test_worker_chaos import command_worker, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server(settings: Any) -> Iterator[RedisServer]:
    with RedisServer() as own:
        settings.REDISLOCK = {"URL": own.url, "QUEUES": {"default": {"LEASE": 2}}}
        yield own


def records(key: str = DONE) -> list[dict[str, Any]]:
    return [json.loads(v) for v in get_redis().lrange(key, 0, -1)]


def tracked(count: int, seconds: float = 0.0, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"task": "tests.tasks.tracked", "args": [n, seconds]} for n in range(start, start + count)
    ]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(worker: Any) -> int:
    worker.send_signal(signal.SIGTERM)
    return int(worker.wait(30))


def test_two_processes_run_every_job_once(server: RedisServer, settings: Any) -> None:
    get_queue().enqueue_many(tracked(200, 0.01))  # 0.5 s of work: both processes get some
    worker = command_worker(settings.REDISLOCK, "--processes", "2", "--concurrency", "2", "--burst")
    assert worker.wait(60) == 0
    done = records()
    assert sorted(d["n"] for d in done) == list(range(200))  # each once
    assert len({d["pid"] for d in done}) == 2  # in two processes
    assert worker.pid not in {d["pid"] for d in done}  # never in the supervisor itself


def test_a_killed_process_is_replaced_and_its_jobs_run_again(
    server: RedisServer, settings: Any
) -> None:
    worker = command_worker(settings.REDISLOCK, "--processes", "2")
    try:
        jobs = get_queue().enqueue_many(tracked(30, 0.2))
        wait_for(lambda: len({d["pid"] for d in records(STARTED)}) == 2, 30)
        victim = records(STARTED)[0]["pid"]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: {d["n"] for d in records()} == set(range(30)), 60)
        # Charged twice: only what the killed process was running; what it had leased
        # ahead came back uncharged.
        cut_short = {d["n"] for d in records(STARTED) if d["pid"] == victim} - {
            d["n"] for d in records() if d["pid"] == victim
        }
        attempts = {n: get_queue().get(job.id).attempts for n, job in enumerate(jobs)}
        assert {n for n, a in attempts.items() if a > 1} == cut_short
        assert len(cut_short) == 1
        pids = {d["pid"] for d in records()}
        assert victim not in {d["pid"] for d in records()[-5:]}
        assert len(pids - {victim}) == 2  # the survivor and the one started in its place
        assert get_queue().counts() == job_counts()
        assert stop(worker) == 0
        assert not any(alive(pid) for pid in pids)  # no worker process outlives it
    finally:
        if worker.poll() is None:
            worker.kill()


def test_a_process_is_recycled_after_its_share_of_jobs(server: RedisServer, settings: Any) -> None:
    get_queue().enqueue_many(tracked(20))
    worker = command_worker(
        settings.REDISLOCK, "--processes", "1", "--max-jobs-per-child", "5", "--burst"
    )
    assert worker.wait(60) == 0
    done = records()
    assert sorted(d["n"] for d in done) == list(range(20))
    by_pid: dict[int, int] = {}
    for d in done:
        by_pid[d["pid"]] = by_pid.get(d["pid"], 0) + 1
    assert len(by_pid) >= 4
    assert max(by_pid.values()) <= 5


def test_sigterm_drains_every_process(server: RedisServer, settings: Any) -> None:
    worker = command_worker(settings.REDISLOCK, "--processes", "2")
    try:
        get_queue().enqueue_many(tracked(2, 1.0))
        wait_for(lambda: len(records(STARTED)) == 2, 30)
        pids = {d["pid"] for d in records(STARTED)}
        assert len(pids) == 2
        assert stop(worker) == 0
        assert sorted(d["n"] for d in records()) == [0, 1]  # both finished first
        assert not any(alive(pid) for pid in pids)
    finally:
        if worker.poll() is None:
            worker.kill()


def test_a_process_over_its_memory_is_recycled(server: RedisServer, settings: Any) -> None:
    worker = command_worker(settings.REDISLOCK, "--processes", "1", "--max-memory", "150")
    try:
        get_queue().enqueue("tests.tasks.hog", args=[200])
        wait_for(lambda: len(records()) == 1, 30)
        hog_pid = records()[0]["pid"]
        wait_for(lambda: not alive(hog_pid), 30)  # drained and replaced
        get_queue().enqueue_many(tracked(3))
        wait_for(lambda: len(records()) == 4, 30)
        assert {d["pid"] for d in records()[1:]} != {hog_pid}
        assert stop(worker) == 0
    finally:
        if worker.poll() is None:
            worker.kill()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--processes", "0"], "processes must be an int from 1 to 256"),
        (["--processes", "2", "--max-jobs", "5"], "--max-jobs is for one process"),
        (["--max-memory", "100"], "go with --processes"),
        (["--processes", "2", "--max-memory", "-1"], "max_memory must be a number of MB"),
        (["--processes", "2", "--max-jobs-per-child", "0"], "--max-jobs-per-child must be"),
    ],
)
def test_wrong_options_are_command_errors(
    server: RedisServer, options: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("run_queue_worker", *options)


@pytest.mark.parametrize("how", ["time limit", "cancel"])
def test_a_job_blocked_in_c_is_stopped_for_sure_and_its_process_replaced(
    server: RedisServer, settings: Any, how: str
) -> None:
    """A soft limit (or a cancel) cannot interrupt ``time.sleep(60)``; TIME_LIMIT_GRACE
    later (1 s here; 10 s by default) the worker process ends itself, the attempt is recorded
    (its message names the grace), and another process runs the next job."""
    queues = {"default": {"LEASE": 30, "MAX_ATTEMPTS": 1, "TIME_LIMIT_GRACE": 1}}
    if how == "time limit":
        queues["default"]["TIME_LIMIT"] = 0.3
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": queues}
    worker = command_worker(settings.REDISLOCK, "--processes", "1")
    try:
        queue = get_queue()
        queue.enqueue("tests.tasks.slow", args=[1, 60], job_id="stuck")
        wait_for(lambda: queue.get("stuck").state == "running", 30)
        if how == "cancel":
            wait_for(lambda: bool(queue.get("stuck").started), 30)
            assert queue.cancel("stuck", by="ops")
        wait_for(lambda: queue.get("stuck").state == "dead", 40)
        dead = queue.get("stuck")
        if how == "cancel":
            assert dead.error.startswith("Cancelled by ops")
        else:
            assert "was stopped for sure" in dead.error
            assert "ended 1 s after its time limit" in dead.error
        queue.enqueue_many(tracked(2))
        wait_for(lambda: len(records()) == 2, 30)  # a new process took over
        assert stop(worker) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
