"""A request's claim on its idempotency record: taken (or the record found instead, waited
for while it runs when the decorator has a ``timeout``), kept alive by the lock renewer
while the view runs, and ended once: the record then holds the response, or is freed."""

from __future__ import annotations

import asyncio
import logging
import time
from secrets import token_hex
from typing import Any

from ..conf import conf
from ..locks import renewer as lock_renewer
from ..locks.keys import text
from ..redis import aio
from ..redis.clients import run_script, wait_for_push
from .guard import REDIS_ERRORS
from .idempotency_records import (
    CLAIM,
    FINISH,
    RENEW,
    CorruptRecord,
    Record,
    RecordKeys,
    parse_record,
)

logger = logging.getLogger("django_redislock.idempotent")

WAKE_MS = 1000  # how long a wake-up stays for the waiters that pass it on
RECHECK = 0.25  # a waiting repeat reads the record again at least this often, woken or not
MAX_REPLACED = 3  # corrupt records replaced in a row before one is taken as found


class ClaimHold:
    """What the renewer flags when it finds the claim lost."""

    __slots__ = ("lost",)

    def __init__(self) -> None:
        self.lost = False


class Claim:
    """One request's claim on record ``keys`` for a request with ``fingerprint``. It follows
    the lock renewer's ``Renewable`` protocol (``renew_client``, ``renewal``, ``lost``)."""

    reentrant = False

    def __init__(self, keys: RecordKeys, fingerprint: str, using: str | None, client: Any):
        self.keys, self.fingerprint, self.using = keys, fingerprint, using
        self.renew_client = client  # sync: the renewer's, and the end after a render
        self.token = token_hex(8)
        self.name = f"idempotency claim {keys.record}"
        self.lock_ttl = conf.LOCK_TTL
        self.claim_ms = max(1, int(self.lock_ttl * 1000))
        self.hold = ClaimHold()
        self._pending = [self]  # ended at most once (list.pop is atomic)

    def take(self, client: Any, timeout: float) -> Record | None:
        """None once claimed (the view is to run); else the record found: done, another
        request's, or still running after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        replace, passing = b"", ""
        for _ in range(MAX_REPLACED + 1):
            while True:
                args = self._args(replace, timeout > 0, passing)
                record, replace = self._found(run_script(client, CLAIM, self.keys, args))
                if replace or not self._waits_for(record):
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return record
                popped = wait_for_push(client, self.keys.wake, min(remaining, RECHECK))
                passing = self._passing(record, popped)
            if not replace:
                return record
        return self._still_corrupt()

    async def atake(self, client: Any, timeout: float) -> Record | None:
        """``take`` over the asyncio ``client``."""
        deadline = time.monotonic() + timeout
        replace, passing = b"", ""
        for _ in range(MAX_REPLACED + 1):
            while True:
                args = self._args(replace, timeout > 0, passing)
                reply = await aio.run_script(client, CLAIM, self.keys, args)
                record, replace = self._found(reply)
                if replace or not self._waits_for(record):
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return record
                block = min(remaining, RECHECK)
                wake = self.keys.wake
                asked = aio.cancel_requests()
                popped = await aio.wait_for_push(client, self.renew_client, wake, block)
                passing = self._passing(record, popped)
                if aio.cancel_requests() > asked:  # a cancel redis-py dropped as it popped
                    if passing:
                        await asyncio.shield(aio.call(client, "LPUSH", wake, passing))
                    raise asyncio.CancelledError
            if not replace:
                return record
        return self._still_corrupt()

    def _still_corrupt(self) -> Record:
        """What a claim that keeps meeting corrupt records answers: as if the key were in
        use (409), never an error."""
        logger.error("Idempotency record %s stays corrupt; answered 409.", self.keys.record)
        return Record("R", self.fingerprint)

    def _args(self, replace: bytes, wait: bool, passing: str) -> tuple[Any, ...]:
        flag = "1" if wait else "0"
        return (self.token, self.fingerprint, self.claim_ms, replace, flag, passing, WAKE_MS)

    def _found(self, reply: Any) -> tuple[Record | None, bytes]:
        """(the record CLAIM found, or None when it claimed; a corrupt value to claim over,
        or b"")."""
        if reply[0] != 0:
            if reply[0] == 2:
                logger.warning(
                    "Idempotency record %s was corrupt (another type or shape); it was "
                    "replaced and the request runs as new.",
                    self.keys.record,
                )
            return None, b""
        try:
            return parse_record(reply[1]), b""
        except CorruptRecord as exc:
            logger.error(
                "Idempotency record %s: %s; the request runs as new.", self.keys.record, exc
            )
            return None, exc.value

    def _waits_for(self, record: Record | None) -> bool:
        return record is not None and record.state == "R" and record.fingerprint == self.fingerprint

    @staticmethod
    def _passing(record: Record | None, popped: Any) -> str:
        """The wake-up to pass on to the next waiter: the one popped, if it is the end of
        the claim waited for (another is stale)."""
        token = record.token if record is not None else ""
        return token if popped is not None and text(popped[1]) == token else ""

    def renewal(self, hold: Any, now: int) -> tuple[Any, ...]:
        return ("EVAL", RENEW.source, 1, self.keys.record, self.token, self.claim_ms)

    def lost(self, hold: Any, where: str) -> None:
        hold.lost = True
        logger.error(
            "The idempotency claim %s lapsed while its view ran (Redis unreachable too long, or "
            "a stalled process); a repeat of the request may run the view again.",
            self.keys.record,
        )

    def _ending(self) -> bool:
        """Whether this call is the claim's one end (the renewer then lets it go)."""
        try:
            self._pending.pop()
        except IndexError:
            return False
        lock_renewer.renewer.discard(self.hold)
        return True

    def end(self, value: bytes, ttl_ms: int) -> None:
        """The record becomes ``value`` for ``ttl_ms`` (b"": the key is freed), once."""
        if self._ending():
            try:
                args = (self.token, value, ttl_ms, WAKE_MS)
                self._ended(run_script(self.renew_client, FINISH, self.keys, args))
            except REDIS_ERRORS as exc:
                self._failed(exc)

    async def aend(self, value: bytes, ttl_ms: int) -> None:
        if self._ending():
            try:
                client = aio.get_async_redis(self.using)
                args = (self.token, value, ttl_ms, WAKE_MS)
                self._ended(await aio.run_script(client, FINISH, self.keys, args))
            except REDIS_ERRORS as exc:
                self._failed(exc)

    def _ended(self, done: Any) -> None:
        if not done:
            logger.error(
                "Idempotency claim %s lapsed before its view ended; its response was not stored.",
                self.keys.record,
            )

    def _failed(self, exc: Exception) -> None:
        logger.warning(
            "Could not end idempotency claim %s (%s); it lapses within %ss, and until then "
            "repeats are answered 409.",
            self.keys.record,
            exc,
            self.lock_ttl,
        )
