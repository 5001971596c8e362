"""One background thread per process keeps every ``auto_renew`` lock alive: at a third of
each lock's TTL it extends all the locks due, in one pipeline per Redis client."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from .connection import UNAVAILABLE
from .scripts import EXTEND

if TYPE_CHECKING:
    from .lockbase import Hold, LockBase

logger = logging.getLogger(__name__)


class Renewer:
    def __init__(self) -> None:
        self._entries: dict[int, tuple[LockBase, Hold]] = {}
        self._due: dict[int, float] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, lock: LockBase, hold: Hold) -> None:
        with self._cond:
            self._entries[id(hold)] = (lock, hold)
            self._due[id(hold)] = time.monotonic() + lock.lock_ttl / 3
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="django-redislock-renewer", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def discard(self, hold: Hold) -> None:
        with self._cond:
            self._entries.pop(id(hold), None)
            self._due.pop(id(hold), None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._due:
                        self._thread = None
                        return
                    now = time.monotonic()
                    wait = min(self._due.values()) - now
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                batch = [self._entries[k] for k, due in self._due.items() if due <= now]
            try:
                self._renew(batch)
            except Exception:
                # The thread must outlive any failure, or every auto-renew lock would expire.
                logger.exception("Renewing %d lock(s) failed; retrying in a second.", len(batch))
                with self._cond:
                    for _, hold in batch:
                        if id(hold) in self._due:
                            self._due[id(hold)] = time.monotonic() + 1.0

    def _renew(self, batch: list[tuple[LockBase, Hold]]) -> None:
        by_client: dict[int, list[tuple[LockBase, Hold]]] = defaultdict(list)
        for lock, hold in batch:
            by_client[id(lock.renew_client)].append((lock, hold))
        now_ms = int(time.time() * 1000)
        for entries in by_client.values():
            pipe = entries[0][0].renew_client.pipeline(transaction=False)
            for lock, hold in entries:
                keys = lock.keys
                pipe.execute_command(
                    "EVAL", EXTEND.source, 2, keys[0], keys[2],
                    hold.token, lock.ttl_ms, lock.name, now_ms,
                )  # fmt: skip
            try:
                replies = pipe.execute(raise_on_error=False)
            except UNAVAILABLE as exc:
                logger.warning(
                    "Could not renew %d lock(s): Redis unreachable (%s)", len(entries), exc
                )
                replies = [exc] * len(entries)
            self._settle(entries, replies)

    def _settle(self, entries: list[tuple[LockBase, Hold]], replies: list[Any]) -> None:
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
