"""``RateLimit`` and ``AsyncRateLimit`` on every backend: exact counts at the window edges
(every hit replayed through a reference model at the server time it got), exact and
decreasing waits, bursts, weighted hits, reset, and Redis gone."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from django_redislock.exceptions import RedisUnavailable
from django_redislock.ratelimit.limiter import AsyncRateLimit, RateLimit
from django_redislock.ratelimit.scripts import HIT
from django_redislock.redis.clients import get_redis, run_script
from tests.support.fixtures import Backend
from tests.support.servers import free_port
from tests.support.waiting import Stalls

from .model import Model, Seen


def hit(limit: RateLimit, n: int = 1) -> Seen:
    """One hit through the script itself, with the server time it was judged at."""
    arguments = limit._arguments(n)
    allowed, wait, now = run_script(get_redis(), HIT, [limit.key], arguments)
    return Seen(allowed == 1, int(wait), int(now))


def hammer(limit: RateLimit, passes: int, n: int = 1, *, timeout: float = 60) -> list[Seen]:
    """Hits, one after another, until ``passes`` of them were let through: a count, not a
    time, so a machine that stalls the test only makes it take longer."""
    seen: list[Seen] = []
    deadline = time.monotonic() + timeout
    while sum(s.allowed for s in seen) < passes:
        assert time.monotonic() < deadline, f"{passes} passes not reached in {timeout} s"
        seen.append(hit(limit, n))
        time.sleep(0.0005)
    return seen


def test_exactly_count_pass_per_window_at_the_edges(backend: Backend) -> None:
    limit = RateLimit("edges", rate="5/s")
    seen = hammer(limit, 20)
    Model(5, 1_000_000).replay(seen)
    passes = [k for k, s in enumerate(seen) if s.allowed]  # their places in ``seen``
    # The next five pass as soon as the first five leave the window, not a microsecond
    # before: pass i + 5 is the first hit after pass i + 4 made once pass i is a period old.
    for i in range(len(passes) - 5):
        due = seen[passes[i]].now + 1_000_000
        first = next(k for k in range(passes[i + 4] + 1, len(seen)) if seen[k].now >= due)
        assert passes[i + 5] == first


def test_the_wait_is_exact_decreasing_and_enough(backend: Backend) -> None:
    names = iter(f"wait-{n}" for n in range(100))

    def waited() -> None:
        limit = RateLimit(next(names), rate="10/2s")
        for _ in range(10):
            assert limit.hit().allowed
        first = limit.hit()
        time.sleep(0.05)
        second = limit.hit()
        assert not first
        assert not second
        assert 0 < second.retry_after < first.retry_after <= 2.0
        allowed, retry_after = second
        assert (allowed, retry_after) == (False, second.retry_after)
        time.sleep(second.retry_after)
        assert limit.hit()

    # A stall past the 2 s window before the refusals lets them pass: done again, if so.
    with Stalls() as stalls:
        stalls.again_if_stalled(waited)


def test_burst_spaces_the_rest_evenly(backend: Backend) -> None:
    limit = RateLimit("burst", rate="10/s", burst=2)
    seen = hammer(limit, 12)
    Model(10, 1_000_000, burst=2).replay(seen)
    assert [s.allowed for s in seen[:3]] == [True, True, False]
    assert 0 < seen[2].wait <= 100_000
    passes = [s.now for s in seen if s.allowed]
    # after the burst of two, one more per 0.1 s: the k-th pass no sooner than (k - 1) x 0.1 s
    assert all(p - passes[0] >= (k - 1) * 100_000 for k, p in enumerate(passes[1:], 1))


def test_burst_with_a_period_that_does_not_divide_evenly(backend: Backend) -> None:
    # 7 per 3 s: an emission interval of 428571 3/7 us, kept exact.
    limit = RateLimit("sevenths", rate="7/3s", burst=3)
    Model(7, 3_000_000, burst=3).replay(hammer(limit, 6))


def test_weighted_hits_count_n_units_or_nothing(backend: Backend) -> None:
    limit = RateLimit("weighted", rate="5/s")
    seen = [hit(limit, 3), hit(limit, 3), hit(limit, 2), hit(limit, 1)]
    assert [s.allowed for s in seen] == [True, False, True, False]
    model = Model(5, 1_000_000)
    for s, n in zip(seen, (3, 3, 2, 1), strict=True):
        assert model.hit(s.now, n) == (s.allowed, s.wait)


def test_reset_forgets_and_keys_are_independent(backend: Backend) -> None:
    limit = RateLimit("points:1", rate="2/m")
    assert [bool(limit.hit()) for _ in range(3)] == [True, True, False]
    assert RateLimit("points:2", rate="2/m").hit()
    per_day = RateLimit("points:1", rate="100/d")  # another limit stacked on the same name
    assert per_day.hit()
    limit.reset()
    assert limit.hit()
    assert per_day.key != limit.key
    client = get_redis()
    if backend.kind == "cluster":
        assert client.keyslot(per_day.key) == client.keyslot(limit.key)
    assert 59_000 < client.pttl(limit.key) <= 60_000


def test_a_corrupt_state_is_replaced_not_fatal(backend: Backend) -> None:
    limit = RateLimit("corrupt", rate="2/s")
    get_redis().hset(limit.key, "x", "y")
    assert limit.hit()
    get_redis().set(limit.key, "garbage{}|" * 9)
    assert [bool(limit.hit()) for _ in range(3)] == [True, True, False]


def test_async_limit(backend: Backend) -> None:
    async def body() -> None:
        limit = AsyncRateLimit("async", rate="3/m")
        results = [await limit.hit() for _ in range(4)]
        assert [bool(r) for r in results] == [True, True, True, False]
        assert 59 < results[-1].retry_after <= 60
        await limit.reset()
        assert await limit.hit()

    asyncio.run(body())


def test_redis_unreachable_is_redis_unavailable(backend: Backend, settings: Any) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}
    with pytest.raises(RedisUnavailable):
        RateLimit("gone", rate="5/m").hit()
    with pytest.raises(RedisUnavailable):
        asyncio.run(AsyncRateLimit("gone", rate="5/m").hit())
