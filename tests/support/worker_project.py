"""A throwaway Django project on disk (settings, ``manage.py``, one app of task modules) and
``manage.py run_queue_worker`` started in it as an operator would: a real command in its own
process group, against the test's Redis settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# ``task`` from Django 6's Tasks framework, or from the backport on Django 5.2.
TASK_IMPORT = """try:
    from django.tasks import task
except ImportError:
    from django_tasks import task
"""

SETTINGS = """import json, os
from tests.settings import *  # noqa

REDISLOCK = json.loads(os.environ["REDISLOCK_TEST_SETTINGS"])
INSTALLED_APPS = [*INSTALLED_APPS, {app!r}]
DEBUG = bool(os.environ.get("REDISLOCK_TEST_DEBUG"))  # Django's console shows django.tasks
LOGGING_CONFIG = "logging.config.dictConfig"  # Django's default LOGGING, and the project's:
"""

MANAGE = """import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "talk_settings")
from django.core.management import execute_from_command_line
execute_from_command_line(sys.argv)
"""


def task_module(body: str, imports: str = "") -> str:
    """The source of a task module: ``imports``, then ``task``, then ``body``."""
    return f"{imports}{TASK_IMPORT}{body}"


# The project's own LOGGING, in use when the worker is started with ``logging=``.
PROJECT_LOGGING = """if os.environ.get("REDISLOCK_TEST_LOGGING"):
    LOGGING = {{"version": 1, "disable_existing_loggers": False, **{config!r}}}
"""


def write_project(
    root: Path,
    app: str,
    modules: dict[str, str],
    project_logging: dict[str, Any] | None = None,
) -> Path:
    """Settings (``tests.settings`` plus ``app``; ``project_logging``: the formatters,
    handlers and loggers of the project's LOGGING), ``manage.py`` and the package ``app``
    holding ``modules`` (name -> source), in ``root``."""
    settings = SETTINGS.format(app=app)
    if project_logging:
        settings += PROJECT_LOGGING.format(config=project_logging)
    (root / "talk_settings.py").write_text(settings)
    (root / "manage.py").write_text(MANAGE)
    (root / app).mkdir()
    (root / app / "__init__.py").write_text("")
    for name, source in modules.items():
        (root / app / f"{name}.py").write_text(source)
    return root


def start_worker(
    project: Path, settings: Any, *args: str, logging: str = "", debug: bool = False
) -> subprocess.Popen[str]:
    """``manage.py run_queue_worker ARGS`` in ``project``, in its own session (a terminal's
    Ctrl-C reaches the whole group: ``os.killpg``), with ``settings.REDISLOCK``.
    ``logging``, when not empty, turns on the project's LOGGING; ``debug`` sets DEBUG."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as by default
    env = {
        **environ,
        "REDISLOCK_TEST_SETTINGS": json.dumps(settings.REDISLOCK),
        "REDISLOCK_TEST_LOGGING": logging,
        "REDISLOCK_TEST_DEBUG": "1" if debug else "",
        "DJANGO_SETTINGS_MODULE": "talk_settings",
        "PYTHONPATH": os.pathsep.join([str(project), str(ROOT), *sys.path]),
    }
    return subprocess.Popen(
        [sys.executable, str(project / "manage.py"), "run_queue_worker", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(worker: subprocess.Popen[str], timeout: float = 30) -> tuple[str, str, int]:
    """The worker's stdout, stderr and exit status once it exits; killed, with its group,
    when it has not within ``timeout`` seconds."""
    try:
        out, err = worker.communicate(timeout=timeout)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate()
    return out, err, worker.returncode


@contextmanager
def worker_running(
    project: Path, settings: Any, *args: str, logging: str = "", debug: bool = False
) -> Iterator[subprocess.Popen[str]]:
    """``start_worker``, its process group killed on the way out if it is still running."""
    worker = start_worker(project, settings, *args, logging=logging, debug=debug)
    try:
        yield worker
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate()
