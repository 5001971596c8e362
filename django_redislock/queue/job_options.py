"""The options an enqueue decides (issue 26): ``expires``, ``unique_for``, ``unique_by_args``
and ``debounce``, each checked before anything is sent to Redis, and the id
``unique_by_args`` derives.

- ``expires`` (s): kept in the job's metadata under ``EXPIRES_KEY`` (reserved, as
  ``time_limit`` is), so that the worker reads it with the job and POP/START read it in
  Redis: a job not started within ``expires`` s of becoming due is buried as "expired".
- ``unique_for`` (s): ENQUEUE_OPTED keeps a marker ``u:<id>`` that long from the enqueue that
  created the job; within it, an enqueue of the id returns the existing job unchanged.
- ``unique_by_args``: the id is ``unique_job_id(task, args, kwargs)``.
- ``debounce`` (s): each enqueue of the id sets its due time to ``debounce`` s from then and
  keeps its values (it replaces the pending job, or is the follow-up of a running one).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from .options import checked_option, checked_seconds

EXPIRES_KEY = "expires"  # a job's own expiry, in its metadata (reserved, as "time_limit" is)
OPTION_ARGUMENTS = frozenset({"expires", "unique_for", "unique_by_args", "debounce"})
UNIQUE_ID_PREFIX = "args-"


class Options(NamedTuple):
    """One job's checked options, as ENQUEUE_OPTED takes them (ms; 0: not set)."""

    replace: bool
    unique_ms: int
    debounce_ms: int


class EnqueueOptions(NamedTuple):
    """What a job's options left in Redis, as the admin shows them (s; None: not set)."""

    unique_left: float | None  # how long its unique_for window still holds
    debounce: float | None  # the debounce that set its due time


def seconds_or_none(value: Any, name: str) -> float | None:
    """``value`` as a number of seconds > 0 (None: not set); TypeError or ValueError naming
    ``name`` otherwise (the same check as a task's option of that name)."""
    return None if value is None else float(checked_seconds(name, value, zero=False))


def unique_job_id(task: Any, args: Any, kwargs: Any) -> str:
    """The id ``unique_by_args=True`` gives: ``"args-"`` and the SHA-256 (hex) of the JSON
    ``[task, args, kwargs]``, keys sorted, no spaces, ASCII only (tuples count as lists;
    ``1``, ``1.0`` and ``True`` stay distinct; ``f(1)`` and ``f(x=1)`` are distinct)."""
    if not isinstance(task, str):
        raise TypeError(f"task must be a dotted path (str), not {type(task).__name__}.")
    try:
        canonical = json.dumps(
            [task, list(args), dict(kwargs or {})],
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=True,
            allow_nan=False,
        )
    except (TypeError, ValueError) as exc:
        raise TypeError(f"unique_by_args needs JSON arguments: {exc}") from exc
    return UNIQUE_ID_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


def with_expires(meta: Any, expires: Any) -> Any:
    """``meta`` carrying ``expires`` (checked) under ``EXPIRES_KEY``; one already in ``meta``
    (a job's meta enqueued again) is checked too, and ``expires`` replaces it."""
    seconds = seconds_or_none(expires, "expires")
    if isinstance(meta, Mapping) and seconds is None and EXPIRES_KEY in meta:
        seconds_or_none(meta[EXPIRES_KEY], f"meta[{EXPIRES_KEY!r}]")
    if seconds is None:
        return meta
    if meta is None:
        return {EXPIRES_KEY: expires}
    return {**meta, EXPIRES_KEY: expires} if isinstance(meta, Mapping) else meta


def checked_options(
    job_id: Any,
    replace: bool,
    delay: Any,
    at: Any,
    unique_for: Any,
    unique_by_args: Any,
    debounce: Any,
) -> Options:
    """The options of one job, checked alone and together: ``unique_for`` and ``debounce``
    need an id (``job_id``, or ``unique_by_args=True``, not both); ``unique_for`` takes
    neither ``replace=True`` nor ``debounce``; ``debounce`` sets the due time itself (no
    ``delay``/``at``) and always replaces, whatever ``replace`` says."""
    checked_option("unique_by_args", unique_by_args)
    unique = seconds_or_none(unique_for, "unique_for")
    wait = seconds_or_none(debounce, "debounce")
    if unique_by_args and job_id is not None:
        raise ValueError("Pass job_id or unique_by_args=True, not both.")
    for name, value in (("unique_for", unique), ("debounce", wait)):
        if value is not None and job_id is None and not unique_by_args:
            raise ValueError(f"{name} needs an id: pass job_id, or unique_by_args=True.")
    if unique is not None and wait is not None:
        raise ValueError("Pass unique_for or debounce, not both (one keeps, one replaces).")
    if unique is not None and replace:
        raise ValueError("unique_for keeps the existing job: it takes no replace=True.")
    if wait is not None and (delay is not None or at is not None):
        raise ValueError("debounce sets the due time itself: pass no delay or at with it.")
    return Options(
        replace or wait is not None,
        0 if unique is None else max(1, round(unique * 1000)),
        0 if wait is None else max(1, round(wait * 1000)),
    )


def job_expires_ms(meta: Mapping[str, Any]) -> int | None:
    """A job's own expiry in ms, from its metadata (None: none, or not a number)."""
    own = meta.get(EXPIRES_KEY)
    if isinstance(own, (int, float)) and not isinstance(own, bool) and 0 < own < math.inf:
        return max(1, round(own * 1000))
    return None
