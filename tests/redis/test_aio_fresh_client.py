"""Many tasks on a brand-new asyncio client (a fresh event loop each round): every command runs
exactly once and none fails. On Cluster, redis-py routes commands it sees before its first
topology discovery to a random node; the MOVED replies then make it close the whole client
under the other tasks' in-flight commands, which fail or are sent again (``redis.aio``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from django_redislock.locks.async_lock import AsyncLock
from django_redislock.redis import aio
from django_redislock.stock.async_stock import AsyncStock
from django_redislock.stock.stock import Stock
from tests.support.fixtures import Backend

TASKS = 8
ROUNDS = 6  # a round misbehaves only when the random first routes miss the key's node


async def together(work: Any) -> None:
    """Run ``work(i)`` in TASKS tasks started at once on this loop's (new) client; every
    exception is raised, not just the first."""
    results = await asyncio.gather(*(work(i) for i in range(TASKS)), return_exceptions=True)
    errors = [result for result in results if isinstance(result, BaseException)]
    assert not errors, errors


def incrementer(key: str) -> Any:
    async def incr(_: int) -> None:
        for _ in range(50):
            await aio.call(aio.get_async_redis(), "INCR", key)

    return incr


def test_concurrent_first_commands_run_exactly_once(real_backend: Backend) -> None:
    for round_ in range(ROUNDS):
        key = f"fresh:{round_}"

        asyncio.run(together(incrementer(key)))
        assert int(real_backend.client.get(key)) == TASKS * 50, key


def test_concurrent_commands_after_the_client_closed_itself_run_exactly_once(
    real_backend: Backend,
) -> None:
    # redis-py closes a Cluster client itself on CLUSTERDOWN or repeated MOVED (a failover):
    # it then knows no node again, like a new one.
    for round_ in range(ROUNDS):
        key = f"reopened:{round_}"

        async def main(key: str = key) -> None:
            await aio.call(aio.get_async_redis(), "INCR", key)
            await aio.get_async_redis().aclose()
            await together(incrementer(key))

        asyncio.run(main())
        assert int(real_backend.client.get(key)) == TASKS * 50 + 1, key


def test_concurrent_first_scripts_run_exactly_once(real_backend: Backend) -> None:
    # Through run_script (EVALSHA): a stock addition counted twice would be a unit invented.
    for round_ in range(ROUNDS):
        name = f"fresh-sale:{round_}"

        async def add(_: int, name: str = name) -> None:
            for _ in range(25):
                await AsyncStock(name).add(1)

        asyncio.run(together(add))
        assert Stock(name).available() == TASKS * 25, name


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_lock_acquires_all_succeed_once(real_backend: Backend) -> None:
    # Distinct locks, all free: each acquire must win at once. An acquire sent twice would
    # find its own hold and fail or count a re-entry; a client closed under it would raise.
    for round_ in range(ROUNDS):

        async def take(i: int, round_: int = round_) -> None:
            for turn in range(5):
                lock = AsyncLock(f"fresh:{round_}:{i}:{turn}", ttl=30)
                assert await lock.acquire(0), lock.name
                assert await lock.owned()
                await lock.release()
                assert not await lock.locked()

        asyncio.run(together(take))


def test_tasks_queued_on_one_lock_each_get_it_in_turn(real_backend: Backend) -> None:
    # TASKS tasks of a fresh loop queue on one lock, each holding it five times: every hold
    # is exclusive, and no waiter's BLPOP is cut by the client closing under it.
    for round_ in range(3):
        inside, turns = [0], [0]

        async def hold(
            _: int,
            name: str = f"shared:{round_}",
            inside: list[int] = inside,
            turns: list[int] = turns,
        ) -> None:
            for _ in range(5):
                async with AsyncLock(name, ttl=10, timeout=20):
                    inside[0] += 1
                    assert inside[0] == 1
                    await asyncio.sleep(0.002)
                    inside[0] -= 1
                    turns[0] += 1

        asyncio.run(together(hold))
        assert turns[0] == TASKS * 5
