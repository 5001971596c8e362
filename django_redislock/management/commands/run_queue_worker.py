"""``manage.py run_queue_worker``: a thin shell over ``django_redislock.queue.worker.Worker``."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_redislock.exceptions import RedisUnavailable
from django_redislock.queue.supervisor import RECYCLE, Supervisor
from django_redislock.queue.worker import Worker

# Exit status when Redis cannot be reached at start (a supervisor may retry later).
EXIT_REDIS_UNAVAILABLE = 3


class Command(BaseCommand):
    help = "Run jobs from the django-redislock queues until stopped (SIGTERM/SIGINT drain)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue", action="append", dest="queues", metavar="Q",
            help="a queue to work on (repeat for several; default: 'default')",
        )  # fmt: skip
        parser.add_argument("--concurrency", type=int, default=1, help="jobs at once (threads)")
        parser.add_argument("--burst", action="store_true", help="exit when nothing is ready")
        parser.add_argument("--max-jobs", type=int, default=None, help="exit after N jobs")
        parser.add_argument(
            "--no-schedule", action="store_true", help="do not enqueue SCHEDULE entries"
        )
        parser.add_argument(
            "--processes", type=int, default=None, metavar="N",
            help="run N worker processes (each with --concurrency threads) under this one, "
            "which replaces any that dies",
        )  # fmt: skip
        parser.add_argument(
            "--max-jobs-per-child", type=int, default=None, metavar="N",
            help="with --processes: replace a worker process after it started N jobs",
        )  # fmt: skip
        parser.add_argument(
            "--max-memory", type=float, default=None, metavar="MB",
            help="with --processes: replace a worker process using more than MB of memory "
            "(once its running jobs finish)",
        )  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verbosity"] > 1:
            logging.getLogger("django_redislock").setLevel(logging.DEBUG)
        processes = options["processes"]
        if processes is None and (options["max_jobs_per_child"] or options["max_memory"]):
            raise CommandError("--max-jobs-per-child and --max-memory go with --processes.")
        if processes is not None and options["max_jobs"] is not None:
            raise CommandError("--max-jobs is for one process; with --processes, use "
                               "--max-jobs-per-child.")  # fmt: skip
        try:
            worker = self._worker(options, 0, options["max_jobs"])
            if processes is not None:
                supervisor = Supervisor(partial(self._child, options), processes,
                                        burst=options["burst"],
                                        max_memory=options["max_memory"])  # fmt: skip
        except (ValueError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc
        if processes is not None:
            self.stdout.write(
                f"Supervising {processes} worker processes: queues "
                f"{', '.join(q.name for q in worker.queues)}, concurrency "
                f"{worker.concurrency} each."
            )
            del worker  # made to check the options; each child makes its own
            supervisor.run()
            self.stdout.write(f"Stopped; {supervisor.started_children} worker processes ran.")
            return
        schedule = (
            f", scheduling {', '.join(e.name for e in worker.scheduler.entries)}"
            if worker.scheduler
            else ""
        )
        self.stdout.write(
            f"Worker {worker.id}: queues {', '.join(q.name for q in worker.queues)}, "
            f"concurrency {worker.concurrency}{schedule}."
        )
        try:
            worker.run()
        except RedisUnavailable as exc:
            raise CommandError(
                f"Cannot start: {exc}. Check REDISLOCK / CACHES and that Redis is running.",
                returncode=EXIT_REDIS_UNAVAILABLE,
            ) from exc
        self.stdout.write(
            f"Worker {worker.id} stopped: {worker.processed} done, {worker.failed} failed."
        )

    @staticmethod
    def _worker(
        options: dict[str, Any], index: int, max_jobs: int | None, hard_stop: bool = False
    ) -> Worker:
        if options["max_jobs_per_child"] is not None and options["max_jobs_per_child"] < 1:
            raise ValueError("--max-jobs-per-child must be 1 or more.")
        return Worker(
            options["queues"] or ["default"],
            concurrency=options["concurrency"],
            burst=options["burst"],
            max_jobs=max_jobs,
            schedule=not options["no_schedule"] and index == 0,  # one scheduler suffices
            hard_stop=hard_stop,
        )

    @classmethod
    def _child(cls, options: dict[str, Any], index: int) -> int:
        """A worker process of ``--processes``: its exit status for the supervisor."""
        worker = cls._worker(options, index, options["max_jobs_per_child"], hard_stop=True)
        worker.run()
        if worker.max_jobs is not None and worker.started_jobs >= worker.max_jobs:
            return RECYCLE
        return 0
