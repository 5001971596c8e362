"""Waiting for a free connection instead of failing, and waiters that hold none (issue 24,
point 1), on a real redis-server with small pools."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import redis

from django_redislock import AsyncLock, Lock, get_redis
from django_redislock.exceptions import RedisUnavailable
from django_redislock.redis import pools, wakeups
from django_redislock.redis.aio import get_async_redis
from django_redislock.redis.aio import run_script as aio_run_script
from django_redislock.redis.clients import call, reset_connections
from django_redislock.redis.wakeups import NUDGE


@pytest.fixture
def small_pool(settings: Any, redis_server: Any) -> Any:
    settings.REDISLOCK = {"URL": redis_server.url, "MAX_CONNECTIONS": 4}
    reset_connections()
    yield get_redis()
    reset_connections()


def test_the_setting_sizes_the_pools_the_app_builds(small_pool):
    assert small_pool.connection_pool.max_connections == 4

    async def size() -> int:
        return int(get_async_redis().connection_pool.max_connections)

    assert asyncio.run(size()) == 4


def test_many_threads_share_a_small_pool_without_an_error(small_pool):
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(30):
                assert call(small_pool, "SET", f"k:{n}:{i}", i)
                with Lock(f"share:{n % 3}", ttl=5, timeout=30):
                    pass
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []


def test_many_tasks_share_a_small_pool_without_an_error(small_pool):
    async def work(n: int) -> None:
        async with AsyncLock(f"ashare:{n % 5}", ttl=5, timeout=30):
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(work(n) for n in range(300)))

    asyncio.run(main())


def test_a_command_waits_for_a_connection_then_says_why_it_gave_up(small_pool, monkeypatch):
    monkeypatch.setattr(pools, "CONNECTION_WAIT", 0.3)
    reset_connections()  # a pool built now waits as long for a connection
    small_pool = get_redis()
    pool = small_pool.connection_pool
    assert pool.timeout == 0.3
    taken = [pool.get_connection() for _ in range(4)]  # the cache's traffic, say
    outcome: list[Any] = []

    def plain() -> None:
        try:
            outcome.append(call(small_pool, "ECHO", "through"))
        except RedisUnavailable as exc:
            outcome.append(exc)

    def blocking_pop() -> None:
        try:
            outcome.append(call(small_pool, "BLPOP", "nothing", 0.05))
        except RedisUnavailable as exc:
            outcome.append(exc)

    for target in (plain, blocking_pop):  # threads that keep no connection of their own
        thread = threading.Thread(target=target)
        thread.start()
        thread.join(10)
    assert [type(o) for o in outcome] == [RedisUnavailable, RedisUnavailable]
    assert all("MAX_CONNECTIONS" in str(o) for o in outcome)
    # One connection freed while a command waits: it goes through.
    outcome.clear()
    monkeypatch.setattr(pools, "CONNECTION_WAIT", 10)
    thread = threading.Thread(target=plain)
    thread.start()
    pool.release(taken.pop())
    thread.join(10)
    assert outcome == [b"through"]
    for conn in taken:
        pool.release(conn)


def test_asyncio_waiters_beyond_the_pool_are_woken_through_the_listener(small_pool, redis_server):
    """With four connections per event loop, forty tasks wait on one lock: most wait on the
    process's wake-up listener, holding no connection, and each is woken by a hand-off."""
    order: list[int] = []

    async def main() -> None:
        holder = AsyncLock("listened", ttl=10)
        assert await holder.acquire(0)

        async def wait(n: int) -> None:
            async with AsyncLock("listened", ttl=10, timeout=30):
                order.append(n)

        tasks = [asyncio.create_task(wait(n)) for n in range(40)]
        await asyncio.sleep(0.2)
        await holder.release()
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert sorted(order) == list(range(40))
    # The listener's connection says what it is (CLIENT LIST), so that it is not taken for a
    # waiter left blocked.
    names = [client["name"] for client in redis_server.client().client_list()]
    assert wakeups.CLIENT_NAME in names


def test_the_nudge_leaves_nothing_behind(small_pool, redis_server):
    async def nudge() -> Any:
        return await aio_run_script(
            get_async_redis(), NUDGE, ("redislock:{L0}:~wakeups:t",), (1000,)
        )

    assert asyncio.run(nudge()) == 1
    assert 0 < redis_server.client().pttl("redislock:{L0}:~wakeups:t") <= 1000


def connect_timeouts(times: int, then: Any) -> Any:
    """A command whose first ``times`` tries find that a new connection did not open in time
    (redis-py's own error: nothing was sent), then runs ``then``."""
    tries = []

    def command() -> Any:
        tries.append(1)
        if len(tries) <= times:
            raise RedisUnavailable("Redis is unreachable") from redis.TimeoutError(
                "Timeout connecting to server"
            )
        return then()

    command.tries = tries  # type: ignore[attr-defined]
    return command


def test_a_connection_that_opened_too_late_is_tried_again(redis_backend: Any) -> None:
    client = get_redis()
    command = connect_timeouts(2, lambda: call(client, "PING"))
    assert pools.with_connection(client, command) == b"PONG"
    assert len(command.tries) == 3


def test_a_read_that_timed_out_is_never_sent_again(redis_backend: Any) -> None:
    tries = []

    def command() -> Any:
        tries.append(1)
        raise RedisUnavailable("Redis is unreachable") from redis.TimeoutError(
            "Timeout reading from socket"
        )

    with pytest.raises(RedisUnavailable):
        pools.with_connection(get_redis(), command)
    assert tries == [1]  # the command may have run: not sent twice


def test_connections_that_never_open_give_up_at_the_deadline(
    redis_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pools, "CONNECTION_WAIT", 0.2)
    command = connect_timeouts(10**9, lambda: None)
    with pytest.raises(RedisUnavailable) as raised:
        pools.with_connection(get_redis(), command)
    assert "Timeout connecting to server" in str(raised.value.__cause__)
    assert len(command.tries) > 1


def test_an_asyncio_connection_that_opened_too_late_is_tried_again(redis_backend: Any) -> None:
    async def main() -> Any:
        client = get_async_redis()

        async def ping() -> Any:
            return await client.ping()

        command = connect_timeouts(2, ping)
        return await pools.async_with_connection(client, command), len(command.tries)

    assert asyncio.run(main()) == (True, 3)
