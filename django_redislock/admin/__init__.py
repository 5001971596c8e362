"""Admin pages for locks, queues, jobs and workers, read live from Redis (no tables).

Each page costs Redis work in proportion to the rows it shows: counts are ZCARDs, pages are
ranges, never a whole set, never KEYS or SCAN. A destructive action is a confirmation page
(GET) whose form posts to a POST-only URL; both check the action's permission, and the post
is recorded in the admin log."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import redis
from django.contrib import admin, messages
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from ..conf import conf
from ..exceptions import RedisUnavailable
from ..locks.listing import list_locks
from ..models import Dashboard
from ..queue.core import get_queue
from ..queue.jobs import LISTED_STATES
from .actions import (
    ACTIONS,
    JOB_ACTIONS,
    MANAGE,
    RELEASE,
    VIEW,
    Action,
    Gone,
    due_at,
    target,
)

logger = logging.getLogger(__name__)

PER_PAGE = 50
REFRESH_SECONDS = 5
REDIS_ERRORS = (RedisUnavailable, redis.RedisError, redis.exceptions.RedisClusterException)

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Dashboard]
else:
    _ModelAdmin = admin.ModelAdmin


def corrupt(exc: Exception) -> bool:
    """Whether Redis refused a command because a key holds another type than this app
    writes there: the page answers (with the error), as Redis itself is fine."""
    return isinstance(exc, redis.ResponseError) and "WRONGTYPE" in str(exc)


def _can(request: HttpRequest, permission: str) -> bool:
    return bool(request.user.has_perm(permission))


@dataclass(frozen=True)
class Pager:
    number: int
    pages: int
    total: int

    @classmethod
    def of(cls, request: HttpRequest, total: int) -> Pager:
        pages = max(1, math.ceil(total / PER_PAGE))
        return cls(min(requested_page(request), pages), pages, total)

    @property
    def offset(self) -> int:
        return (self.number - 1) * PER_PAGE

    @property
    def previous(self) -> int:
        return self.number - 1

    @property
    def next(self) -> int:
        return self.number + 1


def _seconds_since(moment: Any, now: float) -> float | None:
    try:
        seconds = now - float(moment)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) else None


def requested_page(request: HttpRequest) -> int:
    try:
        return max(1, int(request.GET.get("p", "1")))
    except ValueError:
        return 1


@admin.register(Dashboard)
class DashboardAdmin(_ModelAdmin):
    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _can(request, VIEW)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        pages: list[tuple[str, Callable[..., HttpResponse], str]] = [
            ("", self.queues_view, "dashboard_changelist"),
            ("locks/", self.locks_view, "locks"),
            ("workers/", self.workers_view, "workers"),
            ("queues/<str:queue>/<str:state>/", self.jobs_view, "jobs"),
            ("confirm/<str:action>/", require_GET(self.confirm_view), "confirm"),
            ("action/<str:action>/", require_POST(self.action_view), "action"),
        ]
        return [
            path(route, wrap(view), name=f"django_redislock_{name}") for route, view, name in pages
        ]

    # --- pages ----------------------------------------------------------------------------

    def queues_view(self, request: HttpRequest) -> HttpResponse:
        def load() -> dict[str, Any]:
            rows: list[dict[str, Any]] = []
            for name in conf.QUEUES:
                queue = get_queue(name)
                try:
                    counts, oldest = queue.counts(), queue.oldest_ready_age()
                except redis.ResponseError as exc:
                    if not corrupt(exc):
                        raise
                    rows.append({"name": name, "error": str(exc)})  # the others still show
                    continue
                rows.append({
                    "name": name,
                    "states": [(s, counts[s], self._url("jobs", name, s)) for s in LISTED_STATES],
                    "oldest": oldest,
                })  # fmt: skip
            return {"queues": rows}

        return self._page(request, "queues.html", "Queues", load, {"tab": "queues"})

    def locks_view(self, request: HttpRequest) -> HttpResponse:
        prefix = request.GET.get("q", "")

        def load() -> dict[str, Any]:
            asked = (requested_page(request) - 1) * PER_PAGE
            page = list_locks(prefix, offset=asked, limit=PER_PAGE)
            pager = Pager.of(request, page.total)
            if pager.offset != asked:  # past the last page: show the last
                page = list_locks(prefix, offset=pager.offset, limit=PER_PAGE)
            can_release = _can(request, RELEASE)
            rows = [
                (lock, self._confirm(request, "release", name=lock.name) if can_release else "")
                for lock in page.locks
            ]
            return {"locks": rows, "pager": pager}

        return self._page(request, "locks.html", "Locks", load, {"tab": "locks", "prefix": prefix})

    def workers_view(self, request: HttpRequest) -> HttpResponse:
        def load() -> dict[str, Any]:
            try:
                from ..queue.worker import live_workers
            except ImproperlyConfigured as exc:  # Django 5.2 without the Tasks backport
                return {"note": str(exc), "workers": []}
            try:
                entries = live_workers()
            except ValueError as exc:  # an entry that is no JSON: the others cannot be read
                logger.warning("Admin workers page: a registry entry is unreadable: %s", exc)
                note = f"A worker's registry entry in Redis is unreadable ({exc})."
                return {"note": note, "workers": []}
            now = time.time()
            rows = [self._worker_row(info, now) for info in entries]
            return {"workers": sorted(rows, key=lambda row: row["id"])}

        return self._page(request, "workers.html", "Workers", load, {"tab": "workers"})

    def _worker_row(self, info: Any, now: float) -> dict[str, Any]:
        """A registry entry as shown: whatever it holds, never an error (it is written by
        workers of any version, or by something else entirely)."""
        if not isinstance(info, dict) or "unreadable" in info:
            what = info.get("unreadable") if isinstance(info, dict) else info
            ident = info.get("id", "?") if isinstance(info, dict) else "?"
            host = f"(this registry entry in Redis is unreadable: {str(what)[:200]})"
            return {"id": str(ident), "host": host, "queues": [], "current": [],
                    "beat_age": None, "up": None}  # fmt: skip
        queues, jobs = info.get("queues"), info.get("jobs")
        current = []
        for job in jobs if isinstance(jobs, list) else [jobs]:
            queue, _, job_id = str(job).partition(":")
            # Only a configured queue has a page (and a name a URL can carry).
            link = self._url("jobs", queue, "running") if queue in conf.QUEUES else ""
            current.append((queue, job_id, link))
        return {
            **{key: info.get(key) for key in ("host", "pid", "concurrency", "processed",
                                              "failed")},
            "id": str(info.get("id", "?")),
            "queues": [str(q) for q in queues] if isinstance(queues, list) else [str(queues)],
            "beat_age": _seconds_since(info.get("beat"), now),
            "up": _seconds_since(info.get("started"), now),
            "current": current if jobs else [],
        }  # fmt: skip

    def jobs_view(self, request: HttpRequest, queue: str, state: str) -> HttpResponse:
        if queue not in conf.QUEUES or state not in LISTED_STATES:
            raise Http404(f"No queue {queue!r} or no state {state!r}.")

        def load() -> dict[str, Any]:
            q = get_queue(queue)
            counts = q.counts()
            pager = Pager.of(request, counts[state])
            now = time.time()
            can_manage = _can(request, MANAGE)
            rows: list[dict[str, Any]] = []
            for job in q.jobs(state, pager.offset, PER_PAGE):
                actions = [
                    (ACTIONS[a].label, self._confirm(request, a, queue=queue, job=job.id))
                    for a in JOB_ACTIONS[state]
                    if can_manage
                ]
                ages = {
                    "due_at": due_at(job),
                    "due_in": job.score / 1000 - now,
                    "started_ago": now - job.started / 1000,
                    "finished_ago": now - job.finished / 1000,
                }
                rows.append({"job": job, "actions": actions, **ages})
            purge = state == "dead" and can_manage and counts["dead"] > 0
            return {
                "jobs": rows,
                "pager": pager,
                "tabs": [(s, counts[s], self._url("jobs", queue, s)) for s in LISTED_STATES],
                "purge_url": self._confirm(request, "purge", queue=queue) if purge else "",
            }

        title = f"{state.capitalize()} jobs of queue “{queue}”"
        extra = {"tab": "queues", "queue": queue, "state": state,
                 "job_nouns": f"{state} job,{state} jobs"}  # fmt: skip
        return self._page(request, "jobs.html", title, load, extra)

    # --- actions --------------------------------------------------------------------------

    def confirm_view(self, request: HttpRequest, action: str) -> HttpResponse:
        act = self._action(request, action)
        fields = target(act, request.GET)
        back = self._next(request, request.GET)
        try:
            described = act.describe(fields)
        except Gone as gone:
            messages.warning(request, str(gone))
            return HttpResponseRedirect(back)
        except REDIS_ERRORS as exc:
            status = 200 if corrupt(exc) else 503
            return self._render(request, "confirm.html", act.label, {"redis_error": exc}, status)
        if "state" in act.optional and "job" in described:  # the state confirmed is posted
            fields["state"] = described["job"].state
        context = {
            **described, "action": act, "fields": fields, "next": back,
            "post_url": self._url("action", action),
        }  # fmt: skip
        return self._render(request, "confirm.html", f"{act.label}: are you sure?", context)

    def action_view(self, request: HttpRequest, action: str) -> HttpResponse:
        act = self._action(request, action)
        fields = target(act, request.POST)
        back = self._next(request, request.POST)
        try:
            done = act.perform(fields)
        except Gone as gone:
            messages.warning(request, str(gone))
        except REDIS_ERRORS as exc:
            logger.warning("Admin action %s failed: %s", action, exc)
            messages.error(request, f"Nothing was done: Redis failed ({exc}).")
        else:
            self._log(request, act, fields, done)
            messages.success(request, done)
        return HttpResponseRedirect(back)

    def _action(self, request: HttpRequest, name: str) -> Action:
        if name not in ACTIONS:
            raise Http404(f"No action {name!r}.")
        act = ACTIONS[name]
        if not _can(request, act.permission):
            raise PermissionDenied
        return act

    def _log(self, request: HttpRequest, act: Action, fields: dict[str, str], done: str) -> None:
        # LogEntry.objects.log_actions() wants database rows; these targets live in Redis,
        # so the entry is written as that method writes it.
        object_id, text = act.logged_as(fields)
        LogEntry.objects.create(
            user_id=request.user.pk,
            content_type_id=ContentType.objects.get_for_model(Dashboard).pk,
            object_id=object_id,
            object_repr=text[:200],
            action_flag=act.flag,
            change_message=done,
        )

    def _next(self, request: HttpRequest, data: Any) -> str:
        url = str(data.get("next", ""))
        # Control characters have no place in a link of these pages (and browsers drop some
        # of them, so what is checked here is not what would be followed).
        safe = url.isprintable() and url_has_allowed_host_and_scheme(
            url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        )
        return url if url and safe else self._url("dashboard_changelist")

    # --- rendering ------------------------------------------------------------------------

    def _url(self, name: str, *args: str) -> str:
        return reverse(f"{self.admin_site.name}:django_redislock_{name}", args=args)

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
        if not _can(request, VIEW):
            raise PermissionDenied
        try:
            context, status = load(), 200
        except REDIS_ERRORS as exc:
            logger.warning("Admin page %s: Redis failed: %s", request.path, exc)
            context, status = {"redis_error": exc}, 200 if corrupt(exc) else 503
        paused = request.GET.get("refresh") == "off"
        context.update(extra or {}, refresh=0 if paused else REFRESH_SECONDS, live=True)
        return self._render(request, template, title, context, status)

    def _render(
        self, request: HttpRequest, template: str, title: str, context: dict[str, Any],
        status: int = 200,
    ) -> TemplateResponse:  # fmt: skip
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "urls": {n: self._url(n) for n in ("dashboard_changelist", "locks", "workers")},
            **context,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, f"django_redislock/admin/{template}", context, status=status
        )
