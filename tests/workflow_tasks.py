"""Tasks for the workflow tests: each step records in Redis when it ran (where every process
sees it), so that the order of steps can be checked outside the workers."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from django_redislock import get_redis
from django_redislock.tasks import task

RUNS = "test:workflow:runs"  # one JSON object a run: name, start, end, pid, ok


def runs() -> list[dict[str, Any]]:
    return [json.loads(r) for r in get_redis().lrange(RUNS, 0, -1)]


def record(name: str, start: float, ok: bool = True) -> None:
    entry = {"name": name, "start": start, "end": time.time(), "pid": os.getpid(), "ok": ok}
    get_redis().rpush(RUNS, json.dumps(entry))


@task()
def step(name: str, seconds: float = 0.0, fail: bool = False) -> str:
    """Runs ``seconds``, then succeeds (returning its name) or raises."""
    start = time.time()
    time.sleep(seconds)
    record(name, start, not fail)
    if fail:
        raise RuntimeError(f"step {name} failed on purpose")
    return name


@task(takes_context=True)
def gather(context: Any, name: str) -> list[Any]:
    """Returns the return values of the steps it waited for, in their order."""
    start = time.time()
    found = [
        r.return_value if r is not None and r.status.name == "SUCCESSFUL" else None
        for r in context.dependency_results
    ]
    record(name, start)
    return found


PROCEED = "test:workflow:proceed"  # a list: a progress step waits for a token here


@task(takes_context=True)
def progressing(context: Any, total: int, wait: bool = False) -> int:
    """Publishes its progress step by step (with ``wait``, waits for a token on PROCEED
    after the first step, so that a test sees it mid-way)."""
    for done in range(1, total + 1):
        context.set_progress(done, total)
        context.metadata["last"] = done
        context.save_metadata()
        if wait and done == 1:
            get_redis().blpop([PROCEED], 30)
    return total


@task(takes_context=True)
def bad_metadata(context: Any) -> None:
    context.metadata["when"] = object()
    context.save_metadata()


@task(unique_for=60)
def unique_step(name: str) -> str:
    return name
