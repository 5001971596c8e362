"""The example shop's checkout as a workflow (issue 28): reserve, charge, confirm and email
the receipt, step after step by the real worker; a sold-out product ends the checkout
without charging, and the last step closes the unpaid order; a rolled-back order writes no
workflow."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from shop.models import Order, Product

from django_redislock import get_queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.workflows import Workflow
from tests.support.fixtures import Backend

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop(backend: Backend, settings: Any) -> Product:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 5}}}
    product = Product.objects.create(name="lamp")
    product.put_on_sale(1)
    return product


def drain() -> None:
    worker = Worker(["default"], burst=True)
    thread = threading.Thread(target=worker.run)
    thread.start()
    thread.join(30)


def checkout(product: Product) -> tuple[int, str]:
    response = Client().post(f"/products/{product.pk}/checkout/")
    assert response.status_code == 202, response.content
    return response.json()["order"], response.json()["workflow"]


def test_a_checkout_runs_its_steps_in_order(shop: Product) -> None:
    order, workflow_id = checkout(shop)
    status = Client().get(f"/orders/{order}/", {"workflow": workflow_id}).json()
    assert status["checkout"] == "pending"
    assert status["steps"]["waiting"] == 4  # all but the reservation wait
    drain()
    assert Order.objects.get(pk=order).status == Order.Status.PAID
    workflow = Workflow.get(workflow_id)
    assert workflow.status == "succeeded"
    values = [r.return_value for r in workflow.results()]
    assert values[1:] == ["paid", "confirmed", 1, "left alone"]
    assert len(mail.outbox) == 1
    assert "lamp" in mail.outbox[0].body
    counts = shop.units.counts()
    assert (counts.available, counts.reserved) == (0, 0)  # sold for good
    shop.refresh_from_db()
    assert shop.stock == 0


def test_a_sold_out_checkout_charges_nothing_and_closes_the_order(shop: Product) -> None:
    first, _ = checkout(shop)
    second, workflow_id = checkout(shop)
    drain()
    assert Order.objects.get(pk=first).status == Order.Status.PAID
    assert Order.objects.get(pk=second).status == Order.Status.CLOSED
    workflow = Workflow.get(workflow_id)
    assert workflow.status == "failed"
    states = [r.status.name for r in workflow.results()]
    assert states == ["FAILED", "FAILED", "FAILED", "FAILED", "SUCCESSFUL"]
    assert "sold out" in workflow.results()[0].errors[-1].traceback
    assert len(mail.outbox) == 1  # the first buyer's receipt only


def test_a_rolled_back_order_leaves_no_checkout(shop: Product, monkeypatch: Any) -> None:
    from shop import views

    started = views.start_checkout

    def start_then_fail(order: Order) -> Any:
        started(order)
        raise RuntimeError("the request failed after the checkout was started")

    monkeypatch.setattr(views, "start_checkout", start_then_fail)
    with pytest.raises(RuntimeError):
        Client(raise_request_exception=True).post(f"/products/{shop.pk}/checkout/")
    assert sum(get_queue().counts().values()) == 0
    assert not Order.objects.exists()
