"""How many lock and semaphore waiters this process has now, which spaces out their fallback
re-checks: each costs a script call, and a thousand waiters re-checking every
``LOCK_RETRY_DELAY`` would keep one event loop (or the GIL) too busy to take the hand-offs
they wait for. Beyond ``CROWD`` waiters, the delay (and the registration that must outlive
it) grows with their number; releases still wake each waiter at once."""

from __future__ import annotations

import os

# Waiters of one process that re-check at the plain LOCK_RETRY_DELAY.
CROWD = 50

# One item per waiter of this process: a waiter appends one as it starts waiting and pops
# one when it stops. Both are single list operations (atomic, with no lock to take), and
# the pop runs on a lock hand-off's path, right after the waiter's wake-up.
waiting: list[None] = []


def scale() -> float:
    """How much longer than ``LOCK_RETRY_DELAY`` a waiter's fallback is now (1 or more)."""
    return max(1.0, len(waiting) / CROWD)


def _after_fork() -> None:
    waiting.clear()  # the parent's waiters are not the child's


os.register_at_fork(after_in_child=_after_fork)
