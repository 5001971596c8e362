import csv
import time

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import F
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_POST

from django_redislock import (
    MultiLock,
    get_queue,
    redis_idempotent,
    redis_locked,
    redis_rate_limited,
)
from django_redislock.exceptions import JobNotFound, LockTimeout, ReservationExpired
from django_redislock.fencing import fenced_update
from django_redislock.workflows import Workflow

from .catalog import read_catalog, rebuild_catalog
from .models import Order, PointsAccount, Product, Redemption
from .tasks import close, close_job_id, schedule_close, start_checkout, unpaid_seconds

# Stands in for the slow part of a real sale (the payment provider, the warehouse): the
# window in which concurrent buyers all see the last item in stock.
PAYMENT_SECONDS = 0.005
# A reservation outlives the unpaid window by this much: closing the order releases it.
RESERVATION_MARGIN = 60.0
# How long the payment provider takes to charge an order placed at once (``place_order``):
# long enough for an impatient client to time out and send the request again.
CHARGE_SECONDS = 0.05


@ensure_csrf_cookie
def products(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"products": list(Product.objects.values("id", "name", "stock"))})


def catalog(request: HttpRequest) -> JsonResponse:
    """The cached catalog (``shop.catalog``): read by any number of requests at once."""
    return JsonResponse({"products": read_catalog()})


@require_POST
@staff_member_required
def rebuild(request: HttpRequest) -> JsonResponse:
    """Rebuild the cached catalog, alone (the write side of its ``ReadWriteLock``)."""
    return JsonResponse({"products": len(rebuild_catalog())})


def sell_one(product_id: int, fence: int | None = None) -> JsonResponse:
    product = get_object_or_404(Product, pk=product_id)
    if product.stock <= 0:
        return JsonResponse({"error": "sold-out"}, status=410)
    time.sleep(PAYMENT_SECONDS)
    with transaction.atomic():
        if fence is None:  # the unguarded twin: a plain read-modify-write
            product.stock -= 1
            product.save(update_fields=["stock"])
        else:
            # The safety net for a holder that outlived its lock's TTL (a long GC pause, a
            # slow disk): write only if no newer holder wrote and the stock is as we read it.
            rows = Product.objects.filter(pk=product.pk, stock=product.stock)
            if not fenced_update(rows, fence, stock=F("stock") - 1):
                return JsonResponse({"error": "retry"}, status=409)
        order = Order.objects.create(product=product)
        # Closed, and the item put back, if still unpaid after SHOP_UNPAID_SECONDS. Enqueued
        # inside the transaction, the job is pushed when the order is committed (never for
        # a rolled-back one); if Redis is down then, the periodic sweep closes it.
        schedule_close(order)
    return JsonResponse({"order": order.pk}, status=201)


@require_POST
def pay(request: HttpRequest, order_id: int) -> JsonResponse:
    """Pay an order (a stand-in for the payment callback): only an unpaid one, once. A sale
    by reservation confirms its units: they are gone for good."""
    order = Order.objects.select_related("product").filter(pk=order_id).first()
    if order is None:
        return JsonResponse({"error": "no-such-order"}, status=404)
    try:
        with transaction.atomic():
            paid = Order.objects.filter(pk=order_id, status=Order.Status.UNPAID).update(
                status=Order.Status.PAID
            )
            if paid and order.reservation:
                # Idempotent: a retry after a failed commit confirms the same units again.
                order.product.units.confirm(order.reservation)
    except ReservationExpired:  # unpaid for too long: the units went back on sale
        close(order_id)
        return JsonResponse({"error": "expired"}, status=409)
    if not paid:
        order.refresh_from_db()
        return JsonResponse({"error": order.status}, status=409)
    get_queue().cancel(close_job_id(order_id))  # no longer needed
    return JsonResponse({"order": order_id, "status": "paid"})


@require_POST
@redis_locked("flash-sale:{product_id}", ttl=5, timeout=0.2, fencing=True)
def buy(request: HttpRequest, product_id: int) -> JsonResponse:
    return sell_one(product_id, fence=request.redis_lock.fence)


@require_POST
def buy_unguarded(request: HttpRequest, product_id: int) -> JsonResponse:
    """The same sale without the lock, for the demo: it oversells."""
    return sell_one(product_id)


@require_POST
def buy_reserved(request: HttpRequest, product_id: int) -> JsonResponse:
    """The sale by reservation: Redis hands out a unit in one atomic step and no lock is held
    while the order is made, so buyers do not wait for each other. The reservation outlives
    the unpaid window: closing the order releases it, and should that never happen (Redis
    down when the close job was due) it expires by itself."""
    product = get_object_or_404(Product, pk=product_id)
    reservation = product.units.reserve(1, ttl=unpaid_seconds() + RESERVATION_MARGIN)
    if reservation is None:
        return JsonResponse({"error": "sold-out"}, status=410)
    try:
        time.sleep(PAYMENT_SECONDS)
        with transaction.atomic():
            Product.objects.filter(pk=product.pk).update(stock=F("stock") - 1)
            order = Order.objects.create(product=product, reservation=reservation.id)
            schedule_close(order)  # pushed when the order is committed
    except BaseException:
        product.units.release(reservation)  # no order: the unit goes back at once
        raise
    return JsonResponse({"order": order.pk, "reservation": reservation.id}, status=201)


