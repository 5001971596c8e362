"""Listing stocks and a stock's reservations that expire soonest, for the admin."""

from __future__ import annotations

import asyncio

from django_redislock.conf import conf
from django_redislock.stock.async_stock import AsyncStock
from django_redislock.stock.listing import count_stocks, expiring, stock_names
from django_redislock.stock.stock import Stock
from tests.support.fixtures import Backend


def test_stocks_are_listed_once_set_until_deleted(backend: Backend) -> None:
    Stock("sale:1").set(1)
    Stock("sale:2").add(2)
    Stock("other").set(0)
    Stock("never-set").reserve()  # only set and add list a stock
    assert stock_names() == ["other", "sale:1", "sale:2"]
    assert stock_names("sale:") == ["sale:1", "sale:2"]
    assert stock_names(offset=1, limit=1) == ["sale:1"]
    assert Stock("sale:1").delete()
    assert stock_names() == ["other", "sale:2"]


def test_async_set_and_delete_list_too(backend: Backend) -> None:
    async def main() -> None:
        await AsyncStock("async:1").set(3)
        assert stock_names() == ["async:1"]
        await AsyncStock("async:1").delete()

    asyncio.run(main())
    assert stock_names() == []


def test_expiring_lists_pending_reservations_soonest_first(backend: Backend) -> None:
    stock = Stock("carts", remember=1)
    stock.set(10)
    later = stock.reserve(1, ttl=60)
    soon = stock.reserve(2, ttl=30)
    done = stock.reserve(1, ttl=10)
    assert later is not None
    assert soon is not None
    assert done is not None
    stock.confirm(done)  # finished: due again in 1 s (its record forgotten), not listed
    assert expiring(stock) == [soon, later]
    assert expiring(stock, count=1) == [soon]
    assert expiring(Stock("empty")) == []


# As many stocks as a big shop's catalogue on a real server; fewer where each call is slow.
STOCKS = {"fakeredis": 1_000, "redis": 10_000, "cluster": 2_000}


def test_thousands_of_stocks_deleted_leave_nothing_behind(backend: Backend) -> None:
    count = STOCKS[backend.kind]
    stocks = [Stock(f"sku:{n}") for n in range(count)]
    for stock in stocks[::2]:
        stock.add(1)  # an add keeps its request id a while
    for stock in stocks[1::2]:
        stock.set(1)
    assert count_stocks() == count
    names = sorted(stock.name for stock in stocks)  # listed in byte order
    assert stock_names("sku:99", limit=3) == [n for n in names if n.startswith("sku:99")][:3]
    assert stock_names(offset=count - 2) == names[-2:]
    stocks[0].set(0)  # emptied: still a stock, still listed
    assert stock_names(limit=1) == ["sku:0"]
    assert all(stock.delete() for stock in stocks)
    assert (count_stocks(), stock_names()) == (0, [])
    assert list(backend.client.scan_iter(match=f"{conf.KEY_PREFIX}:*", count=1000)) == []
