"""Views guarded by ``@redis_idempotent`` for its tests. Each counts the times its body ran
in Redis (so that processes of a real server count together) and answers a fresh order id,
so a replay is told from a second run."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.template import engines
from django.template.response import TemplateResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from django_redislock import get_redis, redis_idempotent, redis_locked

GATE = "tests:idempotent:gate"  # a view with ?wait=1 blocks until a token is pushed here
PIDS = "tests:idempotent:pids"  # ... after pushing its process id here
proceed = threading.Event()  # pay_event's view waits for it (in-process tests)
FAIL_ONCE = "tests:idempotent:fail-once"  # set: the next run of pay_waiting answers 500


def runs(name: str) -> int:
    """How many times view ``name``'s body ran."""
    return int(get_redis().get(f"tests:idempotent:runs:{name}") or 0)


def _ran(request: HttpRequest, name: str) -> None:
    client = get_redis()
    client.incr(f"tests:idempotent:runs:{name}")
    if request.GET.get("wait"):
        client.rpush(PIDS, os.getpid())
        client.blpop([GATE], 30)


def _order(request: HttpRequest, status: int = 201) -> JsonResponse:
    response = JsonResponse(
        {"order": uuid.uuid4().hex, "body": request.body.decode(errors="replace")},
        status=status,
    )
    response["Location"] = "/orders/1/"
    response["X-Not-Replayed"] = "1"
    return response


@csrf_exempt
@redis_idempotent(anonymous="shared")
def pay(request: HttpRequest) -> HttpResponse:
    _ran(request, "pay")
    status = int(request.GET.get("status", 201))
    if request.GET.get("raise"):
        raise RuntimeError("the view failed")
    return _order(request, status)


@csrf_exempt
@redis_idempotent(anonymous="shared", timeout=10)
def pay_waiting(request: HttpRequest) -> HttpResponse:
    _ran(request, "pay_waiting")
    if get_redis().delete(FAIL_ONCE):
        return HttpResponse("failed", status=500)
    return _order(request)


@csrf_exempt
@redis_idempotent()
def pay_per_user(request: HttpRequest) -> HttpResponse:
    _ran(request, "pay_per_user")
    return _order(request)


@csrf_exempt
@redis_idempotent(anonymous="shared", required=True, header="X-Request-Id")
def pay_required(request: HttpRequest) -> HttpResponse:
    _ran(request, "pay_required")
    return _order(request)


@csrf_exempt
@redis_idempotent(scope=lambda request: request.headers.get("X-Tenant", "none"))
def pay_by_tenant(request: HttpRequest) -> HttpResponse:
    _ran(request, "pay_by_tenant")
    return _order(request)


@csrf_exempt
@redis_idempotent(anonymous="shared")
def pay_event(request: HttpRequest) -> HttpResponse:
    _ran(request, "pay_event")
    proceed.wait(30)
    return _order(request)


@csrf_exempt
@redis_locked("points:outer", timeout=0)
@redis_idempotent(anonymous="shared")
def locked_pay(request: HttpRequest) -> HttpResponse:
    _ran(request, "locked_pay")
    return _order(request)


@csrf_exempt
@redis_idempotent(anonymous="shared", on_redis_error="fail-open")
def pay_fail_open(request: HttpRequest) -> HttpResponse:
    return _order(request)  # (counts nothing: its tests have no Redis)


@csrf_exempt
@redis_idempotent(anonymous="shared")
def pay_streaming(request: HttpRequest) -> StreamingHttpResponse:
    _ran(request, "pay_streaming")

    def chunks() -> Iterator[bytes]:
        yield b"one,"
        yield b"two"

    return StreamingHttpResponse(chunks(), content_type="text/csv")


@csrf_exempt
@redis_idempotent(anonymous="shared")
def pay_big(request: HttpRequest) -> HttpResponse:
    _ran(request, "pay_big")
    return HttpResponse(b"x" * (int(request.GET["size"])), content_type="application/octet-stream")


@csrf_exempt
@redis_idempotent(anonymous="shared")
def pay_template(request: HttpRequest) -> TemplateResponse:
    _ran(request, "pay_template")
    template = engines["django"].from_string("order {{ order }}")
    return TemplateResponse(request, template, {"order": uuid.uuid4().hex}, status=201)


