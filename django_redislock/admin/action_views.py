"""The admin's action views: a confirmation page (GET) whose form posts to a POST-only
view; both check the action's permission, and a done action is written to the admin log.
An action on the dead jobs checked in a list is posted twice: to be confirmed, then done."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import messages
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme

from ..conf import conf
from ..models import Dashboard
from .actions import ACTIONS as LISTED_ACTIONS
from .actions import MANAGE, Action, Gone, target
from .job_actions import ACTIONS as LEFT_AND_DEAD_ACTIONS
from .job_actions import BULK, MAX_CHECKED, bulk_perform, bulk_summary
from .releasing import ACTIONS as RELEASE_ACTIONS
from .rendering import REDIS_ERRORS, Rendering, can, corrupt
from .schedule_actions import ACTIONS as SCHEDULE_ACTIONS
from .workflow_pages import ACTIONS as WORKFLOW_ACTIONS

ACTIONS = {
    **RELEASE_ACTIONS,
    **LISTED_ACTIONS,
    **LEFT_AND_DEAD_ACTIONS,
    **WORKFLOW_ACTIONS,
    **SCHEDULE_ACTIONS,
}

logger = logging.getLogger("django_redislock.admin")


class ActionViews(Rendering):
    def confirm_view(self, request: HttpRequest, action: str) -> HttpResponse:
        act, fields, back = self._asked(request, action, request.GET)
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
            **described,
            "action": act,
            "fields": fields,
            "next": back,
            "post_url": self._url("action", action),
        }
        return self._render(request, "confirm.html", f"{act.label}: are you sure?", context)

    def action_view(self, request: HttpRequest, action: str) -> HttpResponse:
        act, fields, back = self._asked(request, action, request.POST)
        try:
            done = act.perform({**fields, "user": request.user.get_username()})
        except Gone as gone:
            messages.warning(request, str(gone))
        except REDIS_ERRORS as exc:
            logger.warning("Admin action %s failed: %s", action, exc)
            messages.error(request, f"Nothing was done: Redis failed ({exc}).")
        else:
            self._log(request, act, fields, done)
            messages.success(request, done)
        return HttpResponseRedirect(back)

    def bulk_view(self, request: HttpRequest, action: str) -> HttpResponse:
        """POST only: the dead jobs checked (``job``, at most MAX_CHECKED) of ``queue``; with
        ``confirmed`` the action is done, else the confirmation page is shown."""
        if action not in BULK:
            raise Http404(f"No action {action!r}.")
        if not can(request, MANAGE):
            raise PermissionDenied
        label, flag = BULK[action]
        queue, back = request.POST.get("queue", ""), self._next(request, request.POST)
        ids = list(dict.fromkeys(request.POST.getlist("job")))
        if queue not in conf.QUEUES:
            raise Http404(f"No queue {queue!r} in REDISLOCK['QUEUES'].")
        if len(ids) > MAX_CHECKED:
            raise BadRequest(f"At most {MAX_CHECKED} jobs per action, not {len(ids)}.")
        if not ids:
            messages.warning(request, "No job was checked; nothing was done.")
            return HttpResponseRedirect(back)
        try:
            if "confirmed" not in request.POST:
                summary = bulk_summary(action, queue, ids)
            else:
                done = bulk_perform(action, queue, ids)
        except Gone as gone:
            messages.warning(request, str(gone))
            return HttpResponseRedirect(back)
        except REDIS_ERRORS as exc:
            logger.warning("Admin action %s failed: %s", action, exc)
            messages.error(request, f"Nothing was done: Redis failed ({exc}).")
            return HttpResponseRedirect(back)
        if "confirmed" not in request.POST:
            context = {
                "summary": summary,
                "action": {"label": label},
                "next": back,
                "fields": {"queue": queue},
                "ids": ids,
                "post_url": request.path,
                "bulk": True,
            }
            return self._render(request, "confirm.html", f"{label}: are you sure?", context)
        object_repr = f"{len(ids)} dead jobs of queue {queue}: {', '.join(ids)}"
        self._write_log(request, queue, object_repr, flag, done)
        messages.success(request, done)
        return HttpResponseRedirect(back)

    def _asked(
        self, request: HttpRequest, name: str, data: Any
    ) -> tuple[Action, dict[str, str], str]:
        """The action asked for (if permitted), its target from ``data``, and where to go
        back to."""
        act = self._action(request, name)
        return act, target(act, data), self._next(request, data)

    def _action(self, request: HttpRequest, name: str) -> Action:
        if name not in ACTIONS:
            raise Http404(f"No action {name!r}.")
        act = ACTIONS[name]
        if not can(request, act.permission):
            raise PermissionDenied
        return act

    def _log(self, request: HttpRequest, act: Action, fields: dict[str, str], done: str) -> None:
        # LogEntry.objects.log_actions() wants database rows; these targets live in Redis,
        # so the entry is written as that method writes it.
        object_id, text = act.logged_as(fields)
        self._write_log(request, object_id, text, act.flag, done)

    def _write_log(
        self, request: HttpRequest, object_id: str, text: str, flag: int, done: str
    ) -> None:
        LogEntry.objects.create(
            user_id=request.user.pk,
            content_type_id=ContentType.objects.get_for_model(Dashboard).pk,
            object_id=object_id,
            object_repr=text[:200],
            action_flag=flag,
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
