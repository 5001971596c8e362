"""``redislock_pause`` and ``redislock_resume`` (issue 27), through ``call_command``, on
fakeredis and a real server; the pause as ``redislock_stats`` and the metrics show it."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.core.management import CommandError

from django_redislock import get_queue
from django_redislock.queue.queue import Queue
from tests.metrics.scraping import TOKEN, named, scrape
from tests.support.fixtures import configure_backend

from .test_queue_commands import run

pytestmark = pytest.mark.django_db
TASK = "tests.tasks.record"


@pytest.fixture(params=["fakeredis", "redis"])
def queue(request: pytest.FixtureRequest, settings: Any) -> Queue:
    configure_backend(request, settings, request.param)
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {}, "mail": {}}}
    return get_queue("default")


def test_pause_and_resume_a_queue(queue: Queue, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "django_redislock.admin")
    out, _ = run("redislock_pause", "default")
    assert out.strip() == "Paused the queue 'default'."
    assert queue.paused() == {"*"}
    assert get_queue("mail").paused() == set()
    out, _ = run("redislock_pause", "default")
    assert out.strip() == "The queue 'default' was paused already."
    assert "Paused queue 'default' (redislock_pause)." in caplog.text  # the audit log
    out, _ = run("redislock_resume", "default")
    assert out.strip() == "Resumed the queue 'default'."
    assert queue.paused() == set()
    out, _ = run("redislock_resume", "default")
    assert out.strip() == "The queue 'default' was not paused."


def test_pause_and_resume_one_task(queue: Queue) -> None:
    queue.enqueue(TASK, [1])
    out, _ = run("redislock_pause", "default", "--task", TASK)
    assert out.strip() == f"Paused the task {TASK} of queue 'default'."
    assert queue.fetch(5, worker="w").jobs == []
    assert queue.counts()["parked"] == 1
    out, _ = run("redislock_resume", "default", "--task", TASK)
    assert out.strip() == f"Resumed the task {TASK} of queue 'default'."
    assert queue.counts()["ready"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "Unknown queue 'nope'"),
        (["default", "--task", "a b"], "is not a dotted path"),
        (["default", "--task", "*"], "task must be a task's dotted path"),
    ],
)
def test_a_bad_queue_or_task_is_a_command_error(queue: Queue, args: list[str], message: str):
    for command in ("redislock_pause", "redislock_resume"):
        with pytest.raises(CommandError, match=message):
            run(command, *args)
    assert queue.paused() == set()


def test_stats_show_what_is_paused(queue: Queue) -> None:
    queue.pause()
    queue.pause(task=TASK)
    stats = json.loads(run("redislock_stats", "--json")[0])
    assert stats["queues"]["default"]["paused"] == ["*", TASK]
    assert stats["queues"]["mail"]["paused"] == []
    table = run("redislock_stats")[0]
    assert f"(paused: the whole queue, {TASK})" in table


@pytest.mark.urls("tests.metrics.urls")
def test_the_paused_gauge(queue: Queue, settings: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "METRICS_TOKEN": TOKEN}
    assert named(scrape(), "redislock_queue_paused") == {}
    queue.pause(task=TASK)
    get_queue("mail").pause()
    gauge = named(scrape(), "redislock_queue_paused")
    found = {tuple(sorted(labels)): v for labels, v in gauge.items()}
    assert found == {
        (("queue", "default"), ("task", TASK)): 1.0,
        (("queue", "mail"), ("task", "*")): 1.0,
    }
