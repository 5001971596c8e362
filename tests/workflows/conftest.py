"""The workflow tests' shared fixture: ``two_queues``, "default" and "other" (on Cluster,
two slots) with a Tasks backend that takes any queue, on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock import get_queue
from tests.support.fixtures import Backend


@pytest.fixture
def two_queues(backend: Backend, settings: Any) -> Any:
    options = {"LEASE": 30, "MAX_ATTEMPTS": 1, "RETRY_BACKOFF": 0}
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": options, "other": options}}
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}
    }
    return get_queue("default"), get_queue("other")
