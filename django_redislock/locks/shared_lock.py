"""The acquire, release and reads of a shared lock (see ``shared_lock_base``), blocking
(``SharedLock``: ``Semaphore``, ``ReadWriteSide``) and for asyncio (``AsyncSharedLock``:
``AsyncSemaphore``, ``AsyncReadWriteSide``). The owner of a hold is the thread, or the
asyncio task; an acquire that fails half-way leaves nothing held by nobody who knows it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from threading import current_thread, get_ident
from typing import Any

from ..redis import aio
from ..redis.clients import run_script
from . import renewer as _renewer
from .base import Hold
from .options import SyncContext
from .shared_lock_base import KeysT, SharedLockBase, SharedLockState
from .waiting import AsyncWaiting, SyncWaiting, current_task


class SharedLock(SharedLockBase[KeysT], SyncWaiting, SyncContext):
    """A shared lock for blocking code; ``with`` acquires (or raises LockTimeout)."""

    def _state(self, token: str = "") -> SharedLockState:
        """The lock as Redis sees it now, with what is left on ``token``'s hold."""
        raise NotImplementedError

    def _mine(self) -> Hold | None:
        return self._holds.get(self._owner(get_ident()))

    def acquire(self, timeout: float | None = None) -> bool:
        """Acquire; wait up to ``timeout`` seconds (None: the lock's timeout, 0: try once,
        ``math.inf``: forever). Returns whether this owner now holds it."""
        timeout = self._validate_timeout(timeout)
        started = time.monotonic()
        deadline = started + timeout
        owner = self._owner(get_ident())
        client = self._client or self.client
        hold = self._holds.get(owner)
        if hold is not None:
            if not hold.lost and self._state(hold.token).mine_ms > 0:
                return self._reenter(owner, hold)
            self._forget(owner)  # expired or force-released meanwhile: acquire afresh
        other = self._conflicting_hold(owner)
        if other is not None:
            self._settle_conflict(owner, other, self._state(other.token).mine_ms > 0)
        token = self._new_token()
        args = self._acquire_argv(token, timeout > 0, False)
        try:
            reply = run_script(client, self._scripts.acquire, self._layout.acquiring, args)
        except BaseException:
            self._abandon(client, token)
            raise
        fence = self._fence_of(client, token, self._outcome(reply), deadline, timeout)
        if fence is None:
            return False
        held = self._held_token(token, fence)
        try:
            hold = self._acquired(owner, held, fence, started)
            if self.auto_renew:
                _renewer.renewer.add(self, hold, current_thread())
        except BaseException:
            self._forget(owner)
            with contextlib.suppress(Exception):
                self._release_token(client, held)
            raise
        return True

    def _recheck(self, client: Any, token: str, passing: str, scale: float) -> Any:
        args = self._acquire_argv(token, True, True, passing, scale)
        reply = run_script(client, self._scripts.acquire, self._layout.acquiring, args)
        return self._outcome(reply)

    def _give_up(self, client: Any, token: str, passing: str) -> int:
        args = self._give_up_argv(token, passing)
        return int(run_script(client, self._scripts.give_up, self._layout.giving_up, args))

    def release(self) -> None:
        """Release this owner's hold; the waiters it satisfies get it at once. LockNotOwned
        if this owner holds none (any more)."""
        self.release_owner(self._owner(get_ident()))

    def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this owner's hold to ``ttl`` seconds (default: the lock's ttl).
        LockNotOwned if it was lost."""
        hold = self._mine()
        if hold is None:
            raise self._not_owned("extend")
        args = self._extend_args(hold, ttl)
        reply = run_script(self.client, self._scripts.extend, self._layout.extending, args)
        self._extended(hold, reply)

    def owned(self) -> bool:
        """Whether this owner (thread) holds it, as Redis sees it now."""
        hold = self._mine()
        return hold is not None and not hold.lost and self._state(hold.token).mine_ms > 0

    def ttl(self) -> float | None:
        """Seconds left on this owner's hold, None when it holds none."""
        hold = self._mine()
        mine = self._state(hold.token).mine_ms if hold is not None else -1
        return mine / 1000 if mine >= 0 else None

    @property
    def fence(self) -> int | None:
        """This owner's fencing token (strictly increasing per name), when it has one."""
        hold = self._mine()
        return hold.fence if hold is not None and self._fences() else None


