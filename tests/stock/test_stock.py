"""Stock on fakeredis, a real redis-server and a real Cluster: the API, the argument checks,
idempotent confirm/release, expiry with no worker, and corrupt keys."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from django_redislock.exceptions import (
    RedisLockError,
    ReservationError,
    ReservationExpired,
    StockError,
)
from django_redislock.stock.arguments import MAX_TTL, MAX_UNITS
from django_redislock.stock.stock import SWEEP, Stock, StockCounts
from tests.support.fixtures import Backend
from tests.support.waiting import Stalls


def consistent(stock: Stock) -> StockCounts:
    counts = stock.counts()
    assert counts.available + counts.reserved + counts.confirmed == counts.total
    return counts


def test_set_add_reserve_confirm_release(backend: Backend) -> None:
    stock = Stock("flash-sale:42")
    assert stock.counts() == (0, 0, 0, 0)
    assert stock.set(100) == (100, 0, 0, 100)
    assert stock.add(5) == (105, 0, 0, 105)
    before = datetime.now(timezone.utc)
    first = stock.reserve(2, ttl=600)
    second = stock.reserve()
    assert first is not None
    assert second is not None
    assert (first.stock, first.quantity, second.quantity) == ("flash-sale:42", 2, 1)
    assert first.id != second.id
    assert len(first.id) == 32
    assert second.fence > first.fence > 0
    assert before + timedelta(seconds=599) < first.expires_at
    assert first.expires_at < datetime.now(timezone.utc) + timedelta(seconds=601)
    assert (stock.available(), stock.reserved(), stock.confirmed()) == (102, 3, 0)
    assert stock.confirm(first) is None
    assert stock.release(second) is True
    assert consistent(stock) == (103, 0, 2, 105)
    assert stock.add(-3) == (100, 0, 2, 102)  # taken off sale: the total follows
    assert stock.delete() is True
    assert stock.delete() is False
    assert stock.counts() == (0, 0, 0, 0)


def test_sold_out_answers_none_and_changes_nothing(backend: Backend) -> None:
    stock = Stock("few")
    stock.set(3)
    assert stock.reserve(4) is None
    held = stock.reserve(3)
    assert held is not None
    assert stock.reserve(1) is None
    assert consistent(stock) == (0, 3, 0, 3)
    stock.release(held.id)  # by id, as a later request holding only the order row would
    assert stock.reserve(1) is not None


def test_set_counts_unsold_units_and_keeps_reservations(backend: Backend) -> None:
    stock = Stock("restocked")
    stock.set(10)
    held = stock.reserve(4)
    sold = stock.reserve(1)
    assert held is not None
    assert sold is not None
    stock.confirm(sold)
    # 20 unsold units: 4 of them reserved; the sold one stays counted as confirmed.
    assert stock.set(20) == (16, 4, 1, 21)
    stock.release(held)
    assert consistent(stock) == (20, 0, 1, 21)
    assert stock.set(0) == (0, 0, 1, 1)
    with pytest.raises(StockError, match="fewer than 0 units available"):
        stock.add(-1)
    stock.set(5)
    assert stock.reserve(3) is not None
    with pytest.raises(StockError, match="3 reserved") as caught:
        stock.set(2)  # fewer than reserved: refused, nothing changed
    assert caught.value.stock_name == "restocked"
    assert consistent(stock) == (2, 3, 1, 6)


def test_confirm_and_release_are_idempotent(backend: Backend) -> None:
    stock = Stock("retried")
    stock.set(10)
    paid, cancelled = stock.reserve(2), stock.reserve(3)
    assert paid is not None
    assert cancelled is not None
    for _ in range(3):
        stock.confirm(paid)
        stock.confirm(paid.id)
        assert stock.release(cancelled) is True
        assert stock.release(cancelled.id) is True
        assert consistent(stock) == (8, 0, 2, 10)
    with pytest.raises(ReservationError, match="it is confirmed") as caught:
        stock.release(paid)
    assert (caught.value.state, caught.value.reservation_id) == ("confirmed", paid.id)
    with pytest.raises(ReservationError, match="it is released") as released:
        stock.confirm(cancelled)
    assert not isinstance(released.value, ReservationExpired)
    with pytest.raises(ReservationError, match="unknown"):
        stock.confirm("no-such-id")
    with pytest.raises(ReservationError, match="unknown"):
        stock.release("no-such-id")
    assert consistent(stock) == (8, 0, 2, 10)


def test_an_expired_reservation_gives_its_units_back_with_no_worker(backend: Backend) -> None:
    names = iter(f"carts-{n}" for n in range(100))

    def given_back() -> None:
        stock = Stock(next(names))
        stock.set(5)
        short = stock.reserve(2, ttl=0.2)
        long = stock.reserve(1, ttl=60)
        assert short is not None
        assert long is not None
        assert stock.available() == 2
        time.sleep(0.35)
        assert consistent(stock) == (4, 1, 0, 5)  # the reading itself gave them back
        for _ in range(2):  # the same answer every time
            with pytest.raises(ReservationExpired, match="TTL ran out") as caught:
                stock.confirm(short)
            assert caught.value.state == "expired"
            assert isinstance(caught.value, RedisLockError)
            assert stock.release(short) is False  # already back: nothing done
        assert consistent(stock) == (4, 1, 0, 5)

    # A stall past the 0.2 s TTL before the first reading gives the units back early: such
    # a run is done again.
    with Stalls() as stalls:
        stalls.again_if_stalled(given_back)


def test_confirm_right_after_expiry_expires_it_first(backend: Backend) -> None:
    stock = Stock("late-payment")
    stock.set(1)
    held = stock.reserve(1, ttl=0.05)
    assert held is not None
    time.sleep(0.1)
    with pytest.raises(ReservationExpired):
        stock.confirm(held.id)  # the first call after expiry: no read came before it
    assert consistent(stock) == (1, 0, 0, 1)


def test_a_backlog_of_expired_reservations_is_counted_in_full(backend: Backend) -> None:
    names = iter(f"backlog-{n}" for n in range(100))

    def counted() -> None:
        stock = Stock(next(names))
        count = SWEEP * 2 + 7
        stock.set(count)
        for _ in range(count):
            assert stock.reserve(1, ttl=3) is not None
        assert stock.reserve(1) is None
        time.sleep(3.1)
        now_ms = time.time() * 1000
        # More are due than one script handles (a slow loop may have seen a few expire).
        assert backend.client.zcount(stock.keys.due, 0, now_ms) > SWEEP
        # reserve runs again until they are all back.
        assert stock.reserve(count, ttl=1) is not None
        stock.set(count)
        assert consistent(stock) == (0, count, 0, count)
        time.sleep(1.1)
        assert stock.available() == count  # counts too

    # A stall past a TTL (3 s while reserving, 1 s before the reading) lets reservations
    # expire early: such a run is done again.
    with Stalls() as stalls:
        stalls.again_if_stalled(counted)


def test_finished_reservations_are_forgotten_after_remember(backend: Backend) -> None:
    names = iter(f"short-memory-{n}" for n in range(100))

    def forgotten() -> None:
        stock = Stock(next(names), remember=0.1)
        stock.set(2)
        held = stock.reserve(1)
        assert held is not None
        stock.confirm(held)
        assert backend.client.hlen(stock.keys.records) == 1
        time.sleep(0.2)
        with pytest.raises(ReservationError, match="unknown"):
            stock.confirm(held)
        assert backend.client.hlen(stock.keys.records) == 0
        assert consistent(stock) == (1, 0, 1, 2)

    # A stall past the 0.1 s memory before the first look forgets early: done again, if so.
    with Stalls() as stalls:
        stalls.again_if_stalled(forgotten)


BAD_ARGUMENTS: list[tuple[str, Any, tuple[Any, ...], type[Exception], str]] = [
    ("set", Stock.set, (-1,), ValueError, "quantity must be between 0"),
    ("set", Stock.set, (1.5,), TypeError, "quantity must be an int"),
    ("set", Stock.set, (True,), TypeError, "quantity must be an int"),
    ("add", Stock.add, (MAX_UNITS + 1,), ValueError, "quantity must be between"),
    ("add", Stock.add, ("1",), TypeError, "quantity must be an int"),
    ("reserve", Stock.reserve, (0,), ValueError, "quantity must be between 1"),
    ("reserve", Stock.reserve, (1, 0), ValueError, "ttl must be > 0"),
    ("reserve", Stock.reserve, (1, -1), ValueError, "ttl must be > 0"),
    ("reserve", Stock.reserve, (1, float("nan")), ValueError, "ttl must be > 0"),
    ("reserve", Stock.reserve, (1, MAX_TTL + 1), ValueError, "ttl must be at most"),
    ("reserve", Stock.reserve, (1, "10"), TypeError, "ttl must be a number"),
    ("confirm", Stock.confirm, (None,), TypeError, "reservation must be a Reservation"),
    ("confirm", Stock.confirm, ("",), ValueError, "reservation id must be 1 to 100"),
    ("release", Stock.release, ("x" * 101,), ValueError, "reservation id must be 1 to 100"),
    ("release", Stock.release, ("a\nb",), ValueError, "reservation id must be 1 to 100"),
]


@pytest.mark.parametrize(
    ("method", "args", "error", "message"),
    [b[1:] for b in BAD_ARGUMENTS],
    ids=[f"{b[0]}{b[2]!r}"[:40] for b in BAD_ARGUMENTS],
)
def test_bad_arguments_fail_before_redis_is_touched(
    settings: Any, method: Any, args: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}  # nothing listens there
    with pytest.raises(error, match=message):
        method(Stock("s"), *args)


@pytest.mark.parametrize(
    ("name", "error"),
    [("", ValueError), ("a{b}", ValueError), ("a b", ValueError), (7, TypeError)],
)
def test_names_are_validated_like_lock_names(name: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="Stock name"):
        Stock(name)
    with pytest.raises(ValueError, match="remember must be > 0"):
        Stock("s", remember=0)


def test_a_reservation_of_another_stock_is_refused_before_redis(backend: Backend) -> None:
    mine = Stock("mine")
    mine.set(1)
    held = mine.reserve()
    assert held is not None
    with pytest.raises(ValueError, match="of stock 'mine', not of 'other'"):
        Stock("other").confirm(held)
    assert consistent(mine) == (0, 1, 0, 1)


@pytest.mark.parametrize("key", ["state", "records", "due"])
def test_a_corrupt_key_is_a_clear_error_and_other_stocks_carry_on(
    backend: Backend, key: str
) -> None:
    broken, healthy = Stock("broken"), Stock("healthy")
    broken.set(3)
    healthy.set(3)
    backend.client.delete(getattr(broken.keys, key))
    backend.client.rpush(getattr(broken.keys, key), "junk")  # a list where it is not one
    before = {k: backend.client.dump(k) for k in broken.keys}
    with pytest.raises(StockError, match=r"Stock 'broken' is corrupt: .*delete\(\)") as caught:
        broken.reserve()
    assert {k: backend.client.dump(k) for k in broken.keys} == before  # nothing written
    assert caught.value.stock_name == "broken"
    with pytest.raises(StockError, match="corrupt"):
        broken.release("an-order-id")
    held = healthy.reserve()
    assert held is not None
    healthy.confirm(held)
    assert consistent(healthy) == (2, 0, 1, 3)
    assert broken.delete()
    broken.set(3)
    assert broken.reserve() is not None


def test_a_corrupt_record_or_counter_is_a_clear_error(backend: Backend) -> None:
    stock = Stock("garbled")
    stock.set(3)
    held = stock.reserve(1, ttl=0.05)
    assert held is not None
    backend.client.hset(stock.keys.records, held.id, "nonsense")
    with pytest.raises(StockError, match=f"record of reservation '{held.id}'"):
        stock.confirm(held)
    time.sleep(0.1)  # now due: every script meets it
    with pytest.raises(StockError, match=f"record of reservation '{held.id}'"):
        stock.available()
    stock.delete()
    backend.client.hset(stock.keys.state, "available", "many")
    with pytest.raises(StockError, match="corrupt"):
        stock.reserve()


def test_a_resent_reserve_gets_the_same_reservation(backend: Backend) -> None:
    """A client library may send a call again after a connection error (redis-py's Cluster
    clients do): the same RESERVE, run twice, holds the units once."""
    stock = Stock("resent")
    stock.set(5)
    operation = stock._reserve_op(2, 60)
    first, again = stock._run(operation), stock._run(operation)
    assert first == again
    assert consistent(stock) == (3, 2, 0, 5)
    stock.confirm(first)
    with pytest.raises(StockError, match="is in use"):
        stock._run(operation)  # no longer pending: refused, nothing changed
    assert consistent(stock) == (3, 0, 2, 5)
