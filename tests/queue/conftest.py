"""The queue tests' own fixtures: ``retrying`` (see ``retrying``) and ``sched``, a SCHEDULE
of four entries every 60 s for the schedule's tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fixtures import Backend

from .retrying import retrying

__all__ = ["retrying", "sched"]


@pytest.fixture
def sched(backend: Backend, settings: Any) -> Backend:
    """``sweep`` and ``backfill`` (catching up) into queue "default"; ``poison``, failing
    into "mail" (one attempt); ``flaky``, failing into "retrying" (three attempts)."""
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {
            "default": {},
            "mail": {"MAX_ATTEMPTS": 1},
            "retrying": {"MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 60},
        },
        "SCHEDULE": {
            "sweep": {"task": "tests.tasks.record", "every": 60, "args": [1]},
            "backfill": {
                "task": "tests.tasks.record",
                "every": 60,
                "args": [2],
                "catch_up": True,
            },
            "poison": {"task": "tests.tasks.boom", "every": 60, "queue": "mail"},
            "flaky": {"task": "tests.tasks.boom", "every": 60, "queue": "retrying"},
        },
    }
    return backend
