"""The admin's Stocks page through the test client, on fakeredis, a real redis-server and a
Cluster: every stock's counts and its soonest expiry, paginated and searchable by prefix."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from django_redislock import Stock, get_redis
from tests.support.fixtures import Backend

from .test_admin import html, rows, url

pytestmark = pytest.mark.django_db


def test_stocks_page_shows_counts_and_the_soonest_expiry(
    backend: Backend, admin_client: Client
) -> None:
    sale = Stock("flash-sale:42")
    sale.set(100)
    kept = sale.reserve(3, ttl=600)
    sale.reserve(2, ttl=90)
    assert kept is not None
    sale.confirm(kept)
    Stock("flash-sale:43").set(5)
    page = admin_client.get(url("stocks"))
    assert page.status_code == 200
    assert "2 stocks" in html(page)
    row = re.search(r"<code>flash-sale:42</code></th>(.*?)</tr>", html(page), re.S)
    assert row
    cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
    assert cells[:4] == ["95", "2", "3", "100"]  # available, reserved, confirmed, total
    assert re.fullmatch(r"1 min 2\d s|1 min 30 s", cells[4]), cells[4]  # the 90 s one
    other = re.search(r"<code>flash-sale:43</code></th>(.*?)</tr>", html(page), re.S)
    assert other
    assert "—" in other.group(1)


def test_stocks_page_paginates_and_searches_by_prefix(
    backend: Backend, admin_client: Client
) -> None:
    for i in range(53):
        Stock(f"shop:{i:02}").set(1)
    Stock("cart:1").set(1)
    first = admin_client.get(url("stocks"))
    assert "54 stocks" in html(first)
    assert "page 1 of 2" in html(first)
    assert rows(first, "stocks") == 50
    assert rows(admin_client.get(url("stocks"), {"p": "2"}), "stocks") == 4
    carts = admin_client.get(url("stocks"), {"q": "cart:"})
    assert "1 stock" in html(carts)
    assert rows(carts, "stocks") == 1
    assert "No stock's name starts with" in html(admin_client.get(url("stocks"), {"q": "x"}))


def test_a_corrupt_stock_shows_its_error_and_the_others_still_show(
    backend: Backend, admin_client: Client
) -> None:
    broken, fine = Stock("broken"), Stock("fine")
    broken.set(5)
    fine.set(7)
    get_redis().delete(broken.keys.state)
    get_redis().rpush(broken.keys.state, "not a hash")
    page = admin_client.get(url("stocks"))
    assert page.status_code == 200
    row = re.search(r"<code>broken</code></th>(.*?)</tr>", html(page), re.S)
    assert row
    assert "errornote" in row.group(1)
    good = re.search(r"<code>fine</code></th>(.*?)</tr>", html(page), re.S)
    assert good
    assert re.findall(r'<td class="num">([^<]*)</td>', good.group(1))[0] == "7"


def test_no_stock_yet(backend: Backend, admin_client: Client) -> None:
    assert "No stock is set." in html(admin_client.get(url("stocks")))
