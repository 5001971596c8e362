"""Waiting for a lock or a semaphore permit, sync and asyncio: a waiter blocks on a wake-up
list until a release hands it over (pushed, no polling), re-checks when the holder's TTL (or
its jittered fallback delay) runs out, and leaves the queue at its deadline. The structure
(lock or semaphore) supplies the list, the reading of a wake-up, the re-check, the give-up
and the release of a late hand-off.

The waiters of a lock (or of a semaphore) share one list, and a wake-up starts with its
addressee's "<token><fence>|": one popped by another waiter than its addressee is passed on
by that waiter's next call (its re-check, at once, or its give-up), which it makes without
blocking first. A wake-up that reaches its waiter after the deadline goes on with
the release of what it handed over."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from threading import get_ident
from typing import Any

from ..redis.aio import cancel_requests, get_async_redis
from ..redis.aio import wait_for_push as aio_wait_for_push
from ..redis.clients import get_redis, wait_for_push
from . import crowd
from .base import LockBase, logger
from .keys import fence_for, text
from .options import AsyncContext


def current_task() -> Any:
    """Who an asyncio hold belongs to: the running task (or, outside one, the thread)."""
    return asyncio.current_task() or get_ident()


def addressed_to(mine: bytes) -> Callable[[Any], bool]:
    """Whether a wake-up is for the waiter whose token is ``mine`` (encoded), as the wake-up
    listener asks."""
    return lambda value: (value if isinstance(value, bytes) else str(value).encode()).startswith(
        mine
    )


class Circling:
    """Whether a waiter keeps popping back a wake-up it passed on, and how long it then
    stays off the list. Blocked alone on the list while the addressee is not blocked yet
    (between its ``ACQUIRE`` and its ``BLPOP``, or a thread slowed by a busy machine), a
    waiter pops its own pass-on again at once, and would spend the wake-up's hops in a few
    milliseconds: the addressee would find its hand-off only at its fallback re-check. So
    from the second time in a row it steps aside, 1 ms doubling up to ``MAX_STEP``. A
    wake-up taken by anyone else in between resets it."""

    MAX_STEP = 0.05

    def __init__(self) -> None:
        self.addressee, self.returns = "", 0

    def step_aside(self, passing: str) -> float:
        """Seconds to keep off the list after passing on ``passing`` (empty: passed nothing)."""
        addressee = passing.rpartition("|")[0]  # "<token><fence>" or "<permit>", no hops
        self.returns = self.returns + 1 if addressee and addressee == self.addressee else 0
        self.addressee = addressee
        return min(0.001 * 2 ** (self.returns - 1), self.MAX_STEP) if self.returns else 0.0


class SyncWaiting(LockBase):
    """The blocking wait of ``Lock`` and ``Semaphore``, and their clients."""

    def current_owner(self) -> tuple[Any, ...]:
        """Who holds what this thread acquired, as ``release_owner`` takes it: another thread
        can then release it (``@redis_locked`` does when a streaming response is closed on
        another thread than the view's)."""
        return self._owner(get_ident())

    def _connect(self) -> Any:
        return get_redis(self.using)

    @property
    def renew_client(self) -> Any:
        return self._client or self.client

    def _recheck(self, client: Any, token: str, passing: str, scale: float) -> Any:
        """Try again as a queued waiter, passing wake-up ``passing`` on (if any) and
        registering for ``scale`` times the plain fallback (``crowd``): the fence (int) when
        acquired, else a list whose first item is how many ms until the holder's TTL runs
        out."""
        raise NotImplementedError

    def _give_up(self, client: Any, token: str, passing: str) -> int:
        """Leave the queue, passing wake-up ``passing`` on (if any); the fence when a
        hand-off reached ``token`` meanwhile, else -1."""
        raise NotImplementedError

    def _release_token(self, client: Any, token: str) -> Any:
        raise NotImplementedError

    def _fence_of(
        self, client: Any, token: str, reply: Any, deadline: float, timeout: float
    ) -> int | None:
        """The fence of a first ``ACQUIRE`` ``reply`` (an int when it acquired), else waited
        for until ``deadline`` when ``timeout`` allows; None, signalled busy, when not."""
        if type(reply) is int:
            return reply
        fence = self._wait(client, token, deadline, reply[0]) if timeout > 0 else None
        if fence is None:
            self._busy(timeout)
        return fence

    def _wait(self, client: Any, token: str, deadline: float, pttl: int) -> int | None:
        """Block until a releasing holder hands over (pushed to the wake-up list), the
        holder's TTL runs out, or the deadline (monotonic) passes. Returns the fence, or None."""
        # The timeout is a deadline, counted from the call of acquire(): the BLPOP answers on
        # time (see ``blocking``), and nothing is acquired once it has passed.
        crowd.waiting.append(None)
        try:
            return self._waiting(client, token, deadline, pttl)
        except BaseException:
            # Leave the queue, so no hand-off goes to a waiter that stopped waiting; if one
            # already did, give it on.
            with contextlib.suppress(Exception):
                self._leave(client, token, "")
            raise
        finally:
            crowd.waiting.pop()

    def _waiting(self, client: Any, token: str, deadline: float, pttl: int) -> int | None:
        wake, mine = self._wake_key(token), token.encode()
        accepts = addressed_to(mine)
        scale = 1.0  # what the first ACQUIRE registered for
        circling = Circling()
        while True:
            passing = ""
            block = self._block_for(deadline, pttl, scale)
            if block:
                popped = wait_for_push(client, wake, block, accepts)
                if popped is not None:
                    fence = fence_for(mine, popped[1])
                    if fence is None:
                        passing = text(popped[1])  # another waiter's: passed on at once
                    elif time.monotonic() <= deadline:
                        return fence
            if time.monotonic() >= deadline:
                self._leave(client, token, passing)
                return None
            scale = crowd.scale()
            reply = self._recheck(client, token, passing, scale)
            if type(reply) is int:
                return reply
            pttl = reply[0]
            pause = circling.step_aside(passing)
            if pause:  # it came straight back: let its addressee block first
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))

    def _leave(self, client: Any, token: str, passing: str) -> None:
        """Leave the queue; a hand-off that reached us too late goes on to the next waiter."""
        fence = self._give_up(client, token, passing)
        if fence >= 0:
            self._release_handed(client, token, fence)

    def _abandon(self, client: Any, token: str) -> None:
        """Leave the queue and free whatever ``token`` may hold, after an ``ACQUIRE`` whose
        reply never came (the connection cut, a failover): Redis may have run it. Errors are
        only logged; if Redis is gone, the TTL frees what it took."""
        try:
            self._leave(client, token, "")
        except Exception:
            logger.warning("Could not clean up an abandoned acquire of %s %r", self.noun, self.name)

    def _release_handed(self, client: Any, token: str, fence: int) -> None:
        """Release what a hand-off gave ``token`` (with ``fence``) too late."""
        self._release_token(client, token)


