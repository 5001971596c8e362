"""One background thread per process keeps every ``auto_renew`` lock alive: at a third of
each lock's TTL it extends all the locks due, in one pipeline per Redis client.

It renews a hold only while somebody can still release it: its owner (the thread, or the
asyncio task, that acquired it) is alive and, unless the lock is reentrant, its ``Lock``
object still exists. A hold abandoned so is no longer renewed, and ends within its TTL."""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Protocol

from ..redis.clients import UNAVAILABLE
from ..signals import lock_abandoned

logger = logging.getLogger(__name__)


class RenewedHold(Protocol):
    """One owner's hold the renewer keeps alive; flagged ``lost`` when it is given up."""

    lost: bool


class Renewable(Protocol):
    """Something renewable (a lock, a semaphore): the command that extends one of its holds,
    the client to send it over, and what to do when a hold turns out lost."""

    name: str
    reentrant: bool
    lock_ttl: float

    @property
    def renew_client(self) -> Any: ...

    def renewal(self, hold: Any, now: int) -> tuple[Any, ...]: ...

    def lost(self, hold: Any, where: str) -> None: ...


class _Entry:
    """A hold to renew, and what tells whether anybody can still release it."""

    __slots__ = ("cls", "hold", "lock", "name", "owner")

    def __init__(self, lock: Renewable, hold: RenewedHold, owner: Any) -> None:
        self.hold = hold
        self.name = lock.name
        self.cls = type(lock)
        # A reentrant hold belongs to its thread (any instance there releases it), so it keeps
        # its instance; any other hold dies with its instance, which alone could release it.
        self.lock: Callable[[], Renewable | None] = (
            (lambda: lock) if lock.reentrant else weakref.ref(lock)
        )
        self.owner = weakref.ref(owner)

    def abandoned(self) -> str | None:
        """Why nobody can release this hold any more, or None while somebody can."""
        if self.lock() is None:
            return "its Lock object was garbage-collected without a release"
        owner = self.owner()
        if owner is None:
            return "its owner is gone"
        try:
            if isinstance(owner, threading.Thread):
                return None if owner.is_alive() else f"its thread {owner.name!r} ended"
            return f"its asyncio task {owner.get_name()!r} ended" if owner.done() else None
        except Exception:  # e.g. a dummy thread (not started by threading) that cannot tell
            return None


