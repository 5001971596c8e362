"""``manage.py run_queue_worker``: a thin shell over ``django_redislock.queue.worker.Worker``."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_redislock.exceptions import RedisUnavailable
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

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verbosity"] > 1:
            logging.getLogger("django_redislock").setLevel(logging.DEBUG)
        try:
            worker = Worker(
                options["queues"] or ["default"],
                concurrency=options["concurrency"],
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                schedule=not options["no_schedule"],
            )
        except (ValueError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc
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
