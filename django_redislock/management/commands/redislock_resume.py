"""``manage.py redislock_resume QUEUE [--task PATH]``: end a ``redislock_pause``."""

from __future__ import annotations

from django_redislock.management.pausing import PauseCommand


class Command(PauseCommand):
    help = (
        "Resume a queue paused by redislock_pause (or one task of it): its workers are woken "
        "at once, and the task's parked jobs are ready again."
    )
    verb = "resume"
    unchanged = "{what} was not paused."
