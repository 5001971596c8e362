"""Waiting for a condition in tests: never for the clock alone (CI shares two cores)."""

from __future__ import annotations

import time
from collections.abc import Callable

from django_redislock import get_redis

# A lock waiter's fallback re-check, with LOCK_RETRY_DELAY 5 s, comes 2.5 s at the earliest:
# one that got the lock sooner was woken by the release (a loaded machine's stalls stay well
# below this), and one that gave up sooner did at its deadline.
SLOW_RETRY_DELAY = 5.0
BEFORE_ANY_RECHECK = 2.0


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, what: str = "") -> None:
    """Return once ``predicate()`` is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"condition not reached in time: {what}"
        time.sleep(0.005)


def server_now() -> float:
    """The Redis server's clock (seconds), as the scripts read it."""
    seconds, micros = get_redis().time()
    return float(seconds) + micros / 1_000_000
