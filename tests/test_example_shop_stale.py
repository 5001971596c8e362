"""The example shop's guarded endpoints when a lock holder outlives its TTL: the fenced,
conditional writes keep the sale and the redemption exact (real views, real Redis)."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from shop import views as shop_views
from shop.models import Order, PointsAccount, Product, Redemption

from tests.support.fixtures import Backend

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("real_backend", ["redis"], indirect=True),
]


def post(
    path: str,
    results: dict[str, int],
    key: str,
    client: Client | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    try:
        results[key] = (client or Client()).post(path, data or {}).status_code
    finally:
        connections.close_all()


def test_a_sale_held_up_past_its_ttl_does_not_oversell(
    real_backend: Backend, settings: Any
) -> None:
    product = Product.objects.create(name="last one", stock=1)
    blocker = sqlite3.connect(settings.DATABASES["default"]["NAME"], timeout=30)
    blocker.execute("BEGIN IMMEDIATE")  # a long write elsewhere holds the database
    results: dict[str, int] = {}
    a = threading.Thread(target=post, args=(f"/products/{product.pk}/buy/", results, "A"))
    a.start()
    time.sleep(5.3)  # A waits on SQLite while its 5 s lock expires
    b = threading.Thread(target=post, args=(f"/products/{product.pk}/buy/", results, "B"))
    b.start()
    time.sleep(0.5)
    blocker.commit()
    blocker.close()
    a.join()
    b.join()
    product.refresh_from_db()
    assert Order.objects.filter(product=product).count() == 1, results
    assert product.stock == 0


def test_a_stale_redemption_writing_first_does_not_spend_twice(
    real_backend: Backend, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_TTL": 0.5}
    user = User.objects.create_user("dora")
    account = PointsAccount.objects.create(user=user, balance=100)
    gates = {"A": threading.Event(), "B": threading.Event()}
    real_sleep = time.sleep

    def payment(seconds: float) -> None:  # "issue the voucher" stalls until released
        gate = gates.get(threading.current_thread().name)
        if gate is not None:
            gate.wait(10)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(shop_views.time, "sleep", payment)
    client = Client()
    client.force_login(user)
    results: dict[str, int] = {}
    args = ("/points/redeem/", results)
    a = threading.Thread(target=post, name="A", args=(*args, "A", client, {"points": 100}))
    a.start()
    real_sleep(0.8)  # A read the balance and stalls past its 0.5 s TTL
    b = threading.Thread(target=post, name="B", args=(*args, "B", client, {"points": 100}))
    b.start()
    real_sleep(0.3)  # B holds the lock with a newer fence and read the same balance
    gates["A"].set()
    a.join()  # the stale holder writes first
    gates["B"].set()
    b.join()
    account.refresh_from_db()
    assert sum(r.points for r in Redemption.objects.filter(account=account)) == 100, results
    assert account.balance == 0
