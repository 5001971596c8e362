"""An acquire whose reply is lost: Redis ran the ``ACQUIRE`` (took the lock, or queued the
caller), but the connection was cut before the answer came back, twice over, so the call
raises ``RedisUnavailable``. What Redis took for it must not stay held by nobody until its
TTL: the caller frees it before raising, sync and asyncio, locks and semaphores. Proven on a
real redis-server behind a proxy that drops replies."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from django_redislock import AsyncLock, AsyncSemaphore, Lock, Semaphore
from django_redislock.exceptions import RedisUnavailable
from tests.support.proxy import ReplyLosingProxy
from tests.support.servers import RedisServer


@pytest.fixture
def proxy(settings: Any, redis_server: RedisServer) -> Iterator[ReplyLosingProxy]:
    redis_server.client().flushall()
    with ReplyLosingProxy("127.0.0.1", redis_server.port) as proxy:
        settings.REDISLOCK = {"URL": proxy.url}
        yield proxy


# A sync command on a connection that worked before is sent once more on a new one (see
# fastpath), so both its replies must be lost for the caller to give up; an asyncio one is
# sent once.
SYNC_SENDS, ASYNC_SENDS = 2, 1


@pytest.mark.parametrize("kind", [Lock, Semaphore])
def test_a_sync_acquire_whose_reply_is_lost_frees_what_it_took(
    proxy: ReplyLosingProxy, redis_server: RedisServer, kind: Any
) -> None:
    warm = kind("warm", ttl=30) if kind is Lock else kind("warm", limit=1, ttl=30)
    with warm:  # this thread's connection now exists: the next command may be sent twice
        pass
    lost = kind("lost", ttl=30) if kind is Lock else kind("lost", limit=1, ttl=30)
    proxy.lose_replies = SYNC_SENDS
    with pytest.raises(RedisUnavailable):
        lost.acquire(timeout=0)
    assert proxy.lost == SYNC_SENDS  # Redis did run it: the replies were dropped on the way
    other = kind("lost", ttl=30) if kind is Lock else kind("lost", limit=1, ttl=30)
    assert other.acquire(timeout=0)  # not held by a caller that never learned it had it
    other.release()


@pytest.mark.parametrize("kind", [AsyncLock, AsyncSemaphore])
def test_an_async_acquire_whose_reply_is_lost_frees_what_it_took(
    proxy: ReplyLosingProxy, kind: Any
) -> None:
    def make(name: str) -> Any:
        return kind(name, ttl=30) if kind is AsyncLock else kind(name, limit=1, ttl=30)

    async def scenario() -> bool:
        async with make("warm"):
            pass
        proxy.lose_replies = ASYNC_SENDS
        with pytest.raises(RedisUnavailable):
            await make("lost").acquire(timeout=0)
        assert proxy.lost == ASYNC_SENDS
        other = make("lost")
        got = await other.acquire(timeout=0)
        if got:
            await other.release()
        return bool(got)

    assert asyncio.run(scenario())
