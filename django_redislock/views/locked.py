"""``@redis_locked``: a view runs for one request at a time per key (a product on sale, a
user's points), across every process and server of the site."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

import redis
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.template.response import SimpleTemplateResponse

from .. import finalizers
from ..conf import conf
from ..exceptions import RedisLockError
from ..locks.async_lock import AsyncLock
from ..locks.base import LockBase
from ..locks.lock import Lock
from ..names import validate_seconds
from ..semaphores.async_semaphore import AsyncSemaphore
from ..semaphores.keys import validate_limit
from ..semaphores.semaphore import Semaphore
from .guard import (
    REDIS_ERRORS,
    View,
    ViewGuard,
    check_arguments,
    refusal,
    refused,
    unavailable,
)
from .keys import KeyRefused

logger = logging.getLogger("django_redislock.decorators")  # the name docs/reference/views.rst gives

__all__ = ["redis_locked"]


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
    anonymous: str | None = None,
    limit: int | None = None,
    using: str | None = None,
) -> Callable[[View], View]:
    """Guard a view with a lock named by ``key``: a template filled from the URL kwargs and
    ``request`` (``"points:{request.user.pk}"``) or a callable ``(request, *args, **kwargs)
    -> str``. A request that cannot get the lock within ``timeout`` is answered
    ``busy_status`` (default ``REDISLOCK['BUSY_STATUS']``) with ``Retry-After``, unless
    ``on_busy(request, lock)`` returns a response. An anonymous user, when the template
    reads ``request.user``, is refused with 403 unless ``anonymous`` is ``"ip"`` or
    ``"shared"``. ``limit=N``: N requests per key at once (a semaphore). See
    docs/reference/views.rst for the rest."""
    check_arguments(key, ("on_busy", on_busy), on_redis_error, anonymous, using)
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
    if limit is not None:
        validate_limit(limit)
    if fencing and on_redis_error == "fail-open":
        raise ValueError(
            "fencing=True cannot be combined with on_redis_error='fail-open': without Redis "
            "there is no fence, so the view's fenced write could not be protected."
        )

    def decorate(view: View) -> View:
        guard = _LockGuard(
            view, key, on_redis_error=on_redis_error, anonymous=anonymous, using=using
        )
        guard.busy_status, guard.on_busy = busy_status, on_busy
        guard.lock_options = {"ttl": ttl, "timeout": timeout, "fair": fair, "fencing": fencing}
        if limit is not None:
            guard.lock_options["limit"] = limit
            guard.classes = (Semaphore, AsyncSemaphore)
        return guard.wrap()  # type: ignore[no-any-return]

    return decorate


class _LockGuard(ViewGuard):
    lock_options: dict[str, Any]
    busy_status: int | None
    on_busy: Callable[..., Any] | None
    # What guards a sync view and an async one: a lock, or with ``limit`` a semaphore
    classes: tuple[type[LockBase], type[LockBase]] = (Lock, AsyncLock)

    def make_lock(self, cls: type[LockBase], request: Any, args: Any, kwargs: Any) -> Any:
        return cls(self.name(request, args, kwargs), using=self.using, **self.lock_options)

    def sync_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            lock = self.make_lock(self.classes[0], request, args, kwargs)
        except KeyRefused as no_key:
            return refused(request, no_key)
        try:
            acquired = lock.acquire()
        except REDIS_ERRORS as exc:
            if self.open_on(lock, exc):
                request.redis_lock = None  # type: ignore[attr-defined]
                return self.view(request, *args, **kwargs)
            return unavailable(request)
        if not acquired:
            if self.on_busy is not None:
                response = self.custom("on_busy", self.on_busy, request, lock)
                if response is not None:
                    return response
            return self.busy(request)
        request.redis_lock = lock  # type: ignore[attr-defined]
        owner = lock.current_owner()
        try:
            response = self.view(request, *args, **kwargs)
        except BaseException:
            _release(lock, owner)
            raise
        if not _release_later(response, lock, owner):
            _release(lock, owner)
        return response

    async def async_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            lock = self.make_lock(self.classes[1], request, args, kwargs)
        except KeyRefused as no_key:
            return refused(request, no_key)
        try:
            acquired = await lock.acquire()
        except REDIS_ERRORS as exc:
            if self.open_on(lock, exc):
                request.redis_lock = None  # type: ignore[attr-defined]
                return await self.view(request, *args, **kwargs)
            return unavailable(request)
        if not acquired:
            if self.on_busy is not None:
                response = await self.acustom(self.on_busy, request, lock)
                if response is not None:
                    return response
            return self.busy(request)
        request.redis_lock = lock  # type: ignore[attr-defined]
        owner = lock.current_owner()
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
        return refusal(request, status, "busy", "This is busy with another request; retry shortly.")

    def open_on(self, lock: LockBase, exc: Exception) -> bool:
        never = "fencing=True views always fail closed" if lock.fencing else ""
        return self.open_on_error(exc, f"lock {lock.name!r}", never_open=never)


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
    finalizers.start()
    weakref.finalize(response, finalizers.post, once)
    return True


class _Once:
    """The release, at most once: by the response's closers, or (posted by its finalizer)
    on the finalizers' thread. No lock: ``list.pop`` is atomic."""

    def __init__(self, lock: LockBase, owner: tuple[Any, ...]) -> None:
        self.pending = [lock]
        self.owner = owner

    def __call__(self) -> None:
        try:
            lock = self.pending.pop()
        except IndexError:
            return
        _release(lock, self.owner)


def _release(lock: LockBase, owner: tuple[Any, ...]) -> None:
    try:
        lock.release_owner(owner)
    except (RedisLockError, redis.RedisError) as exc:
        _log_release_failure(lock, exc)


async def _arelease(lock: AsyncLock | AsyncSemaphore) -> None:
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
