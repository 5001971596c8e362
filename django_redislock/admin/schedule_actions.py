"""The admin's actions on a SCHEDULE entry: pause, resume, and run now.

A run now's confirmation link carries a nonce made when the schedule page was shown, and its
form posts it back: the job is enqueued once per nonce, so a form sent twice (a double
click, a reload) makes one job, and a confirmation left open while a later run now was
asked for enqueues nothing more."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE
from django.http import Http404

from ..queue.worker.schedule import Entry
from ..queue.worker.schedule_state import (
    checked_nonce,
    entry_named,
    entry_states,
    pause_entry,
    resume_entry,
    run_entry_now,
)
from .actions import MANAGE, Action, Gone


def _entry(t: Mapping[str, str]) -> Entry:
    try:
        return entry_named(t["entry"])
    except ValueError as exc:
        raise Http404(str(exc)) from exc


def _who(t: Mapping[str, str]) -> str:
    return f"admin {t.get('user') or '?'}"[:200]


def _paused(entry: Entry) -> bool:
    return entry_states([entry])[0].paused


def _describe_pause(t: Mapping[str, str]) -> dict[str, Any]:
    entry = _entry(t)
    if _paused(entry):
        raise Gone(f"Schedule entry “{entry.name}” is paused already.")
    return {
        "schedule": True,
        "summary": f"Pause schedule entry “{entry.name}” ({entry.task}): none of its ticks "
        "is enqueued until it is resumed, and then it runs from its next tick on (the "
        "ticks passed meanwhile are skipped). Its jobs already enqueued still run.",
    }


def _pause(t: Mapping[str, str]) -> str:
    entry = _entry(t)
    if not pause_entry(entry, by=_who(t)):
        raise Gone(f"Schedule entry “{entry.name}” was paused already; nothing was done.")
    return f"Schedule entry “{entry.name}” was paused."


def _describe_resume(t: Mapping[str, str]) -> dict[str, Any]:
    entry = _entry(t)
    if not _paused(entry):
        raise Gone(f"Schedule entry “{entry.name}” is not paused.")
    return {
        "schedule": True,
        "summary": f"Resume schedule entry “{entry.name}” ({entry.task}): it runs again "
        "from its next tick; the ticks passed while it was paused are not run.",
    }


def _resume(t: Mapping[str, str]) -> str:
    entry = _entry(t)
    if not resume_entry(entry):
        raise Gone(f"Schedule entry “{entry.name}” was not paused; nothing was done.")
    return f"Schedule entry “{entry.name}” was resumed."


def _nonce(t: Mapping[str, str]) -> int:
    try:
        return checked_nonce(t["nonce"])
    except ValueError as exc:
        raise Http404(str(exc)) from exc


def _describe_run(t: Mapping[str, str]) -> dict[str, Any]:
    entry, _ = _entry(t), _nonce(t)
    paused = " (it is paused: this job runs all the same)" if _paused(entry) else ""
    return {
        "schedule": True,
        "summary": f"Run schedule entry “{entry.name}” now{paused}: one job of "
        f"{entry.task} is enqueued in queue “{entry.queue}”, besides its ticks. Sending this "
        "form again enqueues nothing more.",
    }


def _run(t: Mapping[str, str]) -> str:
    entry = _entry(t)
    job = run_entry_now(entry, _nonce(t))
    if job is None:
        raise Gone(
            f"This run of schedule entry “{entry.name}” was enqueued already (the form was "
            "sent twice), or a later one was asked for since; nothing more was enqueued."
        )
    return f"Schedule entry “{entry.name}” was run now: job “{job.id}” was enqueued."


def _as_entry(t: Mapping[str, str]) -> tuple[str, str]:
    return f"schedule:{t['entry']}", f"schedule entry {t['entry']}"


ENTRY = ("entry",)
ACTIONS = {
    "schedule_pause": Action("Pause", MANAGE, CHANGE, ENTRY, _describe_pause, _pause, _as_entry),
    "schedule_resume": Action(
        "Resume", MANAGE, CHANGE, ENTRY, _describe_resume, _resume, _as_entry
    ),
    "schedule_run": Action(
        "Run now", MANAGE, ADDITION, ("entry", "nonce"), _describe_run, _run, _as_entry
    ),
}
