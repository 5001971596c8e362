"""``manage.py redislock_force_release NAME [--read-write]``: free a lock (or the
``ReadWriteLock`` of that name) whoever holds it (an operator's escape hatch, as the admin's
"force release"), after showing who holds it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from django_redislock.locks.listing import describe_lock
from django_redislock.locks.lock import Lock
from django_redislock.locks.read_write import ReadWriteLock
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
        parser.add_argument(
            "--read-write",
            action="store_true",
            help="the ReadWriteLock of that name (its readers and writer), not the Lock",
        )
        add_confirmation(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        name, read_write = options["name"], options["read_write"]
        kind = "read-write lock" if read_write else "lock"
        title = kind[0].upper() + kind[1:]
        with command_errors():
            validate_name(name)
            held = describe_lock(name, read_write=read_write)
            if held is None:
                self.stdout.write(f"{title} {name!r} is not held; nothing to release.")
                return
            if held.read_write and not held.writer:
                holder = f"read by {held.readers} reader(s), {seconds(held.ttl)} left"
            else:
                holder = (
                    f"held by {held.host} pid {held.pid} for {seconds(held.held_for)}, "
                    f"{seconds(held.ttl)} left, fence {held.fence or '-'}"
                )
            self.stdout.write(f"{title} {name!r}: {holder}, {held.waiters} waiter(s).")
            question = f"Force-release {kind} {name!r} while its holder may still be at work?"
            if not confirmed(self, options, question):
                return
            released = (ReadWriteLock if read_write else Lock).force_release(name)
        if not released:
            self.stdout.write(f"{title} {name!r} was released meanwhile; nothing to do.")
            return
        audit.info("Force-released %s %r (redislock_force_release).", kind, name)
        self.stdout.write(f"Released {kind} {name!r}.")
