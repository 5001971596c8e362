"""``manage.py run_queue_worker``: a thin shell over ``queue.worker.loop.Worker``."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import autoreload

from django_redislock.exceptions import RedisUnavailable
from django_redislock.management.reloading import reloading
from django_redislock.management.worker_logging import VERBOSITY_HELP, worker_logging

from ...queue.worker.loop import Worker
from ...queue.worker.supervisor import RECYCLE, Supervisor

# Exit status when Redis cannot be reached at start (a supervisor may retry later).
EXIT_REDIS_UNAVAILABLE = 3


class Command(BaseCommand):
    help = "Run jobs from the django-redislock queues until stopped (SIGTERM/SIGINT drain)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            metavar="Q",
            help="a queue to work on (repeat for several; default: 'default')",
        )
        parser.add_argument("--concurrency", type=int, default=1, help="jobs at once (threads)")
        parser.add_argument("--burst", action="store_true", help="exit when nothing is ready")
        parser.add_argument("--max-jobs", type=int, default=None, help="exit after N jobs")
        parser.add_argument(
            "--no-schedule", action="store_true", help="do not enqueue SCHEDULE entries"
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=None,
            metavar="N",
            help="run N worker processes (each with --concurrency threads) under this one, "
            "which replaces any that dies",
        )
        parser.add_argument(
            "--max-jobs-per-child",
            type=int,
            default=None,
            metavar="N",
            help="with --processes: replace a worker process after it started N jobs",
        )
        parser.add_argument(
            "--max-memory",
            type=float,
            default=None,
            metavar="MB",
            help="with --processes: replace a worker process using more than MB of memory "
            "(once its running jobs finish)",
        )
        parser.add_argument(
            "--reload",
            action="store_true",
            help="for development: restart the worker when a Python file changes (Django's "
            "autoreloader, as runserver); Ctrl-C then stops it at once",
        )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        for action in parser._actions:  # Django's own -v, documented for what it does here
            if action.dest == "verbosity":
                action.help = VERBOSITY_HELP
        return parser

    def handle(self, *args: Any, **options: Any) -> None:
        processes = options["processes"]
        if processes is None and (options["max_jobs_per_child"] or options["max_memory"]):
            raise CommandError("--max-jobs-per-child and --max-memory go with --processes.")
        if processes is not None and options["max_jobs"] is not None:
            raise CommandError(
                "--max-jobs is for one process; with --processes, use --max-jobs-per-child."
            )
        if processes is not None and options["reload"]:
            raise CommandError(
                "--reload restarts one worker process; it does not go with --processes."
            )
        if options["reload"]:
            self._worker_or_error(options)  # a mistake is shown once, not per restart
            shown = partial(worker_logging, options["verbosity"], self.stdout)
            made = partial(self._worker_or_error, options)
            autoreload.run_with_reloader(reloading, made, self.serve, shown, self.stderr)
            return
        with worker_logging(options["verbosity"], self.stdout):
            if processes is not None:
                self._supervise(options, processes)
            else:
                self.serve(self._worker_or_error(options))

    def _worker_or_error(self, options: dict[str, Any]) -> Worker:
        try:
            return self._worker(options, 0, options["max_jobs"])
        except (ValueError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc

    def _supervise(self, options: dict[str, Any], processes: int) -> None:
        worker = self._worker_or_error(options)
        try:
            supervisor = Supervisor(
                partial(self._child, options),
                processes,
                burst=options["burst"],
                max_memory=options["max_memory"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"Supervising {processes} worker processes: queues "
            f"{', '.join(q.name for q in worker.queues)}, concurrency "
            f"{worker.concurrency} each."
        )
        del worker  # made to check the options; each child makes its own
        self.stdout.flush()  # or each child would print what it inherited unwritten
        supervisor.run()
        self.stdout.write(f"Stopped; {supervisor.started_children} worker processes ran.")

    def serve(self, worker: Worker) -> None:
        """Run ``worker`` until it stops, between its banner and its summary."""
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
