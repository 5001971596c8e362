"""``@redis_rate_limited``: at most ``count`` requests per period per key (a user's
redemptions, an address's logins), across every process and server of the site; the rest
are answered 429 with an exact ``Retry-After``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from ..view_guard import (
    REDIS_ERRORS,
    View,
    ViewGuard,
    check_arguments,
    refusal,
    refused,
    unavailable,
)
from ..view_keys import KeyRefused
from .limiter import AsyncRateLimit, Hit, RateLimit, RateLimitBase
from .rate import parse_rate, validate_burst

LIMITED_STATUS = 429  # Too Many Requests (RFC 6585)


def redis_rate_limited(
    key: str | Callable[..., str],
    *,
    rate: str,
    burst: int | None = None,
    on_limited: Callable[[HttpRequest, Hit], Any] | None = None,
    on_redis_error: str | None = None,
    anonymous: str | None = None,
    using: str | None = None,
) -> Callable[[View], View]:
    """Let at most ``rate`` requests (``"5/m"``, ``"100/h"``, ``"10/5m"``) through per key,
    ``burst`` of them at once (default: the rate's count). ``key`` is a template like
    ``@redis_locked``'s (``"points:{request.user.pk}"``) or a callable. A request over the
    limit is answered 429 with ``Retry-After`` (whole seconds, rounded up; the JSON body
    has the exact ``retry_after``), unless ``on_limited(request, hit)`` returns a response.
    The view sees the check as ``request.rate_limit`` (a ``Hit``; None when Redis was
    unreachable and ``on_redis_error`` is ``"fail-open"``). Anonymous users, when the
    template reads ``request.user``, are refused with 403 unless ``anonymous`` is ``"ip"``
    or ``"shared"``."""
    check_arguments(key, ("on_limited", on_limited), on_redis_error, anonymous, using)
    parsed = parse_rate(rate)
    burst = validate_burst(burst, parsed)

    def decorate(view: View) -> View:
        guard = _RateGuard(
            view, key, on_redis_error=on_redis_error, anonymous=anonymous, using=using
        )
        guard.limit_options = {"rate": parsed, "burst": burst, "using": using}
        guard.on_limited = on_limited
        return guard.wrap()  # type: ignore[no-any-return]

    return decorate


class _RateGuard(ViewGuard):
    decorator = "@redis_rate_limited"
    what = "rate limit key"
    limit_options: dict[str, Any]
    on_limited: Callable[..., Any] | None

    def sync_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            limit = RateLimit(self.name(request, args, kwargs), **self.limit_options)
        except KeyRefused as no_key:
            return refused(request, no_key)
        try:
            hit = limit.hit()
        except REDIS_ERRORS as exc:
            if not self.open_on(limit, exc):
                return unavailable(request)
            hit = None
        request.rate_limit = hit  # type: ignore[attr-defined]
        if hit is None or hit.allowed:
            return self.view(request, *args, **kwargs)
        if self.on_limited is not None:
            response = self.custom("on_limited", self.on_limited, request, hit)
            if response is not None:
                return response
        return limited(request, hit)

    async def async_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            limit = AsyncRateLimit(self.name(request, args, kwargs), **self.limit_options)
        except KeyRefused as no_key:
            return refused(request, no_key)
        try:
            hit = await limit.hit()
        except REDIS_ERRORS as exc:
            if not self.open_on(limit, exc):
                return unavailable(request)
            hit = None
        request.rate_limit = hit  # type: ignore[attr-defined]
        if hit is None or hit.allowed:
            return await self.view(request, *args, **kwargs)
        if self.on_limited is not None:
            response = await self.acustom(self.on_limited, request, hit)
            if response is not None:
                return response
        return limited(request, hit)

    def open_on(self, limit: RateLimitBase, exc: Exception) -> bool:
        return self.open_on_error(exc, f"rate limit {limit.name!r} ({limit.rate})")


def limited(request: HttpRequest, hit: Hit) -> HttpResponse:
    """The 429 answer: ``Retry-After`` rounded up to whole seconds, the exact figure in the
    JSON body's ``retry_after`` and in the text."""
    return refusal(
        request,
        LIMITED_STATUS,
        "rate-limited",
        f"Too many requests ({hit.rate} allowed); retry in {hit.retry_after:.3f} s.",
        retry_after=hit.retry_after,
        extra={"retry_after": hit.retry_after},
    )
