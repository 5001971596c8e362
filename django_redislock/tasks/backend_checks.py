"""What ``manage.py check`` says of a ``TASKS`` entry naming ``RedisTaskBackend``: its
``QUEUES`` must be a list of queues of ``REDISLOCK['QUEUES']`` (E013), and it takes no
``OPTIONS`` (E014)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.checks import CheckMessage, Error

from ..conf import conf


def backend_errors(alias: str, queues: Any, options: Any) -> Iterator[CheckMessage]:
    """The errors of ``TASKS[alias]``, whose ``QUEUES`` and ``OPTIONS`` settings are
    ``queues`` and ``options`` as given."""
    where = f"TASKS[{alias!r}]"
    yield from _queue_errors(where, queues)
    yield from _option_errors(where, options)


def _queue_errors(where: str, names: Any) -> Iterator[CheckMessage]:
    configured = conf.QUEUE_NAMES  # never raises: REDISLOCK's own check reports its shape
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        yield Error(
            f"{where}['QUEUES'] must be a list of queue names, not {names!r:.60}.",
            hint=f"For example {configured[:3] or ['default']!r}: names of queues in "
            "REDISLOCK['QUEUES'].",
            id="django_redislock.E013",
        )
        return
    for name in sorted(set(names) - set(configured)):
        yield Error(
            f"{where}['QUEUES'] names {name!r}, which is not a queue in REDISLOCK['QUEUES'].",
            hint=f"Add {name!r} to REDISLOCK['QUEUES'] (configured: "
            f"{', '.join(configured) or 'none'}).",
            id="django_redislock.E013",
        )


def _option_errors(where: str, options: Any) -> Iterator[CheckMessage]:
    if not isinstance(options, dict):
        yield Error(
            f"{where}['OPTIONS'] must be a dict, not {options!r:.60}.",
            hint="RedisTaskBackend takes no options: leave OPTIONS out. Queue options "
            "(LEASE, MAX_ATTEMPTS, ...) go in REDISLOCK['QUEUES'].",
            id="django_redislock.E014",
        )
    elif options:
        yield Error(
            f"{where}['OPTIONS'] has {', '.join(map(repr, options))}; "
            "RedisTaskBackend takes no options.",
            hint="Queue options (LEASE, MAX_ATTEMPTS, ...) go in REDISLOCK['QUEUES'].",
            id="django_redislock.E014",
        )
