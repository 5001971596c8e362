"""What ``Queue.enqueue`` accepts: job ids (new ones, and those a caller names), priorities
and due times, each checked before anything is sent to Redis."""

from __future__ import annotations

import base64
import math
import os
from collections import deque
from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple

from ..exceptions import MAX_RETRY_LATER
from .job_codec import encoded, encoded_meta


class Made(NamedTuple):
    """A job as ``enqueue`` checked it, before it is pushed (or run, in eager mode)."""

    id: str
    task: Any
    args: Any
    kwargs: Any
    priority: Any
    meta: Any


MAX_JOB_ID = 200
MAX_DELAY = MAX_RETRY_LATER  # seconds: a century
JOB_ARGUMENTS = frozenset(
    {"task", "args", "kwargs", "job_id", "delay", "at", "priority", "meta", "time_limit"}
    | {"max_attempts", "retry_backoff", "retry_backoff_max", "retry_on"}
    | {"concurrency_key", "concurrency_limit", "rate_key", "rate"}
)


def new_ids(count: int) -> Iterator[str]:
    # 120 random bits each, 20 URL-safe characters (15 bytes: base64 without padding); one
    # read of the OS's random source per batch. Never a leading "-": a command line would
    # take "--id -x…" for an option: "_" stands for it there (63 values for the first
    # character, not 64).
    chars = base64.urlsafe_b64encode(os.urandom(15 * count)).decode()
    return (_no_dash(chars[i : i + 20]) for i in range(0, 20 * count, 20))


def _no_dash(job_id: str) -> str:
    return "_" + job_id[1:] if job_id[0] == "-" else job_id


# New single ids are taken from a pool filled 256 at a time: one read of the OS's random
# source (a system call) per 256 enqueues, not one each. deque.popleft is atomic, so threads
# share it safely; a forked child starts with an empty pool, never its parent's ids.
_pool: deque[str] = deque()
os.register_at_fork(after_in_child=_pool.clear)


def new_id() -> str:
    try:
        return _pool.popleft()
    except IndexError:
        _pool.extend(new_ids(256))
        return _pool.popleft()


def job_values(
    job_id: str,
    task: Any,
    args: Any,
    kwargs: Any,
    priority: Any,
    meta: Any,
    delay: Any,
    at: Any,
) -> list[Any]:
    """One job's seven values in ENQUEUE's arguments, each checked."""
    stored = encoded(task, args, kwargs)
    return [
        job_id,
        *stored,
        encoded_meta(meta),
        checked_priority(priority),
        due_argument(delay, at),
    ]


def checked_job_id(job_id: Any) -> str:
    if not isinstance(job_id, str) or not job_id or len(job_id) > MAX_JOB_ID:
        raise ValueError(f"job_id must be a non-empty str of at most {MAX_JOB_ID} characters.")
    if not job_id.isprintable() or "{" in job_id or "}" in job_id:
        raise ValueError(f"job_id {job_id!r} contains braces or control characters.")
    return job_id


def checked_priority(priority: Any) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(f"priority must be an int, not {type(priority).__name__}.")
    if not -100 <= priority <= 100:
        raise ValueError(f"priority must be from -100 to 100, not {priority}.")
    return priority


def due_argument(delay: Any, at: Any) -> int:
    """The due argument of ENQUEUE: epoch ms for ``at``, minus the delay in ms for ``delay``."""
    if at is not None:
        if delay is not None:
            raise TypeError("Pass delay or at, not both.")
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise TypeError(f"at must be an aware datetime, not {at!r}.")
        return max(1, round(at.timestamp() * 1000))
    if delay is None:
        return 0
    return -round(checked_delay(delay) * 1000)


def checked_delay(delay: Any) -> float:
    if not isinstance(delay, (int, float)) or isinstance(delay, bool):
        raise TypeError(f"delay must be a number of seconds, not {type(delay).__name__}.")
    if math.isnan(delay) or math.isinf(delay) or delay < 0:
        raise ValueError(f"delay must be a finite number of seconds >= 0, not {delay!r}.")
    if delay > MAX_DELAY:  # a due time past that overflows Redis's integer replies
        raise ValueError(f"delay must be at most {MAX_DELAY:.0f} s (100 years), not {delay!r}.")
    return delay
