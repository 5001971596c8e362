"""SIGTERM and SIGINT in a worker: the first stops it taking jobs and lets the running ones
finish (the drain); a second exits at once (the jobs it held run again once their leases
run out)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("django_redislock.queue.worker")  # the name users' LOGGING knows


def install_stop_signals(
    stopping: threading.Event, running_count: Callable[[], int], stop: Callable[[], None]
) -> None:
    """Handle SIGTERM (and SIGINT, unless ignored) with ``stop``, then a forced exit; only
    from the main thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        return
    # SIGINT ignored: a process of --processes (its parent relays the terminal's Ctrl-C
    # as SIGTERM: both would count as two signals), or started in the background.
    interactive = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN

    def on_signal(signum: int, frame: Any) -> None:
        if stopping.is_set():
            # Written straight to stdout, taking no lock: logging's or the stream's may
            # be held by the very thread this handler interrupted, or by a job's thread.
            with contextlib.suppress(OSError):
                os.write(
                    1,
                    b"Forced: exiting now; the jobs it held run again once their leases run out.\n",
                )
            os._exit(128 + signum)
        running = running_count()
        if interactive:
            logger.warning("Stopping: finishing %d running job(s); Ctrl-C again to force.", running)
        else:  # its parent says how to force
            logger.info("Stopping: finishing %d running job(s).", running)
        stop()

    signal.signal(signal.SIGTERM, on_signal)
    if interactive:
        signal.signal(signal.SIGINT, on_signal)
