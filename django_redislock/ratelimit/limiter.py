"""``RateLimit``: at most ``count`` hits per period for one key (a user's redemptions, an IP's
logins), checked in one atomic round trip on the Redis server's clock. ``AsyncRateLimit`` is
the same over the asyncio client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..redis import aio, clients
from ..signals import rate_limited
from .keys import limiter_key, validate_key
from .rate import Rate, parse_rate, validate_burst
from .scripts import HIT, PEEK

US = 1_000_000


@dataclass(frozen=True)
class Hit:
    """The answer to one hit: ``allowed``, else ``retry_after`` seconds until the same hit
    would pass (exact, on the server's clock; 0.0 when allowed). True when allowed, and
    unpacks as ``allowed, retry_after = limit.hit()``. With ``hit(report=True)`` it also
    says what is left after it: ``remaining`` units and ``reset_after`` seconds until all
    are back (else both None)."""

    allowed: bool
    retry_after: float
    name: str
    rate: Rate
    remaining: int | None = None
    reset_after: float | None = None

    def __bool__(self) -> bool:
        return self.allowed

    def __iter__(self) -> Iterator[Any]:
        return iter((self.allowed, self.retry_after))


@dataclass(frozen=True)
class RateLimitState:
    """What a limiter has left, read by ``peek()`` without counting a hit.

    ``limit``: the rate's count (units per period); ``remaining``: units a hit could take
    now (at most the burst); ``retry_after``: seconds until one unit is free (0.0 when one
    is now); ``reset_after``: seconds until every unit is back (the newest pass has left the
    window, the burst refilled; 0.0 for an untouched limiter); ``reset_at``: that moment as
    a Unix time on the Redis server's clock. All exact to the microsecond."""

    name: str
    rate: Rate
    limit: int
    remaining: int
    retry_after: float
    reset_after: float
    reset_at: float


class RateLimitBase:
    def __init__(
        self, key: str, *, rate: str | Rate, burst: int | None = None, using: str | None = None
    ) -> None:
        """``key`` names what is limited (``"points:42"``); ``rate`` is ``"<count>/<period>"``
        (``"5/m"``, ``"100/h"``, ``"10/5m"``, ``"100/10"`` for per ten seconds; ``"0/m"``
        lets nothing through): at most ``count`` hits in any window of the period;
        ``burst`` (1 to count, default count) is how many may pass at once, the rest then
        coming evenly spaced. Nothing touches Redis yet."""
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

    @property
    def closed(self) -> bool:
        """True for a rate of 0: every hit is refused, without asking Redis."""
        return self.rate.count == 0

    def _arguments(self, n: Any, report: bool = False) -> tuple[int, ...]:
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"n must be a whole number, not {type(n).__name__}.")
        if not 1 <= n <= max(self.burst, 1):
            raise ValueError(
                f"n must be from 1 to the burst ({self.burst}), not {n}: more could never pass."
            )
        return self.rate.count, self.rate.period_us, self.burst, n, int(report)

    def _peek_arguments(self) -> tuple[int, int, int]:
        return self.rate.count, self.rate.period_us, self.burst

    def _hit(self, reply: Any) -> Hit:
        allowed, wait_us = int(reply[0]), int(reply[1])
        remaining = reset_after = None
        if len(reply) > 3:
            remaining, reset_after = int(reply[3]), int(reply[5]) / US
        hit = Hit(allowed == 1, wait_us / US, self.name, self.rate, remaining, reset_after)
        if not hit.allowed and rate_limited.receivers:
            rate_limited.send(type(self), limit=self, name=self.name, hit=hit)
        return hit

    def _closed_hit(self, report: bool) -> Hit:
        period = self.rate.period
        hit = Hit(False, period, self.name, self.rate, *((0, period) if report else ()))
        if rate_limited.receivers:
            rate_limited.send(type(self), limit=self, name=self.name, hit=hit)
        return hit

    def _state(self, reply: Any) -> RateLimitState:
        free, one, every, now = (int(value) for value in reply)
        return RateLimitState(
            self.name, self.rate, self.rate.count, free, one / US, every / US, (now + every) / US
        )

    def _closed_state(self) -> RateLimitState:
        # Nothing to read: a closed limiter keeps no state (its reset_at is on this clock).
        period = self.rate.period_us
        return self._state((0, period, period, int(time.time() * US)))


class RateLimit(RateLimitBase):
    """A rate limit for code outside views.

    For example::

        limit = RateLimit(f"points:{user.pk}", rate="5/m")
        hit = limit.hit()
        if not hit:
            raise TooMany(hit.retry_after)
    """

    def hit(self, n: int = 1, *, report: bool = False) -> Hit:
        """Count ``n`` units now if they fit; a refused hit counts nothing. ``report=True``
        also reads what is left after the hit (``Hit.remaining``, ``Hit.reset_after``), in
        the same round trip. Raises ``RedisUnavailable`` when Redis cannot be reached."""
        arguments = self._arguments(n, report)
        if self.closed:
            return self._closed_hit(report)
        reply = clients.run_script(clients.get_redis(self.using), HIT, [self.key], arguments)
        return self._hit(reply)

    def peek(self) -> RateLimitState:
        """What is left now, without counting a hit (one round trip, no write)."""
        if self.closed:
            return self._closed_state()
        client = clients.get_redis(self.using)
        return self._state(clients.run_script(client, PEEK, [self.key], self._peek_arguments()))

    def reset(self) -> None:
        """Forget every hit of this limiter (this key, rate and burst)."""
        clients.call(clients.get_redis(self.using), "DEL", self.key)


class AsyncRateLimit(RateLimitBase):
    """``RateLimit`` for asyncio code: ``await limit.hit()``, ``await limit.peek()``,
    ``await limit.reset()``."""

    async def hit(self, n: int = 1, *, report: bool = False) -> Hit:
        arguments = self._arguments(n, report)
        if self.closed:
            return self._closed_hit(report)
        reply = await aio.run_script(aio.get_async_redis(self.using), HIT, [self.key], arguments)
        return self._hit(reply)

    async def peek(self) -> RateLimitState:
        if self.closed:
            return self._closed_state()
        client = aio.get_async_redis(self.using)
        reply = await aio.run_script(client, PEEK, [self.key], self._peek_arguments())
        return self._state(reply)

    async def reset(self) -> None:
        await aio.call(aio.get_async_redis(self.using), "DEL", self.key)
