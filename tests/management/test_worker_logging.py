"""``run_queue_worker -v N``: what each verbosity shows, nothing added when the project's
LOGGING already handles the app's records, and each record printed once at ``-v 3``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.management.worker_logging import worker_logging
from tests.support.fixtures import Backend
from tests.support.worker_project import finish, start_worker, task_module, write_project

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
        (
            3,
            [
                "a warning",
                "a job's line",
                "a debug message",
                "a library's debug message",
                "a task's traceback",
                "a task started",
            ],
        ),
    ],
)
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


def test_v3_leaves_out_records_a_library_handler_printed_but_not_those_it_filed() -> None:
    out, elsewhere = StringIO(), StringIO()
    library = logging.getLogger("acme")
    with root_handlers(), worker_logging(3, out):
        printing = logging.StreamHandler(out)  # LOGGING: the library's own console
        library.addHandler(printing)
        logging.getLogger("acme.payments").info("printed by the library")
        library.removeHandler(printing)
        filing = logging.StreamHandler(elsewhere)  # LOGGING: a file, say
        library.addHandler(filing)
        logging.getLogger("acme.payments").info("filed by the library")
        library.removeHandler(filing)
    assert out.getvalue().count("printed by the library") == 1
    assert out.getvalue().count("filed by the library") == 1  # and shown by the worker
    assert elsewhere.getvalue() == "filed by the library\n"


# The project's LOGGING, when the worker runs with it: each library logger has its own handler.
LIBRARY_LOGGING = {
    "formatters": {"lib": {"format": "LIB %(name)s %(message)s"}},
    "handlers": {
        "out": {"class": "logging.StreamHandler", "formatter": "lib", "stream": "ext://sys.stdout"},
        "err": {"class": "logging.StreamHandler", "formatter": "lib"},
    },
    "loggers": {
        "django_tasks": {"handlers": ["out"], "level": "DEBUG"},
        "django.tasks": {"handlers": ["out"], "level": "DEBUG"},
        "acme": {"handlers": ["err"], "level": "INFO"},
    },
}
CHARGE = task_module(
    """
@task()
def charge() -> None:
    try:
        raise ConnectionError("gateway down")
    except ConnectionError:
        logging.getLogger("acme.payments").exception("gateway refused card 42")
    raise ValueError("card declined")
""",
    imports="import logging\n",
)


@pytest.fixture
def payments_site(redis_backend: Backend, settings: Any, tmp_path: Path) -> Path:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"MAX_ATTEMPTS": 1}}}
    return write_project(tmp_path, "paymentsapp", {"tasks": CHARGE}, LIBRARY_LOGGING)


@pytest.mark.processes
@pytest.mark.parametrize("project_logging", ["libraries", ""])
def test_v3_prints_each_record_once_whoever_handles_it(
    payments_site: Path, settings: Any, project_logging: str
) -> None:
    """A library logger with its own StreamHandler that propagates to the root handler the
    worker adds at -v 3 is printed by its handler only; with no LOGGING, by the worker."""
    get_queue().enqueue("paymentsapp.tasks.charge", job_id="card-42")
    out, err, code = finish(
        start_worker(payments_site, settings, "--burst", "-v", "3", logging=project_logging)
    )
    assert code == 0, err
    lines = [line.strip() for line in (out + err).splitlines()]
    # The library's record and its traceback, and the Tasks framework's failure with its own.
    assert sum("gateway refused card 42" in line for line in lines) == 1
    assert lines.count("ConnectionError: gateway down") == 1
    assert lines.count("ValueError: card declined") == 1
    assert lines.count("Traceback (most recent call last):") == 2
    assert sum("(card-42) failed in" in line for line in lines) == 1  # the worker's own line
    library = [line for line in lines if "gateway refused card 42" in line]
    assert library[0].startswith("LIB acme.payments ") == bool(project_logging)


@pytest.mark.parametrize("verbosity", [0, 1, 3])
@pytest.mark.parametrize("name", ["django.tasks", "django_tasks"])
def test_the_frameworks_lines_per_task_state_are_left_out(verbosity: int, name: str) -> None:
    """The worker's line per job says the same, with the traceback: whoever handles the
    framework's logger (Django 6's console with DEBUG on, LOGGING), and only while it runs."""
    out, project = StringIO(), StringIO()
    framework = logging.getLogger(name)
    handler = logging.StreamHandler(project)  # as LOGGING (or Django's console) would
    framework.addHandler(handler)
    try:
        with root_handlers(), worker_logging(verbosity, out):
            framework.info("Task id=%s path=%s state=%s", "j1", "shop.tasks.a", "RUNNING")
            framework.error("Task id=%s path=%s state=%s", "j1", "shop.tasks.a", "FAILED")
            framework.warning("something else of the framework's")
        framework.error("Task id=%s path=%s state=%s", "j2", "shop.tasks.a", "FAILED")
    finally:
        framework.removeHandler(handler)
    assert "state=" not in out.getvalue()
    assert project.getvalue() == (
        "something else of the framework's\nTask id=j2 path=shop.tasks.a state=FAILED\n"
    )
    assert framework.filters == []
