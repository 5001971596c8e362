"""Waiting for a condition in tests: never for the clock alone (CI shares two cores)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from django_redislock import get_redis

R = TypeVar("R")

# A lock waiter's fallback re-check, with LOCK_RETRY_DELAY 30 s, comes 15 s at the earliest:
# one that got the lock sooner was woken by the release (a loaded machine's stalls of a few
# seconds stay well below this), and one that gave up sooner did at its deadline.
SLOW_RETRY_DELAY = 30.0
BEFORE_ANY_RECHECK = 10.0


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, what: str = "") -> None:
    """Return once ``predicate()`` is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"condition not reached in time: {what}"
        time.sleep(0.005)


def ttl_set_since(left: float | None, ttl: float, since: float) -> bool:
    """Whether ``left`` (seconds, read just now) is what a TTL of ``ttl`` seconds set after
    ``since`` (a ``time.monotonic()``) can have left: at most ``ttl``, and at least ``ttl``
    less all the time since (a stalled machine only widens the range, never misses it)."""
    return left is not None and ttl - (time.monotonic() - since) - 0.002 < left <= ttl


def server_now() -> float:
    """The Redis server's clock (seconds), as the scripts read it."""
    seconds, micros = get_redis().time()
    return float(seconds) + micros / 1_000_000


class Stalls:
    """Notes each time this process (and, with ``probe``, the server the probe asks) stood
    still for ``over`` seconds or more: a thread runs ``probe`` and sleeps a few ms in a loop,
    and records each turn that took too long. A timing sample that a stall overlapped says
    nothing about the code under test, whose bound it may miss; one that no stall overlapped
    must keep to the bound. Use as a context manager."""

    def __init__(self, over: float = 0.1, probe: Callable[[], object] | None = None) -> None:
        self.over, self.probe = over, probe
        self.seen: list[tuple[float, float]] = []
        self._done = -math.inf  # when the last finished turn began
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="stalls")

    def _watch(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            if self.probe is not None:
                self.probe()
            time.sleep(0.005)
            ended = time.monotonic()
            if ended - began >= self.over:
                self.seen.append((began, ended))
            self._done = began

    def __enter__(self) -> Stalls:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def between(self, start: float, end: float) -> bool:
        """Whether a stall overlapped [start, end]. Waits for the watcher's turn that was
        under way at ``end`` to finish first: the machine may have stood still in it."""
        wait_for(lambda: self._done > end, what="the stall watcher took a turn")
        return any(began < end and ended > start for began, ended in self.seen)

    def again_if_stalled(self, run: Callable[[], R], tries: int = 10) -> R:
        """``run()``, done again when it failed (raised) in a run that a stall overlapped: a
        stalled machine may rightly fail what it did (a short TTL ran out meanwhile). A run
        that failed with no stall overlapping it fails the test, as does the last one.
        ``run`` must start afresh each time (its own names, or what it left cleaned up)."""
        for tried in range(1, tries + 1):
            start = time.monotonic()
            try:
                return run()
            except (Exception, pytest.fail.Exception):  # (pytest.fail's, pytest.raises's)
                if tried == tries or not self.between(start, time.monotonic()):
                    raise
        raise AssertionError("unreachable")

    def timed(self, action: Callable[[], R], tries: int = 20) -> tuple[R, float]:
        """``action()`` and the seconds it took, from a run that no stall overlapped: after
        one that a stall overlapped, ``action`` (repeatable) runs again, ``tries`` at most."""
        for _ in range(tries):
            start = time.monotonic()
            result = action()
            end = time.monotonic()
            if not self.between(start, end):
                return result, end - start
        raise AssertionError(f"the machine stalled in each of {tries} runs: {self.seen[-3:]}")
