"""AsyncStock on fakeredis, a real redis-server and a real Cluster (asyncio.run per test):
the same answers as Stock, concurrent tasks never oversell, and a stock shared with Stock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from django_redislock.exceptions import ReservationError, ReservationExpired, StockError
from django_redislock.stock.async_stock import AsyncStock
from django_redislock.stock.stock import Stock
from tests.support.fixtures import Backend


def test_the_api_awaited(backend: Backend) -> None:
    async def main() -> None:
        stock = AsyncStock("async-sale")
        assert await stock.set(10) == (10, 0, 0, 10)
        assert await stock.add(2) == (12, 0, 0, 12)
        paid, cancelled = await stock.reserve(3, ttl=60), await stock.reserve()
        assert paid is not None
        assert cancelled is not None
        assert cancelled.fence > paid.fence
        await stock.confirm(paid)
        await stock.confirm(paid.id)  # idempotent
        assert await stock.release(cancelled) is True
        assert await stock.release(cancelled) is True
        assert (await stock.available(), await stock.reserved(), await stock.confirmed()) == (
            9,
            0,
            3,
        )
        with pytest.raises(ReservationError, match="confirmed"):
            await stock.release(paid)
        short = await stock.reserve(1, ttl=0.05)
        assert short is not None
        await asyncio.sleep(0.1)
        with pytest.raises(ReservationExpired):
            await stock.confirm(short)
        assert await stock.release(short) is False
        assert await stock.reserve(10) is None
        with pytest.raises(StockError, match="fewer than 0"):
            await stock.add(-10)
        assert await stock.delete() is True
        assert await stock.counts() == (0, 0, 0, 0)

    asyncio.run(main())


def test_concurrent_tasks_never_oversell_and_sync_sees_the_same_stock(backend: Backend) -> None:
    Stock("shared").set(50)

    async def buy(stock: AsyncStock) -> int:
        sold = 0
        while (reservation := await stock.reserve(1)) is not None:
            await stock.confirm(reservation)
            sold += 1
        return sold

    async def main() -> list[int]:
        stock = AsyncStock("shared")
        # One call first: redis-py's asyncio Cluster client, used first by several tasks at
        # once, races its own initialisation (a command fails or is sent twice).
        await stock.counts()
        return await asyncio.gather(*(buy(stock) for _ in range(8)))

    assert sum(asyncio.run(main())) == 50
    assert Stock("shared").counts() == (0, 0, 50, 50)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.reserve(0), ValueError),
        (lambda s: s.reserve(1, ttl=0), ValueError),
        (lambda s: s.set(-1), ValueError),
        (lambda s: s.add(1.0), TypeError),
        (lambda s: s.confirm(3), TypeError),
    ],
)
def test_bad_arguments_fail_before_redis_is_touched(settings: Any, call: Any, error: Any) -> None:
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}  # nothing listens there
    with pytest.raises(error):
        asyncio.run(call(AsyncStock("s")))
