"""A task's options (``@task(max_attempts=...)``): declared on ``RedisTask``, checked when the
task is made, kept by ``using()``, kept with its jobs so that ``get_result()`` rebuilds the
task as enqueued; ``django_redislock.tasks.task`` takes them on every supported Django."""

from __future__ import annotations

import math
from typing import Any

import pytest

from django_redislock.tasks import task
from tests.support.fixtures import Backend

from .. import retry_tasks as tasks


def plain(n: int) -> int:
    return n


@pytest.fixture
def tasks_backend(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {}, "mail": {}}}
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}
    }
    return backend


BAD = [
    ("max_attempts", 0, ValueError),
    ("max_attempts", 1001, ValueError),
    ("max_attempts", "3", TypeError),
    ("max_attempts", True, TypeError),
    ("retry_backoff", -1, ValueError),
    ("retry_backoff", math.nan, ValueError),
    ("retry_backoff", True, TypeError),
    ("retry_backoff_max", math.inf, ValueError),
    ("retry_on", len, TypeError),
    ("retry_on", (ValueError, "builtins.len"), TypeError),
    ("retry_on", 42, TypeError),
    ("time_limit", 0, ValueError),
    ("time_limit", "30", TypeError),
    ("expires", 0, ValueError),
    ("expires", math.inf, ValueError),
    ("unique_for", -1, ValueError),
    ("unique_for", "soon", TypeError),
    ("unique_by_args", 1, TypeError),
    ("debounce", 0, ValueError),
    ("concurrency_key", "", TypeError),
    ("concurrency_limit", 0, ValueError),
    ("rate_key", 5, TypeError),
    ("rate", "100/fortnight", ValueError),
    ("rate", 100, TypeError),
]


@pytest.mark.parametrize(("option", "value", "error"), BAD, ids=lambda v: repr(v)[:30])
def test_a_wrong_value_is_refused_naming_the_option(
    option: str, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match=option):
        task(**{option: value})(plain)
    with pytest.raises(error, match=option):
        tasks.charge.using(**{option: value})


def test_retry_on_is_kept_as_a_tuple_of_classes() -> None:
    assert task(retry_on=KeyError)(plain).retry_on == (KeyError,)
    assert task(retry_on=[KeyError, OSError])(plain).retry_on == (KeyError, OSError)
    assert task(retry_on=[KeyError])(plain) == task(retry_on=(KeyError,))(plain)


def test_retry_on_takes_a_nested_class_and_refuses_a_local_one_when_declared() -> None:
    assert task(retry_on=tasks.Gateway.Busy)(plain).retry_on == (tasks.Gateway.Busy,)

    def made_here() -> type[Exception]:
        class Local(Exception):
            pass

        return Local

    with pytest.raises(ValueError, match=r"retry_on.*cannot be imported by that path"):
        task(retry_on=made_here())(plain)


def test_using_keeps_the_options(tasks_backend: Backend) -> None:
    moved = tasks.charge.using(priority=3, queue_name="mail")
    assert (moved.priority, moved.queue_name) == (3, "mail")
    assert moved.options() == tasks.charge.options()
    changed = tasks.charge.using(max_attempts=5, retry_on=KeyError)
    assert changed.options() == {
        **tasks.charge.options(),
        "max_attempts": 5,
        "retry_on": (KeyError,),
    }
    assert tasks.charge.using(time_limit=None).time_limit is None  # None unsets
    with pytest.raises(TypeError, match="max_attemps"):
        tasks.charge.using(max_attemps=5)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"max_attempts": 2, "retry_on": [KeyError], "time_limit": None},
        {"expires": 5, "unique_for": None, "unique_by_args": True, "rate": "5/s"},
        {"concurrency_key": "c:{order_id}", "concurrency_limit": 3, "rate_key": "r", "rate": "9/m"},
        {"priority": 4, "retry_backoff": 0, "retry_backoff_max": None},
    ],
    ids=["as-declared", "worker", "enqueue", "limits", "mixed"],
)
def test_get_result_rebuilds_the_task_as_enqueued(
    tasks_backend: Backend, changes: dict[str, Any]
) -> None:
    enqueued = tasks.charge.using(**changes) if changes else tasks.charge
    result = enqueued.enqueue(7)
    found = tasks.charge.get_result(result.id)
    assert found.task == result.task == enqueued
    assert found.task.options() == enqueued.options()


def test_a_task_without_options_keeps_its_jobs_meta_empty(tasks_backend: Backend) -> None:
    from django_redislock import get_queue

    result = tasks.flaky.enqueue("k", 0)
    assert get_queue().get(result.id).meta == {}
    assert tasks.flaky.get_result(result.id).task == tasks.flaky


def test_on_a_django_whose_task_forwards_nothing_ours_makes_the_task(monkeypatch: Any) -> None:
    """Django 6.0's ``@task`` takes no options: ``task`` then makes the task itself."""
    from django_redislock.tasks import decorator

    monkeypatch.setattr(decorator, "FORWARDS", False)
    made = task(max_attempts=3, retry_on=KeyError)(plain)
    assert (made.max_attempts, made.retry_on, made.priority) == (3, (KeyError,), 0)
    assert task(plain, time_limit=5).time_limit == 5
    assert task(plain) == task()(plain)  # no option: the framework's own
    with pytest.raises(TypeError, match="max_attemps"):
        task(max_attemps=3)(plain)
    with pytest.raises(ValueError, match="max_attempts"):
        task(plain, max_attempts=0)
