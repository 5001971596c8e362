"""``manage.py redislock_force_release NAME``: free a lock whoever holds it (an operator's
escape hatch, as the admin's "force release"), after showing who holds it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from django_redislock.locks.listing import describe_lock
from django_redislock.locks.lock import Lock
from django_redislock.management.operating import (
    add_confirmation,
    audit,
    command_errors,
    confirmed,
    seconds,
)
from django_redislock.names import validate_name


class Command(BaseCommand):
    help = (
        "Free a lock whoever holds it; its next waiter gets it at once. Its holder is not "
        "told: use it for a holder that is stuck or gone."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the lock's name")
        add_confirmation(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"]
        with command_errors():
            validate_name(name)
            held = describe_lock(name)
            if held is None:
                self.stdout.write(f"Lock {name!r} is not held; nothing to release.")
                return
            self.stdout.write(
                f"Lock {name!r}: held by {held.host} pid {held.pid} for "
                f"{seconds(held.held_for)}, {seconds(held.ttl)} left, fence "
                f"{held.fence or '-'}, {held.waiters} waiter(s)."
            )
            question = f"Force-release lock {name!r} while its holder may still be at work?"
            if not confirmed(self, options, question):
                return
            released = Lock.force_release(name)
        if not released:
            self.stdout.write(f"Lock {name!r} was released meanwhile; nothing to do.")
            return
        audit.info("Force-released lock %r (redislock_force_release).", name)
        self.stdout.write(f"Released lock {name!r}.")
