"""``MultiLock``: several locks taken as one, all names or none (see ``multi_base``)."""

from __future__ import annotations

import contextlib
import time
from threading import current_thread
from typing import Any

from ..exceptions import LockNotOwned
from ..redis.clients import run_script
from .lock import Lock
from .multi_base import MultiLockBase, Shard, new_token
from .multi_scripts import MULTI_ACQUIRE, MULTI_RELEASE
from .options import WithStatement


class MultiLock(MultiLockBase, WithStatement):
    """``with MultiLock(["sku:1", "sku:7"], ttl=10, timeout=2):`` holds every name, or
    raises LockTimeout. Takes ``Lock``'s options (``fences``: a dict name -> fence).

    Names on one shard (every name on a standalone Redis; on Cluster, names whose hash tag
    is the same) are taken by one script, all or none. When one is busy, or the names are on
    several shards, they are taken one by one in lock order, waiting for each within the
    timeout, which is one deadline for the whole set; if that fails, those taken are
    released. Each name is an ordinary lock: the admin lists it with its owner."""

    _lock_class = Lock

    def acquire(self, timeout: float | None = None) -> bool:
        """Acquire every name; wait up to ``timeout`` seconds in all (None: the timeout given
        at construction, 0: try once, ``math.inf``: forever). Returns whether they are held;
        when not, none is."""
        timeout = self._validate_timeout(timeout)
        deadline = time.monotonic() + timeout
        owner = self._locks[0].current_owner()
        if owner in self._owners:
            self._start_afresh(owner)
        shards = self._shards or self._layout()
        if len(shards) == 1:
            busy = self._take_at_once(owner, shards[0])
            if not busy:
                return True
            if timeout == 0:
                self._busy(busy, timeout)
                return False
        return self._take_in_order(owner, deadline, timeout)

    def _start_afresh(self, owner: tuple[Any, ...]) -> None:
        """A second acquire by the same owner: an error while it holds every name; else what
        is left of its hold (a name lost) is released first."""
        if self.owned():
            raise self._already_held()
        self._owners.discard(owner)
        with contextlib.suppress(Exception):
            self._free(owner, self._locks)

    def _take_at_once(self, owner: tuple[Any, ...], shard: Shard) -> int:
        """Take every name of ``shard`` in one script: 0, or the position (from 1) of a busy
        name, when none was taken."""
        client = self._locks[0].client
        token = new_token()
        try:
            args = self._acquire_args(token, shard)
            reply = run_script(client, MULTI_ACQUIRE, shard.acquiring, args)
            if type(reply) is int:
                return reply  # busy: nothing was taken
            self._adopt(owner, token, reply, current_thread())
        except BaseException:
            # The reply lost (the script may have run), a receiver failed, an interrupt:
            # free whatever this token took.
            self._abandon(client, shard, token)
            raise
        return 0

    def _abandon(self, client: Any, shard: Shard, token: str) -> None:
        tokens = [token] * len(shard.names)
        try:
            run_script(client, MULTI_RELEASE, shard.releasing, self._release_args(shard, tokens))
        except Exception:
            self._log_clean_up_failure(shard.names)

    def _take_in_order(self, owner: tuple[Any, ...], deadline: float, timeout: float) -> bool:
        taken: list[Lock] = []
        try:
            for lock in self._locks:
                if not lock.acquire(max(0.0, deadline - time.monotonic()) if timeout else 0):
                    break
                taken.append(lock)
        except BaseException:
            self._free_quietly(owner, taken)
            raise
        if len(taken) < len(self._locks):
            self._free_quietly(owner, taken)
            return False
        self._owners.add(owner)
        return True

    def _free_quietly(self, owner: tuple[Any, ...], locks: list[Lock]) -> None:
        """Roll back: release ``locks``; a failure only logged (their TTL ends them)."""
        if locks:
            try:
                self._free(owner, locks)
            except Exception:
                self._log_clean_up_failure([lock.name for lock in locks])

    def _free(self, owner: tuple[Any, ...], locks: Any) -> None:
        """Release ``owner``'s holds of ``locks``, one script per shard; LockNotOwned naming
        the names found lost (the others are released all the same)."""
        shards, holds = self._begin_release(owner, locks)
        client = self._locks[0].client
        lost: list[str] = []
        failure: Exception | None = None
        for shard in shards:
            try:
                args = self._release_args(shard, self._tokens(shard, holds))
                codes = run_script(client, MULTI_RELEASE, shard.releasing, args)
            except Exception as exc:  # Redis gone: the other shards are freed still
                failure = failure or exc
                continue
            lost += self._end_release(shard, holds, codes)
        if failure is not None:
            raise failure
        if lost:
            raise self._not_owned("release", lost)

    def release(self) -> None:
        """Release every name. LockNotOwned if this owner does not hold them, or naming those
        it no longer held (the others are released)."""
        owner = self._locks[0].current_owner()
        if owner not in self._owners:
            raise self._not_owned("release")
        self._owners.discard(owner)
        self._free(owner, self._locks)

    def extend(self, ttl: float | None = None) -> None:
        """Reset every name's remaining TTL to ``ttl`` seconds (default: the ttl given at
        construction). LockNotOwned naming the names no longer held."""
        self._validate_ttl(ttl)
        if self._locks[0].current_owner() not in self._owners:
            raise self._not_owned("extend")
        lost = []
        for lock in self._locks:
            try:
                lock.extend(ttl)
            except LockNotOwned:
                lost.append(lock.name)
        if lost:
            raise self._not_owned("extend", lost)

    def locked(self) -> bool:
        """Whether anybody (this owner included) holds any of the names."""
        return any(lock.locked() for lock in self._locks)

    def owned(self) -> bool:
        """Whether this owner (thread) holds every name, as Redis sees it now."""
        if self._locks[0].current_owner() not in self._owners:
            return False
        return all(lock.owned() for lock in self._locks)
