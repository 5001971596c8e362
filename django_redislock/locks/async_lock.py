"""``AsyncLock``: the same lock as ``Lock``, for asyncio code (``redis.asyncio``).

The owner of a hold is the current asyncio task. Cancellation never leaves a lock held by
nobody who knows it: a cancelled acquire gives up its place and releases whatever it may
have been handed, and a release runs to its end even when its caller is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from secrets import token_hex
from threading import current_thread
from typing import Any

from ..redis.aio import call, run_script
from . import renewer as _renewer
from .base import Hold
from .options import now_ms
from .scripts import ACQUIRE, EXTEND, GIVE_UP, RELEASE
from .waiting import AsyncWaiting, current_task

logger = logging.getLogger("django_redislock.locks")


class AsyncLock(AsyncWaiting):
    """``async with AsyncLock("name"):`` — see ``Lock`` for the options."""

    async def acquire(self, timeout: float | None = None) -> bool:
        """Acquire the lock; wait up to ``timeout`` seconds (None: the lock's timeout, 0: try
        once, ``math.inf``: forever). Returns whether the lock is now held."""
        timeout = self._validate_timeout(timeout)
        started = time.monotonic()
        deadline = started + timeout
        client = self.client
        owner = self._owner(current_task())
        hold = self._holds.get(owner)
        if hold is not None:
            if self._owns_value(hold, await call(client, "GET", self._keys[0])):
                return self._reenter(owner, hold)
            self._forget(owner)  # expired or taken over meanwhile: acquire afresh
        token = f"{token_hex(8)}|"
        try:
            args = self._args(token, timeout > 0, False)
            reply = await run_script(client, ACQUIRE, self._keys.acquiring, args)
            reply = await self._fence_of(client, token, reply, deadline, timeout)
            if reply is None:
                return False
            hold = self._acquired(owner, token, reply, started)
            if self.wait_replicas:
                await asyncio.to_thread(self._confirm_replicas, hold)
            if self.auto_renew:
                _renewer.renewer.add(self, hold, asyncio.current_task() or current_thread())
        except BaseException:
            # Cancelled, Redis lost, a receiver failed...: leave the queue and free whatever
            # this token may hold, even if this task is being cancelled.
            self._forget(owner)
            await asyncio.shield(self._abandon(client, token))
            raise
        return True

    def _wake_key(self, token: str) -> str:
        return self._keys.wake

    async def _recheck_async(self, client: Any, token: str, passing: str, scale: float) -> Any:
        args = (*self._args(token, True, True, scale), passing)
        return await run_script(client, ACQUIRE, self._keys.acquiring, args)

    async def _give_up_async(self, client: Any, token: str, passing: str) -> int:
        args = (token, passing)
        return int(await run_script(client, GIVE_UP, self._keys.giving_up, args))

    async def _release_token_async(self, client: Any, token: str) -> Any:
        return await run_script(client, RELEASE, self._keys.releasing, self._release_args(token))

    async def release(self) -> None:
        """Release the lock (once per acquire when reentrant). LockNotOwned if this task does
        not hold it any more. Runs to its end even if the calling task is cancelled."""
        hold = self._begin_release(self._owner(current_task()))
        if hold is not None:
            args = self._release_args(hold.token)
            reply = await asyncio.shield(
                run_script(self.client, RELEASE, self._keys.releasing, args)
            )
            self._end_release(hold, reply)

    async def extend(self, ttl: float | None = None) -> None:
        """Reset the remaining TTL to ``ttl`` seconds (default: the lock's ttl)."""
        ttl_ms = self._ttl_ms_of(ttl)
        hold = self._holds.get(self._owner(current_task()))
        if hold is None:
            raise self._not_owned("extend")
        client = self.client
        args = (hold.token, ttl_ms, self.name, now_ms())
        self._extended(hold, await run_script(client, EXTEND, self._keys.extending, args))

    async def locked(self) -> bool:
        """Whether anybody holds the lock."""
        client = self.client
        return bool(await call(client, "EXISTS", self._keys[0]))

    async def owned(self) -> bool:
        """Whether this task holds the lock, as Redis sees it now."""
        hold = self._holds.get(self._owner(current_task()))
        if hold is None or hold.lost:
            return False
        client = self.client
        return self._owns_value(hold, await call(client, "GET", self._keys[0]))

    async def ttl(self) -> float | None:
        """Seconds left before the lock expires, None when nobody holds it."""
        client = self.client
        pttl = await call(client, "PTTL", self._keys[0])
        return pttl / 1000 if pttl >= 0 else None

    @property
    def fence(self) -> int | None:
        """This task's fencing token (strictly increasing per name), when ``fencing=True``."""
        hold: Hold | None = self._holds.get(self._owner(current_task()))
        return hold.fence if hold is not None and self.fencing else None

    @classmethod
    async def force_release(cls, name: str, using: str | None = None) -> bool:
        """Free lock ``name`` whoever holds it; the next waiter, if any, gets it at once."""
        lock = cls(name, ttl=1, using=using)
        client = lock.client
        args = lock._release_args("")
        return lock._forced(await run_script(client, RELEASE, lock._keys.releasing, args))
