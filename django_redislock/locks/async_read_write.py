"""``AsyncReadWriteLock``: the same read-write lock as ``ReadWriteLock``, for asyncio code
(``redis.asyncio``). The owner of a hold is the current asyncio task; cancellation never
leaves a hold held by nobody who knows it (as for ``AsyncLock``)."""

from __future__ import annotations

from ..redis.aio import run_script
from .read_write_base import ReadWriteBase, SideBase
from .read_write_keys import WRITE, ReadWriteKeys, ReadWriteState, parse_state
from .read_write_scripts import STATE
from .shared_lock import AsyncSharedLock


class AsyncReadWriteSide(SideBase, AsyncSharedLock[ReadWriteKeys]):
    """``async with rw.read():`` — see ``ReadWriteSide``."""

    async def acquire(self, timeout: float | None = None) -> bool:
        """Acquire this side; wait up to ``timeout`` seconds (None: the lock's timeout, 0: try
        once, ``math.inf``: forever). Returns whether this task now holds it. LockError when
        this task holds a side of this lock already (see ``read_write_base``)."""
        return await super().acquire(timeout)

    async def release(self) -> None:
        """Release this task's hold; the waiters that may hold the lock then get it at once.
        LockNotOwned if this task does not hold this side (any more). Runs to its end even if
        the calling task is cancelled."""
        await super().release()

    async def _state(self, holder: str = "") -> ReadWriteState:
        client = self.client
        return parse_state(await run_script(client, STATE, self._layout.reading, (holder,)))

    async def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this task's hold to ``ttl`` seconds (default: the lock's ttl)."""
        await super().extend(ttl)

    async def state(self) -> ReadWriteState:
        """The whole lock's readers, writer and waiters in one read."""
        return await self._state()

    async def owned(self) -> bool:
        """Whether this task holds this side, as Redis sees it now."""
        return await super().owned()

    async def locked(self) -> bool:
        """Whether anybody holds this side: a reader (read side), the writer (write side)."""
        state = await self._state()
        return state.writer is not None if self.kind == WRITE else state.readers > 0

    async def ttl(self) -> float | None:
        """Seconds left on this task's hold, None when it holds none."""
        return await super().ttl()

    @property
    def fence(self) -> int | None:
        """This task's fencing token on the write side, when ``fencing=True``; None on the
        read side."""
        return super().fence


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
