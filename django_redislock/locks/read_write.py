"""``ReadWriteLock``: many readers or one writer, writers first, on one Redis (standalone,
Sentinel or Cluster); ``ReadWriteSide``: one side of it (``rw.read()``, ``rw.write()``)
with the ``Lock`` API."""

from __future__ import annotations

import contextlib
import time
from threading import current_thread, get_ident
from typing import Any

from ..redis.clients import run_script
from . import renewer as _renewer
from .options import SyncContext
from .read_write_base import ReadWriteBase, SideBase
from .read_write_keys import WRITE, ReadWriteState, parse_state
from .read_write_scripts import ACQUIRE, EXTEND, GIVE_UP, STATE
from .waiting import SyncWaiting


class ReadWriteSide(SideBase, SyncWaiting, SyncContext):
    """The read or the write side of a ``ReadWriteLock``: ``with rw.read():`` acquires (or
    raises LockTimeout) and releases on exit, as ``Lock`` does."""

    def acquire(self, timeout: float | None = None) -> bool:
        """Acquire this side; wait up to ``timeout`` seconds (None: the lock's timeout, 0: try
        once, ``math.inf``: forever). Returns whether this owner now holds it. LockError
        when this owner holds a side of this lock already (see ``read_write_base``)."""
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
        other = self._other_hold(owner)
        if other is not None:
            self._refuse_second_side(owner, other, self._state(other.token).mine_ms > 0)
        token = self._new_token()
        args = self._acquire_argv(token, timeout > 0, False)
        try:
            fence = self._outcome(run_script(client, ACQUIRE, self._layout.acquiring, args))
        except BaseException:
            self._abandon(client, token)
            raise
        if type(fence) is not int:
            fence = self._wait(client, token, deadline, fence[0]) if timeout > 0 else None
            if fence is None:
                self._busy(timeout)
                return False
        holder = self._holder(token, fence)
        try:
            hold = self._acquired(owner, holder, fence, started)
            if self.auto_renew:
                _renewer.renewer.add(self, hold, current_thread())
        except BaseException:
            self._forget(owner)
            with contextlib.suppress(Exception):
                self._release_token(client, holder)
            raise
        return True

    def _recheck(self, client: Any, token: str, passing: str, scale: float) -> Any:
        args = self._acquire_argv(token, True, True, passing, scale)
        return self._outcome(run_script(client, ACQUIRE, self._layout.acquiring, args))

    def _give_up(self, client: Any, token: str, passing: str) -> int:
        return int(run_script(client, GIVE_UP, self._layout, self._give_up_argv(token, passing)))

    def release(self) -> None:
        """Release this owner's hold; the waiters that may hold the lock then get it at once.
        LockNotOwned if this owner does not hold this side (any more)."""
        self.release_owner(self._owner(get_ident()))

    def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this owner's hold to ``ttl`` seconds (default: the lock's ttl).
        LockNotOwned if it was lost."""
        hold = self._holds.get(self._owner(get_ident()))
        if hold is None:
            raise self._not_owned("extend")
        args = self._extend_args(hold, ttl)
        self._extended(hold, run_script(self.client, EXTEND, self._layout.extending, args))

    def _state(self, holder: str = "") -> ReadWriteState:
        return parse_state(run_script(self.client, STATE, self.layout.reading, (holder,)))

    def state(self) -> ReadWriteState:
        """The whole lock's readers, writer and waiters in one read."""
        return self._state()

    def locked(self) -> bool:
        """Whether anybody holds this side: a reader (read side), the writer (write side)."""
        state = self._state()
        return state.writer is not None if self.kind == WRITE else state.readers > 0

    def owned(self) -> bool:
        """Whether this owner (thread) holds this side, as Redis sees it now."""
        hold = self._holds.get(self._owner(get_ident()))
        return hold is not None and not hold.lost and self._state(hold.token).mine_ms > 0

    def ttl(self) -> float | None:
        """Seconds left on this owner's hold, None when it holds none."""
        hold = self._holds.get(self._owner(get_ident()))
        mine = self._state(hold.token).mine_ms if hold is not None else -1
        return mine / 1000 if mine >= 0 else None

    @property
    def fence(self) -> int | None:
        """This owner's fencing token on the write side (strictly increasing per name), when
        ``fencing=True``; None on the read side."""
        hold = self._holds.get(self._owner(get_ident()))
        return hold.fence if hold is not None and self.fencing and self.kind == WRITE else None


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
