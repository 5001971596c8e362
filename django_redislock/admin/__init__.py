"""Admin pages for locks, semaphores, stocks, queues, jobs (one in full too), workers and
the schedule, read live from Redis (no tables).

Each page costs Redis work in proportion to the rows it shows: counts are ZCARDs, pages are
ranges, never a whole set, never KEYS or SCAN. A destructive action is a confirmation page
(GET) whose form posts to a POST-only URL; both check the action's permission, and the post
is recorded in the admin log."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET, require_POST

from ..models import Dashboard
from .action_views import ActionViews
from .actions import VIEW
from .job_pages import JobPages
from .pages import Pages
from .rendering import ModelAdmin, can
from .schedule_page import SchedulePage
from .workflow_pages import WorkflowPages


@admin.register(Dashboard)
class DashboardAdmin(Pages, JobPages, WorkflowPages, SchedulePage, ActionViews, ModelAdmin):
    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can(request, VIEW)

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
            ("stocks/", self.stocks_view, "stocks"),
            ("semaphores/", self.semaphores_view, "semaphores"),
            ("schedule/", self.schedule_view, "schedule"),
            ("tasks/", self.tasks_view, "tasks"),
            ("tasks/<str:queue>/", self.task_history_view, "task_history"),
            ("queues/<str:queue>/job/", self.job_view, "job"),
            ("queues/<str:queue>/workflows/", self.workflows_view, "workflows"),
            ("queues/<str:queue>/workflow/", self.workflow_view, "workflow"),
            ("queues/<str:queue>/<str:state>/", self.jobs_view, "jobs"),
            ("confirm/<str:action>/", require_GET(self.confirm_view), "confirm"),
            ("action/<str:action>/", require_POST(self.action_view), "action"),
            ("bulk/<str:action>/", require_POST(self.bulk_view), "bulk"),
        ]
        return [
            path(route, wrap(view), name=f"django_redislock_{name}") for route, view, name in pages
        ]
