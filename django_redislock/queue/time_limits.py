"""What a time limit is: a queue's ``TIME_LIMIT``, or a job's own ``time_limit`` (kept in its
metadata under ``META_KEY``), checked; the worker's ``time_limits`` enforces them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..conf import conf
from .jobs import Job

META_KEY = "time_limit"  # a job's own limit, in its metadata (reserved, as "backend" is)
MAX_TIME_LIMIT = 365 * 86400.0  # a year: more is a typo (or milliseconds)


class Named(Protocol):
    """A queue, as far as its time limit settings go: its name in ``REDISLOCK['QUEUES']``."""

    name: str


def checked_time_limit(value: Any, name: str = "time_limit") -> float | None:
    """``value`` as a time limit in seconds (None: none); TypeError or ValueError naming
    ``name`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds or None, not {type(value).__name__}.")
    if not 0 < value <= MAX_TIME_LIMIT:  # NaN fails too
        raise ValueError(
            f"{name} must be > 0 and at most {MAX_TIME_LIMIT:.0f} s (a year), not {value!r}."
        )
    return float(value)


def with_time_limit(meta: Any, time_limit: Any) -> Any:
    """A job's ``meta`` carrying ``time_limit`` (checked) under ``META_KEY``. A limit already
    in ``meta`` (a job's meta enqueued again) is checked too; ``time_limit`` replaces it. A
    ``meta`` of the wrong type is left for ``encoded_meta`` to refuse."""
    seconds = checked_time_limit(time_limit)
    if not isinstance(meta, Mapping):
        return meta if seconds is None or meta is not None else {META_KEY: time_limit}
    if seconds is None:
        if META_KEY in meta:
            checked_time_limit(meta[META_KEY], f"meta[{META_KEY!r}]")
        return meta
    return {**meta, META_KEY: time_limit}


def queue_time_limits(queues: Sequence[Named]) -> dict[str, float | None]:
    """Each queue's ``TIME_LIMIT``, checked (ValueError or TypeError naming the setting)."""
    options = conf.QUEUES
    return {
        q.name: checked_time_limit(
            options[q.name].get("TIME_LIMIT"), f"REDISLOCK['QUEUES'][{q.name!r}]['TIME_LIMIT']"
        )
        for q in queues
    }


def queue_graces(queues: Sequence[Named]) -> dict[str, float]:
    """Each queue's ``TIME_LIMIT_GRACE``: how long a job may go on after its time limit or its
    cancel before its lease lapses (in process mode: its worker process is ended)."""
    return {q.name: float(conf.QUEUES[q.name]["TIME_LIMIT_GRACE"]) for q in queues}


def job_time_limit(job: Job, default: float | None) -> float | None:
    """The limit ``job`` runs under: its own, else its queue's ``default``."""
    own = job.meta.get(META_KEY)
    if isinstance(own, (int, float)) and not isinstance(own, bool) and 0 < own < math.inf:
        return float(own)
    return default
