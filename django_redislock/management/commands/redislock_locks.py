"""``manage.py redislock_locks``: the held locks (all, soonest to expire first, or those
whose name starts with ``--prefix``, by name), as the admin's Locks page shows them."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_redislock.locks.listing import LockInfo, list_locks
from django_redislock.management.operating import command_errors, seconds

MAX_LIMIT = 10_000


class Command(BaseCommand):
    help = (
        "List the held locks: name, owner (host and pid), held for, TTL left, fence and "
        "waiters. Free one with redislock_force_release."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--prefix", default="", help="only locks whose name starts so")
        parser.add_argument(
            "--limit", type=int, default=100, help=f"show at most N (1 to {MAX_LIMIT})"
        )
        parser.add_argument("--offset", type=int, default=0, help="skip the first N")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        limit, offset = options["limit"], options["offset"]
        if not 1 <= limit <= MAX_LIMIT or offset < 0:
            raise CommandError(f"--limit must be 1 to {MAX_LIMIT} and --offset 0 or more.")
        with command_errors():
            page = list_locks(options["prefix"], offset=offset, limit=limit)
        if options["json"]:
            locks = [_as_json(lock) for lock in page.locks]
            self.stdout.write(json.dumps({"total": page.total, "locks": locks}, indent=2))
            return
        if not page.locks:
            under = f" whose name starts with {options['prefix']!r}" if options["prefix"] else ""
            if page.total:
                self.stdout.write(f"No locks{under} past {offset}: {page.total} in all.")
            else:
                self.stdout.write(f"No locks{under} held.")
            return
        width = max(len("name"), *(len(lock.name) for lock in page.locks))
        self.stdout.write(
            f"{'name':<{width}}  {'owner':<24} {'held for':>9} {'ttl':>9} "
            f"{'fence':>16} {'waiters':>7}"
        )
        for lock in page.locks:
            owner = f"{lock.host} pid {lock.pid}"
            if lock.read_write:  # its writer, or how many read it
                owner = f"writer {owner}" if lock.writer else f"{lock.readers} reader(s)"
            self.stdout.write(
                f"{lock.name:<{width}}  {owner:<24} {seconds(lock.held_for):>9} "
                f"{seconds(lock.ttl):>9} {lock.fence or '-':>16} {lock.waiters:>7}"
            )
        shown = f"{offset + 1}-{offset + len(page.locks)}"
        more = " (--offset for more)" if offset + len(page.locks) < page.total else ""
        self.stdout.write(f"\nLocks {shown} of {page.total}{more}.")


def _as_json(lock: LockInfo) -> dict[str, Any]:
    return {
        "name": lock.name,
        "host": lock.host,
        "pid": lock.pid,
        "acquired_at": lock.acquired_at.isoformat(),
        "held_for": round(lock.held_for, 3),
        "ttl": lock.ttl,
        "fence": lock.fence,
        "waiters": lock.waiters,
        "readers": lock.readers,  # a read-write lock's; null for a plain lock
    }
