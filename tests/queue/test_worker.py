"""The worker with real processes on a real redis-server and a real Cluster."""

from __future__ import annotations

import json
import logging
import os
import pickle
import resource
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import live_workers
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, Processes
from tests.support.servers import free_port

from ..tasks import DONE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.processes

QUEUES = {"default": {"LEASE": 1, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.05}}
ERRORS = "test:worker-errors"


@pytest.fixture
def real(real_backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return real_backend


def work(concurrency: int = 1, burst: bool = False) -> None:
    Worker(["default"], concurrency=concurrency, burst=burst).run()


def done() -> list[dict[str, Any]]:
    return [json.loads(v) for v in get_redis().lrange(DONE, 0, -1)]


def wait_for(predicate: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_workers_run_every_job_and_stop_on_sigterm(real: Backend, processes: Processes) -> None:
    queue = get_queue()
    workers = [processes.start(work, 2) for _ in range(2)]
    wait_for(lambda: len(live_workers()) == 2)
    queue.enqueue_many([{"task": "tests.tasks.record", "args": [i]} for i in range(200)])
    wait_for(lambda: len(done()) == 200)
    assert sorted(d["n"] for d in done()) == list(range(200))
    # A job's record is written before its worker settles it: the last one may still be
    # settling when the record count reaches 200.
    settled = job_counts()
    wait_for(lambda: queue.counts() == settled)
    assert sum(w["processed"] for w in live_workers()) <= 200
    for worker in workers:
        os.kill(worker.pid, signal.SIGTERM)
    processes.join_all(10)
    assert live_workers() == []


def test_sigterm_lets_running_jobs_finish(real: Backend, processes: Processes) -> None:
    queue = get_queue()
    worker = processes.start(work, 3)
    queue.enqueue_many([{"task": "tests.tasks.slow", "args": [i, 0.5]} for i in range(6)])
    wait_for(lambda: queue.counts()["running"] == 3)
    os.kill(worker.pid, signal.SIGTERM)
    worker.join(10)
    assert worker.exitcode == 0
    assert sorted(d["n"] for d in done()) == [0, 1, 2]  # the running three finished
    assert queue.counts() == job_counts(ready=3)  # none lost


def test_killed_worker_jobs_are_delivered_again(real: Backend, processes: Processes) -> None:
    queue = get_queue()
    victim = processes.start(work, 1)
    queue.enqueue("tests.tasks.slow", args=[1, 5])
    wait_for(lambda: queue.counts()["running"] == 1)
    os.kill(victim.pid, signal.SIGKILL)
    processes.start(work, 1)
    wait_for(lambda: len(done()) == 1)  # after the 1 s lease ran out
    assert queue.counts()["dead"] == 0


class Pwn:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch /tmp/pwned-by-redislock",))


def test_poison_and_invalid_jobs_go_to_the_dead_set(real: Backend, processes: Processes) -> None:
    queue = get_queue()
    queue.enqueue("tests.tasks.boom", job_id="poison")
    queue.enqueue("os.system", args=["touch /tmp/pwned-by-redislock"], job_id="not-an-app")
    queue.enqueue("tests.tasks.not_a_task", job_id="plain-function")
    # A pickle written straight into a job is never unpickled: this one would run a
    # command if it were.
    client = get_redis()
    blob = pickle.dumps(Pwn())
    client.hset(
        queue.key("j:pickled"),
        mapping={"t": "tests.tasks.record", "ar": blob, "sc": 0, "e": 0, "s": "r"},
    )
    client.zadd(queue.key("ready"), {"pickled": 1})
    queue.enqueue_many([{"task": "tests.tasks.record", "args": [i]} for i in range(20)])
    processes.start(work, 2)
    wait_for(lambda: queue.counts()["dead"] == 4)
    wait_for(lambda: len(done()) == 20)
    errors = {job.id: job.error for job in queue.jobs("dead")}
    assert "ValueError: poison" in errors["poison"]
    assert queue.get("poison").attempts == 2
    assert "not in an installed app" in errors["not-an-app"]
    assert "not a task" in errors["plain-function"]
    assert "not a JSON task" in errors["pickled"]
    assert not os.path.exists("/tmp/pwned-by-redislock")
    assert "Traceback" in queue.get("poison").traceback


def test_delayed_jobs_never_start_early(real: Backend, processes: Processes) -> None:
    queue = get_queue()
    processes.start(work, 4)
    jobs = queue.enqueue_many(
        [{"task": "tests.tasks.record", "args": [i], "delay": 0.05 + i * 0.01} for i in range(60)]
    )
    wait_for(lambda: len(done()) == 60)
    due = {i: job.score for i, job in enumerate(jobs)}
    for record in done():
        assert record["at"] >= due[record["n"]] - 1  # ms clock granularity


def test_burst_exits_when_nothing_is_ready(real: Backend) -> None:
    queue = get_queue()
    queue.enqueue_many([{"task": "tests.tasks.record", "args": [i]} for i in range(5)])
    work(concurrency=2, burst=True)
    assert len(done()) == 5


def test_command_exits_clearly_when_redis_is_unreachable() -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "REDISLOCK_TEST_URL": f"redis://127.0.0.1:{free_port()}/0",
    }
    code = (
        "import django, os; from django.conf import settings; django.setup();"
        "settings.REDISLOCK = {'URL': os.environ['REDISLOCK_TEST_URL']};"
        "from django.core.management import execute_from_command_line;"
        "execute_from_command_line(['manage.py', 'run_queue_worker'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 3, result.stderr
    assert "Cannot start" in result.stderr
    assert "Redis is unreachable" in result.stderr


# --- the worker's parts (issue 13) ---------------------------------------------------------


def test_the_worker_never_imports_the_tasks_backend_nor_the_admin_the_framework() -> None:
    """The worker runs jobs without the Tasks backend module (it only adapts), and the
    registry the admin reads needs no Tasks framework at all."""
    code = """
import sys, django
django.setup()
import django_redislock.queue.worker.loop
assert "django_redislock.tasks.backend" not in sys.modules, "the worker imported the backend"
for name in [m for m in sys.modules if m.startswith(("django_redislock", "django_tasks",
                                                     "django.tasks"))]:
    del sys.modules[name]
for blocked in ("django_tasks", "django.tasks"):
    sys.modules[blocked] = None  # as on Django 5.2 without the backport
from django_redislock.queue.worker.registry import live_workers
assert callable(live_workers)
from django.core.exceptions import ImproperlyConfigured
try:
    import django_redislock.queue.worker.loop
except ImproperlyConfigured:
    print("ok")
"""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_a_refused_task_is_a_queue_error() -> None:
    from django_redislock.exceptions import InvalidTask, QueueError
    from django_redislock.queue.execution import resolve_task

    with pytest.raises(QueueError, match="not in an installed app") as refused:
        resolve_task("os.system")
    assert type(refused.value) is InvalidTask


def work_with_many_files(concurrency: int) -> None:
    """``work`` in a process whose descriptors run past 1023 (a big app's files and
    connections): the waiter's own sockets get numbers ``select`` cannot take."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2048), hard))
    while os.open(os.devnull, os.O_RDONLY) < 1100:
        pass
    logging.getLogger("django_redislock").addHandler(ErrorsToRedis(logging.ERROR))
    work(concurrency)


class ErrorsToRedis(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        get_redis().rpush(ERRORS, self.format(record))


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_worker_whose_descriptors_run_past_1023_waits_and_wakes(
    real: Backend, processes: Processes, concurrency: int
) -> None:
    worker = processes.start(work_with_many_files, concurrency)
    wait_for(lambda: len(live_workers()) == 1)
    time.sleep(0.2)  # let it go idle: the next job wakes it from its wait
    get_queue().enqueue("tests.tasks.record", args=[1])
    wait_for(lambda: len(done()) == 1)
    os.kill(worker.pid, signal.SIGTERM)
    processes.join_all(10)
    assert worker.exitcode == 0
    assert get_redis().lrange(ERRORS, 0, -1) == []  # no wait failed
