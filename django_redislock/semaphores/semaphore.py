"""``Semaphore``: up to ``limit`` holders at once, each holding a permit that expires with its
TTL, with the ``Lock`` API (one Redis, standalone, Sentinel or Cluster)."""

from __future__ import annotations

from ..locks.shared_lock import SharedLock
from ..redis.clients import run_script
from .base import SemaphoreBase, SemaphoreState, parse_state
from .keys import Permit, SemaphoreKeys
from .scripts import STATE


class Semaphore(SemaphoreBase, SharedLock[SemaphoreKeys]):
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
        return super().acquire(timeout)

    def release(self) -> None:
        """Give this owner's permit back (to the oldest waiter, if any). LockNotOwned if this
        owner holds none any more."""
        super().release()

    def _state(self, token: str = "", permits: bool = False) -> SemaphoreState:
        args = (token, "1" if permits else "0")
        return parse_state(run_script(self.client, STATE, self.layout.reading, args))

    def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL of this owner's permit to ``ttl`` seconds (default: the semaphore's
        ttl). LockNotOwned if the permit expired or was force-released."""
        super().extend(ttl)

    def locked(self) -> bool:
        """Whether too few permits are free for this semaphore's ``permits`` (an acquire
        would wait)."""
        return self._would_wait(self._state().held)

    def owned(self) -> bool:
        """Whether this owner (thread) holds a live permit, as Redis sees it now."""
        return super().owned()

    def count(self) -> int:
        """How many permits are held now."""
        return self._state().held

    def ttl(self) -> float | None:
        """Seconds left on this owner's permit, None when it holds none."""
        return super().ttl()

    def holders(self) -> list[Permit]:
        """The live holders (with how many permits each holds), soonest to expire first."""
        return self._state(permits=True).permits

    @property
    def fence(self) -> int | None:
        """This owner's fencing token (strictly increasing per name), when ``fencing=True``."""
        return super().fence

    def state(self) -> SemaphoreState:
        """Holders, waiters and the stored limit in one read (for the admin)."""
        return self._state(permits=True)

    @classmethod
    def force_release(cls, name: str, using: str | None = None) -> bool:
        """Free every permit of semaphore ``name`` whoever holds them (an operator's escape
        hatch); the oldest waiters get them at once. Returns whether any permit was held."""
        semaphore = cls(name, limit=1, ttl=1, using=using)
        return semaphore._forced(semaphore._release_token(semaphore.client, ""))