class Renewer:
    LINGER = 5.0  # seconds the thread waits, with nothing to renew, before it ends

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._due: dict[int, float] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        # When the thread, asleep, wakes by itself: a hold due earlier must wake it. (Waking
        # it for every hold would cost a thread switch per short-lived hold: a claim per
        # request, say.)
        self._wakes_at = float("inf")

    def add(self, lock: Renewable, hold: RenewedHold, owner: Any) -> None:
        """Keep ``hold`` alive while ``owner`` (a Thread, or an asyncio Task) is alive and,
        unless ``lock`` is reentrant, ``lock`` exists."""
        with self._cond:
            self._entries[id(hold)] = _Entry(lock, hold, owner)
            due = self._due[id(hold)] = time.monotonic() + lock.lock_ttl / 3
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="django-redislock-renewer", daemon=True
                )
                self._thread.start()
            if due < self._wakes_at:
                self._cond.notify()

    def discard(self, hold: RenewedHold) -> None:
        with self._cond:
            self._entries.pop(id(hold), None)
            self._due.pop(id(hold), None)

    def _run(self) -> None:
        while self._wait_until_due():
            self._round()

    def _wait_until_due(self) -> bool:
        """Sleep until a hold is due; False (the thread ends) when none is left for
        ``LINGER`` seconds (so that holds added one after another, a claim per request,
        say, do not start a thread each)."""
        with self._cond:
            while True:
                now = time.monotonic()
                if not self._due:
                    self._wakes_at = now + self.LINGER
                    self._cond.wait(self.LINGER)
                    if not self._due:
                        self._thread = None
                        self._wakes_at = float("inf")
                        return False
                    continue
                self._wakes_at = min(self._due.values())
                if self._wakes_at <= now:
                    return True
                self._cond.wait(self._wakes_at - now)

    def _round(self) -> None:
        # A method of its own so that no local outlives the round: a Lock object must not be
        # kept alive by the renewer while it sleeps.
        with self._cond:
            batch, abandoned = self._take_due(time.monotonic())
        try:
            for entry, reason in abandoned:
                self._abandon(entry, reason)
            self._renew(batch)
        except Exception:
            # The thread must outlive any failure, or every auto-renew lock would expire.
            logger.exception("Renewing %d lock(s) failed; retrying in a second.", len(batch))
            with self._cond:
                for _, hold in batch:
                    if id(hold) in self._due:
                        self._due[id(hold)] = time.monotonic() + 1.0

    def _take_due(
        self, now: float
    ) -> tuple[list[tuple[Renewable, RenewedHold]], list[tuple[_Entry, str]]]:
        """The due holds to renew, and the due ones nobody can release any more (dropped)."""
        batch, abandoned = [], []
        for key in [k for k, due in self._due.items() if due <= now]:
            entry = self._entries[key]
            lock = entry.lock()  # kept alive until it is renewed
            reason = entry.abandoned()
            if lock is not None and reason is None:
                batch.append((lock, entry.hold))
            else:
                del self._entries[key], self._due[key]
                abandoned.append((entry, reason or "its Lock object was garbage-collected"))
        return batch, abandoned

    def _abandon(self, entry: _Entry, reason: str) -> None:
        # Not deleted: the owner may have been cut off mid-work, so the lock keeps guarding
        # what it guarded for the rest of its TTL, like a crashed process's lock.
        entry.hold.lost = True
        logger.warning("Stopped renewing lock %r: %s. It ends within its TTL.", entry.name, reason)
        for receiver, error in lock_abandoned.send_robust(
            entry.cls, lock=entry.lock(), name=entry.name, reason=reason
        ):
            if error is not None:
                logger.error("lock_abandoned receiver %r failed: %r", receiver, error)

    def _renew(self, batch: list[tuple[Renewable, RenewedHold]]) -> None:
        by_client: dict[int, list[tuple[Renewable, RenewedHold]]] = defaultdict(list)
        for lock, hold in batch:
            by_client[id(lock.renew_client)].append((lock, hold))
        now_ms = int(time.time() * 1000)
        for entries in by_client.values():
            pipe = entries[0][0].renew_client.pipeline(transaction=False)
            for lock, hold in entries:
                pipe.execute_command(*lock.renewal(hold, now_ms))
            try:
                replies = pipe.execute(raise_on_error=False)
            except UNAVAILABLE as exc:
                logger.warning(
                    "Could not renew %d lock(s): Redis unreachable (%s)", len(entries), exc
                )
                replies = [exc] * len(entries)
            self._settle(entries, replies)

    def _settle(self, entries: list[tuple[Renewable, RenewedHold]], replies: list[Any]) -> None:
        now = time.monotonic()
        for (lock, hold), reply in zip(entries, replies, strict=False):
            with self._cond:
                if id(hold) not in self._due:
                    continue  # released meanwhile
                if isinstance(reply, Exception):
                    # Try again soon; the lock stays valid until its TTL runs out.
                    self._due[id(hold)] = now + min(1.0, lock.lock_ttl / 6)
                    continue
                if reply == 1:
                    self._due[id(hold)] = now + lock.lock_ttl / 3
                    continue
                self._entries.pop(id(hold), None)
                self._due.pop(id(hold), None)
            lock.lost(hold, "auto-renew")


renewer = Renewer()


def _after_fork() -> None:
    # The child holds none of the parent's locks and has no renewer thread.
    global renewer
    renewer = Renewer()


os.register_at_fork(after_in_child=_after_fork)
