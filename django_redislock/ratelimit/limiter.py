"""``RateLimit``: at most ``count`` hits per period for one key (a user's redemptions, an IP's
logins), checked in one atomic round trip on the Redis server's clock. ``AsyncRateLimit`` is
the same over the asyncio client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..redis import aio, clients
from ..signals import rate_limited
from .keys import limiter_key, validate_key
from .rate import Rate, parse_rate, validate_burst
from .scripts import HIT


@dataclass(frozen=True)
class Hit:
    """The answer to one hit: ``allowed``, else ``retry_after`` seconds until the same hit
    would pass (exact, on the server's clock; 0.0 when allowed). True when allowed, and
    unpacks as ``allowed, retry_after = limit.hit()``."""

    allowed: bool
    retry_after: float
    name: str
    rate: Rate

    def __bool__(self) -> bool:
        return self.allowed

    def __iter__(self) -> Iterator[Any]:
        return iter((self.allowed, self.retry_after))


class RateLimitBase:
    def __init__(
        self, key: str, *, rate: str | Rate, burst: int | None = None, using: str | None = None
    ) -> None:
        """``key`` names what is limited (``"points:42"``); ``rate`` is ``"<count>/<period>"``
        (``"5/m"``, ``"100/h"``, ``"10/5m"``): at most ``count`` hits in any window of the
        period; ``burst`` (1 to count, default count) is how many may pass at once, the
        rest then coming evenly spaced. Nothing touches Redis yet."""
        self.name = validate_key(key)
        self.rate = parse_rate(rate)
        self.burst = validate_burst(burst, self.rate)
        if using is not None and not isinstance(using, str):
            raise TypeError(
                f"using must be a cache alias or a Redis URL, not {type(using).__name__}."
            )
        self.using = using
        self.key = limiter_key(self.name, self.rate, self.burst)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.rate} burst={self.burst}>"

    def _arguments(self, n: Any) -> tuple[int, int, int, int]:
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"n must be a whole number, not {type(n).__name__}.")
        if not 1 <= n <= self.burst:
            raise ValueError(
                f"n must be from 1 to the burst ({self.burst}), not {n}: more could never pass."
            )
        return self.rate.count, self.rate.period_us, self.burst, n

    def _hit(self, reply: Any) -> Hit:
        allowed, wait_us = int(reply[0]), int(reply[1])
        hit = Hit(allowed == 1, wait_us / 1_000_000, self.name, self.rate)
        if not hit.allowed and rate_limited.receivers:
            rate_limited.send(type(self), limit=self, name=self.name, hit=hit)
        return hit


class RateLimit(RateLimitBase):
    """A rate limit for code outside views::

    limit = RateLimit(f"points:{user.pk}", rate="5/m")
    hit = limit.hit()
    if not hit:
        raise TooMany(hit.retry_after)
    """

    def hit(self, n: int = 1) -> Hit:
        """Count ``n`` units now if they fit; a refused hit counts nothing. Raises
        ``RedisUnavailable`` when Redis cannot be reached."""
        arguments = self._arguments(n)
        reply = clients.run_script(clients.get_redis(self.using), HIT, [self.key], arguments)
        return self._hit(reply)

    def reset(self) -> None:
        """Forget every hit of this limiter (this key, rate and burst)."""
        clients.call(clients.get_redis(self.using), "DEL", self.key)


class AsyncRateLimit(RateLimitBase):
    """``RateLimit`` for asyncio code: ``await limit.hit()``, ``await limit.reset()``."""

    async def hit(self, n: int = 1) -> Hit:
        arguments = self._arguments(n)
        reply = await aio.run_script(aio.get_async_redis(self.using), HIT, [self.key], arguments)
        return self._hit(reply)

    async def reset(self) -> None:
        await aio.call(aio.get_async_redis(self.using), "DEL", self.key)