class AsyncSharedLock(SharedLockBase[KeysT], AsyncWaiting):
    """A shared lock for asyncio code; ``async with`` acquires (or raises LockTimeout)."""

    async def _state(self, token: str = "") -> SharedLockState:
        """The lock as Redis sees it now, with what is left on ``token``'s hold."""
        raise NotImplementedError

    def _mine(self) -> Hold | None:
        return self._holds.get(self._owner(current_task()))

    async def acquire(self, timeout: float | None = None) -> bool:
        """Acquire; wait up to ``timeout`` seconds (None: the lock's timeout, 0: try once,
        ``math.inf``: forever). Returns whether this task now holds it."""
        timeout = self._validate_timeout(timeout)
        started = time.monotonic()
        deadline = started + timeout
        client = self.client
        owner = self._owner(current_task())
        hold = self._holds.get(owner)
        if hold is not None:
            if not hold.lost and (await self._state(hold.token)).mine_ms > 0:
                return self._reenter(owner, hold)
            self._forget(owner)  # expired or force-released meanwhile: acquire afresh
        other = self._conflicting_hold(owner)
        if other is not None:
            live = (await self._state(other.token)).mine_ms > 0
            self._settle_conflict(owner, other, live)
        token = self._new_token()
        try:
            args = self._acquire_argv(token, timeout > 0, False)
            reply = await aio.run_script(
                client, self._scripts.acquire, self._layout.acquiring, args
            )
            fence = await self._fence_of(client, token, self._outcome(reply), deadline, timeout)
            if fence is None:
                return False
            hold = self._acquired(owner, self._held_token(token, fence), fence, started)
            if self.auto_renew:
                _renewer.renewer.add(self, hold, asyncio.current_task() or current_thread())
        except BaseException:
            # Cancelled, Redis lost, a receiver failed...: leave the queue and free whatever
            # this token may hold, even if this task is being cancelled.
            self._forget(owner)
            await asyncio.shield(self._abandon(client, token))
            raise
        return True

    async def _recheck_async(self, client: Any, token: str, passing: str, scale: float) -> Any:
        args = self._acquire_argv(token, True, True, passing, scale)
        script, keys = self._scripts.acquire, self._layout.acquiring
        return self._outcome(await aio.run_script(client, script, keys, args))

    async def _give_up_async(self, client: Any, token: str, passing: str) -> int:
        args = self._give_up_argv(token, passing)
        return int(
            await aio.run_script(client, self._scripts.give_up, self._layout.giving_up, args)
        )

    async def _release_token_async(self, client: Any, held: str) -> Any:
        """Free ``held`` ("": every holder); the waiters it goes to are woken by the same
        call."""
        args = self._release_args(held)
        return await aio.run_script(client, self._scripts.release, self.layout.releasing, args)

    async def _release_handed_async(self, client: Any, token: str, fence: int) -> None:
        await self._release_token_async(client, self._held_token(token, fence))

    async def release(self) -> None:
        """Release this task's hold; the waiters it satisfies get it at once. LockNotOwned if
        this task holds none (any more). Runs to its end even if the calling task is
        cancelled."""
        hold = self._begin_release(self._owner(current_task()))
        if hold is not None:
            call = self._release_token_async(self.client, hold.token)
            self._end_release(hold, await asyncio.shield(call))

    async def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this task's hold to ``ttl`` seconds (default: the lock's ttl)."""
        hold = self._mine()
        if hold is None:
            raise self._not_owned("extend")
        client = self.client
        args = self._extend_args(hold, ttl)
        reply = await aio.run_script(client, self._scripts.extend, self._layout.extending, args)
        self._extended(hold, reply)

    async def owned(self) -> bool:
        """Whether this task holds it, as Redis sees it now."""
        hold = self._mine()
        return hold is not None and not hold.lost and (await self._state(hold.token)).mine_ms > 0

    async def ttl(self) -> float | None:
        """Seconds left on this task's hold, None when it holds none."""
        hold = self._mine()
        mine = (await self._state(hold.token)).mine_ms if hold is not None else -1
        return mine / 1000 if mine >= 0 else None

    @property
    def fence(self) -> int | None:
        """This task's fencing token (strictly increasing per name), when it has one."""
        hold = self._mine()
        return hold.fence if hold is not None and self._fences() else None
