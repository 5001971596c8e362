"""What ``run_queue_worker`` says beyond a job's line, run as a real command against a real
redis-server: a task module that fails to import (said once, with its traceback; its jobs
wait rather than die), a cancel said once and truthfully, Redis errors never wrapped twice,
and redis-py's maintenance notices left out."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from django_redislock import get_queue, get_redis
from django_redislock.redis.clients import reset_connections
from django_redislock.redis.notices import quiet_maintenance_notices
from tests.support.fixtures import Backend
from tests.support.servers import free_port
from tests.support.waiting import wait_for
from tests.support.worker_project import finish, start_worker, task_module, worker_running

MISSING = "import no_such_library  # a dependency the deploy forgot"
BROKEN = task_module(
    f"""{MISSING}

@task()
def go() -> None:
    pass
"""
)
LOOPING = task_module(
    """from django_redislock import get_redis

@task()
def spin() -> None:
    get_redis().rpush("test:spinning", "1")
    while True:  # Python code: a cancel reaches it at once
        time.sleep(0.01)
""",
    imports="import time\n",
)


@pytest.mark.processes
@pytest.mark.usefixtures("redis_backend")
def test_a_task_module_that_fails_to_import_is_said_once_and_its_jobs_wait(
    site: Path, settings: Any
) -> None:
    (site / "reloadapp" / "broken.py").write_text(BROKEN)
    queue = get_queue()
    for n in range(3):
        queue.enqueue("reloadapp.broken.go", job_id=f"b{n}")
    queue.enqueue("tests.tasks.record", args=[1], job_id="fine")
    out, err, code = finish(start_worker(site, settings, "--burst"))
    assert code == 0, err
    lines = out.splitlines()
    [said] = [
        i
        for i, line in enumerate(lines)
        if "importing reloadapp.broken failed" in line and "[ERROR]" in line
    ]
    assert lines[said].endswith(
        "[ERROR] importing reloadapp.broken failed: ModuleNotFoundError: No module named "
        "'no_such_library'; its jobs wait, each tried again after 60 s"
    )
    assert lines[said + 1] == "Traceback (most recent call last):"
    missing_at = BROKEN.splitlines().index(MISSING) + 1
    assert lines[said + 2].endswith(f'reloadapp/broken.py", line {missing_at}, in <module>')
    assert "ModuleNotFoundError: No module named 'no_such_library'" in lines[said + 3 : said + 6]
    assert out.count("Traceback (most recent call last):") == 1
    assert "importlib" not in out
    assert "django_redislock/" not in out
    for n in range(3):
        [line] = [line for line in lines if f"(b{n})" in line]
        assert line.endswith(
            f"[WARNING] default: reloadapp.broken.go (b{n}) not run: importing "
            "reloadapp.broken failed; runs again in 60 s"
        )
    assert "(fine) succeeded in" in out  # the others run
    # Not burned for a deploy mistake: waiting, no failure charged.
    assert queue.counts()["scheduled"] == 3
    assert queue.counts()["dead"] == 0
    assert {job.failures for job in queue.jobs("scheduled")} == {0}
    assert "0 failed" in out


@pytest.mark.processes
@pytest.mark.usefixtures("redis_backend")
def test_a_cancelled_job_is_said_once_and_never_promised_again(site: Path, settings: Any) -> None:
    (site / "reloadapp" / "looping.py").write_text(LOOPING)
    queue = get_queue()
    with worker_running(site, settings) as worker:
        queue.enqueue("reloadapp.looping.spin", job_id="spinner")
        wait_for(lambda: get_redis().llen("test:spinning") == 1)
        assert queue.cancel("spinner")
        wait_for(lambda: queue.counts()["dead"] == 1)
        os.killpg(worker.pid, signal.SIGINT)
        out, err, code = finish(worker)
    assert code == 0, err
    lines = [line for line in out.splitlines() if "spinner" in line]
    assert len(lines) == 1, out
    assert (
        lines[0]
        .split(" ", 1)[1]
        .startswith("[WARNING] default: reloadapp.looping.spin (spinner) cancelled after ")
    )
    assert lines[0].endswith("; not run again")
    assert "Traceback" not in out
    assert "delivered again" not in out


def test_a_command_says_redis_is_unreachable_once(settings: Any) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}
    with pytest.raises(CommandError) as raised:
        call_command("redislock_stats")
    message = str(raised.value)
    assert message.startswith("Cannot reach Redis (Error 111 connecting to 127.0.0.1:")
    assert "unreachable" not in message  # was "Cannot reach Redis (Redis is unreachable (…))"
    assert raised.value.returncode == 3


def test_redis_maintenance_notices_are_dropped_and_nothing_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet_maintenance_notices()
    quiet_maintenance_notices()  # twice: one filter
    assert len(logging.getLogger("redis.connection").filters) == 1
    with caplog.at_level(logging.DEBUG, logger="redis"):
        for name in ("redis.connection", "redis.asyncio.connection"):
            logging.getLogger(name).warning(
                "Failed to enable maintenance notifications: unknown subcommand"
            )
            logging.getLogger(name).warning("Connection reset by peer")
    assert [r.getMessage() for r in caplog.records] == ["Connection reset by peer"] * 2


def test_the_app_quiets_them_before_its_first_connection(redis_backend: Backend) -> None:
    """In any process (a web one too), not only the worker's."""
    logger = logging.getLogger("redis.connection")
    logger.filters.clear()
    reset_connections()
    get_redis().ping()
    assert [type(f).__name__ for f in logger.filters] == ["MaintenanceNotices"]
