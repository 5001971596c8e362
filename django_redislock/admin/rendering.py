"""What every admin page shares: permission checks, Redis failures shown as a
page (503, or 200 with the error when a key holds data of the wrong type), and rendering."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import redis
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from ..exceptions import RedisUnavailable
from ..models import Dashboard
from .actions import VIEW

logger = logging.getLogger("django_redislock.admin")

# The pages every page links to
TABS = ("dashboard_changelist", "locks", "semaphores", "stocks", "workers", "schedule")
REFRESH_SECONDS = 5
REDIS_ERRORS = (RedisUnavailable, redis.RedisError, redis.exceptions.RedisClusterException)

if TYPE_CHECKING:
    ModelAdmin = admin.ModelAdmin[Dashboard]
    _Mixin = ModelAdmin
else:
    ModelAdmin = admin.ModelAdmin
    _Mixin = object  # the page classes are mixins of DashboardAdmin, a ModelAdmin


def corrupt(exc: Exception) -> bool:
    """Whether Redis refused a command because a key holds another type than this app
    writes there: the page answers (with the error), as Redis itself is fine."""
    return isinstance(exc, redis.ResponseError) and "WRONGTYPE" in str(exc)


def can(request: HttpRequest, permission: str) -> bool:
    return bool(request.user.has_perm(permission))


def seconds_since(moment: Any, now: float) -> float | None:
    try:
        seconds = now - float(moment)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) else None


class Rendering(_Mixin):
    def _url(self, name: str, *args: str) -> str:
        return reverse(f"{self.admin_site.name}:django_redislock_{name}", args=args)

    def job_url(self, queue: str, job_id: str) -> str:
        # The id goes in the query: any text survives there (slashes, "..", "?", "#").
        return f"{self._url('job', queue)}?{urlencode({'id': job_id})}"

    def _confirm(self, request: HttpRequest, action: str, **fields: str) -> str:
        query = urlencode({**fields, "next": request.get_full_path()})
        return f"{self._url('confirm', action)}?{query}"

    def _page(
        self,
        request: HttpRequest,
        template: str,
        title: str,
        load: Callable[[], dict[str, Any]],
        extra: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not can(request, VIEW):
            raise PermissionDenied
        try:
            context, status = load(), 200
        except REDIS_ERRORS as exc:
            logger.warning("Admin page %s: Redis failed: %s", request.path, exc)
            context, status = {"redis_error": exc}, 200 if corrupt(exc) else 503
        # A page whose content can no longer change (a dead or finished job) is not reloaded
        # under its reader (a traceback opened would close every few seconds).
        settled = bool(context.get("settled"))
        paused = request.GET.get("refresh") == "off" or settled
        context.update(extra or {}, refresh=0 if paused else REFRESH_SECONDS, live=True)
        return self._render(request, template, title, context, status)

    def _render(
        self,
        request: HttpRequest,
        template: str,
        title: str,
        context: dict[str, Any],
        status: int = 200,
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "urls": {n: self._url(n) for n in TABS},
            **context,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, f"django_redislock/admin/{template}", context, status=status
        )
