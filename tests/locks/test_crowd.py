"""Many waiters in one process (an event loop's requests, a pool of threads): one of them
blocks on a lock's wake-up list directly, the others through the process's wake-up listener,
which gives each wake-up to its addressee; and their fallback re-checks are spaced out with
their number (``locks.crowd``), so that a thousand of them do not keep the process too busy
to take the hand-offs they wait for. On real redis-servers: the test's own for counting
blocked clients, the shared standalone one and a Cluster for the crowd."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_redislock import AsyncLock, Lock
from django_redislock.locks import crowd
from django_redislock.redis import wakeups
from django_redislock.redis.clients import reset_connections
from tests.support.servers import RedisServer
from tests.support.waiting import wait_for

THREADS = 20
TASKS = 4 * crowd.CROWD  # four times the plain crowd: a four times longer fallback


@pytest.fixture
def own_server(settings: Any) -> Iterator[RedisServer]:
    """A redis-server of the test's own: no other test's clients block on it."""
    with RedisServer() as own:
        settings.REDISLOCK = {"URL": own.url}
        reset_connections()
        yield own
    reset_connections()


def blocked_waiters(server: RedisServer) -> int:
    """The clients blocked in a ``BLPOP`` now, but for the process's wake-up listener."""
    clients = server.client().client_list()
    return sum(c.get("cmd") == "blpop" and c["name"] != wakeups.CLIENT_NAME for c in clients)


def test_threads_of_one_process_block_on_a_lock_through_one_connection(own_server):
    holder = Lock("crowded", ttl=30)
    assert holder.acquire(0)
    keys = holder.keys
    done = threading.Event()
    got: list[int] = []

    def wait(n: int) -> None:
        with Lock("crowded", ttl=30, timeout=20):
            got.append(n)
        if len(got) == THREADS:
            done.set()

    threads = [threading.Thread(target=wait, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    client = own_server.client()
    wait_for(lambda: client.zcard(keys.waiters) == THREADS, 10, "all queued")
    for _ in range(50):  # however the waits and re-checks interleave
        assert blocked_waiters(own_server) <= 1
        time.sleep(0.01)
    holder.release()
    assert done.wait(20), "every waiter got the lock in turn"
    for thread in threads:
        thread.join(5)
    assert sorted(got) == list(range(THREADS))


def test_a_crowd_of_waiters_re_checks_and_registers_for_longer(real_backend):
    # Every waiter's registration must outlive its (longer) fallback: each re-check in the
    # crowd registers it for as many times the plain registration.
    plain_ms = Lock("crowd").registration_ms
    client = real_backend.client

    async def take_in_turn() -> bool:
        async with AsyncLock("crowd", ttl=30, timeout=30):
            return True

    async def registered_for_longer(keys: Any) -> bool:
        seconds, micros = client.time()
        now = seconds * 1000 + micros // 1000
        deadlines = [int(value.split(b"|")[0]) for value in client.hvals(keys.registrations)]
        return len(deadlines) == TASKS and min(deadlines) - now > plain_ms * 2

    async def main() -> int:
        holder = AsyncLock("crowd", ttl=30)
        assert await holder.acquire(0)
        waiters = [asyncio.create_task(take_in_turn()) for _ in range(TASKS)]
        deadline = time.monotonic() + 30
        while not await registered_for_longer(holder.keys):  # each re-checked in the crowd
            assert time.monotonic() < deadline, "the crowd's registrations never grew"
            await asyncio.sleep(0.05)
        await holder.release()
        return sum(await asyncio.gather(*waiters))

    assert asyncio.run(main()) == TASKS
    assert crowd.scale() == 1.0  # nobody counted once the waits ended
