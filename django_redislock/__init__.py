"""django-redislock: distributed locks and semaphores, locking and rate-limiting view
decorators, stock reservations and a reliable delayed job queue for Django, on Redis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = [
    "AsyncLock",
    "AsyncRateLimit",
    "AsyncSemaphore",
    "AsyncStock",
    "Lock",
    "RateLimit",
    "Redlock",
    "Semaphore",
    "Stock",
    "get_queue",
    "get_redis",
    "redis_locked",
    "redis_rate_limited",
]

if TYPE_CHECKING:
    from .decorators import redis_locked
    from .locks.async_lock import AsyncLock
    from .locks.async_semaphore import AsyncSemaphore
    from .locks.lock import Lock
    from .locks.redlock import Redlock
    from .locks.semaphore import Semaphore
    from .queue.queue import get_queue
    from .ratelimit import AsyncRateLimit, RateLimit, redis_rate_limited
    from .redis.clients import get_redis
    from .stock.async_stock import AsyncStock
    from .stock.core import Stock

_LAZY = {
    "AsyncLock": ".locks.async_lock",
    "AsyncRateLimit": ".ratelimit",
    "RateLimit": ".ratelimit",
    "redis_rate_limited": ".ratelimit",
    "AsyncStock": ".stock.async_stock",
    "AsyncSemaphore": ".locks.async_semaphore",
    "Semaphore": ".locks.semaphore",
    "Stock": ".stock.core",
    "Lock": ".locks.lock",
    "Redlock": ".locks.redlock",
    "get_queue": ".queue.queue",
    "get_redis": ".redis.clients",
    "redis_locked": ".decorators",
}


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the package does not read Django settings.
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
