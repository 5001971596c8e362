"""Sending what a process gathered of the task history to Redis: a queue's flush as one
pipeline (``send``), whatever the number of runs: each (task, minute)'s counts added to its
ten-minute and hour buckets, the tasks' set and each task's recent jobs kept up to date,
every key given its expiry (``keys``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from ..queue.queue import Queue
from .keys import KEEP, MARGIN, RECENT, SPAN_MINUTES, HistoryKeys, hour_expiry, span_expiry

logger = logging.getLogger(__name__)


@dataclass
class Counts:
    """Runs of one task in one minute: how many, how many failed, and their durations."""

    runs: int = 0
    failures: int = 0
    buckets: dict[int, int] = field(default_factory=dict)

    def add(self, other: Counts) -> None:
        self.runs += other.runs
        self.failures += other.failures
        for index, count in other.buckets.items():
            self.buckets[index] = self.buckets.get(index, 0) + count


Minutes = dict[tuple[str, int], Counts]  # (task, epoch minute) -> its runs
Jobs = dict[str, dict[str, int]]  # task -> {job id: when it last started or ended (epoch ms)}


def send(
    queue: Queue, minutes: Minutes, now: float | None = None, *, jobs: Jobs | None = None
) -> None:
    """Add ``minutes``, and ``jobs`` to the tasks' recent jobs, to the history of ``queue``
    in Redis: one pipeline."""
    keys = HistoryKeys(queue.keys)
    hours: dict[tuple[str, int], Counts] = {}
    spans: set[tuple[str, int]] = set()
    pipe = queue.client.pipeline(transaction=False)
    for (task, minute), counts in minutes.items():
        span, offset = divmod(minute, SPAN_MINUTES)
        spans.add((task, span))
        key = keys.span(task, span)
        _increments(pipe, key, f"{offset}:", counts)
        hours.setdefault((task, minute // 60), Counts()).add(counts)
    for (task, hour), counts in hours.items():
        key = keys.hour(task, hour)
        _increments(pipe, key, "", counts)
        pipe.expireat(key, hour_expiry(hour))
    for task, span in spans:
        pipe.expireat(keys.span(task, span), span_expiry(span))
    now_ms = int((time.time() if now is None else now) * 1000)
    if hours:  # (only jobs that started, none ended: no run to count yet)
        pipe.zadd(keys.tasks, {task: now_ms for task, _ in hours})
        pipe.zremrangebyscore(keys.tasks, "-inf", now_ms - (KEEP + MARGIN) * 1000)
        pipe.expire(keys.tasks, KEEP + MARGIN)
    indexes: dict[int, str] = {}  # the pipeline's place of each index's first command
    for task, ids in (jobs or {}).items():
        if ids:
            key = indexes[len(pipe)] = keys.recent(task)
            pipe.zadd(key, ids)
            pipe.zremrangebyrank(key, 0, -RECENT - 1)
            pipe.expire(key, KEEP + MARGIN)
    _checked(queue, pipe.execute(raise_on_error=False), indexes)


def _checked(queue: Queue, replies: list[Any], indexes: dict[int, str]) -> None:
    """Raise the first error of a flush's ``replies``, but for a task's index of recent jobs
    of another type than a sorted set: deleted (and logged), a new one starts at the next
    flush; what the flush added to the other keys stays (the pipeline is no transaction)."""
    unreadable = set()
    for place, reply in enumerate(replies):
        if not isinstance(reply, Exception):
            continue
        key = indexes.get(place, indexes.get(place - 1))  # its ZADD or its trim
        if (
            key is None
            or not isinstance(reply, redis.ResponseError)
            or "WRONGTYPE" not in str(reply)
        ):
            raise reply
        unreadable.add(key)
    for key in unreadable:
        logger.warning("The recent jobs index %r was no sorted set: deleted, started anew", key)
        queue.client.delete(key)


def _increments(pipe: Any, key: str, prefix: str, counts: Counts) -> None:
    pipe.hincrby(key, prefix + "n", counts.runs)
    if counts.failures:
        pipe.hincrby(key, prefix + "f", counts.failures)
    for index, count in counts.buckets.items():
        pipe.hincrby(key, f"{prefix}h{index}", count)
