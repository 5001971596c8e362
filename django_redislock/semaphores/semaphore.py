"""``Semaphore``: up to ``limit`` holders at once, each holding a permit that expires with its
TTL, with the ``Lock`` API (one Redis, standalone, Sentinel or Cluster)."""

from __future__ import annotations

import contextlib
import time
from threading import current_thread, get_ident
from typing import Any

from ..locks import renewer as _renewer
from ..locks.options import SyncContext
from ..locks.waiting import SyncWaiting
from ..redis.clients import run_script
from .base import SemaphoreBase, SemaphoreState, parse_state
from .keys import Permit
from .scripts import ACQUIRE, EXTEND, GIVE_UP, STATE


class Semaphore(SemaphoreBase, SyncWaiting, SyncContext):
    """A distributed semaphore: ``with Semaphore("exports", limit=4):`` waits for one of the
    ``limit`` permits (or raises LockTimeout) and gives it back on exit. Each permit expires
    with its holder's ``ttl``, so a crashed holder's permit comes back by itself.

    ``Semaphore(name, *, limit, ttl=None, timeout=None, auto_renew=False, fair=False,
    fencing=False, permits=1, using=None)``: the options mean what they mean for ``Lock``;
    ``permits`` is how many permits one holder takes, all at once or none (1 to ``limit``).
    A release hands the permits straight to the waiters they satisfy: the oldest first, and
    with ``fair=True`` strictly in arrival order (a waiter for more permits than are free
    keeps those behind it waiting)."""

    def acquire(self, timeout: float | None = None) -> bool:
        """Take this semaphore's ``permits`` (all or none); wait up to ``timeout`` seconds
        (None: the semaphore's timeout, 0: try once, ``math.inf``: forever). Returns whether
        this owner now holds them."""
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
        permit = self._permit(token, fence)
        try:
            hold = self._acquired(owner, permit, fence, started)
            if self.auto_renew:
                _renewer.renewer.add(self, hold, current_thread())
        except BaseException:
            self._forget(owner)
            with contextlib.suppress(Exception):
                self._release_token(client, permit)
            raise
        return True

    def _recheck(self, client: Any, token: str, passing: str, scale: float) -> Any:
        args = self._acquire_argv(token, True, True, passing, scale)
        return self._outcome(run_script(client, ACQUIRE, self._layout.acquiring, args))

    def _give_up(self, client: Any, token: str, passing: str) -> int:
        args = (token, passing)
        return int(run_script(client, GIVE_UP, self._layout.giving_up, args))

    def release(self) -> None:
        """Give this owner's permit back (to the oldest waiter, if any). LockNotOwned if this
        owner holds none any more."""
        self.release_owner(self._owner(get_ident()))

    def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this owner's permit to ``ttl`` seconds (default: the semaphore's
        ttl). LockNotOwned if the permit expired or was force-released."""
        hold = self._holds.get(self._owner(get_ident()))
        if hold is None:
            raise self._not_owned("extend")
        args = self._extend_args(hold, ttl)
        self._extended(hold, run_script(self.client, EXTEND, self._layout.extending, args))

    def _state(self, token: str = "", permits: bool = False) -> SemaphoreState:
        args = (token, "1" if permits else "0")
        return parse_state(run_script(self.client, STATE, self.layout.reading, args))

    def locked(self) -> bool:
        """Whether too few permits are free for this semaphore's ``permits`` (an acquire
        would wait)."""
        return self._would_wait(self._state().held)

    def owned(self) -> bool:
        """Whether this owner (thread) holds a live permit, as Redis sees it now."""
        hold = self._holds.get(self._owner(get_ident()))
        return hold is not None and not hold.lost and self._state(hold.token).mine_ms > 0

    def ttl(self) -> float | None:
        """Seconds left on this owner's permit, None when it holds none."""
        hold = self._holds.get(self._owner(get_ident()))
        mine = self._state(hold.token).mine_ms if hold is not None else -1
        return mine / 1000 if mine >= 0 else None

    @property
    def fence(self) -> int | None:
        """This owner's fencing token (strictly increasing per name), when ``fencing=True``."""
        hold = self._holds.get(self._owner(get_ident()))
        return hold.fence if hold is not None and self.fencing else None

    def count(self) -> int:
        """How many permits are held now."""
        return self._state().held

    def holders(self) -> list[Permit]:
        """The live holders (with how many permits each holds), soonest to expire first."""
        return self._state(permits=True).permits

    def state(self) -> SemaphoreState:
        """Holders, waiters and the stored limit in one read (for the admin)."""
        return self._state(permits=True)

    @classmethod
    def force_release(cls, name: str, using: str | None = None) -> bool:
        """Free every permit of semaphore ``name`` whoever holds them (an operator's escape
        hatch); the oldest waiters get them at once. Returns whether any permit was held."""
        semaphore = cls(name, limit=1, ttl=1, using=using)
        return semaphore._forced(semaphore._release_token(semaphore.client, ""))
