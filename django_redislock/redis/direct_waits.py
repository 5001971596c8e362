"""Which wake-up lists a waiter of this process blocks on directly, with a ``BLPOP`` on a
connection of its own: one waiter per list at a time. The others of that list wait through
the wake-up listener (``wakeups``), which hands each wake-up to its own addressee.

Waiters that each block on the same list pop one another's wake-ups, and pass them on in
turn: with hundreds of them in one process (an event loop's requests, a pool of threads), a
wake-up goes round until its hops run out and its addressee finds the hand-off only at its
next re-check. One direct waiter and the listener keep that to a hop at most."""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable

_lock = threading.Lock()
_claimed: set[Hashable] = set()


class direct_wait:  # (lower case: used as a context manager, as a function would be)
    """Whether the caller may block on list ``key`` of ``server`` (a client) directly: True
    when no other waiter of this process does; the claim ends with the block. (A class, not
    a generator: it is on a lock hand-off's path, where a generator's resumption counts.)"""

    __slots__ = ("claim", "claimed")

    def __init__(self, server: object, key: str) -> None:
        self.claim = (id(server), key)

    def __enter__(self) -> bool:
        with _lock:
            self.claimed = self.claim not in _claimed
            if self.claimed:
                _claimed.add(self.claim)
        return self.claimed

    def __exit__(self, *exc: object) -> None:
        if self.claimed:
            with _lock:
                _claimed.discard(self.claim)


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's waiters are not the child's
    _claimed.clear()


os.register_at_fork(after_in_child=_after_fork)
