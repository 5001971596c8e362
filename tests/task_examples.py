"""Tasks for the Django Tasks backend tests (``test_tasks.py``, ``test_tasks_framework.py``)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

try:
    from django.tasks import TaskContext, task
except ImportError:  # Django 5.2: the backport
    from django_tasks import TaskContext, task


@task()
def add(a: int, b: int) -> int:
    return a + b


@task(priority=10)
def urgent() -> str:
    return "first"


@task(takes_context=True)
def introspect(context: TaskContext, tag: str) -> dict[str, Any]:
    return {"tag": tag, "attempt": context.attempt, "id": context.task_result.id}


@task()
async def sleepy_add(a: int, b: int) -> int:
    await asyncio.sleep(0.01)
    return a + b


@task()
def fails(message: str) -> None:
    raise ValueError(message)


@task()
def returns_a_set() -> Any:
    return {1, 2}


# --- for the Django Tasks framework's own backend tests, ported (test_tasks_framework.py) ---


@task()
def noop(*args: Any, **kwargs: Any) -> None:
    return None


@task()
async def anoop(*args: Any, **kwargs: Any) -> None:
    return None


@task()
def answer() -> int:
    return 42


@task()
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Returns what it received, to see arguments after their trip through Redis."""
    return {"args": args, "kwargs": kwargs}


@task()
def broken() -> None:
    raise ValueError("broken on purpose")


@task()
def wrapped_error() -> None:
    raise ValueError(KeyError("inner cause"))


@task()
def exits() -> None:
    raise SystemExit("the task called exit")


@task()
def interrupted() -> None:
    raise KeyboardInterrupt


@task()
def returns_bytes_and_tuples() -> Any:
    return (b"raw", (1, 2))


@task()
def returns_a_datetime() -> Any:
    return datetime.now(tz=timezone.utc)


@task(takes_context=True)
def own_id(context: TaskContext) -> str:
    return context.task_result.id


@task(takes_context=True)
def attempt_is(context: TaskContext, expected: int) -> bool:
    assert context.attempt == expected, context.attempt
    return True


def undecorated() -> None:
    raise AssertionError("must never run")


# A Task whose name in its module still refers to the plain function: the worker, which
# imports the task by that name, would not find a task there.
undecorated_task = task()(undecorated)


@task()
def redefined() -> str:
    return "first"


# The name now refers to a second task: the worker, importing "redefined", runs that one.
first_redefined = redefined


@task()
def redefined() -> str:
    return "second"
