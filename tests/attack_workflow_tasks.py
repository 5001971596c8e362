"""Tasks for the attacks on dependencies and workflows (``tests/queue/test_dependency_attacks``).
Each run records itself in Redis (where every process sees it), so that the order of steps,
and how often each ran, can be checked from outside the workers."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from django_redislock import get_redis
from django_redislock.tasks import task

RUNS = "test:attack:runs"  # one JSON object a run: name, start, end, pid, ok


def runs() -> list[dict[str, Any]]:
    return [json.loads(r) for r in get_redis().lrange(RUNS, 0, -1)]


def names() -> list[str]:
    return [r["name"] for r in runs()]


def _record(name: str, start: float, ok: bool) -> None:
    entry = {"name": name, "start": start, "end": time.time(), "pid": os.getpid(), "ok": ok}
    get_redis().rpush(RUNS, json.dumps(entry))


@task()
def mark(name: str, seconds: float = 0.0, fail: bool = False) -> str:
    """Runs ``seconds``, records its run, then returns its name (or raises)."""
    start = time.time()
    if seconds:
        time.sleep(seconds)
    _record(name, start, not fail)
    if fail:
        raise RuntimeError(f"step {name} failed on purpose")
    return name


@task(takes_context=True)
def collect(context: Any, name: str) -> list[Any]:
    """Records its run and returns the return values of the steps it waited for, in
    ``depends_on`` order (None for one that did not succeed)."""
    start = time.time()
    found = [
        r.return_value if r is not None and r.status.name == "SUCCESSFUL" else None
        for r in context.dependency_results
    ]
    _record(name, start, True)
    return found
