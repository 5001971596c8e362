"""What ``run_queue_worker`` prints: the app's log records (one line per job at INFO) on its
standard output, at the level ``--verbosity`` asks for, unless the project's ``LOGGING``
already sends them somewhere.

Django's default ``LOGGING`` gives handlers to the ``django`` loggers only: the app's records
would reach no handler, and Python would print only warnings, bare, on stderr.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..redis.notices import quiet_maintenance_notices

APP = "django_redislock"
# The Tasks framework's loggers (Django 6, and the backport): what they log besides each
# task's state is shown with the worker's warnings.
TASK_LOGGERS = ("django.tasks", "django_tasks")
STATE_LINE = "Task id=%s path=%s state="  # their line per task state (TaskStates)

# --verbosity: 0 warnings only, 1 one line per job (INFO), 2 the app's DEBUG, 3 DEBUG of
# every library (redis-py, the Tasks framework, …) too.
LEVELS = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG, 3: logging.DEBUG}
VERBOSITY_HELP = (
    "0: warnings only; 1 (default): one line per job; 2: the app's debug messages; 3: debug "
    "messages of every library too. Shown on stdout unless LOGGING configures the "
    "'django_redislock' loggers (or the root logger): then LOGGING decides, and -v 2/3 only "
    "lower the app's level to DEBUG."
)


class TaskStates(logging.Filter):
    """Drops the Tasks framework's line per task state ("Task id=… path=… state=RUNNING",
    "…SUCCESSFUL", "…FAILED" with a traceback): the worker's own line per job says the same,
    with the task's traceback at the level of the outcome. Logged at INFO and ERROR, shown
    by Django's default LOGGING when DEBUG is on (Django 6), they would double each job."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(STATE_LINE))


class LineFormatter(logging.Formatter):
    """``12:01:02 default: shop.tasks.close (close:42) succeeded in 3.1 ms``; the level is named
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


def prints(handler: logging.Handler, stream: Any) -> bool:
    """Whether ``handler`` writes on ``stream`` or on the terminal (stdout, stderr)."""
    if not isinstance(handler, logging.StreamHandler) or isinstance(handler, logging.FileHandler):
        return False
    if handler.stream is stream or handler.stream in (sys.stdout, sys.stderr):
        return True
    try:
        return handler.stream.fileno() in (1, 2)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False


class NotPrintedYet(logging.Filter):
    """Lets a record through unless a handler of a logger it passed on its way up to ours
    already printed it: with ``-v 3`` the worker's handler is the root logger's, and a
    library logger that has its own StreamHandler (``LOGGING``) and propagates would show
    every record twice, tracebacks included. A handler writing elsewhere (a file, mail)
    does not count: the record is still shown once on the terminal."""

    def __init__(self, owner: logging.StreamHandler[Any]) -> None:
        super().__init__()
        self.owner = owner

    def filter(self, record: logging.LogRecord) -> bool:
        logger = logging.root.manager.loggerDict.get(record.name)
        # The handlers of the loggers below the owner's ran first (Logger.callHandlers).
        while isinstance(logger, logging.Logger) and self.owner not in logger.handlers:
            if any(self._printed(handler, record) for handler in logger.handlers):
                return False
            logger = logger.parent if logger.propagate else None
        return True

    def _printed(self, handler: logging.Handler, record: logging.LogRecord) -> bool:
        return (
            record.levelno >= handler.level
            and prints(handler, self.owner.stream)
            and bool(handler.filter(record))
        )


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
    framework's warnings but not its lines per task state, for the duration."""
    level = LEVELS.get(verbosity, logging.DEBUG)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LineFormatter(detailed=verbosity >= 2))
    handler.addFilter(NotPrintedYet(handler))
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
    states = TaskStates()
    for name in TASK_LOGGERS:  # whoever handles them, LOGGING included
        logging.getLogger(name).addFilter(states)
    quiet_maintenance_notices()
    try:
        yield
    finally:
        for name in TASK_LOGGERS:
            logging.getLogger(name).removeFilter(states)
        for name, (_, add) in shown.items():
            logging.getLogger(name).setLevel(saved[name])
            if add:
                logging.getLogger(name).removeHandler(handler)
