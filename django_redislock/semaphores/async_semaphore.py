"""``AsyncSemaphore``: the same semaphore as ``Semaphore``, for asyncio code
(``redis.asyncio``). The owner of a permit is the current asyncio task; cancellation never
leaves a permit held by nobody who knows it (as for ``AsyncLock``)."""

from __future__ import annotations

import asyncio
import time
from threading import current_thread
from typing import Any

from ..locks import renewer as _renewer
from ..locks.waiting import AsyncWaiting, current_task
from ..redis.aio import run_script
from .base import SemaphoreBase, SemaphoreState, parse_state
from .keys import Permit
from .scripts import ACQUIRE, EXTEND, GIVE_UP, RELEASE, STATE


class AsyncSemaphore(SemaphoreBase, AsyncWaiting):
    """``async with AsyncSemaphore("exports", limit=4):`` — see ``Semaphore``."""

    async def acquire(self, timeout: float | None = None) -> bool:
        """Take this semaphore's ``permits`` (all or none); wait up to ``timeout`` seconds
        (None: the semaphore's timeout, 0: try once, ``math.inf``: forever). Returns whether
        this task now holds them."""
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
        token = self._new_token()
        try:
            args = self._acquire_argv(token, timeout > 0, False)
            reply = await run_script(client, ACQUIRE, self._layout.acquiring, args)
            fence = self._outcome(reply)
            if type(fence) is not int:
                fence = await self._wait(client, token, deadline, fence[0]) if timeout > 0 else None
                if fence is None:
                    self._busy(timeout)
                    return False
            hold = self._acquired(owner, self._permit(token, fence), fence, started)
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
        return self._outcome(await run_script(client, ACQUIRE, self._layout.acquiring, args))

    async def _give_up_async(self, client: Any, token: str, passing: str) -> int:
        args = (token, passing)
        return int(await run_script(client, GIVE_UP, self._layout.giving_up, args))

    async def _release_token_async(self, client: Any, permit: str) -> Any:
        """Free ``permit`` ("": every permit); the waiters it goes to are woken by the same
        call."""
        args = self._release_args(permit)
        return await run_script(client, RELEASE, self.layout.releasing, args)

    async def _release_handed_async(self, client: Any, token: str, fence: int) -> None:
        await self._release_token_async(client, self._permit(token, fence))

    async def release(self) -> None:
        """Give this task's permit back (to the oldest waiter, if any). LockNotOwned if it
        holds none any more. Runs to its end even if the calling task is cancelled."""
        hold = self._begin_release(self._owner(current_task()))
        if hold is not None:
            call = self._release_token_async(self.client, hold.token)
            self._end_release(hold, await asyncio.shield(call))

    async def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this task's permit to ``ttl`` seconds (default: the semaphore's)."""
        hold = self._holds.get(self._owner(current_task()))
        if hold is None:
            raise self._not_owned("extend")
        client = self.client
        args = self._extend_args(hold, ttl)
        self._extended(hold, await run_script(client, EXTEND, self._layout.extending, args))

    async def _state(self, token: str = "", permits: bool = False) -> SemaphoreState:
        client = self.client
        args = (token, "1" if permits else "0")
        return parse_state(await run_script(client, STATE, self._layout.reading, args))

    async def locked(self) -> bool:
        """Whether too few permits are free for this semaphore's ``permits`` (an acquire
        would wait)."""
        return self._would_wait((await self._state()).held)

    async def owned(self) -> bool:
        """Whether this task holds a live permit, as Redis sees it now."""
        hold = self._holds.get(self._owner(current_task()))
        return hold is not None and not hold.lost and (await self._state(hold.token)).mine_ms > 0

    async def ttl(self) -> float | None:
        """Seconds left on this task's permit, None when it holds none."""
        hold = self._holds.get(self._owner(current_task()))
        mine = (await self._state(hold.token)).mine_ms if hold is not None else -1
        return mine / 1000 if mine >= 0 else None

    @property
    def fence(self) -> int | None:
        """This task's fencing token (strictly increasing per name), when ``fencing=True``."""
        hold = self._holds.get(self._owner(current_task()))
        return hold.fence if hold is not None and self.fencing else None

    async def count(self) -> int:
        """How many permits are held now."""
        return (await self._state()).held

    async def holders(self) -> list[Permit]:
        """The live holders (with how many permits each holds), soonest to expire first."""
        return (await self._state(permits=True)).permits

    async def state(self) -> SemaphoreState:
        """Holders, waiters and the limit in one read (for the admin)."""
        return await self._state(permits=True)

    @classmethod
    async def force_release(cls, name: str, using: str | None = None) -> bool:
        """Free every permit of semaphore ``name``; the oldest waiters get them at once."""
        semaphore = cls(name, limit=1, ttl=1, using=using)
        return semaphore._forced(await semaphore._release_token_async(semaphore.client, ""))
