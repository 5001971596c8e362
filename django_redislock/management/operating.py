"""What the operator's commands share: errors turned into ``CommandError`` (never a
traceback), the confirmation a destructive command asks for, and finding a queue."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser

from ..conf import conf
from ..exceptions import RedisLockError, RedisUnavailable
from ..queue.queue import Queue, get_queue

# Exit status when Redis cannot be reached (as ``run_queue_worker``'s at start).
EXIT_REDIS_UNAVAILABLE = 3

# Destructive commands log what they did here, beside the admin's actions.
audit = logging.getLogger("django_redislock.admin")


@contextmanager
def command_errors() -> Iterator[None]:
    """Raise what goes wrong as a ``CommandError`` with a hint: Redis unreachable (exit
    status 3), a refusal from Redis, a wrong setting or argument."""
    try:
        yield
    except (RedisUnavailable, redis.ConnectionError, redis.TimeoutError) as exc:
        # RedisUnavailable says "Redis is unreachable (…)" already: its cause, not it again
        said = exc.__cause__ if isinstance(exc, RedisUnavailable) and exc.__cause__ else exc
        raise CommandError(
            f"Cannot reach Redis ({said}). Check REDISLOCK's URL (or the cache its CACHE "
            "names) and that Redis is running.",
            returncode=EXIT_REDIS_UNAVAILABLE,
        ) from exc
    except redis.RedisError as exc:  # WRONGTYPE, READONLY, OOM, …
        raise CommandError(f"Redis refused: {exc}") from exc
    except (ImproperlyConfigured, ValueError, TypeError, RedisLockError) as exc:
        raise CommandError(str(exc)) from exc


def add_queue_and_state(
    parser: CommandParser, states: list[str], what: str, default: str | None = None
) -> None:
    """``--queue Q`` (required) and ``--state``: one of ``states``, required without a
    ``default``; ``what`` says what is done to the jobs of that state."""
    parser.add_argument("--queue", required=True, metavar="Q", help="the queue")
    parser.add_argument(
        "--state",
        choices=states,
        required=default is None,
        default=default,
        help=f"the state of the jobs to {what}" + (f" (default: {default})" if default else ""),
    )


def add_confirmation(parser: CommandParser) -> None:
    parser.add_argument(
        "--yes",
        "--noinput",
        "--no-input",
        action="store_false",
        dest="interactive",
        help="do not ask for confirmation (needed when there is no terminal to ask on)",
    )


def confirmed(command: Any, options: dict[str, Any], question: str) -> bool:
    """Whether to go on: ``--yes``, or "yes" typed on a terminal after ``question``. Without
    a terminal (a cron job, a pipe) it refuses rather than wait or guess."""
    if not options["interactive"]:
        return True
    if not sys.stdin.isatty():
        raise CommandError(f"{question} No terminal to confirm on: pass --yes to go ahead.")
    if input(f"{question} Type 'yes' to go on: ").strip().lower() == "yes":
        return True
    command.stdout.write("Cancelled; nothing changed.")
    return False


def named_queue(name: str) -> Queue:
    """Queue ``name`` from ``REDISLOCK['QUEUES']``, or a CommandError listing them."""
    if name not in conf.QUEUES:
        raise CommandError(
            f"Unknown queue {name!r}; configured in REDISLOCK['QUEUES']: "
            f"{', '.join(sorted(conf.QUEUES)) or 'none'}."
        )
    return get_queue(name)


def seconds(value: float | None) -> str:
    """A duration for a table: ``-`` when there is none."""
    if value is None:
        return "-"
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"
