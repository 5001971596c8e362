"""``AsyncMultiLock``: ``MultiLock`` for asyncio code. The owner is the current task.
Cancellation never leaves a name held by nobody who knows it: a cancelled acquire frees what
it took, and a release runs to its end even when its caller is cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import time
from threading import current_thread
from typing import Any

from ..exceptions import LockNotOwned
from ..redis.aio import run_script
from .async_lock import AsyncLock
from .multi_base import MultiLockBase, Shard, new_token
from .multi_scripts import MULTI_ACQUIRE, MULTI_RELEASE
from .options import AsyncWithStatement


class AsyncMultiLock(MultiLockBase, AsyncWithStatement):
    """``async with AsyncMultiLock(["sku:1", "sku:7"], ttl=10, timeout=2):`` — see
    ``MultiLock``."""

    _lock_class = AsyncLock

    async def acquire(self, timeout: float | None = None) -> bool:
        """Acquire every name; wait up to ``timeout`` seconds in all (None: the timeout given
        at construction, 0: try once, ``math.inf``: forever). Returns whether they are held;
        when not, none is."""
        timeout = self._validate_timeout(timeout)
        deadline = time.monotonic() + timeout
        owner = self._locks[0].current_owner()
        if owner in self._owners:
            await self._start_afresh(owner)
        shards = self._shards or self._layout()
        if len(shards) == 1:
            busy = await self._take_at_once(owner, shards[0])
            if not busy:
                return True
            if timeout == 0:
                self._busy(busy, timeout)
                return False
        return await self._take_in_order(owner, deadline, timeout)

    async def _start_afresh(self, owner: tuple[Any, ...]) -> None:
        """As ``MultiLock._start_afresh``."""
        if await self.owned():
            raise self._already_held()
        self._owners.discard(owner)
        with contextlib.suppress(Exception):
            await self._free(owner, self._locks)

    async def _take_at_once(self, owner: tuple[Any, ...], shard: Shard) -> int:
        """Take every name of ``shard`` in one script: 0, or the position (from 1) of a busy
        name, when none was taken."""
        client = self._locks[0].client
        token = new_token()
        try:
            args = self._acquire_args(token, shard)
            reply = await run_script(client, MULTI_ACQUIRE, shard.acquiring, args)
            if type(reply) is int:
                return reply  # busy: nothing was taken
            self._adopt(owner, token, reply, asyncio.current_task() or current_thread())
        except BaseException:
            # Cancelled, the reply lost, a receiver failed: free whatever this token took,
            # even if this task is being cancelled.
            await asyncio.shield(self._abandon(client, shard, token))
            raise
        return 0

    async def _abandon(self, client: Any, shard: Shard, token: str) -> None:
        tokens = [token] * len(shard.names)
        try:
            args = self._release_args(shard, tokens)
            await run_script(client, MULTI_RELEASE, shard.releasing, args)
        except Exception:
            self._log_clean_up_failure(shard.names)

    async def _take_in_order(self, owner: tuple[Any, ...], deadline: float, timeout: float) -> bool:
        taken: list[AsyncLock] = []
        try:
            for lock in self._locks:
                if not await lock.acquire(max(0.0, deadline - time.monotonic()) if timeout else 0):
                    break
                taken.append(lock)
        except BaseException:
            await asyncio.shield(self._free_quietly(owner, taken))
            raise
        if len(taken) < len(self._locks):
            await self._free_quietly(owner, taken)
            return False
        self._owners.add(owner)
        return True

    async def _free_quietly(self, owner: tuple[Any, ...], locks: list[AsyncLock]) -> None:
        """Roll back: release ``locks``; a failure only logged (their TTL ends them)."""
        if locks:
            try:
                await self._free(owner, locks)
            except Exception:
                self._log_clean_up_failure([lock.name for lock in locks])

    async def _free(self, owner: tuple[Any, ...], locks: Any) -> None:
        """As ``MultiLock._free``, the shards at once; runs to its end even if the caller is
        cancelled."""
        shards, holds = self._begin_release(owner, locks)
        client = self._locks[0].client

        argvs = [self._release_args(shard, self._tokens(shard, holds)) for shard in shards]

        async def free_all() -> list[Any]:
            calls = (
                run_script(client, MULTI_RELEASE, shard.releasing, args)
                for shard, args in zip(shards, argvs, strict=True)
            )
            return await asyncio.gather(*calls, return_exceptions=True)

        lost: list[str] = []
        failure: BaseException | None = None
        for shard, codes in zip(shards, await asyncio.shield(free_all()), strict=True):
            if isinstance(codes, BaseException):  # Redis gone: the other shards are freed
                failure = failure or codes
            else:
                lost += self._end_release(shard, holds, codes)
        if failure is not None:
            raise failure
        if lost:
            raise self._not_owned("release", lost)

    async def release(self) -> None:
        """Release every name. LockNotOwned if this task does not hold them, or naming those
        it no longer held (the others are released)."""
        owner = self._locks[0].current_owner()
        if owner not in self._owners:
            raise self._not_owned("release")
        self._owners.discard(owner)
        await self._free(owner, self._locks)

    async def extend(self, ttl: float | None = None) -> None:
        """Reset every name's remaining TTL to ``ttl`` seconds (default: the ttl given at
        construction). LockNotOwned naming the names no longer held."""
        self._validate_ttl(ttl)
        if self._locks[0].current_owner() not in self._owners:
            raise self._not_owned("extend")
        lost = []
        for lock in self._locks:
            try:
                await lock.extend(ttl)
            except LockNotOwned:
                lost.append(lock.name)
        if lost:
            raise self._not_owned("extend", lost)

    async def locked(self) -> bool:
        """Whether anybody (this task included) holds any of the names."""
        for lock in self._locks:
            if await lock.locked():
                return True
        return False

    async def owned(self) -> bool:
        """Whether this task holds every name, as Redis sees it now."""
        if self._locks[0].current_owner() not in self._owners:
            return False
        for lock in self._locks:
            if not await lock.owned():
                return False
        return True
