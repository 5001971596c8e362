"""EAGER steps' dependencies: the jobs run in this process just before the one running now,
that it depends on (none of them is in Redis), where ``context.dependency_results`` reads
them from. Apart from ``eager`` so that the task context may read them without importing
what runs jobs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

from .jobs import Job

_before: ContextVar[Mapping[str, Job] | None] = ContextVar("redislock_eager_before", default=None)


def ran_before(ref: str) -> Job | None:
    """The job ``ref`` names, if it ran here before the job running now (EAGER)."""
    before = _before.get()
    return None if before is None else before.get(ref)


@contextlib.contextmanager
def running_after(before: Mapping[str, Job]) -> Iterator[None]:
    """While a job runs whose dependencies ran here: ``before``, by ref."""
    token = _before.set(before)
    try:
        yield
    finally:
        _before.reset(token)
