"""``Stock``: units for sale, reserved in one atomic round trip, then confirmed (sold) or
released; a reservation nobody finishes gives its units back when its TTL runs out.

What the sync ``Stock`` and the asyncio ``AsyncStock`` share lives in ``StockBase``: the
argument checks (all made before Redis is touched) and the reading of the scripts' replies.
Each operation is an ``Operation`` (script, arguments, how to read its answer) that the sync
or asyncio transport runs.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from ..exceptions import ReservationError, ReservationExpired, StockError
from ..locks.keys import text
from ..redis.clients import get_redis, run_script
from ..redis.scripts import LuaScript
from ..signals import (
    reservation_confirmed,
    reservation_released,
    stock_reserved,
    stock_sold_out,
)
from .arguments import MAX_ID_LENGTH, MAX_TOTAL, MAX_UNITS, epoch, milliseconds, units
from .keys import StockKeys, stock_keys, validate_stock_name
from .scripts import ADJUST, COUNTS, DELETE, FINISH, RESERVE

# Due entries (expired reservations, records to forget) each script handles at most.
SWEEP = 100
# How long an add's request id is remembered (ms): a resend within it is applied once.
# Resends come within seconds (a Cluster retry, a reconnection); ten minutes bound the set.
ADD_REQUEST_TTL_MS = 600_000
STATES = {"c": "confirmed", "r": "released", "x": "expired", "unknown": "unknown"}


class StockCounts(NamedTuple):
    """A stock's counters, read together: ``available + reserved + confirmed == total``
    (everything set and added) at every moment."""

    available: int
    reserved: int
    confirmed: int
    total: int


@dataclass(frozen=True)
class Reservation:
    """Units of stock ``stock`` held for one buyer until ``expires_at`` (server clock).
    ``id`` is unique: store it with the order as its idempotency key. ``fence`` is strictly
    greater than every earlier reservation's of the same stock."""

    stock: str
    id: str
    quantity: int
    fence: int
    expires_at: datetime


class Reply(NamedTuple):
    status: str
    counts: StockCounts
    more: bool
    extra: list[Any]


class Operation(NamedTuple):
    script: LuaScript
    keys: tuple[str, ...]
    args: tuple[Any, ...]
    answer: Callable[[Reply], Any]


class StockBase:
    """A stock's name, keys and options, the checks of every argument and the reading of
    every reply. ``remember`` (seconds): how long a finished reservation's outcome is kept,
    so that a retried confirm or release gets the same answer; use one value per stock."""

    def __init__(self, name: str, *, remember: float = 86400.0, using: str | None = None):
        self.name = validate_stock_name(name)
        self.remember_ms = milliseconds(remember, "remember")
        self.using = using
        self._keys: StockKeys | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @property
    def keys(self) -> StockKeys:
        """The stock's Redis keys (built on first use: they follow ``KEY_PREFIX``)."""
        if self._keys is None:
            self._keys = stock_keys(self.name)
        return self._keys

    def _args(self, *args: Any) -> tuple[Any, ...]:
        return (self.remember_ms, SWEEP, *args)

    def _read(self, raw: Any) -> Reply:
        status = text(raw[0])
        if status == "corrupt":
            key, record = text(raw[6]), text(raw[7])
            if key == self.keys.names:
                raise StockError(
                    f"Stock {self.name!r}: the listing {key!r} is not a sorted set (another "
                    "program wrote it?): nothing changed. Delete that key; its stocks are "
                    "listed again at their next set or add.",
                    self.name,
                )
            where = f"the record of reservation {record!r} in {key!r}" if record else repr(key)
            raise StockError(
                f"Stock {self.name!r} is corrupt: {where} is not what the stock stores "
                f"there (another program wrote it?). Stock({self.name!r}).delete() removes "
                "the stock's keys; then set it again.",
                self.name,
            )
        counts = StockCounts(*(int(n) for n in raw[1:5]))
        return Reply(status, counts, bool(raw[5]), list(raw[6:]))

    def _counts_op(self) -> Operation:
        return Operation(COUNTS, self.keys.counters, self._args(), lambda reply: reply.counts)

    def _adjust_op(self, mode: str, units: int, request: str) -> Operation:
        def answer(reply: Reply) -> StockCounts:
            if reply.status == "short":
                have = reply.counts
                raise StockError(
                    f"Stock {self.name!r} was not changed: {mode}({units}) would leave fewer "
                    f"than 0 units available ({have.available} available, {have.reserved} "
                    "reserved).",
                    self.name,
                )
            if reply.status == "toomuch":
                raise StockError(
                    f"Stock {self.name!r} was not changed: {mode}({units}) would take its "
                    f"total over {MAX_TOTAL} units.",
                    self.name,
                )
            return reply.counts

        args = self._args(mode, units, MAX_TOTAL, request, ADD_REQUEST_TTL_MS, self.name)
        return Operation(ADJUST, self.keys, args, answer)

    def _set_op(self, quantity: int) -> Operation:
        return self._adjust_op("set", units(quantity, "quantity", minimum=0), "")

    def _add_op(self, quantity: int) -> Operation:
        # The request id makes a resent call (same arguments) add once.
        quantity = units(quantity, "quantity", minimum=-MAX_UNITS)
        return self._adjust_op("add", quantity, secrets.token_hex(16))

    def _delete_op(self) -> Operation:
        return Operation(DELETE, self.keys, (self.name,), lambda reply: reply.status == "ok")

    def _reserve_op(self, quantity: int, ttl: float) -> Operation:
        quantity = units(quantity, "quantity", minimum=1)
        ttl_ms = milliseconds(ttl, "ttl")
        reservation_id = secrets.token_hex(16)

        def answer(reply: Reply) -> Reservation | None:
            if reply.status == "short":
                if stock_sold_out.receivers:
                    stock_sold_out.send(type(self), stock=self, name=self.name, quantity=quantity)
                return None
            if reply.status != "ok":  # "taken": only a resent call can meet its id in use
                raise StockError(
                    f"Stock {self.name!r}: reservation id {reservation_id!r} is in use, and not "
                    f"by a pending reservation of {quantity} units: nothing reserved.",
                    self.name,
                )
            fence, expires = reply.extra
            made = Reservation(self.name, reservation_id, quantity, int(fence), epoch(expires))
            if stock_reserved.receivers:
                stock_reserved.send(type(self), stock=self, name=self.name, reservation=made)
            return made

        args = self._args(reservation_id, quantity, ttl_ms)
        return Operation(RESERVE, self.keys.counters, args, answer)

    def _reservation_id(self, reservation: Any) -> str:
        if isinstance(reservation, Reservation):
            if reservation.stock != self.name:
                raise ValueError(
                    f"reservation {reservation.id!r} is of stock {reservation.stock!r}, not "
                    f"of {self.name!r}."
                )
            return reservation.id
        if not isinstance(reservation, str):
            raise TypeError(
                f"reservation must be a Reservation or its id (str), not "
                f"{type(reservation).__name__}."
            )
        if not 0 < len(reservation) <= MAX_ID_LENGTH or not reservation.isprintable():
            raise ValueError(
                f"reservation id must be 1 to {MAX_ID_LENGTH} printable characters, not "
                f"{reservation!r}."
            )
        return reservation

    def _finish_op(self, reservation: Any, action: str) -> Operation:
        reservation_id = self._reservation_id(reservation)

        def answer(reply: Reply) -> bool:
            if reply.status == "ok":  # done by this call (a repeat answers its action)
                signal = reservation_confirmed if action == "c" else reservation_released
                if signal.receivers:
                    signal.send(
                        type(self), stock=self, name=self.name, reservation_id=reservation_id
                    )
                return True
            if reply.status == action:
                return True
            if action == "r" and reply.status == "x":
                return False
            state = STATES[reply.status]
            verb = "confirm" if action == "c" else "release"
            error = ReservationExpired if reply.status == "x" else ReservationError
            raise error(
                f"Cannot {verb} reservation {reservation_id!r} of stock {self.name!r}: it is "
                f"{state}" + _WHY[reply.status],
                self.name,
                reservation_id,
                state,
            )

        return Operation(FINISH, self.keys.counters, self._args(reservation_id, action), answer)


