"""``manage.py redislock_requeue``: run dead (or scheduled) jobs of a queue now; a dead
job's attempts start again from zero."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_redislock.exceptions import JobNotFound
from django_redislock.management.operating import (
    add_confirmation,
    add_queue_and_state,
    audit,
    command_errors,
    confirmed,
    named_queue,
)

from ...queue.queue import Queue

BATCH = 500  # jobs read per page, and between two progress lines


class Command(BaseCommand):
    help = (
        "Requeue the jobs of a queue in a state (dead by default, or scheduled) to run now: "
        "those named by --id, or all of them (after a confirmation)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_queue_and_state(parser, ["dead", "scheduled"], "requeue", default="dead")
        parser.add_argument(
            "--id",
            action="append",
            dest="ids",
            metavar="ID",
            help="only this job (repeat for several; an id that starts with '-' as "
            "--id=-abc); default: every job in the state",
        )
        add_confirmation(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        state = options["state"]
        with command_errors():
            queue = named_queue(options["queue"])
            if options["ids"]:
                self._named(queue, state, options["ids"])
                return
            total = queue.counts()[state]
            if not total:
                self.stdout.write(f"No {state} jobs in queue {queue.name!r}.")
                return
            question = f"Requeue all {total} {state} job(s) of queue {queue.name!r} to run now?"
            if confirmed(self, options, question):
                self._all(queue, state, total)

    def _named(self, queue: Queue, state: str, ids: list[str]) -> None:
        missed = 0
        for job_id in dict.fromkeys(ids):
            try:
                found = queue.get(job_id).state
            except JobNotFound:
                found = "missing"
            if found == state and queue.requeue(job_id):
                self.stdout.write(f"Requeued {job_id}.")
                continue
            missed += 1
            now = found if found != state else "gone meanwhile"
            self.stderr.write(f"Not requeued {job_id}: not {state} ({now}).")
        requeued = len(set(ids)) - missed
        audit.info(
            "Requeued %d %s job(s) of queue %r (redislock_requeue).", requeued, state, queue.name
        )
        if missed:
            raise CommandError(f"{missed} of {len(set(ids))} job(s) not requeued.")

    def _all(self, queue: Queue, state: str, total: int) -> None:
        """Requeue the ``total`` jobs there were in ``state`` (not those arriving since), a
        page at a time. A job that cannot be requeued (damaged, or changed meanwhile) is
        tried once, and stepped over when it stays."""
        seen: set[str] = set()
        requeued = offset = 0
        while len(seen) < total:
            page = queue.jobs(state, offset, BATCH)
            fresh = [job.id for job in page if job.id not in seen][: total - len(seen)]
            if not fresh:
                if len(page) < BATCH:
                    break
                offset += len(page)  # jobs tried already, that stayed
                continue
            seen.update(fresh)
            if state == "dead":  # one script per page, as the admin's "retry all"
                requeued += queue.retry_dead(fresh)
            else:
                requeued += sum(queue.requeue(job_id) for job_id in fresh)
            if total > BATCH:
                self.stdout.write(f"  {len(seen)} of {total}…")
        audit.info(
            "Requeued %d %s job(s) of queue %r (redislock_requeue).", requeued, state, queue.name
        )
        self.stdout.write(f"Requeued {requeued} {state} job(s) of queue {queue.name!r}.")
        if len(seen) > requeued:
            self.stdout.write(f"{len(seen) - requeued} could not be (they changed meanwhile).")
