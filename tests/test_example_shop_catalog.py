"""The example shop's catalog cache (``shop.catalog``): read by many requests at once under
the read side of a ReadWriteLock, rebuilt alone under its write side, a waiting rebuild
going before new readers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from shop.catalog import CACHE_KEY, catalog_lock
from shop.models import Product

from tests.support.waiting import wait_for

pytestmark = [pytest.mark.usefixtures("backend"), pytest.mark.django_db(transaction=True)]


def test_the_catalog_is_built_once_then_read_from_the_cache() -> None:
    cache.delete(CACHE_KEY)
    product = Product.objects.create(name="kettle", stock=3)
    expected = [{"id": product.pk, "name": "kettle", "stock": 3}]
    assert Client().get("/catalog/").json() == {"products": expected}
    Product.objects.filter(pk=product.pk).update(stock=0)
    assert Client().get("/catalog/").json() == {"products": expected}  # cached
    assert cache.get(CACHE_KEY) == expected


def test_a_rebuild_waits_for_readers_and_new_readers_wait_for_it() -> None:
    cache.delete(CACHE_KEY)
    Product.objects.create(name="kettle", stock=3)
    staff = User.objects.create_superuser("staff")
    answers: dict[str, Any] = {}

    def rebuild() -> None:
        client = Client()
        client.force_login(staff)
        answers["rebuild"] = client.post("/catalog/rebuild/")

    def read() -> None:
        answers["read"] = Client().get("/catalog/")

    rw = catalog_lock()
    with rw.read():  # a request in the middle of reading the catalog
        writer = threading.Thread(target=rebuild)
        writer.start()
        wait_for(lambda: rw.state().waiters == 1, what="the rebuild waiting for the reader")
        reader = threading.Thread(target=read)
        reader.start()
        wait_for(lambda: rw.state().waiters == 2, what="a new reader queued behind it")
        assert "rebuild" not in answers
    writer.join(30)
    reader.join(30)
    assert answers["rebuild"].json() == {"products": 1}
    assert answers["read"].json()["products"][0]["name"] == "kettle"
    assert rw.state().readers == 0
    assert rw.state().writer is None
