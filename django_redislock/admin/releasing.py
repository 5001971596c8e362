"""The admin's force-release actions on a lock, a read-write lock and a semaphore (see
``actions``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.admin.models import DELETION

from ..locks.listing import describe_lock
from ..locks.lock import Lock
from ..locks.read_write import ReadWriteLock
from ..semaphores.semaphore import Semaphore
from ..templatetags.redislock_admin import duration
from .actions import RELEASE, Action, Gone


def _describe_release(t: Mapping[str, str]) -> dict[str, Any]:
    lock = describe_lock(t["name"])
    if lock is None:
        raise Gone(f"Lock “{t['name']}” is not held any more.")
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


def _release(t: Mapping[str, str]) -> str:
    if not Lock.force_release(t["name"]):
        raise Gone(f"Lock “{t['name']}” was not held any more; nothing was done.")
    return f"Lock “{t['name']}” was force-released."


def _describe_release_read_write(t: Mapping[str, str]) -> dict[str, Any]:
    lock = describe_lock(t["name"], read_write=True)
    if lock is None:
        raise Gone(f"Read-write lock “{t['name']}” is not held any more.")
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


def _release_read_write(t: Mapping[str, str]) -> str:
    if not ReadWriteLock.force_release(t["name"]):
        raise Gone(f"Read-write lock “{t['name']}” was not held any more; nothing was done.")
    return f"Read-write lock “{t['name']}” was force-released."


def _describe_release_semaphore(t: Mapping[str, str]) -> dict[str, Any]:
    state = Semaphore(t["name"], limit=1).state()
    if not state.held:
        raise Gone(f"Semaphore “{t['name']}” has no permit held any more.")
    limit = f" of {state.limit}" if state.limit else ""
    waiters = f"; {state.waiters} waiting get them at once" if state.waiters else ""
    return {
        "summary": (
            f"Force-release every permit of semaphore “{t['name']}”: {state.held}{limit} "
            f"held{waiters}."
        ),
        "warning": (
            "Their holders are not told: any still working carry on beside the processes "
            "that get the permits. Release only when holders are stuck or gone."
        ),
        "semaphore": True,
    }


def _release_semaphore(t: Mapping[str, str]) -> str:
    if not Semaphore.force_release(t["name"]):
        raise Gone(f"Semaphore “{t['name']}” had no permit held any more; nothing was done.")
    return f"Every permit of semaphore “{t['name']}” was force-released."


def _as_lock(t: Mapping[str, str]) -> tuple[str, str]:
    return t["name"], f"lock {t['name']}"


def _as_read_write(t: Mapping[str, str]) -> tuple[str, str]:
    return t["name"], f"read-write lock {t['name']}"


def _as_semaphore(t: Mapping[str, str]) -> tuple[str, str]:
    return t["name"], f"semaphore {t['name']}"


ACTIONS = {
    "release": Action(
        "Force release", RELEASE, DELETION, ("name",), _describe_release, _release, _as_lock
    ),
    "release_read_write": Action(
        "Force release",
        RELEASE,
        DELETION,
        ("name",),
        _describe_release_read_write,
        _release_read_write,
        _as_read_write,
    ),
    "release_semaphore": Action(
        "Force release",
        RELEASE,
        DELETION,
        ("name",),
        _describe_release_semaphore,
        _release_semaphore,
        _as_semaphore,
    ),
}
