"""``manage.py redislock_purge``: delete every job of a queue in one state (dead, scheduled or
ready), in atomic batches, after a confirmation."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from django_redislock.management.operating import (
    add_confirmation,
    add_queue_and_state,
    audit,
    command_errors,
    confirmed,
    named_queue,
)

BATCH = 1000  # jobs deleted per atomic step, and between two progress lines


class Command(BaseCommand):
    help = (
        "Delete every job of a queue in a state (dead, scheduled or ready), after a "
        "confirmation. Running jobs are never purged: cancel them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_queue_and_state(parser, ["dead", "scheduled", "ready"], "delete")
        add_confirmation(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        state = options["state"]
        with command_errors():
            queue = named_queue(options["queue"])
            total = queue.counts()[state]
            if not total:
                self.stdout.write(f"No {state} jobs in queue {queue.name!r}.")
                return
            question = (
                f"Delete all {total} {state} job(s) of queue {queue.name!r}? This cannot be undone."
            )
            if not confirmed(self, options, question):
                return

            def progress(removed: int) -> None:
                if total > BATCH:
                    self.stdout.write(f"  {removed} of {total}…")

            removed = queue.purge(state, BATCH, progress)
        audit.info("Purged %d %s job(s) of queue %r (redislock_purge).", removed, state, queue.name)
        self.stdout.write(f"Deleted {removed} {state} job(s) of queue {queue.name!r}.")
