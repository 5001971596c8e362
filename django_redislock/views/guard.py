"""What ``@redis_locked`` and ``@redis_rate_limited`` share: checking their common arguments,
naming the key of a request (a template or a callable, anonymous users included), wrapping
sync and async views alike, the Redis-unreachable policy, and the refusal answers (JSON
when the client accepts it, plain text otherwise, always with ``Retry-After``)."""

from __future__ import annotations

import functools
import inspect
import logging
import math
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse, JsonResponse

from ..conf import ON_REDIS_ERROR_CHOICES, conf
from ..exceptions import RedisUnavailable
from ..names import validate_name
from ..redis.failures import why_unreachable
from .keys import ANONYMOUS_CHOICES, KeyRefused, KeyTemplate

logger = logging.getLogger("django_redislock.view_guard")  # its name before views/

View = TypeVar("View", bound=Callable[..., Any])
REDIS_ERRORS = (RedisUnavailable, redis.RedisError)
# Seconds a refused client is told to wait when no better figure is known. View locks are
# held for milliseconds, so the shortest value HTTP can express is the honest one.
RETRY_AFTER = 1


def check_arguments(
    key: Any, hook: tuple[str, Any], on_redis_error: Any, anonymous: Any, using: Any
) -> None:
    """The arguments both decorators take; a clear TypeError/ValueError for a wrong one."""
    if not (isinstance(key, str) or callable(key)):
        raise TypeError(f"key must be a str template or a callable, not {type(key).__name__}.")
    name, function = hook
    if function is not None and not callable(function):
        raise TypeError(f"{name} must be a callable, not {type(function).__name__}.")
    if on_redis_error is not None and on_redis_error not in ON_REDIS_ERROR_CHOICES:
        raise ValueError(
            f"on_redis_error must be one of {', '.join(map(repr, ON_REDIS_ERROR_CHOICES))}, "
            f"not {on_redis_error!r}."
        )
    if anonymous is not None and anonymous not in ANONYMOUS_CHOICES:
        raise ValueError(
            f"anonymous must be one of {', '.join(map(repr, ANONYMOUS_CHOICES))}, "
            f"not {anonymous!r}."
        )
    if anonymous is not None and not isinstance(key, str):
        raise ValueError(
            "anonymous applies to a key template that reads request.user; a callable key "
            "decides by itself what an anonymous user's key is."
        )
    if using is not None and not isinstance(using, str):
        raise TypeError(f"using must be a cache alias or a Redis URL, not {type(using).__name__}.")


class ViewGuard:
    """Guards one view; subclasses define ``sync_view`` and ``async_view``."""

    decorator = "@redis_locked"
    what = "lock name"
    # The rules a name must follow, and how an error names it ("Lock name ...").
    validate_name: Callable[[Any], str] = staticmethod(validate_name)

    def __init__(
        self,
        view: Callable[..., Any],
        key: str | Callable[..., str],
        *,
        on_redis_error: str | None,
        anonymous: str | None,
        using: str | None,
        ip_masks: tuple[int, int] = (32, 64),
    ) -> None:
        self.view = view
        self.view_name = name_of(view)
        self.key = key
        self.on_redis_error = on_redis_error
        self.using = using
        self.template: KeyTemplate | None = None
        if isinstance(key, str):
            self.template = KeyTemplate(
                key,
                view,
                self.view_name,
                decorator=self.decorator,
                what=self.what,
                anonymous=anonymous or "deny",
                validate=self.validate_name,
                ip_masks=ip_masks,
            )
        self.needs_user = self.template is not None and self.template.reads_user

    def wrap(self) -> Any:
        view = self.view
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                if self.needs_user and hasattr(request, "auser"):
                    # request.user loads lazily with a sync query, which async code may not run.
                    request.user = await request.auser()
                return await self.async_view(request, *args, **kwargs)

            return async_wrapper

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            return self.sync_view(request, *args, **kwargs)

        return wrapper

    def sync_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def async_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def name(self, request: HttpRequest, args: Any, kwargs: dict[str, Any]) -> str:
        """The key's name for this request. Raises ``KeyRefused`` when it has none: an
        anonymous user refused, or a callable's name that a request value made illegal."""
        if self.template is not None:
            return self.template.fill(request, args, kwargs)
        name = self.key(request, *args, **kwargs)  # type: ignore[operator]
        try:
            return self.validate_name(name)
        except ValueError as exc:
            logger.error(
                "%s: the key callable made an illegal %s from this request (%s); answered 400.",
                f"{self.decorator} on {self.view_name}",
                self.what,
                exc,
            )
            raise KeyRefused(400, "bad-key", "This request's values cannot name a key.") from exc

    def custom(
        self, argument: str, hook: Callable[..., Any], request: HttpRequest, subject: Any
    ) -> Any:
        """A sync view's ``argument`` hook's answer (``on_busy``, ``on_limited``); None to
        fall back to the decorator's own."""
        response = hook(request, subject)
        if inspect.isawaitable(response):
            response.close()  # type: ignore[attr-defined]
            raise TypeError(f"{argument} of the sync view {self.view_name} must not be async.")
        return response

    async def acustom(self, hook: Callable[..., Any], request: HttpRequest, subject: Any) -> Any:
        response = hook(request, subject)
        return await response if inspect.isawaitable(response) else response

    def open_on_error(self, exc: Exception, what: str, *, never_open: str = "") -> bool:
        """Whether to run the view unguarded (fail-open) after Redis failed on ``what``
        (e.g. "lock 'sale:7'"); logs either way. ``never_open`` says why this view always
        fails closed, if it does."""
        policy = self.on_redis_error or conf.ON_REDIS_ERROR
        if policy == "fail-open" and not never_open:
            logger.warning(
                "Redis is unreachable (%s); running %s WITHOUT %s (ON_REDIS_ERROR 'fail-open').",
                why_unreachable(exc),
                self.view_name,
                what,
            )
            return True
        logger.error(
            "Redis is unreachable (%s); %s answered 503 instead of checking %s%s.",
            why_unreachable(exc),
            self.view_name,
            what,
            f" ({never_open})" if policy == "fail-open" else "",
        )
        return False


def name_of(view: Any) -> str:
    view = getattr(view, "func", view)  # method_decorator passes a partial of the method
    return f"{getattr(view, '__module__', '?')}.{getattr(view, '__qualname__', repr(view))}"


def unavailable(request: HttpRequest) -> HttpResponse:
    return refusal(request, 503, "redis-unavailable", "Service unavailable; retry shortly.")


def refused(request: HttpRequest, refused: KeyRefused) -> HttpResponse:
    return refusal(request, refused.status, refused.code, refused.detail, retry_after=None)


def refusal(
    request: HttpRequest,
    status: int,
    code: str,
    detail: str,
    *,
    retry_after: float | None = RETRY_AFTER,
    extra: dict[str, Any] | None = None,
) -> HttpResponse:
    """An error answer: JSON ``{"error": code, "detail": detail, **extra}`` to a client that
    prefers JSON, ``detail`` as plain text otherwise; ``Retry-After`` in whole seconds,
    rounded up as HTTP wants (None: no header)."""
    response: HttpResponse
    if request.get_preferred_type(["text/html", "application/json"]) == "application/json":
        response = JsonResponse({"error": code, "detail": detail, **(extra or {})}, status=status)
    else:
        response = HttpResponse(detail, status=status, content_type="text/plain; charset=utf-8")
    if retry_after is not None:
        response["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return response
