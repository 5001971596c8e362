"""BullMQ's ``tests/rate_limiter.test.ts`` where it concerns a rate limiter itself, rewritten
for ``RateLimit``: ``getRateLimitTtl(maxJobs)`` is ``peek()`` (``retry_after`` is 0 while
fewer than the limit have passed, else at most the period).

What does not apply, and why: the rest of that file tests BullMQ's worker and queue (jobs
held back in the delayed set, a global or dynamic queue limit, flows, priorities, pausing,
closing a worker during a limit, max attempts). Those are the job queue's keyed rate limits
(``@task(rate_key=..., rate=...)``), which live with the worker in ``queue/`` and are
tested there, not with ``RateLimit``. ``getRateLimitTtl()``'s -2 for a missing key is a
Redis PTTL detail; here an untouched limiter reports everything left (asserted below).
"""

from __future__ import annotations

import asyncio

import pytest

from django_redislock.ratelimit.limiter import AsyncRateLimit, RateLimit

pytestmark = pytest.mark.usefixtures("backend")


def test_an_untouched_limiter_has_no_wait() -> None:
    state = RateLimit("bull:untouched", rate="2/100s").peek()
    assert (state.remaining, state.retry_after, state.reset_after) == (2, 0, 0)


def test_below_the_limit_the_wait_is_zero() -> None:
    limit = RateLimit("bull:below", rate="2/1s")
    assert limit.hit()
    state = limit.peek()
    assert (state.remaining, state.retry_after) == (1, 0)


def test_at_the_limit_the_wait_is_at_most_the_period() -> None:
    limit = RateLimit("bull:above", rate="1/1s")
    assert limit.hit()
    state = limit.peek()
    assert state.remaining == 0
    assert 0 < state.retry_after <= 1
    refused = limit.hit()
    assert not refused
    assert refused.retry_after <= state.retry_after


def test_max_greater_than_one() -> None:
    async def body() -> list[bool]:
        limit = AsyncRateLimit("bull:max", rate="3/2s")
        return [bool(await limit.hit()) for _ in range(4)]

    assert asyncio.run(body()) == [True, True, True, False]
