"""Real processes hammering one limiter on a real server (and Cluster): merged by the server
time of each hit, every decision and every wait is the reference model's, so no two
processes ever slip a hit past the limit between them."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock.ratelimit.limiter import RateLimit
from tests.support.fixtures import Backend, Processes

from .model import Model
from .test_limiter import hammer


def hammering(rate: str, burst: int | None, passes: int, out: Any) -> None:
    out.put(hammer(RateLimit("contended", rate=rate, burst=burst), passes))


@pytest.mark.parametrize(
    ("rate", "count", "period", "burst"), [("20/s", 20, 1, None), ("20/s", 20, 1, 5)]
)
def test_processes_share_one_exact_limit(
    real_backend: Backend,
    processes: Processes,
    rate: str,
    count: int,
    period: int,
    burst: int | None,
) -> None:
    out = processes.queue()
    for _ in range(4):
        processes.start(hammering, rate, burst, 8, out)
    seen = [hit for _ in range(4) for hit in out.get(timeout=60)]
    processes.join_all()
    seen.sort(key=lambda hit: (hit.now, not hit.allowed))
    Model(count, period * 1_000_000, burst).replay(seen)
    passes = [hit.now for hit in seen if hit.allowed]
    assert len(passes) == 32  # over the count: the window rolled over
    assert all(passes[i + count] - passes[i] >= 1_000_000 for i in range(len(passes) - count))
