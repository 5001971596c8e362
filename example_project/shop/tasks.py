"""The shop's background jobs: close an order left unpaid, and a periodic sweep."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

try:
    from django.tasks import task  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

from django_redislock import get_queue

from .models import Order, Product


def unpaid_seconds() -> float:
    """How long an order may stay unpaid before it is closed and its item restocked."""
    return float(getattr(settings, "SHOP_UNPAID_SECONDS", 15 * 60))


def close_job_id(order_id: int) -> str:
    """The id of an order's close-if-unpaid job: known from the order, so paying can cancel it."""
    return f"close:{order_id}"


def schedule_close(order: Order) -> None:
    """Queue the order's close-if-unpaid job."""
    get_queue().enqueue(
        "shop.tasks.close_if_unpaid",
        args=[order.pk],
        job_id=close_job_id(order.pk),
        delay=unpaid_seconds(),
    )


def close(order_id: int) -> bool:
    """Close the order if it is still unpaid and put its item back on sale (a reserved unit
    is released once the close is committed; releasing one that expired changes nothing)."""
    with transaction.atomic():
        closed = Order.objects.filter(pk=order_id, status=Order.Status.UNPAID).update(
            status=Order.Status.CLOSED
        )
        if closed:
            Product.objects.filter(orders__pk=order_id).update(stock=F("stock") + 1)
            order = Order.objects.select_related("product").get(pk=order_id)
            if order.reservation:
                reservation, units = order.reservation, order.product.units
                transaction.on_commit(lambda: units.release(reservation))
    return bool(closed)


@task()
def close_if_unpaid(order_id: int) -> str:
    """Runs ``SHOP_UNPAID_SECONDS`` after the order was made; a paid order is left alone."""
    return "closed" if close(order_id) else "left alone"


@task()
def sweep_unpaid() -> int:
    """The safety net (every minute, from REDISLOCK['SCHEDULE']): close what is unpaid for
    longer than allowed but has no job, e.g. an order made while Redis was down."""
    cutoff = timezone.now() - timedelta(seconds=unpaid_seconds() + 60)
    stale = Order.objects.filter(status=Order.Status.UNPAID, created__lt=cutoff)
    return sum(close(pk) for pk in stale.values_list("pk", flat=True)[:1000])
