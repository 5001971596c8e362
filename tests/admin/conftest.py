"""The admin tests' shared fixture: ``queue``, the default of the admin tests' queues."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.queue.queue import Queue
from tests.support.fixtures import Backend

from .test_admin import QUEUES


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return get_queue("default")
