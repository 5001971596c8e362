import time

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import F
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_POST

from django_redislock import get_queue, redis_locked
from django_redislock.fencing import fenced_update

from .models import Order, PointsAccount, Product, Redemption
from .tasks import schedule_close

# Stands in for the slow part of a real sale (the payment provider, the warehouse): the
# window in which concurrent buyers all see the last item in stock.
PAYMENT_SECONDS = 0.005


@ensure_csrf_cookie
def products(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"products": list(Product.objects.values("id", "name", "stock"))})


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
        # Closed, and the item put back, if still unpaid after SHOP_UNPAID_SECONDS. Queued
        # once the order is committed; if Redis is down then, the periodic sweep closes it.
        transaction.on_commit(lambda: schedule_close(order))
    return JsonResponse({"order": order.pk}, status=201)


@require_POST
def pay(request: HttpRequest, order_id: int) -> JsonResponse:
    """Pay an order (a stand-in for the payment callback): only an unpaid one, once."""
    paid = Order.objects.filter(pk=order_id, status=Order.Status.UNPAID).update(
        status=Order.Status.PAID
    )
    if not paid:
        status = Order.objects.filter(pk=order_id).values_list("status", flat=True).first()
        return JsonResponse({"error": status or "no-such-order"}, status=409 if status else 404)
    get_queue().cancel(f"close:{order_id}")  # no longer needed
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
@login_required
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