@csrf_exempt
@redis_idempotent(anonymous="shared")
@redis_locked("points:shared", timeout=0)
def pay_locked(request: HttpRequest) -> HttpResponse:
    _ran(request, "pay_locked")
    return _order(request)


@csrf_exempt
@redis_idempotent(anonymous="shared", on_redis_error="fail-open")
async def apay_fail_open(request: HttpRequest) -> HttpResponse:
    return _order(request)


@csrf_exempt
@redis_idempotent(anonymous="shared")
async def apay(request: HttpRequest) -> HttpResponse:
    await asyncio.to_thread(_ran, request, "apay")
    if request.GET.get("raise"):
        raise RuntimeError("the view failed")
    return _order(request, int(request.GET.get("status", 201)))


@csrf_exempt
@redis_idempotent(anonymous="shared", timeout=10)
async def apay_waiting(request: HttpRequest) -> HttpResponse:
    await asyncio.to_thread(_ran, request, "apay_waiting")
    return _order(request)


class PayView(View):
    @method_decorator(redis_idempotent(anonymous="shared"))
    def post(self, request: HttpRequest) -> HttpResponse:
        _ran(request, "PayView")
        return _order(request)


class PayAPIView(APIView):
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    @method_decorator(redis_idempotent(anonymous="shared"))
    def post(self, request: Any) -> Response:
        _ran(request, "PayAPIView")
        return Response({"order": uuid.uuid4().hex, "got": request.data}, status=201)


@csrf_exempt
@redis_idempotent(anonymous="shared", methods=("post", "put", "patch", "delete"))
def every_method(request: HttpRequest) -> HttpResponse:
    _ran(request, "every_method")
    return HttpResponse(f"{request.method} {uuid.uuid4().hex}", content_type="text/plain")


@csrf_exempt
@redis_idempotent(anonymous="shared")
def odd_bodies(request: HttpRequest) -> HttpResponse:
    """?kind=binary: bytes that are not UTF-8; empty: a 204; bare: no Content-Type."""
    _ran(request, "odd_bodies")
    kind = request.GET["kind"]
    if kind == "binary":
        response = HttpResponse(b"\x00\xff\xfe" + uuid.uuid4().bytes, content_type="image/png")
        response["Content-Disposition"] = 'attachment; filename="receipt.png"'
        response["Content-Language"] = "de"
        return response
    if kind == "empty":
        return HttpResponse(status=204)
    response = HttpResponse(uuid.uuid4().hex.encode(), status=202)
    del response["Content-Type"]
    return response


@csrf_exempt
@redis_idempotent(anonymous="shared")
@redis_idempotent(anonymous="shared")
def twice(request: HttpRequest) -> HttpResponse:
    _ran(request, "twice")
    return _order(request)


@csrf_exempt
@redis_idempotent(anonymous="shared", ttl=0.5)
def short_lived(request: HttpRequest) -> HttpResponse:
    _ran(request, "short_lived")
    return _order(request)


@csrf_exempt
@redis_idempotent(anonymous="shared")
def missing(request: HttpRequest) -> HttpResponse:
    _ran(request, "missing")
    raise Http404("no such order")


class HeaderUser(BaseAuthentication):
    """DRF authentication by an X-User header naming a user (for the tests)."""

    def authenticate(self, request: Any) -> tuple[Any, None] | None:
        from django.contrib.auth.models import User

        name = request.headers.get("X-User")
        return (User.objects.get(username=name), None) if name else None


class RedeemAPIView(APIView):
    authentication_classes = [HeaderUser]
    permission_classes = [IsAuthenticated]

    @method_decorator(redis_idempotent())
    def post(self, request: Any) -> Response:
        _ran(request, "RedeemAPIView")
        return Response({"order": uuid.uuid4().hex, "user": request.user.username}, status=201)

    @method_decorator(redis_idempotent())
    def delete(self, request: Any) -> Response:
        _ran(request, "RedeemAPIView")
        return Response({"detail": "no such order"}, status=404)


class ReadsTheBody(BasePermission):
    """A permission that reads ``request.data`` before the view (the stream is then spent)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return "amount" in request.data


class SpentStreamAPIView(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [ReadsTheBody]

    @method_decorator(redis_idempotent(anonymous="shared"))
    def post(self, request: Any) -> Response:
        _ran(request, "SpentStreamAPIView")
        return Response({"order": uuid.uuid4().hex, "got": request.data}, status=201)
