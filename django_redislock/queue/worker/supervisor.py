"""Process mode: ``run_queue_worker --processes N``. A parent process keeps N worker processes
running (forked children, each a ``Worker`` with its threads): it starts another when one
dies (a crash, an OOM kill; the dead one's jobs run again once their leases run out, only
the job that was running charged), recycles a child after ``max_jobs_per_child`` jobs or
above ``max_memory`` MB of resident memory (it drains, exits and is replaced), and drains
them all on SIGTERM/SIGINT (a second signal kills them at once). CPU-bound jobs then use
every core, which threads in one interpreter cannot.

POSIX only (``os.fork``). The parent holds no Redis or database connection while it forks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...exceptions import RedisUnavailable

logger = logging.getLogger("django_redislock.worker")

MAX_PROCESSES = 256
# The exit status of a child that ran its max_jobs: replaced, even in burst mode.
RECYCLE = 100
# The exit status of a child that ended itself to stop a job for sure (a hard time limit or
# a cancel the job did not heed): replaced.
HARD_STOPPED = 102
CHECK_EVERY = 0.1  # seconds between looks at the children
MEMORY_EVERY = 1.0  # seconds between memory readings
# A child that dies sooner than this after its start is crash-looping: the next one starts
# after a pause that doubles each time, up to MAX_PAUSE.
QUICK_DEATH = 2.0
MAX_PAUSE = 10.0


@dataclass
class Child:
    index: int  # its slot: 0 … processes-1 (slot 0 runs the SCHEDULE)
    pid: int
    started: float = field(default_factory=time.monotonic)
    recycling: bool = False  # sent SIGTERM to be replaced (memory), not to stop


def resident_mb(pid: int) -> float | None:
    """A process's resident memory in MB (Linux: /proc), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 1_048_576


class Supervisor:
    """Keeps ``processes`` children running ``run_child(index)``, which returns the exit
    status: 0 when it stopped as asked (or, in burst mode, found nothing to do), RECYCLE
    when it ran its share of jobs and wants a successor."""

    def __init__(
        self,
        run_child: Callable[[int], int],
        processes: int,
        *,
        burst: bool = False,
        max_memory: float | None = None,
    ) -> None:
        if (
            not isinstance(processes, int)
            or isinstance(processes, bool)
            or not (1 <= processes <= MAX_PROCESSES)
        ):
            raise ValueError(
                f"processes must be an int from 1 to {MAX_PROCESSES}, not {processes!r}."
            )
        if max_memory is not None and (
            not isinstance(max_memory, (int, float))
            or isinstance(max_memory, bool)
            or max_memory <= 0
        ):
            raise ValueError(f"max_memory must be a number of MB above 0, not {max_memory!r}.")
        self.run_child = run_child
        self.processes = processes
        self.burst = burst
        self.max_memory = max_memory
        self.children: dict[int, Child] = {}
        self.stopping = threading.Event()
        self.killing = False
        self.started_children = 0
        self._pause = 0.0
        self._memory_at = 0.0

    # --- the parent's loop ---------------------------------------------------------------

    def run(self) -> None:
        """Start the children and keep them running until a signal (or, in burst mode, until
        every child has finished)."""
        self._install_signals()
        for index in range(self.processes):
            self._start(index)
        while self.children:
            self._reap()
            if self.killing:
                self._signal_all(signal.SIGKILL)
            elif not self.stopping.is_set() and self.max_memory is not None:
                self._check_memory()
            time.sleep(CHECK_EVERY)
        logger.info("All worker processes stopped.")

    def _start(self, index: int) -> None:
        if self._pause:
            self.stopping.wait(self._pause)
            if self.stopping.is_set():
                return
        from django.db import connections

        connections.close_all()  # a child must not share the parent's database connection
        pid = os.fork()
        if pid == 0:  # the child
            status = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                # The terminal's Ctrl-C reaches every process of the group: the parent alone
                # acts on it (SIGTERM to each child), or a child would count two signals.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                status = self.run_child(index)
            except RedisUnavailable as exc:  # said in a line: the traceback tells nothing
                logger.error("Worker process %d stopped: %s.", os.getpid(), exc)
            except BaseException:
                logger.exception("Worker process %d failed.", os.getpid())
            finally:
                logging.shutdown()
                os._exit(status)
        self.children[pid] = Child(index, pid)
        self.started_children += 1
        logger.info("Worker process %d started (slot %d).", pid, index)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            lived = time.monotonic() - child.started
            if self.stopping.is_set():
                logger.info("Worker process %d stopped (%s).", pid, code)
                continue
            if code == 0 and self.burst and not child.recycling:
                logger.info("Worker process %d finished (burst).", pid)
                continue
            if code == HARD_STOPPED:
                logger.warning(
                    "Worker process %d ended itself to stop a job for sure; starting another.", pid
                )
                self._pause = 0.0
            elif code in (0, RECYCLE) or child.recycling:
                logger.info("Worker process %d recycled; starting another.", pid)
                self._pause = 0.0
            else:
                how = f"signal {-code}" if code < 0 else f"status {code}"
                logger.warning(
                    "Worker process %d died (%s) after %.1f s; starting another "
                    "(its jobs run again when their leases run out).",
                    pid,
                    how,
                    lived,
                )
                quick = lived < QUICK_DEATH
                self._pause = min(max(self._pause * 2, 0.5), MAX_PAUSE) if quick else 0.0
            self._start(child.index)

    def _check_memory(self) -> None:
        now = time.monotonic()
        if now - self._memory_at < MEMORY_EVERY:
            return
        self._memory_at = now
        for child in list(self.children.values()):
            used = resident_mb(child.pid)
            if used is not None and used > (self.max_memory or 0) and not child.recycling:
                logger.warning(
                    "Worker process %d uses %.0f MB (over %s MB): recycling it "
                    "once its running jobs finish.",
                    child.pid,
                    used,
                    self.max_memory,
                )
                child.recycling = True
                self._kill(child.pid, signal.SIGTERM)

    # --- signals -------------------------------------------------------------------------

    def _install_signals(self) -> None:
        def on_signal(signum: int, frame: Any) -> None:
            if self.stopping.is_set():
                logger.warning(
                    "Forced: killing the worker processes now; the jobs they held "
                    "run again once their leases run out."
                )
                self.killing = True
                return
            logger.warning(
                "Stopping: each worker process finishes its running jobs; Ctrl-C again to force."
            )
            self.stopping.set()
            self._signal_all(signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def _signal_all(self, signum: int) -> None:
        for pid in list(self.children):
            self._kill(pid, signum)

    @staticmethod
    def _kill(pid: int, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # gone already: reaped next
            os.kill(pid, signum)
