"""Which wake-up lists a waiter of this process blocks on directly, with a ``BLPOP`` on a
connection of its own: one waiter per list at a time. The others of that list wait through
the wake-up listener (``wakeups``), which hands each wake-up to its own addressee.

Waiters that each block on the same list pop one another's wake-ups, and pass them on in
turn: with hundreds of them in one process (an event loop's requests, a pool of threads), a
wake-up goes round until its hops run out and its addressee finds the hand-off only at its
next re-check. One direct waiter and the listener keep that to a hop at most.

A claim and its end are single dict operations (atomic, with no lock to take): the end runs
on a lock hand-off's path, right after the waiter's wake-up, where every step counts."""

from __future__ import annotations

import os
from collections.abc import Hashable

# (id of the server's client, list) -> the claim's owner (an object of its own).
_claimed: dict[Hashable, object] = {}

# ``unclaim(claim, None)`` ends a claim: a method of the dict itself, so no Python frame.
unclaim = _claimed.pop


def claim(server: object, key: str) -> Hashable | None:
    """The claim on list ``key`` of ``server`` (a client), for ``unclaim`` once the block
    ends, when no other waiter of this process blocks on it directly; else None."""
    wanted, mine = (id(server), key), object()
    return wanted if _claimed.setdefault(wanted, mine) is mine else None


def _after_fork() -> None:
    _claimed.clear()  # the parent's waiters are not the child's


os.register_at_fork(after_in_child=_after_fork)
