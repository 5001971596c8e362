"""The example shop's jobs: each order gets a close-if-unpaid job when it is made, paying
cancels it, and the periodic sweep closes what slipped through; run by the real worker."""

from __future__ import annotations

import importlib
import threading
import time
from typing import Any

import pytest
from django.test import Client
from shop import views as shop_views
from shop.models import Order, Product
from shop.tasks import sweep_unpaid

from django_redislock import Semaphore, get_queue
from django_redislock.checks import check_settings
from django_redislock.queue.worker.loop import Worker
from tests.support.fixtures import Backend

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop(backend: Backend, settings: Any) -> Product:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5}},
        "SCHEDULE": {"sweep-unpaid": {"task": "shop.tasks.sweep_unpaid", "every": 60}},
    }
    settings.SHOP_UNPAID_SECONDS = 0.3
    return Product.objects.create(name="lamp", stock=5)


def buy(product: Product) -> int:
    response = Client().post(f"/products/{product.pk}/buy/")
    assert response.status_code == 201, response.content
    return int(response.json()["order"])


def drain() -> None:
    worker = Worker(["default"], burst=True)
    thread = threading.Thread(target=worker.run)
    thread.start()
    thread.join(30)


def test_an_unpaid_order_is_closed_and_restocked(shop: Product) -> None:
    order = buy(shop)
    job = get_queue().get(f"close:{order}")
    assert (job.state, job.task, job.args) == ("scheduled", "shop.tasks.close_if_unpaid", [order])
    assert abs(job.score - (job.enqueued + 300)) <= 5
    shop.refresh_from_db()
    assert shop.stock == 4
    time.sleep(0.35)
    drain()
    assert Order.objects.get(pk=order).status == Order.Status.CLOSED
    shop.refresh_from_db()
    assert shop.stock == 5
    assert get_queue().get(f"close:{order}").result == '"closed"'


def test_paying_cancels_the_close_job(shop: Product) -> None:
    order = buy(shop)
    response = Client().post(f"/orders/{order}/pay/")
    assert response.json() == {"order": order, "status": "paid"}
    assert get_queue().counts()["scheduled"] == 0
    assert Client().post(f"/orders/{order}/pay/").status_code == 409  # only once
    assert Client().post("/orders/999999/pay/").status_code == 404
    time.sleep(0.35)
    drain()
    assert Order.objects.get(pk=order).status == Order.Status.PAID
    shop.refresh_from_db()
    assert shop.stock == 4


def buy_reserved(product: Product) -> tuple[int, str]:
    response = Client().post(f"/products/{product.pk}/buy-reserved/")
    assert response.status_code == 201, response.content
    return int(response.json()["order"]), response.json()["reservation"]


def test_paying_a_reserved_order_confirms_its_unit(shop: Product) -> None:
    shop.put_on_sale(5)
    order, reservation = buy_reserved(shop)
    assert Order.objects.get(pk=order).reservation == reservation
    assert (shop.units.available(), shop.units.reserved()) == (4, 1)
    assert Client().post(f"/orders/{order}/pay/").json() == {"order": order, "status": "paid"}
    units = shop.units
    assert (units.available(), units.reserved(), units.confirmed()) == (4, 0, 1)
    assert Client().post(f"/orders/{order}/pay/").status_code == 409  # once
    assert units.confirmed() == 1


def test_an_unpaid_reserved_order_gives_its_unit_back(shop: Product) -> None:
    shop.put_on_sale(5)
    order, _ = buy_reserved(shop)
    time.sleep(0.35)
    drain()
    assert Order.objects.get(pk=order).status == Order.Status.CLOSED
    shop.refresh_from_db()
    assert shop.stock == 5
    assert (shop.units.available(), shop.units.reserved(), shop.units.confirmed()) == (5, 0, 0)


def test_a_sold_out_product_answers_410_by_reservation(shop: Product) -> None:
    shop.put_on_sale(1)
    buy_reserved(shop)
    response = Client().post(f"/products/{shop.pk}/buy-reserved/")
    assert (response.status_code, response.json()) == (410, {"error": "sold-out"})


def test_paying_after_the_reservation_expired_closes_the_order(
    shop: Product, monkeypatch: Any
) -> None:
    monkeypatch.setattr(shop_views, "RESERVATION_MARGIN", -0.1)  # it lives 0.2 s
    shop.put_on_sale(5)
    order, _ = buy_reserved(shop)
    time.sleep(0.3)
    assert shop.units.available() == 5  # expired: back on sale by itself
    response = Client().post(f"/orders/{order}/pay/")
    assert (response.status_code, response.json()) == (409, {"error": "expired"})
    assert Order.objects.get(pk=order).status == Order.Status.CLOSED
    shop.refresh_from_db()
    assert shop.stock == 5
    assert (shop.units.available(), shop.units.reserved(), shop.units.confirmed()) == (5, 0, 0)


def test_the_order_export_lets_two_run_at_once(shop: Product, django_user_model: Any) -> None:
    buy(shop)
    staff = Client()
    staff.force_login(django_user_model.objects.create_user("clerk", is_staff=True))
    csv_text = staff.get("/orders/export/").content.decode()
    assert csv_text.splitlines()[0] == "order,product,status,created"
    assert len(csv_text.splitlines()) == 2
    running = [Semaphore("orders-export", limit=2) for _ in range(2)]
    for export in running:
        assert export.acquire(0)
    busy = staff.get("/orders/export/", HTTP_ACCEPT="application/json")
    assert (busy.status_code, busy.json()["error"]) == (409, "busy")
    running[0].release()
    assert staff.get("/orders/export/").status_code == 200
    running[1].release()
    assert Client().get("/orders/export/").status_code == 302  # staff only: to the login


def test_the_sweep_closes_orders_that_have_no_job(shop: Product, settings: Any) -> None:
    settings.SHOP_UNPAID_SECONDS = 0
    old = Order.objects.create(product=shop)  # made while Redis was down: no job
    Order.objects.filter(pk=old.pk).update(created=old.created.replace(year=2020))
    fresh = Order.objects.create(product=shop)
    assert sweep_unpaid.call() == 1
    assert Order.objects.get(pk=old.pk).status == Order.Status.CLOSED
    assert Order.objects.get(pk=fresh.pk).status == Order.Status.UNPAID


def test_the_example_settings_pass_the_checks(settings: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # no embedded server for this
    example = importlib.import_module("config.settings")
    settings.REDISLOCK = example.REDISLOCK
    assert check_settings() == []
