"""``Lock``: a distributed lock on one Redis (standalone, Sentinel or Cluster)."""

from __future__ import annotations

import contextlib
import logging
import time
from secrets import token_hex
from threading import current_thread, get_ident
from typing import Any

from ..redis.clients import call, run_script
from . import renewer as _renewer
from .options import SyncContext, now_ms
from .scripts import ACQUIRE, EXTEND, GIVE_UP, RELEASE
from .waiting import SyncWaiting

logger = logging.getLogger(__name__)


class Lock(SyncWaiting, SyncContext):
    """A distributed lock. ``with Lock("name"):`` acquires (or raises LockTimeout) and
    releases on exit. See docs/reference/locks.rst for every option."""

    def acquire(self, timeout: float | None = None) -> bool:
        """Acquire the lock; wait up to ``timeout`` seconds (None: the lock's timeout, 0: try
        once, ``math.inf``: forever). Returns whether the lock is now held."""
        timeout = self._validate_timeout(timeout)
        started = time.monotonic()
        deadline = started + timeout
        owner = self._owner(get_ident())
        client = self._client or self.client
        hold = self._holds.get(owner)
        if hold is not None:
            if self._owns_value(hold, call(client, "GET", self._keys[0])):
                return self._reenter(owner, hold)
            self._forget(owner)  # expired or taken over meanwhile: acquire afresh
        token = f"{token_hex(8)}|"
        args = self._args(token, timeout > 0, False)
        try:
            reply = run_script(client, ACQUIRE, self._keys.acquiring, args)
        except BaseException:
            self._abandon(client, token)
            raise
        reply = self._fence_of(client, token, reply, deadline, timeout)
        if reply is None:
            return False
        try:
            hold = self._acquired(owner, token, reply, started)
            if self.wait_replicas:
                self._confirm_replicas(hold)
            if self.auto_renew:
                _renewer.renewer.add(self, hold, current_thread())
        except BaseException:
            self._roll_back(owner, token)
            raise
        return True

    def _roll_back(self, owner: tuple[Any, ...], token: str) -> None:
        """Undo an acquisition that failed half-way (a signal receiver raised, replicas did not
        confirm, Redis went away, an interrupt), so no lock is left held by nobody-who-knows."""
        self._forget(owner)
        with contextlib.suppress(Exception):
            self._release_token(self.client, token)

    def _wake_key(self, token: str) -> str:
        return self._keys.wake

    def _recheck(self, client: Any, token: str, passing: str, scale: float) -> Any:
        args = (*self._args(token, True, True, scale), passing)
        return run_script(client, ACQUIRE, self._keys.acquiring, args)

    def _give_up(self, client: Any, token: str, passing: str) -> int:
        return int(run_script(client, GIVE_UP, self._keys.giving_up, (token, passing)))

    def _release_token(self, client: Any, token: str) -> Any:
        return run_script(client, RELEASE, self._keys.releasing, self._release_args(token))

    def release(self) -> None:
        """Release the lock (once per acquire when reentrant). LockNotOwned if this owner does
        not hold it any more."""
        self.release_owner(self._owner(get_ident()))

    def extend(self, ttl: float | None = None) -> None:
        """Reset the remaining TTL to ``ttl`` seconds (default: the lock's ttl)."""
        ttl_ms = self._ttl_ms_of(ttl)
        hold = self._holds.get(self._owner(get_ident()))
        if hold is None:
            raise self._not_owned("extend")
        args = (hold.token, ttl_ms, self.name, now_ms())
        self._extended(hold, run_script(self.client, EXTEND, self.keys.extending, args))

    def locked(self) -> bool:
        """Whether anybody holds the lock."""
        return bool(call(self.client, "EXISTS", self.keys[0]))

    def owned(self) -> bool:
        """Whether this owner (thread) holds the lock, as Redis sees it now."""
        hold = self._holds.get(self._owner(get_ident()))
        if hold is None or hold.lost:
            return False
        return self._owns_value(hold, call(self.client, "GET", self.keys[0]))

    def ttl(self) -> float | None:
        """Seconds left before the lock expires, None when nobody holds it."""
        pttl = call(self.client, "PTTL", self.keys[0])
        return pttl / 1000 if pttl >= 0 else None

    @property
    def fence(self) -> int | None:
        """This owner's fencing token (strictly increasing per name), when ``fencing=True``."""
        hold = self._holds.get(self._owner(get_ident()))
        return hold.fence if hold is not None and self.fencing else None

    @classmethod
    def force_release(cls, name: str, using: str | None = None) -> bool:
        """Free lock ``name`` whoever holds it (an operator's escape hatch). The next waiter,
        if any, gets it at once. Returns whether a lock was held."""
        lock = cls(name, ttl=1, using=using)
        client = lock.client
        return lock._forced(
            run_script(client, RELEASE, lock.keys.releasing, lock._release_args(""))
        )
