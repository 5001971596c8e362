"""Tasks for ``tests/workflows/test_ported_celery_dramatiq.py``, the workflow tests ported
from Celery's canvas suite and Dramatiq's composition suite.

Celery passes a task's return value to the next task of a chain as its first argument
(unless the signature is immutable); Dramatiq's pipelines do so as the last argument. A
workflow step never receives anything it was not given: it reads what the steps it waited
for returned through ``context.dependency_results``. So there are two kinds of task here:

- those that only use their own arguments (``add``, ``identity``, ``echo``...), the
  counterpart of Celery's immutable signatures (``.si()``) and Dramatiq's ``pipe_ignore``;
- those that also use what came before (``accumulate``, ``passthrough``, ``collect``...),
  the counterpart of Celery's ``.s()`` and Dramatiq's default.

Every run writes a line in Redis (``LOG``, where the worker's threads and the test both
see it): the job's id, the task and its attempt, so that a test can tell which steps ran,
how often and in which order.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django_redislock import get_redis
from django_redislock.tasks import task

LOG = "test:ported-workflows:log"  # a list: one JSON object per run, in the order they ran


class ExpectedError(Exception):
    """What ``fail`` raises: a failure the test asked for."""


def entries() -> list[dict[str, Any]]:
    """Every run so far, in the order they started."""
    return [json.loads(raw) for raw in get_redis().lrange(LOG, 0, -1)]


def _note(context: Any, name: str) -> None:
    entry = {"id": context.task_result.id, "task": name, "attempt": context.attempt}
    get_redis().rpush(LOG, json.dumps(entry))


def _upstream(context: Any) -> list[Any]:
    """What the steps this one waited for returned, in the order it waited for them; every
    one of them must have succeeded (a step after ``then`` only runs when they did)."""
    values = []
    for result in context.dependency_results:
        if result is None or result.status.name != "SUCCESSFUL":
            raise AssertionError(f"a dependency did not succeed: {result!r}")
        values.append(result.return_value)
    return values


# --- steps that use only their own arguments (Celery's .si(), Dramatiq's pipe_ignore) ---


@task(takes_context=True)
def add(context: Any, *numbers: int, **more: int) -> int:
    """The sum of its arguments, positional and named; ignores what came before."""
    _note(context, "add")
    return sum(numbers) + sum(more.values())


@task(takes_context=True)
def identity(context: Any, value: Any) -> Any:
    _note(context, "identity")
    return value


@task(takes_context=True)
def echo(context: Any, word: str) -> str:
    """Returns ``word``; the log tells the order in which echoes ran."""
    _note(context, f"echo:{word}")
    return word


@task(takes_context=True)
def fail(context: Any, *args: Any) -> None:
    _note(context, "fail")
    raise ExpectedError(f"failed on purpose with {args!r}")


@task(takes_context=True)
def fails_first_attempt(context: Any, value: Any) -> Any:
    """Fails its first attempt, returns ``value`` on the next (given max_attempts > 1)."""
    _note(context, "fails_first_attempt")
    if context.attempt == 1:
        raise ExpectedError("first attempt fails on purpose")
    return value


@task(takes_context=True)
def return_priority(context: Any) -> str:
    _note(context, "return_priority")
    return f"Priority: {context.task_result.task.priority}"


@task(takes_context=True)
def rendezvous(context: Any, key: str, parties: int) -> int:
    """Arrives at ``key`` and waits until ``parties`` runs arrived (at most 30 s, then
    fails): it only succeeds when that many run at the same time."""
    _note(context, "rendezvous")
    redis = get_redis()
    arrived = int(redis.incr(key))
    deadline = time.monotonic() + 30
    while int(redis.get(key) or 0) < parties:
        if time.monotonic() > deadline:
            raise ExpectedError(f"only {int(redis.get(key) or 0)} of {parties} arrived")
        time.sleep(0.01)
    return arrived


# --- steps that use what came before (Celery's .s(), Dramatiq's default) ---


@task(takes_context=True)
def accumulate(context: Any, *numbers: int) -> int:
    """Its numbers plus every number the steps before it returned (Celery's ``add.s(n)``
    in a chain, ``tsum.s()`` as a chord's body)."""
    _note(context, "accumulate")
    return sum(numbers) + sum(_upstream(context))


@task(takes_context=True)
def passthrough(context: Any) -> Any:
    """What the one step before it returned (Celery's ``identity.s()`` in a chain)."""
    _note(context, "passthrough")
    [value] = _upstream(context)
    return value


@task(takes_context=True)
def collect(context: Any) -> list[Any]:
    """The list of what the steps before it returned, in order (a chord's body)."""
    _note(context, "collect")
    return _upstream(context)


@task(takes_context=True)
def add_to_all(context: Any, n: int) -> list[int]:
    """Each value before it plus ``n`` (Celery's ``add_to_all``)."""
    _note(context, "add_to_all")
    return [value + n for value in _upstream(context)]


@task(takes_context=True)
def extend(context: Any, *extra: Any) -> list[Any]:
    """The values before it, then ``extra`` (Celery's ``add.s([5])`` on a list)."""
    _note(context, "extend")
    return [*_upstream(context), *extra]


@task(takes_context=True)
def extend_each(context: Any, *extra: Any) -> list[Any]:
    """Each value before it (a list), with ``extra`` appended."""
    _note(context, "extend_each")
    return [[*value, *extra] for value in _upstream(context)]


@task(takes_context=True)
def return_args(context: Any, *args: Any) -> list[Any]:
    """Its arguments, then what the steps before it returned (Dramatiq's pipe)."""
    _note(context, "return_args")
    return [*args, *_upstream(context)]


@task(takes_context=True)
def parents(context: Any, i: int) -> list[Any]:
    """``i`` and the job ids of the steps it waited for (Celery's ``ids``)."""
    _note(context, "parents")
    return [i, [result.id for result in context.dependency_results]]


@task(takes_context=True)
def outcomes(context: Any) -> list[list[Any]]:
    """How each step before it ended, however: [status, return value or exception class]
    (what an ``on_complete`` step sees)."""
    _note(context, "outcomes")
    seen = []
    for result in context.dependency_results:
        if result.status.name == "SUCCESSFUL":
            seen.append([result.status.name, result.return_value])
        else:
            seen.append([result.status.name, result.errors[-1].exception_class_path])
    return seen
