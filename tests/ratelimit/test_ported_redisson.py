"""Redisson's ``RedissonRateLimiterTest`` where it applies, rewritten for ``RateLimit``
(``tryAcquire(n)`` is ``hit(n)``; ``availablePermits()`` is ``peek().remaining``;
``delete()`` is ``reset()``). Its OVERALL mode is what a limiter is here: one budget per
name, shared by every client. Waits are for a condition (the permits back, the server's
clock past a moment), never a fixed sleep; periods are shortened (5 s to 1-2 s) to keep the
suite quick, which changes no logic, yet left long enough for a busy machine.

What does not apply, and why:
- ``trySetRate``/``setRate``/``updateRate``/``setStateArgs``/``getConfig`` and the
  keep-state tests: a limiter's rate is given where it is used and is part of its key, so a
  new rate is a new limiter with a fresh state (asserted below), never an update in place.
- ``PER_CLIENT`` mode, ``release()``, ``keepAliveTime``, ``expire()``: no such options; a
  limiter's key expires by itself one period after its last pass (asserted below).
- ``acquire()`` (blocking until a permit comes) and ``tryAcquire(n, timeout)``: a hit here
  never waits; it says how long to wait (``retry_after``), tested in ``test_limiter``.
- ``testRateValue`` (200 threads for 20 s): too heavy for a shared CI machine; the
  concurrency tests below and ``test_processes`` check the same property exactly.
"""

from __future__ import annotations

import threading
import time

import pytest

from django_redislock.ratelimit.limiter import RateLimit
from django_redislock.redis.clients import get_redis
from tests.conftest import Backend
from tests.support.waiting import server_now, wait_for

from .model import Model, Seen
from .test_limiter import hit


@pytest.mark.usefixtures("backend")
class TestOneClient:
    def test_rate_config(self) -> None:
        limit = RateLimit("acquire", rate="1/5s")
        assert (limit.rate.count, limit.rate.period) == (1, 5)
        assert limit.peek().limit == 1

    def test_available_permits_come_back_after_the_period(self) -> None:
        limit = RateLimit("rt2", rate="10/2s")
        assert limit.peek().remaining == 10
        before = server_now()  # no later than the pass
        assert limit.hit()
        assert limit.peek().remaining == 9
        wait_for(lambda: limit.peek().remaining == 10)
        assert server_now() >= before + 2

    def test_permits_one_by_one(self) -> None:  # testZeroTimeout
        limit = RateLimit("myLimiter", rate="5/2s")
        assert limit.peek().remaining == 5
        assert limit.hit() and limit.hit()  # noqa: PT018
        assert limit.peek().remaining == 3
        assert limit.hit() and limit.hit()  # noqa: PT018
        assert limit.peek().remaining == 1
        assert limit.hit()
        assert limit.peek().remaining == 0
        assert not any(limit.hit() for _ in range(5))
        wait_for(lambda: limit.peek().remaining == 5)
        assert all(limit.hit() for _ in range(5))
        assert not any(limit.hit() for _ in range(5))

    def test_permits_exceeding_the_rate(self) -> None:
        limit = RateLimit("exceeding", rate="1/1s")
        with pytest.raises(ValueError, match="n must be from 1 to the burst"):
            limit.hit(20)
        assert limit.hit()

    def test_try_acquire(self) -> None:
        limit = RateLimit("try", rate="1/5s")
        assert [bool(limit.hit()) for _ in range(3)] == [True, False, False]

    def test_rounds(self) -> None:  # test()
        limit = RateLimit("test", rate="10/1s")
        for _ in range(3):
            assert all(limit.hit() for _ in range(10))
            assert not any(limit.hit() for _ in range(10))
            wait_for(lambda: limit.peek().remaining == 10)

    def test_acquisition_interval(self) -> None:
        limit = RateLimit("interval", rate="2/2s")
        assert limit.hit()
        first = server_now()
        wait_for(lambda: server_now() >= first + 1.6)
        assert limit.hit()
        wait_for(lambda: limit.peek().remaining == 1)  # the first left, the second not yet
        assert limit.hit()
        assert not limit.hit()

    def test_remove(self) -> None:
        limit = RateLimit("remove", rate="5/5m")
        assert limit.hit()
        assert get_redis().exists(limit.key) == 1
        limit.reset()
        assert get_redis().exists(limit.key) == 0
        assert limit.peek().remaining == 5

    def test_the_key_expires_by_itself(self) -> None:  # testExpire
        limit = RateLimit("expire", rate="2/1s")
        assert limit.hit()
        wait_for(lambda: get_redis().exists(limit.key) == 0)

    def test_a_new_rate_is_a_fresh_limiter(self) -> None:  # the update-rate tests
        assert all(RateLimit("change", rate="2/m").hit() for _ in range(2))
        assert not RateLimit("change", rate="2/m").hit()
        changed = RateLimit("change", rate="3/m")
        assert changed.peek().remaining == 3


class Hammering:
    """Threads hitting one limiter until, between them, ``passes`` hits got through (a
    count, not a time: a stalled machine only makes it take longer)."""

    def __init__(self, limit: RateLimit, passes: int) -> None:
        self.limit, self.passes = limit, passes
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.deadline = time.monotonic() + 60

    def hammer(self) -> None:
        while time.monotonic() < self.deadline:
            got = hit(self.limit)
            with self.lock:  # every hit is kept: the model must see each one the server saw
                self.seen.append(got)
                if sum(s.allowed for s in self.seen) >= self.passes:
                    return
            time.sleep(0.002)

    def run(self, threads: int) -> list[Seen]:
        running = [threading.Thread(target=self.hammer) for _ in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
        assert sum(s.allowed for s in self.seen) >= self.passes, "not enough passes in 60 s"
        return sorted(self.seen, key=lambda s: (s.now, not s.allowed))


@pytest.mark.parametrize("count", [10, 18])
def test_concurrent_clients_never_pass_more_than_the_rate(
    real_backend: Backend, count: int
) -> None:  # testConcurrency, testConcurrency2
    limit = RateLimit("concurrency", rate=f"{count}/1s")
    seen = Hammering(limit, 2 * count + 1).run(8)  # the window rolls over twice
    Model(count, 1_000_000).replay(seen)
    passes = [s.now for s in seen if s.allowed]
    # any count + 1 passes span at least the period
    assert all(passes[i + count] - passes[i] >= 1_000_000 for i in range(len(passes) - count))
