"""``@redis_rate_limited``: at most ``count`` requests per period per key (a user's
redemptions, an address's logins), across every process and server of the site; the rest
are answered 429 with an exact ``Retry-After`` and the IETF ``RateLimit`` fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from ..ratelimit.keys import validate_key
from ..ratelimit.limiter import AsyncRateLimit, Hit, RateLimit, RateLimitBase
from ..ratelimit.rate import MAX_COUNT, Rate, validate_burst
from .guard import (
    REDIS_ERRORS,
    View,
    ViewGuard,
    check_arguments,
    name_of,
    refusal,
    refused,
    unavailable,
)
from .keys import KeyRefused, validate_ip_masks
from .rate_arguments import Rates, key_function, validate_group, with_group
from .rate_headers import add_fields, policy_id

LIMITED_STATUS = 429  # Too Many Requests (RFC 6585)


def redis_rate_limited(
    key: str | Callable[..., str],
    *,
    rate: Any,
    burst: int | None = None,
    group: str | None = None,
    headers: bool = False,
    on_limited: Callable[[HttpRequest, Hit], Any] | None = None,
    on_redis_error: str | None = None,
    anonymous: str | None = None,
    ipv4_mask: int = 32,
    ipv6_mask: int = 64,
    using: str | None = None,
) -> Callable[[View], View]:
    """Let at most ``rate`` requests through per key, ``burst`` of them at once (default:
    the rate's count).

    ``rate``: ``"5/m"``, ``"100/h"``, ``"10/5m"``, ``"100/10"`` (per ten seconds); ``"0/m"``
    refuses every request; None sets no limit; a callable ``(group, request) -> rate`` (or
    its dotted path) decides per request, None meaning no limit (``burst`` is then capped
    at the count it answers). ``key``: a template like ``@redis_locked``'s
    (``"points:{request.user.pk}"``), a callable ``(request, *args, **kwargs)`` or
    django-ratelimit's ``(group, request)`` (a first parameter named ``group``), or the
    dotted path of one. Names are global: two views with the same key share one budget,
    unless ``group`` is given, which prefixes the name (``"<group>:<key>"``) and is what a
    rate or key callable receives (by default, the view's dotted name).

    A request over the limit is answered 429 with ``Retry-After`` (whole seconds, rounded
    up; the JSON body has the exact ``retry_after``) and the ``RateLimit``/
    ``RateLimit-Policy`` fields, unless ``on_limited(request, hit)`` returns a response;
    ``headers=True`` adds those fields to the requests let through too. The view sees the
    check as ``request.rate_limit`` (a ``Hit``; None when no limit applied, or when Redis
    was unreachable and ``on_redis_error`` is ``"fail-open"``). Anonymous users, when the
    template reads ``request.user``, are refused with 403 unless ``anonymous`` is ``"ip"``
    (keyed by their network: ``ipv4_mask`` and ``ipv6_mask`` bits, default /32 and /64) or
    ``"shared"``."""
    prefix = validate_group(group)
    guard_key = key_function(key, prefix)
    check_arguments(guard_key, ("on_limited", on_limited), on_redis_error, anonymous, using)
    rates = Rates(rate)
    if rates.fixed is not None:
        burst = validate_burst(burst, rates.fixed)
    elif burst is not None:
        burst = validate_burst(burst, Rate(MAX_COUNT, 1_000_000, "any rate"))
    if not isinstance(headers, bool):
        raise TypeError(f"headers must be True or False, not {type(headers).__name__}.")
    masks = validate_ip_masks(ipv4_mask, ipv6_mask)

    def decorate(view: View) -> View:
        view_group = prefix or name_of(view)
        guard = _RateGuard(
            view,
            with_group(guard_key, view_group),
            on_redis_error=on_redis_error,
            anonymous=anonymous,
            using=using,
            ip_masks=masks,
        )
        guard.rates, guard.group, guard.policy_group = rates, view_group, prefix
        guard.burst, guard.headers, guard.on_limited = burst, headers, on_limited
        return guard.wrap()  # type: ignore[no-any-return]

    return decorate


class _RateGuard(ViewGuard):
    decorator = "@redis_rate_limited"
    what = "rate limit key"
    validate_name = staticmethod(validate_key)
    rates: Rates
    group: str
    policy_group: str | None
    burst: int | None
    headers: bool
    on_limited: Callable[..., Any] | None

    def limiter(
        self, cls: type[RateLimitBase], request: HttpRequest, args: Any, kwargs: Any
    ) -> Any:
        """This request's limiter; None when no limit applies. Raises ``KeyRefused``."""
        rate = self.rates.for_request(self.group, request, f"{self.decorator} on {self.view_name}")
        if rate is None:
            return None
        burst = self.burst
        if burst is not None and self.rates.fixed is None:
            burst = min(burst, rate.count) or None  # a callable's rate may be below it
        name = self.name(request, args, kwargs)
        return cls(name, rate=rate, burst=burst, using=self.using)

    def sync_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            limit = self.limiter(RateLimit, request, args, kwargs)
        except KeyRefused as no_key:
            return refused(request, no_key)
        hit = None
        if limit is not None:
            try:
                hit = limit.hit(report=self.headers)
            except REDIS_ERRORS as exc:
                if not self.open_on(limit, exc):
                    return unavailable(request)
        request.rate_limit = hit  # type: ignore[attr-defined]
        if hit is None or hit.allowed:
            return self.passed(self.view(request, *args, **kwargs), hit)
        response = None
        if self.on_limited is not None:
            response = self.custom("on_limited", self.on_limited, request, hit)
        return self.refused(request, response, hit)

    async def async_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            limit = self.limiter(AsyncRateLimit, request, args, kwargs)
        except KeyRefused as no_key:
            return refused(request, no_key)
        hit = None
        if limit is not None:
            try:
                hit = await limit.hit(report=self.headers)
            except REDIS_ERRORS as exc:
                if not self.open_on(limit, exc):
                    return unavailable(request)
        request.rate_limit = hit  # type: ignore[attr-defined]
        if hit is None or hit.allowed:
            return self.passed(await self.view(request, *args, **kwargs), hit)
        response = None
        if self.on_limited is not None:
            response = await self.acustom(self.on_limited, request, hit)
        return self.refused(request, response, hit)

    def passed(self, response: Any, hit: Hit | None) -> Any:
        if self.headers and hit is not None and hit.remaining is not None:
            policy = policy_id(self.policy_group, hit.rate)
            add_fields(response, policy, hit.rate, hit.remaining, hit.reset_after or 0.0)
        return response

    def refused(self, request: HttpRequest, response: Any, hit: Hit) -> Any:
        if response is None:
            response = limited(request, hit)
        # A refused hit of one unit leaves none: more comes when the same hit would pass.
        add_fields(response, policy_id(self.policy_group, hit.rate), hit.rate, 0, hit.retry_after)
        return response

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
