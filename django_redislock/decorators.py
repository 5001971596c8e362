"""``@redis_locked``: a view runs for one request at a time per key (a product on sale, a
user's points), across every process and server of the site."""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import weakref
from collections.abc import Callable
from threading import get_ident
from typing import Any, TypeVar

import redis
from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.template.response import SimpleTemplateResponse

from .conf import ON_REDIS_ERROR_CHOICES, conf
from .exceptions import RedisLockError, RedisUnavailable
from .locks.async_lock import AsyncLock, _task
from .locks.base import LockBase
from .locks.keys import validate_seconds
from .locks.lock import Lock
from .view_keys import KeyTemplate

logger = logging.getLogger(__name__)

View = TypeVar("View", bound=Callable[..., Any])
REDIS_ERRORS = (RedisUnavailable, redis.RedisError)
# Seconds a refused client is told to wait. View locks are held for milliseconds, so the
# shortest value HTTP can express is the honest one.
RETRY_AFTER = 1


def redis_locked(
    key: str | Callable[..., str],
    *,
    ttl: float | None = None,
    timeout: float | None = None,
    fair: bool = False,
    fencing: bool = False,
    busy_status: int | None = None,
    on_busy: Callable[[HttpRequest, Any], Any] | None = None,
    on_redis_error: str | None = None,
    using: str | None = None,
) -> Callable[[View], View]:
    """Guard a view with a lock named by ``key``: a template filled from the URL kwargs and
    ``request`` (``"points:{request.user.pk}"``) or a callable ``(request, *args, **kwargs)
    -> str``. A request that cannot get the lock within ``timeout`` is answered
    ``busy_status`` (default ``REDISLOCK['BUSY_STATUS']``) with ``Retry-After``, unless
    ``on_busy(request, lock)`` returns a response. See the README for the rest."""
    if not (isinstance(key, str) or callable(key)):
        raise TypeError(f"key must be a str template or a callable, not {type(key).__name__}.")
    for value, argument in ((ttl, "ttl"), (timeout, "timeout")):
        if value is not None:
            validate_seconds(value, argument, allow_zero=argument == "timeout", allow_inf=False)
    if busy_status is not None and (
        not isinstance(busy_status, int)
        or isinstance(busy_status, bool)
        or not 400 <= busy_status <= 599
    ):
        raise ValueError(
            f"busy_status must be an HTTP error status (400-599), not {busy_status!r}."
        )
    if on_busy is not None and not callable(on_busy):
        raise TypeError(f"on_busy must be a callable, not {type(on_busy).__name__}.")
    if on_redis_error is not None and on_redis_error not in ON_REDIS_ERROR_CHOICES:
        raise ValueError(
            f"on_redis_error must be one of {', '.join(map(repr, ON_REDIS_ERROR_CHOICES))}, "
            f"not {on_redis_error!r}."
        )
    if fencing and on_redis_error == "fail-open":
        raise ValueError(
            "fencing=True cannot be combined with on_redis_error='fail-open': without Redis "
            "there is no fence, so the view's fenced write could not be protected."
        )
    if using is not None and not isinstance(using, str):
        raise TypeError(f"using must be a cache alias or a Redis URL, not {type(using).__name__}.")

    def decorate(view: View) -> View:
        guard = _Guard(view, key, busy_status, on_busy, on_redis_error, using)
        guard.lock_options = {"ttl": ttl, "timeout": timeout, "fair": fair, "fencing": fencing}
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                return await guard.async_view(request, *args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            return guard.sync_view(request, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


class _Guard:
    def __init__(
        self,
        view: Callable[..., Any],
        key: str | Callable[..., str],
        busy_status: int | None,
        on_busy: Callable[..., Any] | None,
        on_redis_error: str | None,
        using: str | None,
    ) -> None:
        self.view = view
        self.view_name = _name_of(view)
        self.key = key
        self.lock_options: dict[str, Any] = {}
        self.busy_status = busy_status
        self.on_busy = on_busy
        self.on_redis_error = on_redis_error
        self.using = using
        self.needs_user = isinstance(key, str) and "request.user" in key
        if isinstance(key, str):
            self.template = KeyTemplate(key, view, self.view_name)

    def lock_name(self, request: HttpRequest, args: Any, kwargs: dict[str, Any]) -> str:
        if isinstance(self.key, str):
            return self.template.fill(request, args, kwargs)
        return self.key(request, *args, **kwargs)

    def make_lock(self, cls: type[LockBase], request: Any, args: Any, kwargs: Any) -> Any:
        return cls(self.lock_name(request, args, kwargs), using=self.using, **self.lock_options)

    def sync_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        lock = self.make_lock(Lock, request, args, kwargs)
        try:
            acquired = lock.acquire()
        except REDIS_ERRORS as exc:
            if self.open_on_error(lock, exc):
                request.redis_lock = None  # type: ignore[attr-defined]
                return self.view(request, *args, **kwargs)
            return _unavailable(request)
        if not acquired:
            if self.on_busy is not None:
                response = self.on_busy(request, lock)
                if inspect.isawaitable(response):
                    response.close()  # type: ignore[attr-defined]
                    raise TypeError(f"on_busy of the sync view {self.view_name} must not be async.")
                if response is not None:
                    return response
            return self.busy(request)
        request.redis_lock = lock  # type: ignore[attr-defined]
        owner = lock._owner(get_ident())
        try:
            response = self.view(request, *args, **kwargs)
        except BaseException:
            _release(lock, owner)
            raise
        if not _release_later(response, lock, owner):
            _release(lock, owner)
        return response

    async def async_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if self.needs_user and hasattr(request, "auser"):
            # request.user loads lazily with a sync query, which async code may not run.
            request.user = await request.auser()
        lock = self.make_lock(AsyncLock, request, args, kwargs)
        try:
            acquired = await lock.acquire()
        except REDIS_ERRORS as exc:
            if self.open_on_error(lock, exc):
                request.redis_lock = None  # type: ignore[attr-defined]
                return await self.view(request, *args, **kwargs)
            return _unavailable(request)
        if not acquired:
            if self.on_busy is not None:
                response = self.on_busy(request, lock)
                if inspect.isawaitable(response):
                    response = await response
                if response is not None:
                    return response
            return self.busy(request)
        request.redis_lock = lock  # type: ignore[attr-defined]
        owner = lock._owner(_task())
        try:
            response = await self.view(request, *args, **kwargs)
        except BaseException:
            await _arelease(lock)
            raise
        if not _release_later(response, lock, owner):
            await _arelease(lock)
        return response

    def busy(self, request: HttpRequest) -> HttpResponse:
        status = conf.BUSY_STATUS if self.busy_status is None else self.busy_status
        return _refusal(
            request, status, "busy", "This is busy with another request; retry shortly."
        )

    def open_on_error(self, lock: LockBase, exc: Exception) -> bool:
        """Whether to run the view unguarded (fail-open) after Redis failed; logs either way."""
        policy = self.on_redis_error or conf.ON_REDIS_ERROR
        if policy == "fail-open" and not lock.fencing:
            logger.warning(
                "Redis is unreachable (%s); running %s WITHOUT lock %r (ON_REDIS_ERROR "
                "'fail-open').",
                exc,
                self.view_name,
                lock.name,
            )
            return True
        logger.error(
            "Redis is unreachable (%s); %s answered 503 instead of taking lock %r%s.",
            exc,
            self.view_name,
            lock.name,
            " (fencing=True views always fail closed)" if policy == "fail-open" else "",
        )
        return False


def _name_of(view: Any) -> str:
    view = getattr(view, "func", view)  # method_decorator passes a partial of the method
    return f"{getattr(view, '__module__', '?')}.{getattr(view, '__qualname__', repr(view))}"


def _unavailable(request: HttpRequest) -> HttpResponse:
    return _refusal(request, 503, "redis-unavailable", "Service unavailable; retry shortly.")


def _refusal(request: HttpRequest, status: int, code: str, detail: str) -> HttpResponse:
    response: HttpResponse
    if request.get_preferred_type(["text/html", "application/json"]) == "application/json":
        response = JsonResponse({"error": code, "detail": detail}, status=status)
    else:
        response = HttpResponse(detail, status=status, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER)
    return response


def _release_later(response: Any, lock: LockBase, owner: tuple[Any, ...]) -> bool:
    """Arrange the release for when the response is complete, if it is not yet: a template
    response once rendered, a streaming one once the server closed it. If such a response is
    discarded instead (a middleware replaced it, the client left), its garbage collection
    releases the lock. False when the response is complete already."""
    once = _Once(lock, owner)
    if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
        response.add_post_render_callback(lambda rendered: once())
    elif isinstance(response, HttpResponseBase) and response.streaming:
        # Closing may happen on another thread, hence a release by owner over a sync client.
        response._resource_closers.append(once)  # type: ignore[attr-defined]
    else:
        return False
    weakref.finalize(response, once)
    return True


class _Once:
    def __init__(self, lock: LockBase, owner: tuple[Any, ...]) -> None:
        self.lock: LockBase | None = lock
        self.owner = owner
        self.guard = threading.Lock()

    def __call__(self) -> None:
        with self.guard:
            lock, self.lock = self.lock, None
        if lock is not None:
            _release(lock, self.owner)


def _release(lock: LockBase, owner: tuple[Any, ...]) -> None:
    try:
        lock.release_owner(owner)
    except (RedisLockError, redis.RedisError) as exc:
        _log_release_failure(lock, exc)


async def _arelease(lock: AsyncLock) -> None:
    try:
        await lock.release()
    except (RedisLockError, redis.RedisError) as exc:
        _log_release_failure(lock, exc)


def _log_release_failure(lock: LockBase, exc: Exception) -> None:
    # The response is complete by now; failing it would not undo its work.
    logger.warning(
        "Could not release lock %r after the view (%s); raise its ttl if the view can take "
        "longer than %ss. An unreleased lock frees itself when its TTL runs out.",
        lock.name,
        exc,
        lock.lock_ttl,
    )
