"""What ``run_queue_worker`` prints: the app's log records (one line per job at INFO) on its
standard output, at the level ``--verbosity`` asks for, unless the project's ``LOGGING``
already sends them somewhere.

Django's default ``LOGGING`` gives handlers to the ``django`` loggers only: the app's records
would reach no handler, and Python would print only warnings, bare, on stderr.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

APP = "django_redislock"
# The Tasks framework logs a failed task with its traceback (Django 6, and the backport).
TASK_LOGGERS = ("django.tasks", "django_tasks")

# --verbosity: 0 warnings only, 1 one line per job (INFO), 2 the app's DEBUG, 3 DEBUG of
# every library (redis-py, the Tasks framework, …) too.
LEVELS = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG, 3: logging.DEBUG}
VERBOSITY_HELP = (
    "0: warnings only; 1 (default): one line per job; 2: the app's debug messages; 3: debug "
    "messages of every library too. Shown on stdout unless LOGGING configures the "
    "'django_redislock' loggers (or the root logger): then LOGGING decides, and -v 2/3 only "
    "lower the app's level to DEBUG."
)


class LineFormatter(logging.Formatter):
    """``12:01:02 default: shop.tasks.close (close:42) OK in 3.1 ms``; the level is named
    from WARNING up, and the logger at ``detailed`` verbosity."""

    def __init__(self, detailed: bool) -> None:
        super().__init__("%(asctime)s %(message)s", datefmt="%H:%M:%S")
        self.detailed = detailed

    def formatMessage(self, record: logging.LogRecord) -> str:
        tags = [record.levelname] if record.levelno >= logging.WARNING else []
        if self.detailed:
            tags.append(record.name)
        if tags:
            return f"{self.formatTime(record, self.datefmt)} [{' '.join(tags)}] {record.message}"
        return super().formatMessage(record)


def configured_elsewhere(name: str) -> bool:
    """Whether a handler already receives the records of logger ``name`` or of its children
    (``LOGGING``, or a test runner's capture): then nothing is added, so nothing is printed
    twice."""
    if logging.getLogger(name).hasHandlers():  # its own, or an ancestor's (root)
        return True
    loggers: dict[str, Any] = logging.root.manager.loggerDict
    return any(
        isinstance(logger, logging.Logger) and logger.handlers
        for child, logger in loggers.items()
        if child.startswith(name + ".")
    )


@contextmanager
def worker_logging(verbosity: int, stream: Any) -> Iterator[None]:
    """Show the app's records on ``stream`` at ``verbosity``'s level, and the Tasks
    framework's failures (their tracebacks), for the duration."""
    level = LEVELS.get(verbosity, logging.DEBUG)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LineFormatter(detailed=verbosity >= 2))
    shown: dict[str, tuple[int, bool]] = {}  # logger: (level, whether it gets the handler)
    if configured_elsewhere(APP):  # LOGGING decides; only -v 2/3 lower the app's level
        if level == logging.DEBUG:
            shown[APP] = level, False
    elif verbosity >= 3:  # every library's records (none reaches a handler yet)
        shown[""] = level, True
    else:
        shown[APP] = level, True
        for name in TASK_LOGGERS:
            if not configured_elsewhere(name):
                shown[name] = max(level, logging.WARNING), True
    saved = {name: logging.getLogger(name).level for name in shown}
    for name, (wanted, add) in shown.items():
        logging.getLogger(name).setLevel(wanted)
        if add:
            logging.getLogger(name).addHandler(handler)
    try:
        yield
    finally:
        for name, (_, add) in shown.items():
            logging.getLogger(name).setLevel(saved[name])
            if add:
                logging.getLogger(name).removeHandler(handler)
