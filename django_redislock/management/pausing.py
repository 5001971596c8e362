"""What ``redislock_pause`` and ``redislock_resume`` share: a queue, ``--task``, and the
change logged on ``django_redislock.admin`` beside the admin's."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from .operating import audit, command_errors, named_queue


class PauseCommand(BaseCommand):
    verb = ""  # "pause" or "resume": the Queue method called
    unchanged = ""  # said when it changed nothing: "{what} ... already"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="the queue's name in REDISLOCK['QUEUES']")
        parser.add_argument("--task", metavar="PATH", help="only this task's jobs (a dotted path)")

    def handle(self, *args: Any, **options: Any) -> None:
        task = options["task"]
        what = f"task {task} of queue" if task else "queue"
        with command_errors():
            queue = named_queue(options["queue"])
            if self.verb == "pause":
                changed = queue.pause(task, by=f"redislock_{self.verb}")
            else:
                changed = queue.resume(task)
        if not changed:
            self.stdout.write(self.unchanged.format(what=f"The {what} {queue.name!r}"))
            return
        done = f"{self.verb.capitalize()}d"
        audit.info("%s %s %r (redislock_%s).", done, what, queue.name, self.verb)
        self.stdout.write(f"{done} the {what} {queue.name!r}.")
