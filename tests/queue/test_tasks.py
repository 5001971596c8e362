"""The Django Tasks backend: enqueue through ``@task``, run by the worker, results and
signals as the framework defines them; on fakeredis, a real redis-server and a real Cluster."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

try:  # Django 6
    from django.tasks import TaskResultStatus, task_backends
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2: the backport
    from django_tasks import TaskResultStatus, task_backends
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

from django_redislock import get_queue, get_redis
from django_redislock.queue.worker.loop import Worker
from tests.support.counts import job_counts
from tests.support.fixtures import Backend

from .. import task_examples as examples

QUEUES = {"default": {"LEASE": 5, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.01}, "mail": {}}


@pytest.fixture
def tasks(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    settings.TASKS = {
        "default": {
            "BACKEND": "django_redislock.tasks.RedisTaskBackend",
            "QUEUES": ["default", "mail"],
        }
    }
    return backend


def drain() -> Worker:
    """Run a worker until nothing is ready (in a thread: it installs no signal handlers)."""
    worker = Worker(["default", "mail"], concurrency=2, burst=True)
    thread = threading.Thread(target=worker.run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return worker


class Heard:
    def __init__(self, *signals: Any) -> None:
        self.events: list[tuple[str, Any]] = []
        self.signals = signals

    def __enter__(self) -> Heard:
        for signal in self.signals:
            signal.connect(self.receive)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signal in self.signals:
            signal.disconnect(self.receive)

    def receive(self, signal: Any, sender: Any, task_result: Any, **kwargs: Any) -> None:
        name = {task_enqueued: "enqueued", task_started: "started", task_finished: "finished"}
        self.events.append((name[signal], task_result.status))


def test_enqueue_run_and_get_result(tasks: Backend) -> None:
    with Heard(task_enqueued, task_started, task_finished) as heard:
        result = examples.add.enqueue(2, 3)
        assert result.status == TaskResultStatus.READY
        assert result.args == [2, 3]
        job = get_queue().get(result.id)
        assert (job.task, job.args, job.state) == ("tests.task_examples.add", [2, 3], "ready")
        assert examples.add.get_result(result.id).status == TaskResultStatus.READY
        worker = drain()
    assert heard.events == [
        ("enqueued", TaskResultStatus.READY),
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.SUCCESSFUL),
    ]
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.worker_ids == [worker.id]
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.errors == []
    assert get_queue().counts() == job_counts()


def test_priority_queue_name_and_defer(tasks: Backend) -> None:
    later = examples.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    low = examples.add.enqueue(0, 0)
    high = examples.urgent.enqueue()
    mail = examples.add.using(queue_name="mail").enqueue(4, 4)
    assert [j.id for j in get_queue().peek(2)] == [high.id, low.id]
    assert get_queue().get(later.id).state == "scheduled"
    assert get_queue("mail").get(mail.id).task == "tests.task_examples.add"
    drain()
    assert examples.add.get_result(later.id).status == TaskResultStatus.READY  # not yet due
    assert examples.add.get_result(mail.id).return_value == 8
    assert examples.urgent.get_result(high.id).return_value == "first"


def test_context_and_async_tasks(tasks: Backend) -> None:
    seen = examples.introspect.enqueue("x")
    summed = examples.sleepy_add.enqueue(20, 22)
    drain()
    assert examples.introspect.get_result(seen.id).return_value == {
        "tag": "x",
        "attempt": 1,
        "id": seen.id,
    }
    assert examples.sleepy_add.get_result(summed.id).return_value == 42


def test_async_enqueue_and_get_result(tasks: Backend) -> None:
    import asyncio

    async def go() -> Any:
        result = await examples.add.aenqueue(1, 2)
        return await examples.add.aget_result(result.id)

    assert asyncio.run(go()).status == TaskResultStatus.READY


def test_failures_are_retried_then_failed_with_the_error(tasks: Backend) -> None:
    with Heard(task_finished) as heard:
        result = examples.fails.enqueue("nope")
        drain()
        time.sleep(0.05)  # past the retry backoff
        drain()
    assert heard.events == [("finished", TaskResultStatus.FAILED)] * 2
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 2
    assert result.finished_at is not None
    assert len(result.errors) == 2  # one per failed attempt
    for error in result.errors:
        assert error.exception_class is ValueError
        assert error.traceback.endswith("ValueError: nope\n")
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018


def test_a_return_value_that_is_not_json_fails_at_once(tasks: Backend) -> None:
    result = examples.returns_a_set.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1  # not retried: it would fail the same way
    assert "not JSON-serializable" in get_queue().get(result.id).error


def test_results_expire_after_result_ttl(tasks: Backend, settings: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {**QUEUES, "default": {"RESULT_TTL": 30}}}
    result = examples.add.enqueue(1, 1)
    drain()
    assert examples.add.get_result(result.id).return_value == 2
    key = get_queue().key("result:" + result.id)
    assert 0 < get_redis().pttl(key) <= 30_000
    get_redis().pexpire(key, 1)  # as if RESULT_TTL had passed
    time.sleep(0.01)
    with pytest.raises(TaskResultDoesNotExist):
        examples.add.get_result(result.id)


def test_unknown_results_and_invalid_tasks(tasks: Backend) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("no-such-result")
    with pytest.raises(InvalidTask, match="Queue 'other'"):
        examples.add.using(queue_name="other").enqueue(1, 1)
    with pytest.raises(InvalidTask, match="priority"):
        examples.add.using(priority=101)
    with pytest.raises(TypeError, match="JSON"):
        examples.add.enqueue(object(), 1)


def test_backend_checks(settings: Any) -> None:
    settings.REDISLOCK = {"QUEUES": {"default": {}}}
    settings.TASKS = {
        "default": {
            "BACKEND": "django_redislock.tasks.RedisTaskBackend",
            "QUEUES": ["default", "mail"],
            "OPTIONS": {"LEASE": 5},
        }
    }
    errors = list(task_backends["default"].check())
    assert [e.id for e in errors] == ["django_redislock.E013", "django_redislock.E014"]
    assert "'mail'" in errors[0].msg
    assert all(e.hint for e in errors)
