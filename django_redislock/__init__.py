"""django-redislock: distributed locks and semaphores, locking and rate-limiting view
decorators, stock reservations and a reliable delayed job queue for Django, on Redis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = [
    "AsyncLock",
    "AsyncMultiLock",
    "AsyncRateLimit",
    "AsyncReadWriteLock",
    "AsyncSemaphore",
    "AsyncStock",
    "Lock",
    "MultiLock",
    "RateLimit",
    "ReadWriteLock",
    "Redlock",
    "RetryLater",
    "Semaphore",
    "Stock",
    "get_queue",
    "get_redis",
    "redis_idempotent",
    "redis_locked",
    "redis_rate_limited",
]

if TYPE_CHECKING:
    from .exceptions import RetryLater
    from .locks.async_lock import AsyncLock
    from .locks.async_multi_lock import AsyncMultiLock
    from .locks.async_read_write import AsyncReadWriteLock
    from .locks.lock import Lock
    from .locks.multi_lock import MultiLock
    from .locks.read_write import ReadWriteLock
    from .locks.redlock import Redlock
    from .queue.queue import get_queue
    from .ratelimit import AsyncRateLimit, RateLimit
    from .redis.clients import get_redis
    from .semaphores.async_semaphore import AsyncSemaphore
    from .semaphores.semaphore import Semaphore
    from .stock.async_stock import AsyncStock
    from .stock.stock import Stock
    from .views.idempotent import redis_idempotent
    from .views.locked import redis_locked
    from .views.rate_limited import redis_rate_limited

_LAZY = {
    "AsyncLock": ".locks.async_lock",
    "AsyncRateLimit": ".ratelimit",
    "RateLimit": ".ratelimit",
    "redis_rate_limited": ".views.rate_limited",
    "AsyncStock": ".stock.async_stock",
    "AsyncSemaphore": ".semaphores.async_semaphore",
    "Semaphore": ".semaphores.semaphore",
    "Stock": ".stock.stock",
    "Lock": ".locks.lock",
    "MultiLock": ".locks.multi_lock",
    "AsyncMultiLock": ".locks.async_multi_lock",
    "ReadWriteLock": ".locks.read_write",
    "AsyncReadWriteLock": ".locks.async_read_write",
    "Redlock": ".locks.redlock",
    "RetryLater": ".exceptions",
    "get_queue": ".queue.queue",
    "get_redis": ".redis.clients",
    "redis_locked": ".views.locked",
    "redis_idempotent": ".views.idempotent",
}


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the package does not read Django settings.
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
