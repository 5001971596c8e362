"""The admin's force-release actions on a lock, a read-write lock and a semaphore (see
``actions``): one ``Releasable`` per kind says what confirming will do and how to force the
release; the three actions are made alike from them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import DELETION

from ..locks.listing import describe_lock
from ..locks.lock import Lock
from ..locks.read_write import ReadWriteLock
from ..semaphores.semaphore import Semaphore
from ..templatetags.redislock_admin import duration
from .actions import RELEASE, Action, Gone


@dataclass(frozen=True)
class Releasable:
    """A kind of thing the admin force-releases, named ``name``."""

    noun: str  # as the admin log names one: "lock {name}"
    describe: Callable[[str], dict[str, Any]]  # the confirmation's context; Gone if not held
    force_release: Callable[[str], bool]  # False: nothing was held
    not_held: str  # what perform says when nothing was held
    released: str  # what perform says when it was


def _describe_lock(name: str) -> dict[str, Any]:
    lock = describe_lock(name)
    if lock is None:
        raise Gone(f"Lock “{name}” is not held any more.")
    waiters = f"; {lock.waiters} waiting, the first gets it at once" if lock.waiters else ""
    return {
        "summary": (
            f"Force-release lock “{lock.name}”, held by {lock.host} (pid {lock.pid}) for "
            f"{duration(lock.held_for)}, {duration(lock.ttl)} before it expires{waiters}."
        ),
        "warning": (
            "Its holder is not told: if it is still working, it carries on while another "
            "process holds the lock. Release only a lock whose holder is stuck or gone."
        ),
        "lock": lock,
    }


def _describe_read_write(name: str) -> dict[str, Any]:
    lock = describe_lock(name, read_write=True)
    if lock is None:
        raise Gone(f"Read-write lock “{name}” is not held any more.")
    if lock.writer:
        held = f"written by {lock.host} (pid {lock.pid}) for {duration(lock.held_for)}"
    else:
        held = f"read by {lock.readers} reader{'s' if lock.readers != 1 else ''}"
    waiters = f"; {lock.waiters} waiting get it at once" if lock.waiters else ""
    return {
        "summary": f"Force-release read-write lock “{lock.name}”, {held}{waiters}.",
        "warning": (
            "Its holders are not told: any still working carry on beside the processes "
            "that get it. Release only a lock whose holders are stuck or gone."
        ),
        "lock": lock,
    }


def _describe_semaphore(name: str) -> dict[str, Any]:
    state = Semaphore(name, limit=1).state()
    if not state.held:
        raise Gone(f"Semaphore “{name}” has no permit held any more.")
    limit = f" of {state.limit}" if state.limit else ""
    waiters = f"; {state.waiters} waiting get them at once" if state.waiters else ""
    return {
        "summary": (
            f"Force-release every permit of semaphore “{name}”: {state.held}{limit} held{waiters}."
        ),
        "warning": (
            "Their holders are not told: any still working carry on beside the processes "
            "that get the permits. Release only when holders are stuck or gone."
        ),
        "semaphore": True,
    }


# Each force-release action's name, and the kind it releases.
RELEASABLE = {
    "release": Releasable(
        "lock",
        _describe_lock,
        Lock.force_release,
        "Lock “{name}” was not held any more; nothing was done.",
        "Lock “{name}” was force-released.",
    ),
    "release_read_write": Releasable(
        "read-write lock",
        _describe_read_write,
        ReadWriteLock.force_release,
        "Read-write lock “{name}” was not held any more; nothing was done.",
        "Read-write lock “{name}” was force-released.",
    ),
    "release_semaphore": Releasable(
        "semaphore",
        _describe_semaphore,
        Semaphore.force_release,
        "Semaphore “{name}” had no permit held any more; nothing was done.",
        "Every permit of semaphore “{name}” was force-released.",
    ),
}


def release_action(kind: Releasable) -> Action:
    """The admin action that force-releases a thing of ``kind``, named by the request's
    ``name`` field."""

    def describe(t: Mapping[str, str]) -> dict[str, Any]:
        return kind.describe(t["name"])

    def perform(t: Mapping[str, str]) -> str:
        name = t["name"]
        if not kind.force_release(name):
            raise Gone(kind.not_held.format(name=name))
        return kind.released.format(name=name)

    def logged_as(t: Mapping[str, str]) -> tuple[str, str]:
        return t["name"], f"{kind.noun} {t['name']}"

    return Action("Force release", RELEASE, DELETION, ("name",), describe, perform, logged_as)


ACTIONS = {action: release_action(kind) for action, kind in RELEASABLE.items()}
