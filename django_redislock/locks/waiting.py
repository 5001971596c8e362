"""Waiting for a lock or a semaphore permit, sync and asyncio: a waiter blocks on its wake-up
list until a release hands it over (pushed, no polling), re-checks when the holder's TTL (or
its jittered fallback delay) runs out, and leaves the queue at its deadline. The structure
(lock or semaphore) supplies the re-check, the give-up and the release of a late hand-off."""

from __future__ import annotations

import asyncio
import contextlib
import time
from threading import get_ident
from typing import Any

from ..redis.aio import get_async_redis
from ..redis.aio import wait_for_push as aio_wait_for_push
from ..redis.clients import get_redis, wait_for_push
from .base import LockBase, logger
from .options import AsyncContext


def _task() -> Any:
    return asyncio.current_task() or get_ident()


def _cancelling() -> int:
    """How many cancellations of the current task are pending (Python 3.11+; else 0)."""
    task = asyncio.current_task()
    count = getattr(task, "cancelling", None)
    return int(count()) if count is not None else 0


def _cancelled_since(before: int) -> None:
    """Raise the CancelledError that a cancel() during the last await should have raised:
    redis-py's asyncio client can swallow it mid-command, and the waiter would then wait on
    until its timeout."""
    if _cancelling() > before:
        raise asyncio.CancelledError


class SyncWaiting(LockBase):
    """The blocking wait of ``Lock`` and ``Semaphore``, and their clients."""

    def _connect(self) -> Any:
        return get_redis(self.using)

    @property
    def renew_client(self) -> Any:
        return self.client

    def _wake_key(self, token: str) -> str:
        raise NotImplementedError

    def _recheck(self, client: Any, token: str) -> Any:
        """Try again as a queued waiter: the fence (int) when acquired, else a list whose
        first item is how many ms until the holder's TTL runs out."""
        raise NotImplementedError

    def _give_up(self, client: Any, token: str) -> int:
        """Leave the queue; the fence when a hand-off reached ``token`` meanwhile, else -1."""
        raise NotImplementedError

    def _release_token(self, client: Any, token: str) -> Any:
        raise NotImplementedError

    def _wait(self, client: Any, token: str, deadline: float, pttl: int) -> int | None:
        """Block until a releasing holder hands over (pushed to our wake-up list), the
        holder's TTL runs out, or the deadline (monotonic) passes. Returns the fence, or None."""
        try:
            return self._wait_loop(client, token, deadline, pttl)
        except BaseException:
            # Leave the queue, so no hand-off goes to a waiter that stopped waiting; if one
            # already did, give it on.
            with contextlib.suppress(Exception):
                self._leave(client, token)
            raise

    def _wait_loop(self, client: Any, token: str, deadline: float, pttl: int) -> int | None:
        # The timeout is a deadline, counted from the call of acquire(): the BLPOP answers on
        # time (see ``blocking``), and nothing is acquired once it has passed.
        wake = self._wake_key(token)
        while True:
            block = self._block_for(deadline, pttl)
            if block:
                popped = wait_for_push(client, wake, block)
                if popped is not None and time.monotonic() <= deadline:
                    return int(popped[1])
            if time.monotonic() >= deadline:
                self._leave(client, token)
                return None
            reply = self._recheck(client, token)
            if type(reply) is int:
                return reply
            pttl = reply[0]

    def _leave(self, client: Any, token: str) -> None:
        """Leave the queue; a hand-off that reached us too late goes on to the next waiter."""
        fence = self._give_up(client, token)
        if fence >= 0:
            self._release_handed(client, token, fence)

    def _abandon(self, client: Any, token: str) -> None:
        """Leave the queue and free whatever ``token`` may hold, after an ``ACQUIRE`` whose
        reply never came (the connection cut, a failover): Redis may have run it. Errors are
        only logged; if Redis is gone, the TTL frees what it took."""
        try:
            self._leave(client, token)
        except Exception:
            logger.warning("Could not clean up an abandoned acquire of %s %r", self.noun, self.name)

    def _release_handed(self, client: Any, token: str, fence: int) -> None:
        """Release what a hand-off gave ``token`` (with ``fence``) too late."""
        self._release_token(client, token)


class AsyncWaiting(LockBase, AsyncContext):
    """The asyncio wait of ``AsyncLock`` and ``AsyncSemaphore``, and their clients."""

    @property
    def client(self) -> Any:
        # Not kept on the instance: asyncio clients belong to their event loop.
        client = get_async_redis(self.using)
        if self._client is None:
            self._setup(client)
        return client

    def _connect(self) -> Any:
        return get_async_redis(self.using)

    @property
    def renew_client(self) -> Any:
        return get_redis(self.using)  # the renewer is a thread: a sync client

    def _wake_key(self, token: str) -> str:
        raise NotImplementedError

    async def _recheck_async(self, client: Any, token: str) -> Any:
        """``SyncWaiting._recheck`` over the asyncio ``client``."""
        raise NotImplementedError

    async def _give_up_async(self, client: Any, token: str) -> int:
        raise NotImplementedError

    async def _release_token_async(self, client: Any, token: str) -> Any:
        raise NotImplementedError

    async def _wait(self, client: Any, token: str, deadline: float, pttl: int) -> int | None:
        """Block until a releasing holder hands over, the holder's TTL runs out, or the
        deadline (monotonic) passes. Returns the fence, or None."""
        # The timeout is a deadline, counted from the call of acquire(): the BLPOP answers on
        # time (see ``blocking``), and nothing is acquired once it has passed.
        wake = self._wake_key(token)
        while True:
            block = self._block_for(deadline, pttl)
            if block:
                asked = _cancelling()
                popped = await aio_wait_for_push(client, self.renew_client, wake, block)
                _cancelled_since(asked)
                if popped is not None and time.monotonic() <= deadline:
                    return int(popped[1])
            if time.monotonic() >= deadline:
                await self._leave(client, token)
                return None
            asked = _cancelling()
            reply = await self._recheck_async(client, token)
            _cancelled_since(asked)
            if type(reply) is int:
                return reply
            pttl = reply[0]

    async def _leave(self, client: Any, token: str) -> None:
        """Leave the queue; a hand-off that reached us too late goes on to the next waiter."""
        fence = await self._give_up_async(client, token)
        if fence >= 0:
            await self._release_handed_async(client, token, fence)

    async def _release_handed_async(self, client: Any, token: str, fence: int) -> None:
        """Release what a hand-off gave ``token`` (with ``fence``) too late."""
        await self._release_token_async(client, token)

    async def _abandon(self, client: Any, token: str) -> None:
        """Leave the queue and free whatever ``token`` may hold (a cancelled or failed
        acquire); errors are only logged."""
        try:
            await self._leave(client, token)
        except Exception:
            logger.warning("Could not clean up an abandoned acquire of %s %r", self.noun, self.name)
