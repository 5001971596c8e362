"""The backport's task-kwargs tests (django-tasks #227, ``tests/tests/test_custom_backend.py::
CustomTaskTestCase``; the same four are in Django 6.1's ``tests/tasks/
test_custom_backend.py``), ported onto ``RedisTask`` and ``django_redislock.tasks.task``,
in our own code; plus pickling, which Django 6.1 does for every field.

Left out, and why:

* ``test_options``, ``test_no_enqueue`` and ``test_backend_does_not_support_priority`` of
  the same file: already triaged in ``test_ported_django_tasks.py``.
* The custom task class of those tests (``CustomTask`` with made-up fields): our
  ``task_class`` is ``RedisTask``, whose fields are the options of DESIGN; they are used
  here instead. What is checked of each value is ``test_task_options.py``'s.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from django_redislock.queue.options import TASK_OPTIONS
from django_redislock.tasks import task
from django_redislock.tasks.redis_task import RedisTask
from django_redislock.tasks.results import FRAMEWORK
from tests.support.fixtures import Backend

from .. import retry_tasks as tasks


def plain(n: int) -> int:
    return n


def test_custom_task_default_values() -> None:
    made = task()(plain)
    assert type(made) is RedisTask
    assert made.options() == {name: None for name in TASK_OPTIONS} | {"unique_by_args": False}


def test_custom_task_with_custom_values() -> None:
    assert tasks.charge.options() == {
        "max_attempts": 8,
        "retry_backoff": 2,
        "retry_backoff_max": 600,
        "retry_on": (ConnectionError,),
        "time_limit": 30,
        "expires": 3600,
        "unique_for": 60,
        "unique_by_args": False,
        "debounce": None,
        "concurrency_key": None,
        "concurrency_limit": 1,
        "rate_key": None,
        "rate": None,
    }


def test_custom_task_with_standard_and_custom_values(retrying: Backend) -> None:
    made = task(priority=10, queue_name="mail", max_attempts=2, rate="100/s")(plain)
    assert (made.priority, made.queue_name, made.max_attempts, made.rate) == (
        10,
        "mail",
        2,
        "100/s",
    )
    assert made.takes_context is False
    assert made.run_after is None
    assert task(plain, max_attempts=3).max_attempts == 3  # the bare call, with options


def test_custom_task_invalid_kwarg() -> None:
    with pytest.raises(TypeError, match="max_attemps"):
        task(max_attemps=3)(plain)
    with pytest.raises(TypeError, match="max_attemps"):
        task(plain, max_attemps=3)


def test_a_task_with_options_pickles_as_django_6_pickles_tasks(settings: Any) -> None:
    if FRAMEWORK != "django.tasks":  # the backport pickles no task, with options or not
        for made in (tasks.charge, tasks.flaky):
            with pytest.raises((TypeError, pickle.PicklingError)):
                pickle.dumps(made)
        return
    for made in (tasks.charge, tasks.charge.using(retry_on=[KeyError], rate="5/s")):
        assert pickle.loads(pickle.dumps(made)) == made
