"""``run_queue_worker -v N``: what each verbosity shows, and nothing added when the project's
LOGGING already handles the app's records."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO

import pytest

from django_redislock.management.worker_logging import worker_logging

EMITTED = [
    ("django_redislock.worker", logging.WARNING, "a warning"),
    ("django_redislock.worker", logging.INFO, "a job's line"),
    ("django_redislock.queue.leases", logging.DEBUG, "a debug message"),
    ("redis.connection", logging.DEBUG, "a library's debug message"),
    ("django_tasks", logging.ERROR, "a task's traceback"),  # the Tasks framework (backport)
    ("django_tasks", logging.INFO, "a task started"),
]


def shown(verbosity: int) -> str:
    out = StringIO()
    with worker_logging(verbosity, out):
        for name, level, message in EMITTED:
            logging.getLogger(name).log(level, message)
    return out.getvalue()


@contextmanager
def root_handlers(*handlers: logging.Handler) -> Iterator[None]:
    """Only ``handlers`` on the root logger (none: as with Django's default LOGGING), in
    the test's body: pytest adds its own for each phase."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers[:] = handlers
    try:
        yield
    finally:
        root.handlers[:] = saved


@pytest.mark.parametrize(
    ("verbosity", "expected"),
    [
        (0, ["a warning", "a task's traceback"]),
        (1, ["a warning", "a job's line", "a task's traceback"]),
        (2, ["a warning", "a job's line", "a debug message", "a task's traceback"]),
        (3, ["a warning", "a job's line", "a debug message", "a library's debug message",
             "a task's traceback", "a task started"]),
    ],
)  # fmt: skip
def test_each_verbosity_shows_its_levels(verbosity: int, expected: list[str]) -> None:
    root, app = logging.getLogger(), logging.getLogger("django_redislock")
    before = root.level
    with root_handlers():
        out = shown(verbosity)
        assert (app.handlers, app.level, root.level) == ([], logging.NOTSET, before)
    # "12:00:00 message", "12:00:00 [WARNING] message", "12:00:00 [WARNING logger] message"
    assert [line[9:].split("] ", 1)[-1] for line in out.splitlines()] == expected
    assert "[WARNING" in out  # the level is named from WARNING up
    assert ("[WARNING django_redislock.worker] a warning" in out) == (verbosity >= 2)


def test_logging_configured_elsewhere_is_left_alone_but_v2_lowers_the_app_level() -> None:
    project = StringIO()
    handler = logging.StreamHandler(project)
    worker = logging.getLogger("django_redislock.worker")
    with root_handlers():
        worker.addHandler(handler)  # LOGGING names one of the app's loggers
        worker.setLevel(logging.INFO)
        try:
            assert shown(1) == ""  # nothing added: LOGGING decides
            assert "a job's line" in project.getvalue()
        finally:
            worker.removeHandler(handler)
            worker.setLevel(logging.NOTSET)
    with root_handlers(handler):  # LOGGING's root logger
        assert shown(2) == ""
    assert "a debug message" in project.getvalue()  # -v 2 lowered the app's level
    assert "a library's debug message" not in project.getvalue()
