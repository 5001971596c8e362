"""``peek()``: what a limiter has left (remaining, the wait for one unit, the time until all
are back, the limit), read without counting a hit, on every backend; every answer checked
against the reference model at the server time it was read; and ``hit(report=True)``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from django_redislock.ratelimit.limiter import AsyncRateLimit, RateLimit, RateLimitState
from django_redislock.ratelimit.scripts import PEEK
from django_redislock.redis.clients import get_redis, run_script
from tests.support.servers import free_port

from .model import Model
from .test_edges import SECOND, future, write_state
from .test_limiter import hit

pytestmark = pytest.mark.usefixtures("backend")


def peek_raw(limit: RateLimit) -> tuple[tuple[int, int, int], int]:
    free, one, every, now = run_script(get_redis(), PEEK, [limit.key], limit._peek_arguments())
    return (int(free), int(one), int(every)), int(now)


def test_an_untouched_limiter_has_everything_left() -> None:
    state = RateLimit("fresh", rate="5/m").peek()
    assert isinstance(state, RateLimitState)
    assert (state.limit, state.remaining, state.retry_after, state.reset_after) == (5, 5, 0, 0)
    server = get_redis().time()
    assert abs(state.reset_at - (server[0] + server[1] / SECOND)) < 5
    assert (state.name, str(state.rate)) == ("fresh", "5/m")


def test_peek_counts_nothing() -> None:
    limit = RateLimit("looked-at", rate="3/m")
    for _ in range(10):
        assert limit.peek().remaining == 3
    assert [bool(limit.hit()) for _ in range(4)] == [True, True, True, False]
    assert limit.peek().remaining == 0


def test_remaining_and_times_follow_the_hits() -> None:
    limit = RateLimit("follow", rate="4/m")
    limit.hit()
    limit.hit(2)
    state = limit.peek()
    assert (state.remaining, state.retry_after) == (1, 0)
    assert 50 < state.reset_after <= 60  # the newest pass leaves the window in a minute
    limit.hit()
    full = limit.peek()
    assert full.remaining == 0
    refused = limit.hit()
    # one unit frees when the oldest pass leaves: what a refused hit is told, give or take
    # the time between the two calls
    assert 0 < refused.retry_after <= full.retry_after <= 60
    assert full.retry_after <= full.reset_after


def test_exact_at_the_window_edge() -> None:
    limit = RateLimit("peek-edge", rate="3/s")
    now = future()  # the script holds its clock at the newest pass (see test_edges)
    write_state(limit, [now - SECOND + 1, now - 500_000, now])
    assert peek_raw(limit) == ((0, 1, SECOND), now)
    write_state(limit, [now - SECOND, now - 500_000, now])
    assert peek_raw(limit) == ((1, 0, SECOND), now)


def test_burst_spacing_is_exact() -> None:
    # 3 per second, burst 1: the GCRA is 333333 1/3 us ahead after a pass just now.
    limit = RateLimit("peek-spacing", rate="3/s", burst=1)
    now = future()
    write_state(limit, [0, 0, now], at=now + 333_333, frac=1)
    assert peek_raw(limit) == ((0, 333_334, SECOND), now)


@pytest.mark.parametrize(
    ("rate", "count", "period", "burst"), [("6/s", 6, 1, None), ("7/2s", 7, 2, 3)]
)
def test_every_peek_is_the_models_state(
    rate: str, count: int, period: int, burst: int | None
) -> None:
    limit = RateLimit("peek-model", rate=rate, burst=burst)
    model = Model(count, period * SECOND, burst)
    deadline = time.monotonic() + 1.5 * period
    peeks = 0
    while time.monotonic() < deadline:
        seen = hit(limit)
        assert model.hit(seen.now) == (seen.allowed, seen.wait)
        state, now = peek_raw(limit)
        assert state == model.state(now), (state, now)
        peeks += 1
        time.sleep(0.002)
    assert peeks > count


def test_hit_report_says_what_is_left_after_it() -> None:
    limit = RateLimit("report", rate="3/m")
    first = limit.hit(report=True)
    assert (first.allowed, first.remaining) == (True, 2)
    assert first.reset_after == 60  # read in the same script as the pass: exactly
    assert limit.hit(2, report=True).remaining == 0
    refused = limit.hit(report=True)
    assert (refused.allowed, refused.remaining) == (False, 0)
    assert limit.hit().remaining is None  # only when asked


def test_a_rate_of_zero_refuses_everything_without_redis(settings: Any) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}  # nobody there
    limit = RateLimit("closed", rate="0/m")
    refused = limit.hit()
    assert (refused.allowed, refused.retry_after) == (False, 60)
    state = limit.peek()
    assert (state.limit, state.remaining, state.retry_after, state.reset_after) == (0, 0, 60, 60)
    assert abs(state.reset_at - (time.time() + 60)) < 5
    assert not asyncio.run(AsyncRateLimit("closed", rate="0/s").hit())


def test_async_peek() -> None:
    async def body() -> None:
        limit = AsyncRateLimit("apeek", rate="2/m")
        assert (await limit.peek()).remaining == 2
        assert await limit.hit()
        state = await limit.peek()
        assert (state.limit, state.remaining) == (2, 1)
        assert 50 < state.reset_after <= 60
        reported = await limit.hit(report=True)
        assert reported.remaining == 0
        assert (await limit.peek()).retry_after > 0

    asyncio.run(body())
