"""``AsyncSemaphore``: the same semaphore as ``Semaphore``, for asyncio code
(``redis.asyncio``). The owner of a permit is the current asyncio task; cancellation never
leaves a permit held by nobody who knows it (as for ``AsyncLock``)."""

from __future__ import annotations

from ..locks.shared_lock import AsyncSharedLock
from ..redis.aio import run_script
from .base import SemaphoreBase, SemaphoreState, parse_state
from .keys import Permit, SemaphoreKeys
from .scripts import STATE


class AsyncSemaphore(SemaphoreBase, AsyncSharedLock[SemaphoreKeys]):
    """``async with AsyncSemaphore("exports", limit=4):`` — see ``Semaphore``."""

    async def acquire(self, timeout: float | None = None) -> bool:
        """Take this semaphore's ``permits`` (all or none); wait up to ``timeout`` seconds
        (None: the semaphore's timeout, 0: try once, ``math.inf``: forever). Returns whether
        this task now holds them."""
        return await super().acquire(timeout)

    async def release(self) -> None:
        """Give this task's permit back (to the oldest waiter, if any). LockNotOwned if it
        holds none any more. Runs to its end even if the calling task is cancelled."""
        await super().release()

    async def _state(self, token: str = "", permits: bool = False) -> SemaphoreState:
        client = self.client
        args = (token, "1" if permits else "0")
        return parse_state(await run_script(client, STATE, self._layout.reading, args))

    async def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this task's permit to ``ttl`` seconds (default: the semaphore's)."""
        await super().extend(ttl)

    async def locked(self) -> bool:
        """Whether too few permits are free for this semaphore's ``permits`` (an acquire
        would wait)."""
        return self._would_wait((await self._state()).held)

    async def owned(self) -> bool:
        """Whether this task holds a live permit, as Redis sees it now."""
        return await super().owned()

    async def count(self) -> int:
        """How many permits are held now."""
        return (await self._state()).held

    async def ttl(self) -> float | None:
        """Seconds left on this task's permit, None when it holds none."""
        return await super().ttl()

    async def holders(self) -> list[Permit]:
        """The live holders (with how many permits each holds), soonest to expire first."""
        return (await self._state(permits=True)).permits

    @property
    def fence(self) -> int | None:
        """This task's fencing token (strictly increasing per name), when ``fencing=True``."""
        return super().fence

    async def state(self) -> SemaphoreState:
        """Holders, waiters and the limit in one read (for the admin)."""
        return await self._state(permits=True)

    @classmethod
    async def force_release(cls, name: str, using: str | None = None) -> bool:
        """Free every permit of semaphore ``name``; the oldest waiters get them at once."""
        semaphore = cls(name, limit=1, ttl=1, using=using)
        return semaphore._forced(await semaphore._release_token_async(semaphore.client, ""))
