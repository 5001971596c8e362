"""``manage.py redislock_pause QUEUE [--task PATH]``: start nothing more of a queue (or of
one task of it) until ``redislock_resume``."""

from __future__ import annotations

from django_redislock.management.pausing import PauseCommand


class Command(PauseCommand):
    help = (
        "Pause a queue (or only the jobs of one task): enqueues are accepted and running "
        "jobs finish, but nothing more starts until redislock_resume. The pause lives in "
        "Redis: workers started meanwhile keep it."
    )
    verb = "pause"
    unchanged = "{what} was paused already."
