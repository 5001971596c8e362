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


def test_ten_thousand_stocks_deleted_leave_nothing_behind(backend: Backend) -> None:
    stocks = [Stock(f"sku:{n}") for n in range(10_000)]
    for stock in stocks[::2]:
        stock.add(1)  # an add keeps its request id a while
    for stock in stocks[1::2]:
        stock.set(1)
    assert count_stocks() == 10_000
    assert stock_names("sku:99", limit=3) == ["sku:99", "sku:990", "sku:9900"]
    assert stock_names(offset=9_998) == ["sku:9998", "sku:9999"]
    stocks[0].set(0)  # emptied: still a stock, still listed
    assert stock_names(limit=1) == ["sku:0"]
    assert all(stock.delete() for stock in stocks)
    assert (count_stocks(), stock_names()) == (0, [])
    assert list(backend.client.scan_iter(match=f"{conf.KEY_PREFIX}:*", count=1000)) == []
