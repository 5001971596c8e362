"""Tasks for the Django Tasks backend tests (``tests/test_tasks.py``)."""

from __future__ import annotations

import asyncio
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
