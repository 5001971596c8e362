"""``AsyncReadWriteLock``: the same read-write lock as ``ReadWriteLock``, for asyncio code
(``redis.asyncio``). The owner of a hold is the current asyncio task; cancellation never
leaves a hold held by nobody who knows it (as for ``AsyncLock``)."""

from __future__ import annotations

import asyncio
import time
from threading import current_thread
from typing import Any

from ..redis.aio import run_script
from . import renewer as _renewer
from .read_write_base import ReadWriteBase, SideBase
from .read_write_keys import WRITE, ReadWriteState, parse_state
from .read_write_scripts import ACQUIRE, EXTEND, GIVE_UP, RELEASE, STATE
from .waiting import AsyncWaiting, current_task


class AsyncReadWriteSide(SideBase, AsyncWaiting):
    """``async with rw.read():`` — see ``ReadWriteSide``."""

    async def acquire(self, timeout: float | None = None) -> bool:
        """Acquire this side; wait up to ``timeout`` seconds (None: the lock's timeout, 0: try
        once, ``math.inf``: forever). Returns whether this task now holds it. LockError when
        this task holds a side of this lock already (see ``read_write_base``)."""
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
        other = self._other_hold(owner)
        if other is not None:
            live = (await self._state(other.token)).mine_ms > 0
            self._refuse_second_side(owner, other, live)
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
            hold = self._acquired(owner, self._holder(token, fence), fence, started)
            if self.auto_renew:
                _renewer.renewer.add(self, hold, asyncio.current_task() or current_thread())
        except BaseException:
            # Cancelled, Redis lost, a receiver failed...: leave the line and free whatever
            # this token may hold, even if this task is being cancelled.
            self._forget(owner)
            await asyncio.shield(self._abandon(client, token))
            raise
        return True

    async def _recheck_async(self, client: Any, token: str, passing: str, scale: float) -> Any:
        args = self._acquire_argv(token, True, True, passing, scale)
        return self._outcome(await run_script(client, ACQUIRE, self._layout.acquiring, args))

    async def _give_up_async(self, client: Any, token: str, passing: str) -> int:
        args = self._give_up_argv(token, passing)
        return int(await run_script(client, GIVE_UP, self._layout, args))

    async def _release_token_async(self, client: Any, holder: str) -> Any:
        """Free ``holder`` ("": every holder); the waiters let in are woken by the same call."""
        return await run_script(client, RELEASE, self.layout, self._release_args(holder))

    async def _release_handed_async(self, client: Any, token: str, fence: int) -> None:
        await self._release_token_async(client, self._holder(token, fence))

    async def release(self) -> None:
        """Release this task's hold; the waiters that may hold the lock then get it at once.
        LockNotOwned if this task does not hold this side (any more). Runs to its end even if
        the calling task is cancelled."""
        hold = self._begin_release(self._owner(current_task()))
        if hold is not None:
            call = self._release_token_async(self.client, hold.token)
            self._end_release(hold, await asyncio.shield(call))

    async def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this task's hold to ``ttl`` seconds (default: the lock's ttl)."""
        hold = self._holds.get(self._owner(current_task()))
        if hold is None:
            raise self._not_owned("extend")
        client = self.client
        args = self._extend_args(hold, ttl)
        self._extended(hold, await run_script(client, EXTEND, self._layout.extending, args))

    async def _state(self, holder: str = "") -> ReadWriteState:
        client = self.client
        return parse_state(await run_script(client, STATE, self._layout.reading, (holder,)))

    async def state(self) -> ReadWriteState:
        """The whole lock's readers, writer and waiters in one read."""
        return await self._state()

    async def locked(self) -> bool:
        """Whether anybody holds this side: a reader (read side), the writer (write side)."""
        state = await self._state()
        return state.writer is not None if self.kind == WRITE else state.readers > 0

    async def owned(self) -> bool:
        """Whether this task holds this side, as Redis sees it now."""
        hold = self._holds.get(self._owner(current_task()))
        return hold is not None and not hold.lost and (await self._state(hold.token)).mine_ms > 0

    async def ttl(self) -> float | None:
        """Seconds left on this task's hold, None when it holds none."""
        hold = self._holds.get(self._owner(current_task()))
        mine = (await self._state(hold.token)).mine_ms if hold is not None else -1
        return mine / 1000 if mine >= 0 else None

    @property
    def fence(self) -> int | None:
        """This task's fencing token on the write side, when ``fencing=True``; None on the
        read side."""
        hold = self._holds.get(self._owner(current_task()))
        return hold.fence if hold is not None and self.fencing and self.kind == WRITE else None


class AsyncReadWriteLock(ReadWriteBase):
    """``async with rw.read():`` / ``async with rw.write():`` — see ``ReadWriteLock``."""

    side_class = AsyncReadWriteSide
    _read: AsyncReadWriteSide
    _write: AsyncReadWriteSide

    def read(self) -> AsyncReadWriteSide:
        """The read side (the same object at each call)."""
        return self._read

    def write(self) -> AsyncReadWriteSide:
        """The write side (the same object at each call)."""
        return self._write

    async def state(self) -> ReadWriteState:
        """Readers, the writer and waiters in one read."""
        return await self._read.state()

    async def readers(self) -> int:
        """How many readers hold the lock now."""
        return (await self.state()).readers

    async def locked(self) -> bool:
        """Whether anybody (a reader or the writer) holds the lock."""
        state = await self.state()
        return state.readers > 0 or state.writer is not None

    @classmethod
    async def force_release(cls, name: str, using: str | None = None) -> bool:
        """Free lock ``name`` whoever holds it; the waiters that may hold it then get it at
        once. Returns whether anybody held it."""
        side = cls(name, ttl=1, using=using).write()
        return side._forced(await side._release_token_async(side.client, ""))
