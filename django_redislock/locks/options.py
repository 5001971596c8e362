"""The options every lock shares, Redlock included (name, TTL and timeout), the acquire
arguments, signals and errors they make, and ``with lock:`` for the blocking ones."""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ..conf import conf
from ..exceptions import LockNotOwned, LockTimeout
from ..names import validate_name, validate_seconds
from ..signals import lock_acquired, lock_busy, lock_lost, lock_released
from . import keys as _keys

logger = logging.getLogger("django_redislock.locks")


def now_ms() -> int:
    return int(time.time() * 1000)


class LockCore:
    """Name, TTL and timeout of a lock, and what every kind of lock reports the same way."""

    # What messages call this kind of lock, and how they explain a lost hold.
    noun = "lock"
    lost_reason = "its TTL ran out or it was force-released"

    def __init__(self, name: str, ttl: float | None, timeout: float | None) -> None:
        self.name = validate_name(name)
        self.lock_ttl = validate_seconds(
            conf.LOCK_TTL if ttl is None else ttl, "ttl", allow_zero=False, allow_inf=False
        )
        self.ttl_ms = max(1, round(self.lock_ttl * 1000))
        self.timeout = self._validate_timeout(conf.LOCK_TIMEOUT if timeout is None else timeout)
        self.retry_delay = conf.LOCK_RETRY_DELAY

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ttl={self.lock_ttl}>"

    def _ttl_ms_of(self, ttl: float | None) -> int:
        if ttl is None:
            return self.ttl_ms
        return max(1, round(validate_seconds(ttl, "ttl", allow_zero=False, allow_inf=False) * 1000))

    def _validate_timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return self.timeout
        return validate_seconds(timeout, "timeout", allow_zero=True, allow_inf=True)

    def _fallback_delay(self) -> float:
        return random.uniform(self.retry_delay / 2, self.retry_delay)

    def _acquire_args(
        self, token: str, flags: tuple[str, str], register_ms: int, queued: bool
    ) -> tuple[Any, ...]:
        """ARGV of ``ACQUIRE``."""
        now = now_ms()
        return (
            token,
            _keys.OWNER,
            self.ttl_ms,
            self.name,
            now,
            *flags,
            register_ms,
            "1" if queued else "0",
            now - _keys.STALE_MARGIN_MS,
            _keys.PRUNE_BATCH,
        )

    def _signal_acquired(self, fence: int | None, started: float | None = None) -> None:
        if lock_acquired.receivers:  # ``waited``: seconds since acquire() began (monotonic)
            waited = None if started is None else time.monotonic() - started
            lock_acquired.send(type(self), lock=self, name=self.name, fence=fence, waited=waited)

    def _busy(self, timeout: float) -> None:
        if lock_busy.receivers:
            lock_busy.send(type(self), lock=self, name=self.name, timeout=timeout)

    def _released(self) -> None:
        if lock_released.receivers:
            lock_released.send(type(self), lock=self, name=self.name)

    def _report_lost(self, where: str) -> None:
        logger.error(
            "%s %r was lost (found by %s): %s.",
            self.noun.capitalize(),
            self.name,
            where,
            self.lost_reason,
        )
        for receiver, error in lock_lost.send_robust(type(self), lock=self, name=self.name):
            if error is not None:
                logger.error("lock_lost receiver %r failed: %r", receiver, error)

    def _not_owned(self, action: str) -> LockNotOwned:
        return LockNotOwned(
            f"Cannot {action} {self.noun} {self.name!r}: this owner does not hold it (any more).",
            self.name,
        )

    def _timeout_error(self, timeout: float) -> LockTimeout:
        return LockTimeout(
            f"{self.noun.capitalize()} {self.name!r} was not acquired within {timeout}s.", self.name
        )


_Sync = TypeVar("_Sync", bound="WithStatement")
_Async = TypeVar("_Async", bound="AsyncWithStatement")


@contextlib.contextmanager
def released_on_exit(exc: BaseException | None) -> Iterator[None]:
    """Around the release that ends a ``with``/``async with`` block: a lock lost meanwhile
    raises LockNotOwned, unless the body raised: its own exception is kept (the loss was
    logged and signalled)."""
    try:
        yield
    except LockNotOwned:
        if exc is None:
            raise


class WithStatement:
    """``with lock:`` for anything that acquires and releases with a ``timeout`` (a lock,
    ``MultiLock``): acquire (or LockTimeout), release on exit."""

    timeout: float

    if TYPE_CHECKING:

        def _timeout_error(self, timeout: float) -> LockTimeout: ...

    def acquire(self, timeout: float | None = None) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Sync) -> _Sync:
        if not self.acquire():
            raise self._timeout_error(self.timeout)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with released_on_exit(exc):
            self.release()


class AsyncWithStatement:
    """``async with lock:`` for the asyncio locks and ``AsyncMultiLock``, as
    ``WithStatement``."""

    timeout: float

    if TYPE_CHECKING:

        def _timeout_error(self, timeout: float) -> LockTimeout: ...

    async def acquire(self, timeout: float | None = None) -> bool:
        raise NotImplementedError

    async def release(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _Async) -> _Async:
        if not await self.acquire():
            raise self._timeout_error(self.timeout)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with released_on_exit(exc):
            await self.release()


class SyncContext(LockCore, WithStatement):
    """``with lock:`` for the blocking locks: acquire (or LockTimeout), release on exit."""


class AsyncContext(LockCore, AsyncWithStatement):
    """``async with lock:`` for the asyncio locks, as ``SyncContext``."""
