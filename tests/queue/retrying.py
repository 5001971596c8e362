"""What the retry-policy tests share (ours and the peers' ported ones): a queue whose
retries come at once unless a test says otherwise, and a drain that runs every job ready,
retries included."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.queue.worker.loop import Worker
from tests.support.fixtures import Backend

QUEUES = {"default": {"LEASE": 2, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0}}
BACKEND = "django_redislock.tasks.RedisTaskBackend"


@pytest.fixture
def retrying(backend: Backend, settings: Any) -> Backend:
    """Every backend; queue "default" with MAX_ATTEMPTS 2 and no backoff."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": []}}
    return backend


def drain() -> None:
    """Run every job ready, retries at once included, until none is left ready (a burst
    worker may stop while its last job's retry is on its way to Redis)."""
    queue = get_queue()
    while True:
        Worker(["default"], burst=True).run()
        counts = queue.counts()
        if counts["ready"] == counts["running"] == 0:
            return
