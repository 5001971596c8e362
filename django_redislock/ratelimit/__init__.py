"""Rate limits: ``RateLimit``/``AsyncRateLimit`` for any code (``limiter``, over ``rate``,
``keys`` and ``scripts``). Each hit is one atomic script on the Redis server's clock. The view
decorator ``@redis_rate_limited`` lives in ``views.rate_limited``, still importable from here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .limiter import AsyncRateLimit, Hit, RateLimit, RateLimitState
from .rate import Rate, parse_rate

if TYPE_CHECKING:
    from ..views.rate_limited import redis_rate_limited

__all__ = [
    "AsyncRateLimit",
    "Hit",
    "Rate",
    "RateLimit",
    "RateLimitState",
    "parse_rate",
    "redis_rate_limited",
]


def __getattr__(name: str) -> Any:
    # Lazy: views.rate_limited imports this package's modules, so importing it here at
    # import time would make the two import each other.
    if name == "redis_rate_limited":
        from importlib import import_module

        return import_module("..views.rate_limited", __name__).redis_rate_limited
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
