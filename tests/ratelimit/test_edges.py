"""The window's edge to the microsecond, deterministically: a limiter's state is written
with its newest pass in the future, where the script holds its clock (time never runs
backwards within a limiter), so the hit is judged at a time the test knows exactly."""

from __future__ import annotations

import pytest

from django_redislock.ratelimit.limiter import RateLimit
from django_redislock.ratelimit.scripts import HIT
from django_redislock.redis.clients import get_redis, run_script

pytestmark = pytest.mark.usefixtures("backend")

SECOND = 1_000_000


def future() -> int:
    seconds, micros = get_redis().time()
    return (seconds + 100) * SECOND + micros


def write_state(limit: RateLimit, slots: list[int], at: int = 0, frac: int = 0) -> None:
    """The layout described in ``ratelimit.keys``: slots oldest first, the ring full."""
    state = f"{at:016d}{frac:08d}{0:08d}" + "".join(f"{s:016d}" for s in slots)
    get_redis().set(limit.key, state)


def judge(limit: RateLimit) -> tuple[bool, int, int]:
    allowed, wait, now = run_script(get_redis(), HIT, [limit.key], limit._arguments(1))
    return allowed == 1, int(wait), int(now)


@pytest.mark.parametrize(
    ("oldest_age", "expected"),
    [
        (SECOND, (True, 0)),  # the oldest pass leaves the window at exactly +1 s
        (SECOND - 1, (False, 1)),  # one microsecond short
        (SECOND + 1, (True, 0)),
        (1, (False, SECOND - 1)),
    ],
)
def test_a_pass_leaves_the_window_exactly_one_period_later(
    oldest_age: int, expected: tuple[bool, int]
) -> None:
    limit = RateLimit("edge", rate="3/s")
    now = future()
    write_state(limit, [now - oldest_age, now, now])
    allowed, wait, judged_at = judge(limit)
    assert judged_at == now
    assert (allowed, wait) == expected


@pytest.mark.parametrize(("age", "expected"), [(333_334, (True, 0)), (333_333, (False, 1))])
def test_the_burst_spacing_is_exact_in_fractions_of_a_microsecond(
    age: int, expected: tuple[bool, int]
) -> None:
    # 3 per second, burst 1: one pass every 333333 1/3 us, so after a pass at p the next
    # is due at p + 333333 1/3 us: the GCRA keeps that as 333333 us plus 1 third. A pass
    # 333334 us ago is due (2/3 us ago); one 333333 us ago is 1/3 us early: wait 1 us.
    limit = RateLimit("spacing", rate="3/s", burst=1)
    now = future()
    passed = now - age
    write_state(limit, [0, passed, now], at=passed + 333_333, frac=1)
    assert judge(limit)[:2] == expected
