"""``RateLimit`` and ``AsyncRateLimit`` expose the same public names with the same
parameters (the house rule for every sync/async twin)."""

from __future__ import annotations

import inspect

from django_redislock.ratelimit.limiter import AsyncRateLimit, RateLimit


def public(cls: type) -> dict[str, list[str]]:
    return {
        name: list(inspect.signature(member).parameters) if callable(member) else []
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_")
    }


def test_the_twins_match() -> None:
    assert public(RateLimit) == public(AsyncRateLimit)
    assert {"hit", "peek", "reset"} <= set(public(RateLimit))
    for name in ("hit", "peek", "reset"):
        assert inspect.iscoroutinefunction(getattr(AsyncRateLimit, name))
        assert not inspect.iscoroutinefunction(getattr(RateLimit, name))
