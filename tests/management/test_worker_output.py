"""``manage.py run_queue_worker`` as an operator sees it, run as a real command against a
real redis-server: one line per job on stdout, LOGGING respected, the first Ctrl-C drains
(also with ``--processes``) and says how to force, ``--reload`` restarts on a code change."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from django_redislock import get_queue, get_redis
from django_redislock.queue.worker.registry import live_workers
from tests.support.fixtures import Backend
from tests.support.servers import free_port
from tests.support.waiting import wait_for
from tests.support.worker_project import finish, start_worker, worker_running

from ..tasks import DONE, STARTED

pytestmark = pytest.mark.processes


def done() -> list[int]:
    return [json.loads(v)["n"] for v in get_redis().lrange(DONE, 0, -1)]


@pytest.mark.parametrize("debug", [False, True], ids=["DEBUG-off", "DEBUG-on"])
def test_one_line_per_job_on_stdout_with_djangos_default_logging(
    site: Path, settings: Any, debug: bool
) -> None:
    """The same on Django 5.2 and 6.x, DEBUG on or off: a line per job at its outcome; a
    failure's traceback once, under its line, from the task's own frame; none of the Tasks
    framework's lines per task state (Django 6's console shows them when DEBUG is on)."""
    get_queue().enqueue("tests.tasks.record", args=[1], job_id="fine")
    get_queue().enqueue("tests.tasks.boom", job_id="again")
    get_queue().enqueue("os.system", args=["true"], job_id="evil")
    get_queue("mail").enqueue("tests.tasks.boom", job_id="poison")
    out, err, code = finish(
        start_worker(
            site, settings, "--burst", "--queue", "default", "--queue", "mail", debug=debug
        )
    )
    assert code == 0, err
    assert err == ""  # nothing left to Python's last-resort printing, nothing twice
    lines = out.splitlines()
    [fine] = [line for line in lines if "(fine)" in line]
    assert fine.split(" ", 1)[1].startswith("default: tests.tasks.record (fine) succeeded in ")
    [again] = [line for line in lines if "(again)" in line]
    assert again.split(" ", 1)[1].startswith(
        "[WARNING] default: tests.tasks.boom (again) failed in "
    )
    # the first retry's delay is drawn from [d/2, d], d the queue's RETRY_BACKOFF (5 s)
    head, _, delay = again.rpartition(", runs again in ")
    assert head.endswith("ValueError: poison; attempt 1 of 2")
    assert delay.endswith(" s")
    assert 2.5 <= float(delay[:-2]) <= 5.0
    [poison] = [line for line in lines if "(poison)" in line]
    assert poison.split(" ", 1)[1].startswith("[ERROR] mail: tests.tasks.boom (poison) failed")
    assert poison.endswith("ValueError: poison; dead after 1 attempt")
    [evil] = [line for line in lines if "(evil)" in line]
    assert "[ERROR] default: os.system (evil) refused: 'os.system' is not in an installed" in evil
    # Each failure's traceback once, right under its line, only the task's frames.
    assert out.count("Traceback (most recent call last):") == 2
    for line in (again, poison):
        trace = lines[lines.index(line) + 1 : lines.index(line) + 5]
        assert trace[0] == "Traceback (most recent call last):"
        assert trace[1].startswith('  File "')
        assert trace[1].endswith(", in boom")
        assert 'tests/tasks.py", line ' in trace[1]
        assert trace[3] == "ValueError: poison"
    assert "django_redislock/" not in out
    assert "django/tasks" not in out
    assert "django_tasks/" not in out
    assert "state=" not in out  # the framework's lines per task state: never


def test_a_project_logging_the_app_gets_each_line_once_its_own_way(
    site: Path, settings: Any
) -> None:
    get_queue().enqueue("tests.tasks.record", args=[1], job_id="fine")
    out, err, code = finish(start_worker(site, settings, "--burst", logging="project"))
    assert code == 0, err
    [fine] = [line for line in (out + err).splitlines() if "(fine)" in line]
    assert fine.startswith("PROJECT INFO django_redislock.worker default: tests.tasks.record")


@pytest.mark.parametrize("mode", [["--concurrency", "2"], ["--processes", "2"]])
def test_the_first_ctrl_c_drains_and_says_how_to_force_the_second_forces(
    site: Path, settings: Any, mode: list[str]
) -> None:
    """A terminal's Ctrl-C reaches every process of the group: with --processes too, the
    first one lets the running jobs finish (each child used to take it as two signals)."""
    queue = get_queue()
    with worker_running(site, settings, *mode) as worker:
        queue.enqueue("tests.tasks.tracked", args=[1, 1.5])
        queue.enqueue("tests.tasks.tracked", args=[2, 60])
        # Both run, each in its own thread or process (not one leased ahead by the other,
        # which the stop would give back).
        wait_for(lambda: get_redis().llen(STARTED) == 2)
        os.killpg(worker.pid, signal.SIGINT)
        wait_for(lambda: done() == [1])  # the short job finished: a drain
        wait_for(lambda: queue.counts()["running"] == 1)  # and was acknowledged
        assert worker.poll() is None  # waiting for the long one
        os.killpg(worker.pid, signal.SIGINT)
        out, err, code = finish(worker, 15)
    assert code == (0 if "--processes" in mode else 128 + signal.SIGINT), err
    assert out.count("Ctrl-C again to force.") == 1
    assert out.count("Supervising 2 worker processes") == ("--processes" in mode)
    assert "Forced: " in out
    assert queue.counts()["running"] == 1  # the long job runs again after its lease


def test_reload_restarts_the_worker_when_a_module_changes(site: Path, settings: Any) -> None:
    queue = get_queue()
    versions = get_redis()
    with worker_running(site, settings, "--reload") as worker:
        queue.enqueue("reloadapp.tasks.version")
        wait_for(lambda: versions.llen("test:versions") == 1)
        [first] = [w["id"] for w in live_workers()]
        tasks = site / "reloadapp" / "tasks.py"
        tasks.write_text(tasks.read_text().replace('"v1"', '"v2"'))
        touched = time.monotonic()

        def restarted() -> bool:
            nonlocal touched
            # A reloader sees a change to a file it has seen before: until it restarts, the
            # file is touched again each second (it may first have seen the edited one).
            if time.monotonic() - touched > 1:
                os.utime(tasks)
                touched = time.monotonic()
            return [w["id"] for w in live_workers()] not in ([], [first])

        wait_for(restarted)
        queue.enqueue("reloadapp.tasks.version")
        wait_for(lambda: versions.llen("test:versions") == 2)
        assert [v.decode() for v in versions.lrange("test:versions", 0, -1)] == ["v1", "v2"]
        os.killpg(worker.pid, signal.SIGINT)
        out, err, code = finish(worker)
    assert code == 0, err
    assert out.count(": queues default, concurrency 1.") >= 2, out  # a banner per process
    assert f"Stopping worker {first}: finishing 0 running job(s)" in out


def test_reload_with_redis_unreachable_exits_once(site: Path, settings: Any) -> None:
    """Not status 3, which would ask the autoreloader for another process, forever."""
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}
    _, err, code = finish(start_worker(site, settings, "--reload"))
    assert code == 1
    assert err.count("CommandError: Cannot start: Redis is unreachable") == 1


def test_reload_does_not_go_with_processes(redis_backend: Backend) -> None:
    with pytest.raises(CommandError, match="--reload restarts one worker process"):
        call_command("run_queue_worker", "--reload", "--processes", "2")
