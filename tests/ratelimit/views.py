"""Views guarded by ``@redis_rate_limited`` (and ``@redis_locked``, for the anonymous rule)
for the view tests."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View

from django_redislock.views.locked import redis_locked
from django_redislock.views.rate_limited import redis_rate_limited


def _report(request: HttpRequest, **extra: Any) -> JsonResponse:
    hit = request.rate_limit  # type: ignore[attr-defined]
    return JsonResponse({"allowed": None if hit is None else hit.allowed, **extra})


@redis_rate_limited("points:{product_id}", rate="3/m")
def limited(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


def _custom(request: HttpRequest, hit: Any) -> HttpResponse | None:
    if request.GET.get("custom"):
        return HttpResponse(f"slow down: {hit.name} {hit.retry_after > 0}", status=200)
    return None


@redis_rate_limited("points:{product_id}", rate="3/m", on_limited=_custom)
def custom(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


@redis_rate_limited("points:{product_id}", rate="3/m")
async def alimited(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


async def _acustom(request: HttpRequest, hit: Any) -> HttpResponse:
    return HttpResponse("async slow down", status=503)


@redis_rate_limited("points:{product_id}", rate="3/m", on_limited=_acustom)
async def acustom(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


@redis_rate_limited("open:{product_id}", rate="3/m", on_redis_error="fail-open")
def fail_open(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


@redis_rate_limited("open:{product_id}", rate="3/m", on_redis_error="fail-open")
async def afail_open(request: HttpRequest, product_id: int) -> JsonResponse:
    return _report(request)


@method_decorator(redis_rate_limited("cbv:{product_id}", rate="2/m"), name="post")
class LimitedView(View):
    def post(self, request: HttpRequest, product_id: int) -> JsonResponse:
        return _report(request, view="sync")


@method_decorator(redis_rate_limited("cbv:{product_id}", rate="2/m"), name="post")
class AsyncLimitedView(View):
    async def post(self, request: HttpRequest, product_id: int) -> JsonResponse:
        return _report(request, view="async")


@redis_rate_limited("item:{slug}", rate="2/m")
def item(request: HttpRequest, slug: str) -> JsonResponse:
    return _report(request)


@redis_rate_limited(lambda request, slug: f"raw:{slug}", rate="2/m")
def raw_item(request: HttpRequest, slug: str) -> JsonResponse:
    return _report(request)


# The anonymous rule, for both decorators: by default, then each explicit choice.
def _user_views(anonymous: str | None) -> tuple[Any, ...]:
    options = {} if anonymous is None else {"anonymous": anonymous}

    @redis_rate_limited("user:{request.user.pk}", rate="2/m", **options)
    def rate(request: HttpRequest) -> JsonResponse:
        return _report(request)

    @redis_rate_limited("user:{request.user.pk}", rate="2/m", **options)
    async def arate(request: HttpRequest) -> JsonResponse:
        return _report(request)

    @redis_locked("user:{request.user.pk}", **options)
    def lock(request: HttpRequest) -> JsonResponse:
        return JsonResponse({"lock": request.redis_lock.name})  # type: ignore[attr-defined]

    return rate, arate, lock


USER_VIEWS = {policy: _user_views(policy) for policy in (None, "deny", "ip", "shared")}
