"""Rate and key callables named by dotted path in the view tests, and a view that names a
function of its own module defined below it (imported at its first request)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from django_redislock.views.rate_limited import redis_rate_limited

SEEN_GROUPS: list[str] = []


def plan_rate(group: str, request: HttpRequest) -> Any:
    """django-ratelimit's form: ``(group, request) -> rate``; no plan means no limit."""
    SEEN_GROUPS.append(group)
    plan = request.GET.get("plan")
    return {"free": "1/m", "pro": "3/m", "banned": "0/m", "pair": (2, 60)}.get(plan or "")


def plan_key(group: str, request: HttpRequest) -> str:
    return f"plan-user:{request.GET.get('user', 'x')}"


def slug_key(request: HttpRequest, slug: str) -> str:
    return f"slug:{slug}"


def not_a_rate(group: str, request: HttpRequest) -> Any:
    return "lots"


NOT_CALLABLE = "2/m"


@redis_rate_limited("late:{slug}", rate="tests.ratelimit.rate_functions.late_rate")
def late(request: HttpRequest, slug: str) -> JsonResponse:
    return JsonResponse({"allowed": request.rate_limit.allowed})  # type: ignore[attr-defined]


def late_rate(group: str, request: HttpRequest) -> str:
    return "1/m"
