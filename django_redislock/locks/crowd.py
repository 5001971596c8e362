"""How many lock and semaphore waiters this process has now, which spaces out their fallback
re-checks: each costs a script call, and a thousand waiters re-checking every
``LOCK_RETRY_DELAY`` would keep one event loop (or the GIL) too busy to take the hand-offs
they wait for. Beyond ``CROWD`` waiters, the delay (and the registration that must outlive
it) grows with their number; releases still wake each waiter at once."""

from __future__ import annotations

import os
import threading

# Waiters of one process that re-check at the plain LOCK_RETRY_DELAY.
CROWD = 50

_lock = threading.Lock()
_waiting = 0


def scale() -> float:
    """How much longer than ``LOCK_RETRY_DELAY`` a waiter's fallback is now (1 or more)."""
    return max(1.0, _waiting / CROWD)


class counted:  # (lower case: used as a context manager, as a function would be)
    """Count the caller among the waiters while it waits. (A class, not a generator: it is on
    a lock hand-off's path, where a generator's resumption counts.)"""

    __slots__ = ()

    def __enter__(self) -> None:
        global _waiting
        with _lock:
            _waiting += 1

    def __exit__(self, *exc: object) -> None:
        global _waiting
        with _lock:
            _waiting -= 1


def _after_fork() -> None:
    global _lock, _waiting
    _lock = threading.Lock()
    _waiting = 0  # the parent's waiters are not the child's


os.register_at_fork(after_in_child=_after_fork)
