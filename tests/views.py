"""Views guarded by ``@redis_locked`` for the decorator tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils.decorators import method_decorator
from django.views import View

from django_redislock import redis_locked

# Lets a test hold a streaming response half-sent.
stream_gate = threading.Event()


def _report(request: HttpRequest, **extra: Any) -> JsonResponse:
    lock = request.redis_lock  # type: ignore[attr-defined]
    return JsonResponse(
        {
            "lock": None if lock is None else lock.name,
            "fence": None if lock is None else lock.fence,
            **extra,
        }
    )


@redis_locked("sale:{product_id}", ttl=5, timeout=0)
def buy(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request, owned=request.redis_lock.owned())  # type: ignore[attr-defined]


@redis_locked("sale:{product_id}", timeout=0, busy_status=429)
def buy_429(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


def _custom_busy(request: HttpRequest, lock: Any) -> HttpResponse | None:
    if request.GET.get("custom"):
        return HttpResponse(f"sold out for now: {lock.name}", status=200)
    return None


@redis_locked("sale:{product_id}", timeout=0, on_busy=_custom_busy)
def buy_custom_busy(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


@redis_locked("points:{request.user.pk}", fencing=True, timeout=0)
def redeem(request: HttpRequest) -> JsonResponse:
    return _report(request)


@redis_locked("fail-open:{product_id}", on_redis_error="fail-open")
def fail_open(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


@redis_locked("kw:{slug}")
def by_kwargs(request: HttpRequest, **kwargs: Any) -> JsonResponse:
    return _report(request)


@redis_locked("attr:{request.no_such_attribute}")
def bad_attribute(request: HttpRequest) -> JsonResponse:
    return _report(request)


@redis_locked(lambda request, product_id: f"callable:{product_id}:{request.method}", timeout=0)
def by_callable(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


@redis_locked("boom:{product_id}")
def boom(request: HttpRequest, product_id: int) -> JsonResponse:
    raise RuntimeError("the view failed")


@redis_locked("stream:{product_id}", timeout=0)
def stream(request: HttpRequest, product_id: int) -> StreamingHttpResponse:
    def chunks() -> Iterator[bytes]:
        yield b"first "
        stream_gate.wait(10)
        yield b"last"

    return StreamingHttpResponse(chunks())


@redis_locked("sale:{product_id}", ttl=5, timeout=0)
async def abuy(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request, owned=await request.redis_lock.owned())  # type: ignore[attr-defined]


@redis_locked("points:{request.user.pk}", fencing=True, timeout=0)
async def aredeem(request: HttpRequest) -> JsonResponse:
    return _report(request)


@redis_locked("fail-open:{product_id}", on_redis_error="fail-open")
async def afail_open(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


async def _async_busy(request: HttpRequest, lock: Any) -> HttpResponse:
    await asyncio.sleep(0)
    return HttpResponse("async busy page", status=503)


@redis_locked("sale:{product_id}", timeout=0, on_busy=_async_busy)
async def abuy_custom_busy(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


@redis_locked("boom:{product_id}")
async def aboom(request: HttpRequest, product_id: int) -> JsonResponse:
    raise RuntimeError("the async view failed")


@redis_locked("stream:{product_id}", timeout=0)
async def astream(request: HttpRequest, product_id: int) -> StreamingHttpResponse:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"first "
        yield b"last"

    return StreamingHttpResponse(chunks())


@method_decorator(redis_locked("cbv:{product_id}", timeout=0), name="post")
class BuyView(View):
    def post(self, request: HttpRequest, product_id: int) -> JsonResponse:
        return _report(request, view="sync")


@method_decorator(redis_locked("cbv:{product_id}", timeout=0), name="post")
class AsyncBuyView(View):
    async def post(self, request: HttpRequest, product_id: int) -> JsonResponse:
        return _report(request, view="async")
