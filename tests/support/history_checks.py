"""Checks the task history tests share: a history key lives a day past what it holds, and
sits under its queue's hash tag (one Cluster slot, one pipeline per flush)."""

from __future__ import annotations

from typing import Any

from redis.crc import key_slot

from django_redislock.history.keys import KEEP, MARGIN
from django_redislock.queue.queue import Queue


def assert_kept_a_day(client: Any, key: str, span_seconds: int = 0) -> None:
    """``key`` expires a day (``KEEP``) after the end of the ``span_seconds`` it holds,
    plus ``MARGIN``: more than ``KEEP`` from now, at most ``KEEP + span + MARGIN``."""
    ttl = client.ttl(key)
    assert KEEP < ttl <= KEEP + span_seconds + MARGIN, f"{key}: ttl {ttl}"


def assert_under_hash_tag(queue: Queue, key: str) -> None:
    """``key`` is one of ``queue``'s: its prefix, and the slot of the queue's other keys."""
    assert key.startswith(queue.keys.base), key
    assert key_slot(key.encode()) == key_slot(queue.keys.ready.encode()), key
