"""Reading the per-task history back: a task's minutes over the last hours (``series``) and
each task's last day in totals (``summaries``), for the admin and the metrics.

Whatever a bucket holds that this app does not write (a field of another name, a value that
is no count, a key of another type) is skipped and counted in ``skipped``: the rest is shown.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from ..queue.queue import Queue
from .durations import TOP, merged, percentile
from .keys import SPAN_MINUTES, HistoryKeys

MAX_HOURS = 24
MAX_TASKS = 200  # tasks a queue's summaries show, the most recently run first


@dataclass(frozen=True)
class Minute:
    """The runs of a task in one minute (or several merged, ``merged_minutes``)."""

    start: float  # epoch s
    runs: int = 0
    failures: int = 0
    buckets: Mapping[int, int] = field(default_factory=dict)

    @property
    def p50(self) -> float | None:
        return percentile(self.buckets, 0.5)

    @property
    def p95(self) -> float | None:
        return percentile(self.buckets, 0.95)


@dataclass(frozen=True)
class Series:
    task: str
    minutes: list[Minute]  # oldest first, one a minute, the current one last
    skipped: int  # unreadable fields (or keys) left out


@dataclass(frozen=True)
class Summary:
    """A task's last day: the current hour and the 23 before."""

    task: str
    runs: int
    failures: int
    p50: float | None
    p95: float | None
    hourly: list[int]  # runs an hour, oldest first
    skipped: int


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _count(value: Any) -> int | None:
    try:
        number = int(_text(value))
    except ValueError:
        return None
    return number if number >= 0 else None


class _Fields:
    """The counts of one hash by its fields' prefix (``"<m>:"`` or ``""``)."""

    def __init__(self, reply: Any) -> None:
        self.by_prefix: dict[str, Minute] = {}
        self.skipped = 0
        if not isinstance(reply, dict):  # an error (WRONGTYPE): the whole key set aside
            self.skipped = 0 if reply is None else 1
            return
        found: dict[str, tuple[list[int], dict[int, int]]] = {}
        for raw_name, raw_value in reply.items():
            name, count = _text(raw_name), _count(raw_value)
            head, sep, what = name.rpartition(":")
            prefix = head + sep
            index = _bucket_index(what)
            bad_prefix = sep and not (len(head) == 1 and head.isdigit())
            if count is None or bad_prefix or (what not in ("n", "f") and index is None):
                self.skipped += 1
                continue
            totals, buckets = found.setdefault(prefix, ([0, 0], {}))
            if what == "n":
                totals[0] = count
            elif what == "f":
                totals[1] = count
            else:
                assert index is not None
                buckets[index] = count
        for prefix, (totals, buckets) in found.items():
            self.by_prefix[prefix] = Minute(0.0, totals[0], totals[1], buckets)

    def get(self, prefix: str) -> Minute | None:
        return self.by_prefix.get(prefix)


def _bucket_index(what: str) -> int | None:
    if len(what) < 2 or what[0] != "h" or not what[1:].isdigit():
        return None
    index = int(what[1:])
    return index if index <= TOP else None


def _replies(queue: Queue, keys: list[str]) -> list[Any]:
    pipe = queue.client.pipeline(transaction=False)
    for key in keys:
        pipe.hgetall(key)
    replies = pipe.execute(raise_on_error=False)
    for reply in replies:  # a connection error is Redis away; a WRONGTYPE, a key set aside
        if isinstance(reply, Exception) and not isinstance(reply, redis.ResponseError):
            raise reply
    return list(replies)


def _hours(hours: int) -> int:
    if not isinstance(hours, int) or isinstance(hours, bool) or not 1 <= hours <= MAX_HOURS:
        raise ValueError(f"hours must be an int from 1 to {MAX_HOURS}, not {hours!r}.")
    return hours


def series(queue: Queue, task: str, hours: int = MAX_HOURS, *, now: float | None = None) -> Series:
    """The minutes of ``task`` in ``queue`` over the last ``hours`` (1 to 24), one a minute,
    the current one last (a minute without runs is there, empty)."""
    if not isinstance(task, str) or not task:
        raise ValueError(f"task must be a non-empty str, not {task!r}.")
    last = int((time.time() if now is None else now) // 60)
    first = last - _hours(hours) * 60 + 1
    spans = list(range(first // SPAN_MINUTES, last // SPAN_MINUTES + 1))
    keys = HistoryKeys(queue.keys)
    read = [_Fields(r) for r in _replies(queue, [keys.span(task, s) for s in spans])]
    minutes = []
    for minute in range(first, last + 1):
        span, offset = divmod(minute, SPAN_MINUTES)
        found = read[span - spans[0]].get(f"{offset}:")
        if found is None:
            minutes.append(Minute(minute * 60.0))
        else:
            minutes.append(Minute(minute * 60.0, found.runs, found.failures, found.buckets))
    return Series(task, minutes, sum(r.skipped for r in read))


def tasks(queue: Queue, limit: int = MAX_TASKS) -> list[str]:
    """The tasks with a history in ``queue`` (the ``limit`` most recently run), by name."""
    names = queue.client.zrevrange(HistoryKeys(queue.keys).tasks, 0, limit - 1)
    return sorted(_text(name) for name in names)


def summaries(queue: Queue, *, now: float | None = None) -> list[Summary]:
    """Each task's last day in ``queue``, by task name: one pipeline."""
    names = tasks(queue)
    hour = int((time.time() if now is None else now) // 3600)
    hours = range(hour - MAX_HOURS + 1, hour + 1)
    keys = HistoryKeys(queue.keys)
    replies = _replies(queue, [keys.hour(task, h) for task in names for h in hours])
    found = []
    for number, task in enumerate(names):
        read = [_Fields(r) for r in replies[number * MAX_HOURS : (number + 1) * MAX_HOURS]]
        totals = [r.get("") or Minute(0.0) for r in read]
        buckets = merged(t.buckets for t in totals)
        found.append(
            Summary(
                task=task,
                runs=sum(t.runs for t in totals),
                failures=sum(t.failures for t in totals),
                p50=percentile(buckets, 0.5),
                p95=percentile(buckets, 0.95),
                hourly=[t.runs for t in totals],
                skipped=sum(r.skipped for r in read),
            )
        )
    return found


def merged_minutes(minutes: list[Minute], width: int) -> list[Minute]:
    """``minutes`` in groups of ``width`` (a chart's points), each as one."""
    groups = []
    for at in range(0, len(minutes), width):
        group = minutes[at : at + width]
        runs, failures = sum(m.runs for m in group), sum(m.failures for m in group)
        groups.append(Minute(group[0].start, runs, failures, merged(m.buckets for m in group)))
    return groups