_WHY = {
    "c": " (its units are sold).",
    "r": " (its units went back to the stock).",
    "x": " (its TTL ran out and its units went back to the stock).",
    "unknown": " (never made here, or finished longer than `remember` seconds ago).",
}


class Stock(StockBase):
    """Units for sale under one name: ``set``/``add`` them, ``reserve`` some for a buyer in one
    round trip (no lock held), then ``confirm`` (sold) or ``release`` (back at once); a
    reservation left alone gives its units back when its TTL runs out. Nothing touches Redis
    before the first call. See docs/reference/semaphores-stock.rst for each method."""

    def _run(self, operation: Operation) -> Any:
        client = get_redis(self.using)
        while True:
            raw = run_script(client, operation.script, operation.keys, operation.args)
            reply = self._read(raw)
            if reply.status != "more":
                return operation.answer(reply)

    def set(self, quantity: int) -> StockCounts:
        """Make ``quantity`` units unsold (available + reserved): reservations keep their
        units, confirmed units stay sold. StockError (nothing changed) if more are reserved."""
        return self._run(self._set_op(quantity))  # type: ignore[no-any-return]

    def add(self, quantity: int) -> StockCounts:
        """Put ``quantity`` more units up for sale (negative: take them off; StockError, and
        nothing changed, when fewer are available). Applied once even when the call is
        resent after its reply was lost."""
        return self._run(self._add_op(quantity))  # type: ignore[no-any-return]

    def reserve(self, quantity: int = 1, ttl: float = 600.0) -> Reservation | None:
        """Hold ``quantity`` units for ``ttl`` seconds; None when fewer are available."""
        return self._run(self._reserve_op(quantity, ttl))  # type: ignore[no-any-return]

    def confirm(self, reservation: Reservation | str) -> None:
        """The units of ``reservation`` (or its id) are sold for good. Idempotent. Raises
        ReservationExpired when its TTL ran out first (its units went back), ReservationError
        when it was released or is unknown."""
        self._run(self._finish_op(reservation, "c"))

    def release(self, reservation: Reservation | str) -> bool:
        """Give the units of ``reservation`` (or its id) back at once; idempotent. False when
        its TTL had run out (its units were already back). ReservationError when it was
        confirmed (its units are sold) or is unknown."""
        return self._run(self._finish_op(reservation, "r"))  # type: ignore[no-any-return]

    def counts(self) -> StockCounts:
        """The four counters, read at one moment (expired reservations handled first)."""
        return self._run(self._counts_op())  # type: ignore[no-any-return]

    def available(self) -> int:
        return self.counts().available

    def reserved(self) -> int:
        return self.counts().reserved

    def confirmed(self) -> int:
        return self.counts().confirmed

    def delete(self) -> bool:
        """Remove the stock and every reservation record (an operator's reset, which also
        clears a corrupt stock), and its entry in the listing. Whether it existed."""
        return self._run(self._delete_op())  # type: ignore[no-any-return]
