"""The acceptance test of the metrics: ``run_queue_worker --processes 2`` (each child counts
in prometheus_client's multiprocess mode) runs jobs of which some fail and some end dead, on
a real redis-server; the view, scraped with the test client, shows exactly the queue's own
counts and the known outcome of every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from tests.support.counts import job_counts
from tests.support.fixtures import Backend

from ..tasks import DONE
from .scraping import TOKEN, scrape, states, summed, value

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.urls("tests.metrics.urls"),
    pytest.mark.processes,
    pytest.mark.timeout(120),
]

ROOT = Path(__file__).resolve().parents[2]
QUEUES = {
    "default": {"MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 3600, "LEASE": 10},
    "strict": {"MAX_ATTEMPTS": 1, "LEASE": 10},
    "idle": {},  # served by no worker: its jobs stay ready
}


def run_workers(redislock: dict[str, Any], directory: Path, *options: str) -> int:
    """``manage.py run_queue_worker`` in a process of its own, counting into ``directory``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.metrics.worker_settings",
        "REDISLOCK_TEST_SETTINGS": json.dumps(redislock),
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "example_project"), *sys.path]),
    }
    command = [sys.executable, "-m", "django", "run_queue_worker", *options]
    return subprocess.run(
        command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=90
    ).returncode


def test_a_scrape_matches_the_queues_and_every_run(
    redis_backend: Backend, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": QUEUES,
        "METRICS": True,
        "METRICS_TOKEN": TOKEN,
    }
    default, strict, idle = get_queue("default"), get_queue("strict"), get_queue("idle")
    # 20 ms each, so that both children get some
    default.enqueue_many([{"task": "tests.tasks.tracked", "args": [n, 0.02]} for n in range(40)])
    default.enqueue_many([{"task": "tests.tasks.boom"}] * 4)  # fail once: retried in an hour
    default.enqueue("tests.tasks.record", args=[-1], delay=3600)  # not due
    strict.enqueue_many([{"task": "tests.tasks.record", "args": [n]} for n in range(40, 50)])
    strict.enqueue_many([{"task": "tests.tasks.boom"}] * 3)  # no second attempt: dead
    idle.enqueue_many([{"task": "tests.tasks.record", "args": [n]} for n in range(2)])

    code = run_workers(
        settings.REDISLOCK,
        tmp_path,
        "--queue",
        "default",
        "--queue",
        "strict",
        "--processes",
        "2",
        "--concurrency",
        "2",
        "--burst",
    )
    assert code == 0
    ran_in = {json.loads(r).get("pid") for r in get_redis().lrange(DONE, 0, -1)} - {None}
    assert len(ran_in) == 2  # the tracked jobs ran in both children
    assert len(list(tmp_path.glob("counter_*.db"))) >= 2  # each counted in its own file

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # as the web process has it
    samples = scrape()
    for queue in (default, strict, idle):
        assert states(samples, queue.name) == queue.counts()
    assert default.counts() == job_counts(scheduled=5)
    assert strict.counts() == job_counts(dead=3)
    assert idle.counts()["ready"] == 2
    assert value(samples, "redislock_queue_oldest_ready_age_seconds", queue="idle") > 0

    def runs(queue: str, outcome: str) -> float:
        return summed(samples, "redislock_job_runs_total", queue=queue, outcome=outcome)

    assert (runs("default", "succeeded"), runs("default", "retried"), runs("default", "dead")) == (
        40,
        4,
        0,
    )
    assert (runs("strict", "succeeded"), runs("strict", "retried"), runs("strict", "dead")) == (
        10,
        0,
        3,
    )
    assert summed(samples, "redislock_job_duration_seconds_count", queue="default") == 44
    assert summed(samples, "redislock_job_duration_seconds_count", queue="strict") == 13
    assert value(samples, "redislock_workers", queue="default") == 0  # gone: burst
