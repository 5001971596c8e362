"""The system check of the Tasks framework's default backend when queues are configured:
with the framework's Immediate or Dummy backend, ``my_task.enqueue()`` never reaches a
queue (it runs in the web process, or nowhere), and nothing else would say so."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.util import find_spec
from typing import Any

import django
from django.conf import global_settings, settings
from django.core.checks import Warning

OUR_BACKEND = "django_redislock.tasks.RedisTaskBackend"
# The framework's (Django 6) and the backport's (Django 5.2): what each does with a task.
NOT_QUEUED = {
    f"{package}.backends.{module}.{cls}": what
    for package in ("django.tasks", "django_tasks")
    for module, cls, what in (
        ("immediate", "ImmediateBackend", "runs each task at once, in the process enqueueing it"),
        ("dummy", "DummyBackend", "keeps each task in memory and never runs it"),
    )
}


def _default_backend() -> tuple[Any, bool]:
    """The ``BACKEND`` of the framework's default alias (None when there is none: no Tasks
    framework, or a TASKS the framework's own checks report), and whether TASKS is set."""
    tasks = getattr(settings, "TASKS", None)
    if tasks is None:  # on 5.2 the backport's default is its Immediate backend
        framework = django.VERSION < (6, 0) and find_spec("django_tasks") is not None
        return ("django_tasks.backends.immediate.ImmediateBackend" if framework else None), False
    default = tasks.get("default") if isinstance(tasks, dict) else None
    backend = default.get("BACKEND") if isinstance(default, dict) else None
    return backend, tasks is not getattr(global_settings, "TASKS", None)  # Django 6's default


def check_tasks_backend(raw: dict[Any, Any]) -> Iterable[Warning]:
    """W004: queues are configured, but the default Tasks backend does not queue."""
    queues = raw.get("QUEUES")
    if not isinstance(queues, dict) or not queues:
        return
    backend, set_here = _default_backend()
    if not isinstance(backend, str) or backend not in NOT_QUEUED:
        return
    where = "TASKS['default']['BACKEND']" if set_here else "TASKS (not set)"
    yield Warning(
        f"REDISLOCK['QUEUES'] is set, but {where} is the Tasks framework's {backend!r}, "
        f"which {NOT_QUEUED[backend]}: my_task.enqueue() does not reach the queues, and "
        "run_queue_worker never sees those tasks.",
        hint=f"Set TASKS = {{'default': {{'BACKEND': {OUR_BACKEND!r}}}}}. If this is meant "
        "(tests, say), add 'django_redislock.W004' to SILENCED_SYSTEM_CHECKS.",
        id="django_redislock.W004",
    )
