"""The queue worker behind ``manage.py run_queue_worker``: wires its parts and runs the loop
that starts jobs, one at a time in its main thread or several in a pool of threads, until
stopped (SIGTERM/SIGINT drain the running jobs).

Its parts, each started and stopped here: ``Heartbeat`` (the worker's entry in the
registry), ``Leases`` (fetching, leasing ahead, renewing, acknowledging, giving back),
``Runner`` (running one job as its task and recording the outcome), ``TimeLimits`` (each
job's soft time limit), ``Waiter`` (sleeping until an enqueue or the next due job) and the
``Scheduler`` (``SCHEDULE``'s ticks). Its fetches and waits go through ``Retrying`` (Redis
trouble is waited out, never the worker's end); ``install_stop_signals`` handles SIGTERM
and SIGINT.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from secrets import token_hex
from typing import Any

from ...conf import conf
from ...exceptions import JobTimeLimitExceeded
from ...redis.durability import redis_durability_warnings
from ..fetch_scripts import MAX_BATCH
from ..queue import Job, Queue, get_queue
from ..time_limits import queue_graces, queue_time_limits
from .background import Background
from .connections import close_stale_connections
from .leases import Leases
from .registry import Heartbeat
from .retrying import Retrying
from .runner import Runner
from .schedule import Scheduler
from .stop_signals import install_stop_signals
from .supervisor import HARD_STOPPED
from .time_limits import TimeLimits
from .waiter import Waiter

__all__ = ["Worker"]

logger = logging.getLogger("django_redislock.queue.worker")  # the name users' LOGGING knows

MAX_CONCURRENCY = MAX_BATCH


class Worker:
    """Works the ``queues``: ``concurrency`` jobs at once, until stopped; with ``burst``,
    until nothing is ready; with ``max_jobs``, after starting that many."""

    def __init__(
        self,
        queues: Sequence[str] = ("default",),
        *,
        concurrency: int = 1,
        burst: bool = False,
        max_jobs: int | None = None,
        schedule: bool = False,
        using: str | None = None,
        hard_stop: bool = False,
    ) -> None:
        if (
            not isinstance(concurrency, int)
            or isinstance(concurrency, bool)
            or not 1 <= concurrency <= MAX_CONCURRENCY
        ):
            raise ValueError(
                f"concurrency must be an int from 1 to {MAX_CONCURRENCY}, not {concurrency!r}."
            )
        if max_jobs is not None and (not isinstance(max_jobs, int) or max_jobs < 1):
            raise ValueError(f"max_jobs must be an int >= 1, not {max_jobs!r}.")
        self.queues: list[Queue] = [get_queue(name, using) for name in queues]
        if not self.queues:
            raise ValueError("queues must name at least one queue.")
        if len({queue.name for queue in self.queues}) < len(self.queues):
            raise ValueError("queues names a queue twice.")
        self.concurrency = concurrency
        self.burst = burst
        self.max_jobs = max_jobs
        self.id = f"{socket.gethostname()}:{os.getpid()}:{token_hex(3)}"
        self.client = self.queues[0].client
        self.stopping = threading.Event()
        self.started_jobs = 0
        self.started_at = time.time()
        self.guard = Retrying(self.stopping)  # a failed fetch or wait: backed off, retried
        lease = min(q.lease for q in self.queues)
        beat = min(5.0, lease / 3)
        inline = concurrency == 1
        self.leases = Leases(
            self.queues, self.id, one_at_a_time=inline, renew_every=beat, stopping=self.stopping
        )
        # A job still running its queue's TIME_LIMIT_GRACE after its limit or its cancel:
        # its lease lapses; in process mode (hard_stop), this process ends, and the
        # supervisor replaces it.
        overdue = self._hard_stop if hard_stop else self.leases.stop_renewing
        self.limits = TimeLimits(queue_time_limits(self.queues), overdue, queue_graces(self.queues))
        self.leases.on_cancel = self.limits.cancel  # queue.cancel() of a running job
        self.runner = Runner(self.leases, patience=lease, inline=inline, limits=self.limits)
        self.waiter = Waiter(self.client, [queue.keys.wake for queue in self.queues])
        self.tracker = Heartbeat(self.client, self.id, beat, self.describe)
        # Every worker started with schedule=True also enqueues the SCHEDULE's ticks.
        self.scheduler = Scheduler(using) if schedule and conf.SCHEDULE else None

    @property
    def processed(self) -> int:
        return self.runner.processed

    @property
    def failed(self) -> int:
        return self.runner.failed

    def describe(self) -> dict[str, Any]:
        """The worker as its registry entry shows it."""
        return {
            "id": self.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": [q.name for q in self.queues],
            "started": self.started_at,
            "jobs": self.leases.running_ids(),
            "processed": self.processed,
            "failed": self.failed,
            "concurrency": self.concurrency,
        }

    def _hard_stop(self, queue: Queue, job: Job) -> None:
        """Stop ``job`` for sure (process mode): record its attempt as failed (a cancelled
        one ends dead as such), then end this process; the supervisor starts another. The
        other jobs running here run again when their leases run out."""
        grace = self.limits.graces.get(queue.name, 0.0)
        message = (
            f"Job {job.id} ({job.task}) in {queue.name!r} was stopped for sure: its "
            f"worker process {os.getpid()} was ended {grace:g} s after its time limit "
            "or its cancel, which it did not heed."
        )
        logger.error("%s", message)
        try:
            queue.fail(job, JobTimeLimitExceeded(message))
        except Exception:
            logger.exception("Could not record the stop of job %s.", job.id)
        finally:
            logging.shutdown()
            os._exit(HARD_STOPPED)

    def heartbeat(self) -> None:
        """Renew the leases held and write the registry entry, now."""
        self.leases.renewal.renew()  # the jobs running and those leased ahead, now
        self.tracker.beat()

    # --- life cycle -------------------------------------------------------------------

    def run(self) -> None:
        """Work until stopped (or, with ``burst``, until nothing is ready). Raises
        RedisUnavailable when Redis cannot be reached at start."""
        self.tracker.start()  # fails fast, and clearly, when Redis is unreachable
        scheduling = None
        try:
            for warning in redis_durability_warnings(self.client):  # eviction, no persistence
                logger.warning("%s (%s) %s", warning.msg, warning.id, warning.hint or "")
            install_stop_signals(self.stopping, self.leases.running_count, self.stop)
            self.leases.start()
            self.limits.start()
            if self.scheduler is not None:
                scheduling = Background(
                    "redislock-schedule", self.scheduler.run, stopped=self.stopping
                )
                scheduling.start()
            if self.concurrency == 1:
                self._work_inline()
            else:
                self._work_pooled()
        finally:
            self.stopping.set()
            if scheduling is not None:
                scheduling.stop()
            self.limits.stop()
            self.leases.stop()
            self.waiter.stop()
            self.tracker.stop()

    def _work_inline(self) -> None:
        """One job at a time, in this thread, leasing ahead while jobs are quick."""
        leases = self.leases
        while not self._done():
            item = leases.next()
            if item is None:
                wait = self.guard.attempt(leases.fetch_ahead, self._budget())
                if wait is False:
                    continue  # failed, and waited out the backoff
                if not leases.has_ahead():
                    if wait != 0 and self.guard.attempt(leases.settle) is True:
                        continue  # its ends may have let parked jobs go: fetch again
                    if self.burst and wait != 0:
                        break
                    close_stale_connections()  # as after a request: none kept open idle
                    self.guard.attempt(self.waiter.wait_for, wait)
                continue
            self.guard.attempt(leases.send_ahead, self._budget())
            self.started_jobs += 1
            leases.ran(self.runner.run(*item))

    def _work_pooled(self) -> None:
        """``concurrency`` jobs at once, in threads."""
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="redislock-job") as pool:

            def launch(queue: Queue, job: Job) -> None:
                self.started_jobs += 1
                pool.submit(self.runner.run, queue, job)

            while not self._done():
                free = self.leases.free_slots(self.concurrency)
                budget = self._budget()
                free = max(0, free if budget is None else min(free, budget))
                if free == 0 or self.stopping.is_set():
                    continue
                quiet = not self.leases.running_count()  # (then a "nothing ready" is final)
                found = self.guard.attempt(self.leases.fetch, free, launch)
                if found is False:
                    continue
                started, wait = found
                if not started:
                    if self.burst and wait != 0 and not self.leases.running_count():
                        # A job that ended as this fetched may have let parked jobs go.
                        if self.guard.attempt(self.leases.settle) is True or not quiet:
                            continue  # fetch again
                        break
                    self.guard.attempt(self.waiter.wait_for, wait)
            # leaving the block waits for the running jobs: the drain

    def _budget(self) -> int | None:
        """How many more jobs may start (``max_jobs``); None: no limit."""
        return None if self.max_jobs is None else self.max_jobs - self.started_jobs

    def _done(self) -> bool:
        return self.stopping.is_set() or (
            self.max_jobs is not None and self.started_jobs >= self.max_jobs
        )

    def stop(self) -> None:
        self.stopping.set()
        self.waiter.interrupt()
        self.leases.wake()  # never blocks a signal handler
