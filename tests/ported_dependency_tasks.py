"""Tasks for ``tests/queue/test_ported_dependencies.py`` (the peers' dependency, pipeline,
chord and flow tests). Each run is noted in Redis, where the worker and the test both see
it; the tasks that take a context compute from ``context.dependency_results``, which is how
a job of ours reads what the jobs it waited for returned (huey passes it as an argument,
BullMQ reads it as ``getChildrenValues``)."""

from __future__ import annotations

import math
from typing import Any

from django_redislock import get_redis
from django_redislock.tasks import task

RUNS = "test:ported-dependencies:runs"  # the name of each run, in the order they started
TRIES = "test:ported-dependencies:tries"  # a hash: how many times each ``flaky`` key ran


def ran() -> list[str]:
    return [raw.decode() for raw in get_redis().lrange(RUNS, 0, -1)]


def reset() -> None:
    get_redis().delete(RUNS, TRIES)


def _note(name: Any) -> None:
    get_redis().rpush(RUNS, str(name))


def _succeeded(context: Any) -> list[Any]:
    """The return values of the dependencies that succeeded, in ``depends_on`` order."""
    return [
        found.return_value
        for found in context.dependency_results
        if found is not None and found.status.name == "SUCCESSFUL"
    ]


@task()
def mark(name: str, fail: bool = False) -> str:
    """Notes ``name``; raises RuntimeError with ``fail``, else returns ``name``."""
    _note(name)
    if fail:
        raise RuntimeError(f"{name} failed on purpose")
    return name


@task()
def value(name: str, returned: Any) -> Any:
    """Notes ``name`` and returns ``returned`` (any JSON, None included)."""
    _note(name)
    return returned


@task(takes_context=True)
def combine(context: Any, name: str) -> list[Any]:
    """Notes ``name``; returns what each dependency returned, in ``depends_on`` order (None
    for one that did not succeed or is no longer kept)."""
    _note(name)
    return [
        found.return_value if found is not None and found.status.name == "SUCCESSFUL" else None
        for found in context.dependency_results
    ]


@task(takes_context=True)
def outcomes(context: Any, name: str) -> list[Any]:
    """Notes ``name``; returns, per dependency in ``depends_on`` order, [its status, its
    return value or its last error's class path], or None for one no longer kept."""
    _note(name)
    found: list[Any] = []
    for result in context.dependency_results:
        if result is None:
            found.append(None)
        elif result.status.name == "SUCCESSFUL":
            found.append([result.status.name, result.return_value])
        else:
            found.append([result.status.name, result.errors[-1].exception_class_path])
    return found


@task(takes_context=True)
def add(context: Any, *numbers: int) -> int:
    """The sum of what the dependencies returned and of ``numbers`` (huey's ``add``, whose
    first argument is the previous step's result)."""
    total = sum(_succeeded(context)) + sum(numbers)
    _note(f"add={total}")
    return total


@task(takes_context=True)
def mul(context: Any, *numbers: int) -> int:
    """The product of what the dependencies returned and of ``numbers``."""
    product = math.prod(_succeeded(context)) * math.prod(numbers)
    _note(f"mul={product}")
    return product


@task(takes_context=True)
def fib(context: Any, first: int | None = None) -> list[int]:
    """One step of huey's ``fib`` pipeline: (a, b) -> (a + b, a), the pair read from the
    step before (the first step starts from ``first`` and 1)."""
    if first is not None:
        a, b = first, 1
    else:
        [(a, b)] = _succeeded(context)
    _note(f"fib={a + b}")
    return [a + b, a]


@task(takes_context=True)
def countdown(context: Any, start: int | None = None) -> int:
    """Takes ``start`` (else what the step before returned) and returns it less one; raises
    ValueError when it is below zero."""
    n = start if start is not None else _succeeded(context)[0]
    _note(f"countdown={n}")
    if n < 0:
        raise ValueError(f"{n} is below zero")
    return n - 1


@task()
def flaky(key: str, fails: int, returned: Any) -> Any:
    """Fails its first ``fails`` runs of ``key`` (RuntimeError), then returns ``returned``."""
    n = int(get_redis().hincrby(TRIES, key, 1))
    _note(f"{key}#{n}")
    if n <= fails:
        raise RuntimeError(f"{key}: run {n} fails")
    return returned