@require_POST
def checkout(request: HttpRequest, product_id: int) -> JsonResponse:
    """Checkout as a workflow (``shop.tasks.start_checkout``): the order is made now, and
    reserved, charged, confirmed and receipted by the workers, step after step. 202: its
    state is at ``/orders/<id>/`` meanwhile."""
    product = get_object_or_404(Product, pk=product_id)
    with transaction.atomic():
        order = Order.objects.create(product=product)
        workflow = start_checkout(order)  # pushed when the order is committed
    return JsonResponse({"order": order.pk, "workflow": workflow.id}, status=202)


def order_status(request: HttpRequest, order_id: int) -> JsonResponse:
    """An order's state, and its checkout's (the workflow's id given as ``?workflow=``)."""
    order = get_object_or_404(Order, pk=order_id)
    found: dict[str, object] = {"order": order.pk, "status": order.status}
    workflow_id = request.GET.get("workflow")
    if workflow_id:
        try:
            workflow = Workflow.get(workflow_id)
        except JobNotFound:
            return JsonResponse({**found, "error": "no-such-workflow"}, status=404)
        found.update(checkout=workflow.status, steps=workflow.progress())
    return JsonResponse(found)


@staff_member_required
@redis_locked("orders-export", limit=2, ttl=60, timeout=0.5)
def export_orders(request: HttpRequest) -> HttpResponse:
    """A CSV of every order: heavy on the database, so at most two run at once (the others
    get the decorator's 409 with Retry-After)."""
    response = HttpResponse(content_type="text/csv")
    writer = csv.writer(response)
    writer.writerow(["order", "product", "status", "created"])
    for row in Order.objects.values_list("pk", "product__name", "status", "created"):
        writer.writerow(row)
    return response


@require_POST
@redis_idempotent(anonymous="ip")
def place_order(request: HttpRequest, product_id: int) -> JsonResponse:
    """A paid order, made once per Idempotency-Key: a client that timed out sends the same
    key again and gets the first order back (while it is still being charged: 409, retry)."""
    return charge_and_order(product_id)


@require_POST
def place_order_unguarded(request: HttpRequest, product_id: int) -> JsonResponse:
    """The same without ``@redis_idempotent``: every resend is one more order, charged."""
    return charge_and_order(product_id)


def charge_and_order(product_id: int) -> JsonResponse:
    product = get_object_or_404(Product, pk=product_id)
    time.sleep(CHARGE_SECONDS)  # the payment provider
    order = Order.objects.create(product=product, status=Order.Status.PAID)
    return JsonResponse({"order": order.pk}, status=201)


@require_POST
@login_required
@redis_idempotent()  # a resent redemption (same Idempotency-Key) gets the first answer back
@redis_rate_limited("points:{request.user.pk}", rate="5/m")  # 429 past five a minute
@redis_locked("points:{request.user.pk}", fencing=True, timeout=0.2)
def redeem(request: HttpRequest) -> JsonResponse:
    points = int(request.POST.get("points", "0"))
    if points <= 0:
        return JsonResponse({"error": "points must be a positive number"}, status=400)
    account = get_object_or_404(PointsAccount, user=request.user)
    if account.balance < points:
        return JsonResponse({"error": "insufficient-points"}, status=409)
    time.sleep(PAYMENT_SECONDS)  # issue the voucher
    fence = request.redis_lock.fence
    # Written only if no newer lock holder wrote first (the fence) and the balance still
    # covers it: a holder whose lock expired mid-way can never spend the points twice.
    accounts = PointsAccount.objects.filter(pk=account.pk, balance__gte=points)
    with transaction.atomic():
        if not fenced_update(accounts, fence, balance=F("balance") - points):
            return JsonResponse({"error": "retry"}, status=409)
        Redemption.objects.create(account=account, points=points, fence=fence)
    return JsonResponse({"balance": account.balance - points}, status=201)


@require_POST
@login_required
@redis_idempotent()
def transfer_points(request: HttpRequest) -> JsonResponse:
    """Move ``points`` to the user named ``to``, under a ``MultiLock`` of both accounts' lock
    names (those ``redeem`` is guarded by): no redemption or other transfer of either
    account runs meanwhile, and overlapping transfers (a to b, b to a) never deadlock."""
    points = int(request.POST.get("points", "0"))
    source = get_object_or_404(PointsAccount, user=request.user)
    target = get_object_or_404(PointsAccount, user__username=request.POST.get("to", ""))
    if points <= 0 or target.pk == source.pk:
        return JsonResponse({"error": "a positive number of points to another user"}, status=400)
    out, into = f"points:{source.user_id}", f"points:{target.user_id}"
    try:
        with MultiLock([out, into], ttl=5, timeout=0.2, fencing=True) as lock:
            time.sleep(PAYMENT_SECONDS)  # check the transfer with the bank, say
            with transaction.atomic():
                spent = PointsAccount.objects.filter(pk=source.pk, balance__gte=points)
                if not fenced_update(spent, lock.fences[out], balance=F("balance") - points):
                    return JsonResponse({"error": "insufficient-points"}, status=409)
                credited = PointsAccount.objects.filter(pk=target.pk)
                if not fenced_update(credited, lock.fences[into], balance=F("balance") + points):
                    transaction.set_rollback(True)  # a newer holder wrote: undo the debit
                    return JsonResponse(
                        {"error": "retry"}, status=409, headers={"Retry-After": "1"}
                    )
    except LockTimeout:
        return JsonResponse({"error": "busy"}, status=409, headers={"Retry-After": "1"})
    source.refresh_from_db()
    return JsonResponse({"balance": source.balance}, status=201)
