"""``set`` and ``add`` on fakeredis, a real redis-server and a real Cluster: an ``add`` resent
after its reply was lost is applied once (sync and asyncio), its request id is forgotten in
time, and the stock is listed by the same script, in the same round trip."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import pytest

from django_redislock.exceptions import StockError
from django_redislock.redis.clients import get_redis, run_script
from django_redislock.stock.async_stock import AsyncStock
from django_redislock.stock.listing import stock_names
from django_redislock.stock.stock import ADD_REQUEST_TTL_MS, Stock
from tests.support.fixtures import Backend
from tests.support.script_monitor import NodeMonitor


def resend(operation: Any) -> None:
    """The ADJUST call of ``operation`` sent again, as redis-py's Cluster retry or a resend
    after a lost connection sends it: same script, same keys, same arguments."""
    run_script(get_redis(), operation.script, operation.keys, operation.args)


def test_an_add_resent_with_its_request_id_adds_once(backend: Backend) -> None:
    stock = Stock("restock")
    stock.set(10)
    add = stock._add_op(5)
    resend(add)
    resend(add)  # the reply of the first was lost: the same call again
    assert stock.counts() == (15, 0, 0, 15)
    take = stock._add_op(-3)
    resend(take)
    resend(take)
    assert stock.counts() == (12, 0, 0, 12)
    assert stock.add(5) == (17, 0, 0, 17)  # another call is another add
    assert stock.add(5) == (22, 0, 0, 22)


def test_an_async_add_resent_adds_once_too(backend: Backend) -> None:
    async def main() -> None:
        stock = AsyncStock("async-restock")
        await stock.set(1)
        add = stock._add_op(2)
        resend(add)
        resend(add)
        assert await stock.add(4) == (7, 0, 0, 7)

    asyncio.run(main())


def test_request_ids_are_forgotten_in_time(backend: Backend) -> None:
    stock = Stock("forgetful")
    for _ in range(3):
        stock.add(1)
    assert stock.set(0) == (0, 0, 0, 0)  # a set has no request id: nothing more kept
    adds = backend.client
    assert adds.zcard(stock.keys.adds) == 3
    assert 0 < adds.pttl(stock.keys.adds) <= ADD_REQUEST_TTL_MS  # the key goes with the last
    scores = [score for _, score in adds.zrange(stock.keys.adds, 0, -1, withscores=True)]
    now_ms = int(adds.time()[0]) * 1000
    assert all(now_ms < score <= now_ms + ADD_REQUEST_TTL_MS + 1000 for score in scores)


def test_set_and_add_list_the_stock_in_their_one_round_trip(redis_backend: Backend) -> None:
    assert redis_backend.url is not None
    url = urlsplit(redis_backend.url)
    Stock("warm-up").set(1)  # the client connected and the script loaded
    monitor = NodeMonitor(url.hostname or "127.0.0.1", int(url.port or 6379))
    try:
        list(monitor.lines())  # what came before (the monitor's own client connecting)
        Stock("listed:1").set(3)
        Stock("listed:2").add(2)
        seen = list(monitor.lines())
    finally:
        monitor.close()
    # (A waiter an earlier test left, or the process's wake-up listener, may block meanwhile:
    # a stock operation never does.)
    sent = [args[0].upper() for lua, args in seen if not lua and args[0].upper() != b"BLPOP"]
    assert sent == [b"EVALSHA", b"EVALSHA"]  # one call each, nothing after it
    listed = [args for lua, args in seen if lua and args[0].upper() == b"ZADD"]
    names = {Stock("listed:1").keys.names, Stock("listed:2").keys.names}
    assert sorted(a[-1] for a in listed if a[1].decode() in names) == [b"listed:1", b"listed:2"]
    assert stock_names("listed:") == ["listed:1", "listed:2"]


def test_a_listing_that_is_not_a_sorted_set_changes_nothing(backend: Backend) -> None:
    stock = Stock("misfiled")
    stock.set(4)
    backend.client.delete(stock.keys.names)
    backend.client.set(stock.keys.names, "not a zset")
    for call in (lambda: stock.add(1), lambda: stock.set(9), stock.delete):
        with pytest.raises(StockError, match=r"the listing .* is not a sorted set") as raised:
            call()
        assert stock.keys.names in str(raised.value)
    assert stock.counts() == (4, 0, 0, 4)
    backend.client.delete(stock.keys.names)  # as the error says
    assert stock.add(1) == (5, 0, 0, 5)
    assert stock_names() == ["misfiled"]
