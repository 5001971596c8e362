"""System checks of ``REDISLOCK['QUEUES']`` and ``REDISLOCK['SCHEDULE']``: what would fail
at each job or tick is reported by ``manage.py check`` instead."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.checks import Error

from ..conf import QUEUE_DEFAULTS, conf
from ..exceptions import InvalidTask
from .values import QUEUE_NAME_RE, Bounds, short

# A lease shorter than a second expires while a busy worker still runs the job (then it runs
# twice); a result kept less than a second is gone before anyone reads it.
QUEUE_BOUNDS = {
    "LEASE": Bounds(1),
    "MAX_ATTEMPTS": Bounds(1, maximum=1000, whole=True),
    "RETRY_BACKOFF": Bounds(0, above=True),
    "RESULT_TTL": Bounds(1),
    "TIME_LIMIT_GRACE": Bounds(0.1),
}
QUEUE_BOUNDS_WHY = (
    "LEASE and RESULT_TTL are seconds from 1 to a year, RETRY_BACKOFF seconds above 0, "
    "TIME_LIMIT_GRACE seconds from 0.1 to a year, MAX_ATTEMPTS a whole number from 1 to 1000."
)
# True or False, and what each does
QUEUE_FLAGS = {
    "ON_COMMIT": "ON_COMMIT: True (the default) pushes a job enqueued inside "
    "transaction.atomic() when it commits, False at once.",
    "EAGER": "EAGER: True runs each job at once in the process that enqueues it, without "
    "Redis (for tests); False (the default) queues it for a worker.",
}
# None (no limit) or seconds above 0: a job running longer gets JobTimeLimitExceeded.
QUEUE_LIMITS = {"TIME_LIMIT": Bounds(0, above=True)}
assert set(QUEUE_BOUNDS) | set(QUEUE_FLAGS) | set(QUEUE_LIMITS) == set(QUEUE_DEFAULTS)
# Ticks closer than this keep the scheduler doing nothing but Redis round trips.
EVERY_BOUNDS = Bounds(0.1)
SCHEDULE_HINT = (
    "Options: task (the path of a @task in an installed app), every (seconds, 0.1 to a "
    "year) or cron, and optionally args (a JSON list), kwargs (a JSON object), queue, "
    "priority, catch_up."
)


def check_queues(value: Any) -> Iterable[Error]:
    if not isinstance(value, dict):
        yield Error(
            "REDISLOCK['QUEUES'] must be a dict of queue name to options.",
            hint="For example {'default': {'LEASE': 300}}.",
            id="django_redislock.E003",
        )
        return
    for name, options in value.items():
        if not isinstance(name, str) or not QUEUE_NAME_RE.match(name):
            yield Error(
                f"REDISLOCK['QUEUES'] has an invalid queue name {name!r}.",
                hint="Use 1-64 characters from letters, digits and _ . -",
                id="django_redislock.E009",
            )
            continue
        if not isinstance(options, dict):
            yield Error(
                f"REDISLOCK['QUEUES'][{name!r}] must be a dict of options.",
                hint=f"Known options: {', '.join(QUEUE_DEFAULTS)}.",
                id="django_redislock.E009",
            )
            continue
        for option, option_value in options.items():
            where = f"REDISLOCK['QUEUES'][{name!r}][{option!r}]"
            if option in QUEUE_FLAGS:
                if not isinstance(option_value, bool):
                    yield Error(
                        f"{where} is {short(option_value)}; it must be True or False.",
                        hint=QUEUE_FLAGS[option],
                        id="django_redislock.E009",
                    )
                continue
            if option in QUEUE_LIMITS:
                bounds = QUEUE_LIMITS[option]
                if option_value is not None and not (
                    bounds.is_number(option_value) and bounds.contains(option_value)
                ):
                    yield Error(
                        f"{where} is {short(option_value)}; it must be None (no limit) or "
                        f"{bounds.describe()}.",
                        hint="TIME_LIMIT: the seconds a job may run before JobTimeLimitExceeded "
                        "is raised in it; a job's own enqueue(time_limit=...) comes first.",
                        id="django_redislock.E009",
                    )
                continue
            if option not in QUEUE_BOUNDS:
                yield Error(
                    f"{where} is not a known queue option.",
                    hint=f"Known options: {', '.join(QUEUE_DEFAULTS)}.",
                    id="django_redislock.E009",
                )
                continue
            bounds = QUEUE_BOUNDS[option]
            if not bounds.is_number(option_value) or not bounds.contains(option_value):
                yield Error(
                    f"{where} is {short(option_value)}; it must be {bounds.describe()}.",
                    hint=f"The default is {QUEUE_DEFAULTS[option]!r}. {QUEUE_BOUNDS_WHY}",
                    id="django_redislock.E009",
                )


def check_schedule(value: Any) -> Iterable[Error]:
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        yield Error(
            "REDISLOCK['SCHEDULE'] must be a dict of entry name to a dict of options.",
            hint="For example {'sweep': {'task': 'shop.tasks.sweep', 'every': 60}}.",
            id="django_redislock.E012",
        )
        return
    from ..queue.worker.schedule import Entry

    queues = conf.QUEUE_NAMES
    for name, options in value.items():
        where = f"REDISLOCK['SCHEDULE'][{name!r}]"
        if not isinstance(name, str) or not QUEUE_NAME_RE.match(name):
            yield Error(
                f"{where}: an entry name must be 1-64 letters, digits, '_', '.' or '-'.",
                hint="For example 'sweep-unpaid'.",
                id="django_redislock.E012",
            )
            continue
        try:
            entry = Entry.from_setting(name, options)
        except ValueError as exc:
            yield Error(f"{where}: {exc}.", hint=SCHEDULE_HINT, id="django_redislock.E012")
            continue
        if entry.every is not None and not EVERY_BOUNDS.contains(entry.every):
            yield Error(
                f"{where}: 'every' is {entry.every:g}; it must be {EVERY_BOUNDS.describe()}.",
                hint=SCHEDULE_HINT,
                id="django_redislock.E012",
            )
        if entry.queue not in queues:
            yield Error(
                f"{where} names the queue {entry.queue!r}, which is not in REDISLOCK['QUEUES'].",
                hint=f"Add {entry.queue!r} to REDISLOCK['QUEUES'] or set 'queue' to one of "
                f"{', '.join(map(repr, queues)) or 'none'}.",
                id="django_redislock.E012",
            )
        problem = _task_problem(entry.task)
        if problem:
            yield Error(f"{where}: {problem}", hint=SCHEDULE_HINT, id="django_redislock.E012")


def _task_problem(path: str) -> str | None:
    """Why the worker would refuse to run ``path``, or None when it is a @task of an
    installed app."""
    from django.core.exceptions import ImproperlyConfigured

    try:
        # Lazily: on Django 5.2 without the Tasks backport, importing tasks raises.
        from ..queue.execution import resolve_task
    except ImproperlyConfigured as exc:
        return f"its task cannot run: {exc}"
    try:
        resolve_task(path)
    except InvalidTask as exc:
        return str(exc)
    except Exception as exc:  # the task's module itself fails to import
        return f"importing {path!r} raised {type(exc).__name__}: {exc}"
    return None
