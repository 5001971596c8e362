"""``ReadWriteLock``: many readers or one writer, writers first, on one Redis (standalone,
Sentinel or Cluster); ``ReadWriteSide``: one side of it (``rw.read()``, ``rw.write()``)
with the ``Lock`` API."""

from __future__ import annotations

from ..redis.clients import run_script
from .read_write_base import ReadWriteBase, SideBase
from .read_write_keys import WRITE, ReadWriteKeys, ReadWriteState, parse_state
from .read_write_scripts import STATE
from .shared_lock import SharedLock


class ReadWriteSide(SideBase, SharedLock[ReadWriteKeys]):
    """The read or the write side of a ``ReadWriteLock``: ``with rw.read():`` acquires (or
    raises LockTimeout) and releases on exit, as ``Lock`` does."""

    def acquire(self, timeout: float | None = None) -> bool:
        """Acquire this side; wait up to ``timeout`` seconds (None: the lock's timeout, 0: try
        once, ``math.inf``: forever). Returns whether this owner now holds it. LockError
        when this owner holds a side of this lock already (see ``read_write_base``)."""
        return super().acquire(timeout)

    def release(self) -> None:
        """Release this owner's hold; the waiters that may hold the lock then get it at once.
        LockNotOwned if this owner does not hold this side (any more)."""
        super().release()

    def _state(self, holder: str = "") -> ReadWriteState:
        return parse_state(run_script(self.client, STATE, self.layout.reading, (holder,)))

    def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this owner's hold to ``ttl`` seconds (default: the lock's ttl).
        LockNotOwned if it was lost."""
        super().extend(ttl)

    def state(self) -> ReadWriteState:
        """The whole lock's readers, writer and waiters in one read."""
        return self._state()

    def owned(self) -> bool:
        """Whether this owner (thread) holds this side, as Redis sees it now."""
        return super().owned()

    def locked(self) -> bool:
        """Whether anybody holds this side: a reader (read side), the writer (write side)."""
        state = self._state()
        return state.writer is not None if self.kind == WRITE else state.readers > 0

    def ttl(self) -> float | None:
        """Seconds left on this owner's hold, None when it holds none."""
        return super().ttl()

    @property
    def fence(self) -> int | None:
        """This owner's fencing token on the write side (strictly increasing per name), when
        ``fencing=True``; None on the read side."""
        return super().fence


class ReadWriteLock(ReadWriteBase):
    """A distributed read-write lock: ``with rw.read():`` shares the lock with other readers,
    ``with rw.write():`` holds it alone; a writer waiting goes before readers arriving after
    it. Nothing touches Redis until a side is used.

    ``ReadWriteLock(name, *, ttl=None, timeout=None, fair=False, fencing=False,
    auto_renew=False, using=None)``: the options mean what they mean for ``Lock``, for both
    sides; ``fencing`` numbers the writers; ``fair=True`` lets readers and writers in in
    arrival order (the readers at the head of the line together)."""

    side_class = ReadWriteSide
    _read: ReadWriteSide
    _write: ReadWriteSide

    def read(self) -> ReadWriteSide:
        """The read side (the same object at each call)."""
        return self._read

    def write(self) -> ReadWriteSide:
        """The write side (the same object at each call)."""
        return self._write

    def state(self) -> ReadWriteState:
        """Readers, the writer and waiters in one read."""
        return self._read.state()

    def readers(self) -> int:
        """How many readers hold the lock now."""
        return self.state().readers

    def locked(self) -> bool:
        """Whether anybody (a reader or the writer) holds the lock."""
        state = self.state()
        return state.readers > 0 or state.writer is not None

    @classmethod
    def force_release(cls, name: str, using: str | None = None) -> bool:
        """Free lock ``name`` whoever holds it, readers and writer (an operator's escape
        hatch); the waiters that may hold it then get it at once. Returns whether anybody
        held it."""
        side = cls(name, ttl=1, using=using).write()
        return side._forced(side._release_token(side.client, ""))