class AsyncWaiting(LockBase, AsyncContext):
    """The asyncio wait of ``AsyncLock`` and ``AsyncSemaphore``, and their clients."""

    def current_owner(self) -> tuple[Any, ...]:
        """Who holds what this task acquired, as ``release_owner`` takes it: another thread
        can then release it (``@redis_locked`` does when a streaming response is closed
        elsewhere)."""
        return self._owner(current_task())

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

    async def _recheck_async(self, client: Any, token: str, passing: str, scale: float) -> Any:
        """``SyncWaiting._recheck`` over the asyncio ``client``."""
        raise NotImplementedError

    async def _give_up_async(self, client: Any, token: str, passing: str) -> int:
        raise NotImplementedError

    async def _release_token_async(self, client: Any, token: str) -> Any:
        raise NotImplementedError

    async def _fence_of(
        self, client: Any, token: str, reply: Any, deadline: float, timeout: float
    ) -> int | None:
        """``SyncWaiting._fence_of`` over the asyncio ``client``."""
        if type(reply) is int:
            return reply
        fence = await self._wait(client, token, deadline, reply[0]) if timeout > 0 else None
        if fence is None:
            self._busy(timeout)
        return fence

    async def _wait(self, client: Any, token: str, deadline: float, pttl: int) -> int | None:
        """Block until a releasing holder hands over, the holder's TTL runs out, or the
        deadline (monotonic) passes. Returns the fence, or None."""
        # The timeout is a deadline, counted from the call of acquire(): the BLPOP answers on
        # time (see ``blocking``), and nothing is acquired once it has passed.
        crowd.waiting.append(None)
        try:
            return await self._waiting(client, token, deadline, pttl)
        finally:
            crowd.waiting.pop()

    async def _waiting(self, client: Any, token: str, deadline: float, pttl: int) -> int | None:
        wake, mine = self._wake_key(token), token.encode()
        accepts = addressed_to(mine)
        scale = 1.0  # what the first ACQUIRE registered for
        circling = Circling()
        while True:
            passing = ""
            block = self._block_for(deadline, pttl, scale)
            if block:
                asked = cancel_requests()
                popped = await aio_wait_for_push(client, self.renew_client, wake, block, accepts)
                if popped is not None:
                    fence = fence_for(mine, popped[1])
                    if fence is None:
                        passing = text(popped[1])  # another waiter's: passed on at once
                    elif time.monotonic() <= deadline and cancel_requests() <= asked:
                        return fence
                if cancel_requests() > asked:
                    # Cancelled as it popped (the cancel dropped on the way, see
                    # ``raise_if_cancelled_since``): what it popped goes on with the clean-up.
                    await asyncio.shield(self._leave(client, token, passing))
                    raise asyncio.CancelledError
            if time.monotonic() >= deadline:
                await self._leave(client, token, passing)
                return None
            scale = crowd.scale()
            # run_script raises a cancel dropped on the way, as every asyncio command does.
            reply = await self._recheck_async(client, token, passing, scale)
            if type(reply) is int:
                return reply
            pttl = reply[0]
            pause = circling.step_aside(passing)
            if pause:  # it came straight back: let its addressee block first
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))

    async def _leave(self, client: Any, token: str, passing: str) -> None:
        """Leave the queue; a hand-off that reached us too late goes on to the next waiter."""
        fence = await self._give_up_async(client, token, passing)
        if fence >= 0:
            await self._release_handed_async(client, token, fence)

    async def _release_handed_async(self, client: Any, token: str, fence: int) -> None:
        """Release what a hand-off gave ``token`` (with ``fence``) too late."""
        await self._release_token_async(client, token)

    async def _abandon(self, client: Any, token: str) -> None:
        """Leave the queue and free whatever ``token`` may hold (a cancelled or failed
        acquire); errors are only logged."""
        try:
            await self._leave(client, token, "")
        except Exception:
            logger.warning("Could not clean up an abandoned acquire of %s %r", self.noun, self.name)
