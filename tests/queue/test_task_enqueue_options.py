"""A task's options decided at enqueue (``expires``, ``unique_for``, ``unique_by_args``,
``debounce``) through the Tasks API: its jobs go through the queue's enqueue with them. A
task's caller names no job id, so ``unique_for`` and ``debounce`` key its jobs by their
arguments."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.tasks import task
from tests.support.fixtures import Backend

from .. import retry_tasks as tasks


@pytest.fixture
def tasks_backend(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {}}}
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}
    }
    return backend


def test_unique_for_returns_the_first_job_for_the_same_arguments(tasks_backend: Backend) -> None:
    first = tasks.charge.enqueue(7)
    again = tasks.charge.enqueue(7)
    other = tasks.charge.enqueue(8)
    assert first.id == again.id != other.id
    assert first.id.startswith("args-")
    assert get_queue().counts()["ready"] == 2
    assert tasks.charge.get_result(first.id).task == tasks.charge


def test_unique_for_holds_after_the_job_ran(tasks_backend: Backend) -> None:
    first = tasks.charge.enqueue(7)
    [job] = get_queue().pop()
    assert get_queue().ack(job, "7")
    again = tasks.charge.enqueue(7)
    assert again.id == first.id
    assert again.status.name == "SUCCESSFUL"
    assert get_queue().counts()["ready"] == 0


def test_debounce_moves_the_due_time_and_keeps_the_last_arguments(
    tasks_backend: Backend,
) -> None:
    debounced = tasks.flaky.using(debounce=60)
    first = debounced.enqueue("k", 1)
    before = get_queue().get(first.id).score
    time.sleep(0.01)  # the second enqueue's due time is later by at least this much
    second = debounced.enqueue("k", 1)
    assert second.id == first.id
    job = get_queue().get(first.id)
    assert job.score > before
    assert job.score >= int(time.time() * 1000) + 59_000
    assert get_queue().counts()["scheduled"] == 1


def test_expires_is_carried_by_the_job(tasks_backend: Backend) -> None:
    result = tasks.flaky.using(expires=30).enqueue("k", 0)
    assert get_queue().get(result.id).meta["expires"] == 30


def test_unique_by_args_gives_the_same_id_for_the_same_call(tasks_backend: Backend) -> None:
    by_args = tasks.flaky.using(unique_by_args=True)
    assert by_args.enqueue("k", 1).id == by_args.enqueue("k", 1).id
    assert by_args.enqueue("k", 1).id != by_args.enqueue("k", 2).id


def test_a_task_with_unique_for_and_debounce_is_refused_at_enqueue(
    tasks_backend: Backend,
) -> None:
    both = task()(tasks.flaky.func).using(unique_for=5, debounce=5)
    with pytest.raises(ValueError, match="debounce"):
        both.enqueue("k", 1)
    assert get_queue().counts()["ready"] == 0
