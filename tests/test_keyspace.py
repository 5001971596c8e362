"""What stays in Redis once names are no longer used (issue 24, point 3): after 10,000
distinct names of every kind (locks released and lapsed, fenced locks, semaphores released
and lapsed, stocks set and deleted, rate limits, finished jobs, workflows) are done with, a
sweep of the whole keyspace finds only what the README says stays: fence counters for a
minute, one sweep marker per lock shard, a queue's arrival counter and wake-up list, a
join's wake-ups for a minute.

The upkeep the README names runs meanwhile: the admin's listings, further jobs finishing
(each trims the finished-job index), and the workers' clean-up of ended workflows' records.
``STALE_MARGIN_MS`` is set to 0 so that entries of locks that ended unreleased go at once
rather than a minute later (the margin covers clock skew between hosts, not tested here)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from django.test import override_settings

from django_redislock import Lock, Semaphore, Stock, get_queue
from django_redislock.locks import keys as lock_keys
from django_redislock.locks import listing
from django_redislock.locks.listing import list_locks
from django_redislock.ratelimit.limiter import RateLimit
from django_redislock.redis.clients import get_redis
from django_redislock.semaphores import listing as semaphore_listing
from django_redislock.semaphores.listing import list_semaphores
from django_redislock.workflows import chain, step
from django_redislock.workflows.workflow import sweep as sweep_workflows
from tests.support.fixtures import Backend
from tests.tasks import record

pytestmark = pytest.mark.django_db

NAMES = {"fakeredis": 300, "redis": 2_000, "cluster": 1_000}
# The listings' sweeps take this many entries per call here: every name's kind then leaves
# the indexes over several calls, as a site's 10,000s do with the real batch sizes.
SWEEP_BATCH = 250
FENCE_KEEP_MS = 60_000


def what_stays(key: str, kind: str, pttl: int) -> str | None:
    """The README's name for ``key`` if it may stay, else None."""
    rules = [
        (r":\{L\d+\}:s?f:", "string", "a fence counter, for a minute"),
        (r":\{L\d+\}:names:swept$", "string", "a lock shard's sweep marker"),
        (r":\{Q:default\}:seq$", "string", "the queue's arrival counter"),
        (r":\{Q:default\}:wake$", "list", "the queue's wake-up list"),
        (r":\{Q:default\}:result:", "hash", "a finished job, for RESULT_TTL"),
        (r":\{Q:default\}:done$", "zset", "the finished jobs' index"),
        (r":\{Q:default\}:end:", "list", "a join's wake-ups, for a minute"),
    ]
    for pattern, wanted, label in rules:
        if re.search(pattern, key) and kind == wanted:
            if "fence" in label and not 0 < pttl <= FENCE_KEEP_MS:
                return None
            if "RESULT_TTL" in label and pttl <= 0:
                return None
            if "join" in label and not 0 < pttl <= FENCE_KEEP_MS:
                return None
            return label
    return None


def left_over(client: Any) -> dict[str, str]:
    """Every key that may not stay, with its type."""
    found: dict[str, str] = {}
    nodes = client.get_primaries() if hasattr(client, "get_primaries") else [None]
    for node in nodes:
        conn = client if node is None else client.get_redis_connection(node)
        for raw in conn.scan_iter(count=1000):
            key = raw.decode()
            kind = conn.type(key).decode()
            if kind != "none" and what_stays(key, kind, conn.pttl(key)) is None:
                found[key] = kind
    return found


def use_every_kind(count: int) -> None:
    queue = get_queue("default")
    for i in range(count):
        with Lock(f"released:{i}", ttl=5):
            pass
        with Lock(f"fenced:{i}", ttl=5, fencing=True):
            pass
        assert Lock(f"crashed:{i}", ttl=0.05).acquire(0)  # its holder never releases
        with Semaphore(f"export:{i}", limit=2, ttl=5):
            pass
        assert Semaphore(f"left:{i}", limit=2, ttl=0.05).acquire(0)
        assert RateLimit(f"points:{i}", rate="5/s").hit()
        stock = Stock(f"sale:{i}")
        stock.set(3)
        stock.add(1)
        assert stock.delete()
        queue.enqueue("tests.tasks.record", args=[i], job_id=f"job:{i}")
        if i % 20 == 0:  # a workflow: its steps wait, are released, end; its record
            chain(step(record, i), step(record, i)).enqueue()
        if i % 500 == 499:
            for job in queue.pop(500, worker="w"):
                queue.ack(job, "null")
    while jobs := queue.pop(1000, worker="w"):  # (the second steps come once released)
        for job in jobs:
            queue.ack(job, "null")


def upkeep(round_: int) -> None:
    """What runs anyway on a live site: the admin's listings, and jobs finishing."""
    list_locks()
    list_semaphores()
    queue = get_queue("default")
    queue.enqueue("tests.tasks.record", args=[0], job_id=f"later:{round_}")
    for job in queue.pop(1, worker="w"):
        queue.ack(job)
    sweep_workflows(queue)  # (the workers' minutely clean-up of ended workflows' records)


def test_names_no_longer_used_leave_only_what_the_readme_says(
    backend: Backend, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock_keys, "STALE_MARGIN_MS", 0)
    monkeypatch.setattr(listing, "STALE_MARGIN_MS", 0)
    monkeypatch.setattr(listing, "SWEEP_BATCH", SWEEP_BATCH)
    monkeypatch.setattr(semaphore_listing, "SWEEP_BATCH", SWEEP_BATCH)
    queues = {"default": {"RESULT_TTL": 1}}
    with override_settings(REDISLOCK={**settings.REDISLOCK, "QUEUES": queues}):
        use_every_kind(NAMES[backend.kind])
        client = get_redis()
        deadline = time.monotonic() + 60
        round_ = 0
        while (found := left_over(client)) and time.monotonic() < deadline:
            upkeep(round_)
            round_ += 1
            time.sleep(0.2)
        sample = dict(list(found.items())[:20])
        assert found == {}, f"{len(found)} keys stay that the README does not name: {sample}"
