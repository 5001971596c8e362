"""The shop's background jobs: close an order left unpaid, a periodic sweep, and checkout as
a workflow (reserve, charge, confirm, email the receipt; see ``start_checkout``)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import OperationalError, transaction
from django.db.models import F
from django.utils import timezone

try:
    from django.tasks import task  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

from django_redislock import get_queue
from django_redislock.exceptions import RedisUnavailable
from django_redislock.tasks import task as redislock_task
from django_redislock.workflows import Workflow, chain, step

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


# --- checkout, as a workflow -------------------------------------------------------------
#
#   reserve -> charge -> confirm -> email_receipt, then, however they ended, close_if_unpaid
#
# Each step starts the moment the one before it succeeded, in whichever worker is free; one
# that fails for good (sold out, payment refused) ends the steps after it without running
# them, and the last step puts back what an unpaid order held. Every step is idempotent: a
# step whose worker died is run again.


class CheckoutFailed(Exception):
    """A checkout step that cannot succeed (retrying would not help)."""


# What a step retries (with backoff, up to the queue's MAX_ATTEMPTS): the database or Redis
# out of reach a moment. Anything else (CheckoutFailed) ends it at once.
RETRYABLE = (OperationalError, RedisUnavailable)


def start_checkout(order: Order) -> Workflow:
    """Enqueue the order's checkout (inside the request's transaction: at its commit)."""
    return (
        chain(
            step(reserve, order.pk),
            step(charge, order.pk),
            step(confirm, order.pk),
            step(email_receipt, order.pk),
        )
        .on_complete(step(close_if_unpaid, order.pk))
        .enqueue()
    )


@redislock_task(retry_on=RETRYABLE)
def reserve(order_id: int) -> str:
    """Hold one unit of the product for the order (for as long as it may stay unpaid)."""
    order = Order.objects.select_related("product").get(pk=order_id)
    if order.reservation:  # run again after its worker died: reserved already
        return order.reservation
    units = order.product.units
    reservation = units.reserve(1, ttl=unpaid_seconds() + 60)
    if reservation is None:
        raise CheckoutFailed(f"{order.product.name} is sold out")
    with transaction.atomic():
        Product.objects.filter(pk=order.product_id).update(stock=F("stock") - 1)
        Order.objects.filter(pk=order_id).update(reservation=reservation.id)
    return reservation.id


@redislock_task(retry_on=RETRYABLE)
def charge(order_id: int) -> str:
    """The payment (a stand-in for the provider's call, idempotent by the order's id)."""
    paid = Order.objects.filter(pk=order_id, status=Order.Status.UNPAID).update(
        status=Order.Status.PAID
    )
    if not paid and Order.objects.get(pk=order_id).status != Order.Status.PAID:
        raise CheckoutFailed(f"order {order_id} was closed before it was paid")
    return "paid"


@redislock_task(retry_on=RETRYABLE)
def confirm(order_id: int) -> str:
    """The reserved unit is sold for good (confirming again changes nothing)."""
    order = Order.objects.select_related("product").get(pk=order_id)
    order.product.units.confirm(order.reservation)
    return "confirmed"


@redislock_task(retry_on=(*RETRYABLE, OSError))  # (smtplib's errors are OSErrors)
def email_receipt(order_id: int) -> int:
    """The receipt, once the order is paid and its unit confirmed."""
    order = Order.objects.select_related("product").get(pk=order_id)
    return send_mail(
        f"Your receipt for order {order.pk}",
        f"You bought one {order.product.name}. Thank you!",
        "shop@example.com",
        [getattr(settings, "SHOP_RECEIPTS_TO", "buyer@example.com")],
    )
