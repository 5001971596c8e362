"""The management tests' shared fixture: ``site``, a project on disk whose worker runs the
app ``reloadapp`` (its module ``tasks`` to begin with) against the real test server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.fixtures import Backend
from tests.support.worker_project import task_module, write_project

QUEUES = {
    "default": {"MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 5, "LEASE": 30},
    "mail": {"MAX_ATTEMPTS": 1},
}
VERSION = task_module(
    """from django_redislock import get_redis

@task()
def version() -> str:
    get_redis().rpush("test:versions", "v1")
    return "v1"
"""
)
PROJECT_LOGGING = {
    "formatters": {"project": {"format": "PROJECT %(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "out": {
            "class": "logging.StreamHandler",
            "formatter": "project",
            "stream": "ext://sys.stdout",
        }
    },
    "loggers": {"django_redislock": {"handlers": ["out"], "level": "INFO"}},
}


@pytest.fixture
def site(redis_backend: Backend, settings: Any, tmp_path: Path) -> Path:
    """A project (settings, manage.py, the app ``reloadapp``) in ``tmp_path``."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return write_project(tmp_path, "reloadapp", {"tasks": VERSION}, PROJECT_LOGGING)
