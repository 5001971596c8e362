"""The signals a stock and a rate limit send: what a metrics exporter or an audit log hooks
into. A repeated confirm or release sends nothing again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.dispatch import Signal

from django_redislock import AsyncStock, RateLimit, Stock
from django_redislock.signals import (
    rate_limited,
    reservation_confirmed,
    reservation_released,
    stock_reserved,
    stock_sold_out,
)

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def heard() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    got: list[tuple[str, dict[str, Any]]] = []
    signals: dict[str, Signal] = {
        "reserved": stock_reserved,
        "sold out": stock_sold_out,
        "confirmed": reservation_confirmed,
        "released": reservation_released,
        "limited": rate_limited,
    }
    receivers = {}
    for label, signal in signals.items():

        def receiver(sender: Any, label: str = label, **kwargs: Any) -> None:
            kwargs.pop("signal")
            got.append((label, {"sender": sender, **kwargs}))

        receivers[label] = receiver
        signal.connect(receiver)
    yield got
    for label, signal in signals.items():
        signal.disconnect(receivers[label])


def test_a_stock_tells_each_change_once(heard: list[tuple[str, dict[str, Any]]]) -> None:
    stock = Stock("sale")
    stock.set(1)
    kept = stock.reserve(1)
    assert kept is not None
    assert stock.reserve(1) is None
    stock.confirm(kept)
    stock.confirm(kept)  # a retry: nothing new to tell
    assert [label for label, _ in heard] == ["reserved", "sold out", "confirmed"]
    reserved, sold_out, confirmed = (kwargs for _, kwargs in heard)
    assert (reserved["sender"], reserved["name"], reserved["reservation"]) == (Stock, "sale", kept)
    assert (sold_out["stock"], sold_out["quantity"]) == (stock, 1)
    assert confirmed["reservation_id"] == kept.id
    heard.clear()
    stock.add(1)
    again = stock.reserve(1)
    assert again is not None
    assert stock.release(again)
    assert stock.release(again)  # repeated
    assert [label for label, _ in heard] == ["reserved", "released"]


def test_an_async_stock_sends_them_too(heard: list[tuple[str, dict[str, Any]]]) -> None:
    async def body() -> None:
        stock = AsyncStock("sale")
        await stock.set(1)
        kept = await stock.reserve(1)
        assert kept is not None
        await stock.release(kept)

    asyncio.run(body())
    assert [(label, kwargs["sender"]) for label, kwargs in heard] == [
        ("reserved", AsyncStock),
        ("released", AsyncStock),
    ]


def test_a_rate_limit_tells_each_refusal(heard: list[tuple[str, dict[str, Any]]]) -> None:
    limit = RateLimit("points:1", rate="2/m")
    assert limit.hit()
    assert limit.hit()
    refused = limit.hit()
    assert not refused
    assert heard == [
        ("limited", {"sender": RateLimit, "limit": limit, "name": "points:1", "hit": refused})
    ]
