"""Rate limits: ``RateLimit``/``AsyncRateLimit`` for any code, ``@redis_rate_limited`` for
views. Each hit is one atomic script on the Redis server's clock."""

from .decorator import redis_rate_limited
from .limiter import AsyncRateLimit, Hit, RateLimit, RateLimitState
from .rate import Rate, parse_rate

__all__ = [
    "AsyncRateLimit",
    "Hit",
    "Rate",
    "RateLimit",
    "RateLimitState",
    "parse_rate",
    "redis_rate_limited",
]
