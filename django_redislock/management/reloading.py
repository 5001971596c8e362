"""``run_queue_worker --reload``: the worker in the process that Django's autoreloader
restarts when a Python file changes (as ``runserver``'s).

The autoreloader runs the worker in a thread and, on a change, ends the process with status
3 for its parent to start another. Before it ends, the worker stops as on SIGTERM: it gives
back the jobs it leased ahead and leaves the registry, so that the next process runs them
at once rather than after their leases. A worker that ends by itself (``--burst``,
``--max-jobs``, Redis unreachable) ends the process, and the parent, as without ``--reload``.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from django.core.management.base import CommandError

if TYPE_CHECKING:
    from ..queue.worker.loop import Worker

logger = logging.getLogger("django_redislock.worker")

# Seconds a restart waits for the running jobs; a longer one runs again after its lease.
RELOAD_GRACE = 10.0
# The exit status by which a process asks the autoreloader to start the next one.
RESTART = 3


def reloading(
    make: Callable[[], Worker],
    serve: Callable[[Worker], None],
    logs: Callable[[], AbstractContextManager[None]],
    stderr: Any,
) -> None:
    """Make a worker and ``serve`` it, within ``logs``, until it ends by itself (then end
    this process with the command's status) or the autoreloader ends the process (then stop
    it first)."""
    with logs():  # in this thread: the main one leaves the command when the process ends
        status, restarting = _serve(make, serve, stderr)
    if restarting:
        return  # the autoreloader's exit goes on: the next process starts
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # 3 (Redis unreachable at start) would ask the autoreloader for another process.
    os._exit(1 if status == RESTART else status)


def _serve(
    make: Callable[[], Worker], serve: Callable[[Worker], None], stderr: Any
) -> tuple[int, bool]:
    status = 0
    restarting = threading.Event()
    try:
        worker = make()
        stopped = threading.Event()

        def stop_first() -> None:
            if stopped.is_set():
                return
            restarting.set()
            # a changed file (the next process starts once this one ended), or Ctrl-C
            logger.info(
                "Stopping worker %s: finishing %d running job(s), for at most %g s.",
                worker.id,
                worker.leases.running_count(),
                RELOAD_GRACE,
            )
            worker.stop()
            if not stopped.wait(RELOAD_GRACE):
                logger.warning(
                    "Not waiting longer: the running jobs run again once their leases run out."
                )

        atexit.register(stop_first)
        try:
            serve(worker)
        finally:
            stopped.set()
            atexit.unregister(stop_first)
    except CommandError as exc:
        stderr.write(f"CommandError: {exc}")
        status = exc.returncode
    except Exception:
        logger.exception("The worker failed.")
        status = 1
    return status, restarting.is_set()
