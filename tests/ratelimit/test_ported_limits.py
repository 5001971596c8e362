"""The strategy tests of ``limits`` (``tests/test_strategy.py`` and ``tests/aio/
test_strategy.py``) that apply here, rewritten for ``RateLimit`` and ``AsyncRateLimit``: one
body each, run through both twins. ``RateLimit`` is a moving window (a pass frees its place
exactly one period later), so ``limits``' moving-window tests apply whole; ``hit(cost=n)``
is ``hit(n)``, ``test(limit)`` is ``peek().remaining >= 1``, ``get_window_stats()`` is
``peek()`` (``remaining``; ``reset_at`` for ``reset_time``), ``clear()`` is ``reset()``.
Waits are for the Redis server's clock to reach a moment, never a fixed sleep.

What does not apply, and why:
- The fixed-window and sliding-window-counter classes test those algorithms' own
  approximations (a window reset on the clock's boundary, a weighted previous window); the
  parts that hold for any exact limiter (a full window refuses the next hit, costs, test())
  are kept below as plain tests.
- An empty limiter's ``reset_time``: ``limits`` says now + the period; here ``reset_after``
  is 0 ("everything is already back"), documented on ``RateLimitState``.
- ``hit(cost=11)`` on a limit of 10 is False in ``limits``; here it is a ValueError (it could
  never pass: ``n`` is checked against the burst).
- ``RateLimitItemPerSecond(10_00_000, 2)`` (a million): the count is capped at 10,000 here
  (16 bytes per unit per key); the huge-cost test uses 10,000.
- Storage URIs (memcached, MongoDB, memory): Redis only, on fakeredis and a real server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from django_redislock.ratelimit.limiter import AsyncRateLimit, RateLimit, RateLimitState
from tests.support.waiting import server_now, wait_for

pytestmark = pytest.mark.usefixtures("backend")


class Twin:
    """Drives ``RateLimit`` or ``AsyncRateLimit`` (on one event loop, so one client)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.loop = asyncio.new_event_loop() if kind == "async" else None

    def limit(self, name: str, rate: str) -> Any:
        cls = RateLimit if self.kind == "sync" else AsyncRateLimit
        return cls(f"{self.kind}:{name}", rate=rate)

    def _run(self, result: Any) -> Any:
        return self.loop.run_until_complete(result) if self.loop is not None else result

    def hit(self, limit: Any, n: int = 1) -> bool:
        return bool(self._run(limit.hit(n)))

    def peek(self, limit: Any) -> RateLimitState:
        return self._run(limit.peek())  # type: ignore[no-any-return]

    def test(self, limit: Any, n: int = 1) -> bool:
        return self.peek(limit).remaining >= n

    def reset(self, limit: Any) -> None:
        self._run(limit.reset())


@pytest.fixture(params=["sync", "async"])
def twin(request: pytest.FixtureRequest) -> Iterator[Twin]:
    driver = Twin(request.param)
    yield driver
    if driver.loop is not None:
        driver.loop.close()


def test_a_full_window_refuses_and_says_when_it_frees(twin: Twin) -> None:
    limit = twin.limit("full", "10/2s")
    start = server_now()
    assert all(twin.hit(limit) for _ in range(10))
    assert not twin.hit(limit)
    state = twin.peek(limit)
    assert state.remaining == 0
    assert start + 2 <= state.reset_at <= server_now() + 2


def test_empty_stats(twin: Twin) -> None:
    state = twin.peek(twin.limit("empty", "10/2s"))
    assert (state.limit, state.remaining, state.retry_after, state.reset_after) == (10, 10, 0, 0)


def test_multiple_cost(twin: Twin) -> None:
    limit = twin.limit("cost", "10/2m")
    with pytest.raises(ValueError, match="n must be from 1 to the burst"):
        twin.hit(twin.limit("cost-k1", "10/2m"), 11)
    assert twin.hit(limit, 5)
    assert twin.peek(limit).remaining == 5
    assert not twin.test(limit, 6)
    assert not twin.hit(limit, 6)
    assert twin.hit(limit, 5)


def test_test_does_not_count(twin: Twin) -> None:
    limit = twin.limit("test", "2/h")
    assert twin.hit(limit)
    assert twin.test(limit)
    assert twin.hit(limit)
    assert not twin.test(limit)
    assert not twin.hit(limit)


def test_moving_window_stats(twin: Twin) -> None:
    limit = twin.limit("stats", "2/m")
    assert twin.hit(limit)
    first = server_now()  # no earlier than the first pass
    wait_for(lambda: server_now() >= first + 0.2)
    assert twin.hit(limit)
    assert not twin.hit(limit)
    state = twin.peek(limit)
    assert state.remaining == 0
    # one unit frees when the first pass leaves, everything when the second does
    assert 50 < state.retry_after < 60
    assert state.reset_after - state.retry_after >= 0.2
    assert state.reset_at - state.reset_after == pytest.approx(server_now(), abs=5)


def test_moving_window(twin: Twin) -> None:
    limit = twin.limit("moving", "10/4s")
    assert all(twin.hit(limit) for _ in range(5))
    start = server_now()  # no earlier than the first five
    wait_for(lambda: server_now() >= start + 1.5)
    assert all(twin.hit(limit) for _ in range(5))
    refused = twin.peek(limit)
    assert not twin.hit(limit)  # the first five are still in the window
    assert refused.remaining == 0
    assert refused.retry_after <= 4 - 1.5
    wait_for(lambda: twin.peek(limit).remaining == 5)  # the first five left, not the rest
    assert all(twin.hit(limit) for _ in range(5))
    assert not twin.hit(limit)


def test_moving_window_multiple_cost(twin: Twin) -> None:
    limit = twin.limit("moving-cost", "10/4s")
    start = server_now()
    assert twin.hit(limit, 5)
    wait_for(lambda: server_now() >= start + 1.5)
    assert all(twin.hit(limit) for _ in range(4))
    assert not twin.test(limit, 2)
    assert not twin.hit(limit, 2)
    assert twin.hit(limit)
    wait_for(lambda: twin.peek(limit).remaining == 5)  # the cost-5 hit left as one
    assert all(twin.hit(limit) for _ in range(5))
    assert twin.peek(limit).remaining == 0
    assert not twin.hit(limit, 2)


def test_moving_window_varying_cost(twin: Twin) -> None:
    limit = twin.limit("varying", "5/m")
    assert twin.hit(limit, 5)
    assert not twin.hit(limit, 2)
    twin.reset(limit)
    assert twin.hit(limit)


def test_moving_window_huge_cost(twin: Twin) -> None:
    limit = twin.limit("huge", "10000/2s")
    assert twin.hit(limit)
    assert twin.hit(limit, 9998)
    assert twin.peek(limit).remaining == 1
    twin.reset(limit)
    assert twin.peek(limit).remaining == 10000
