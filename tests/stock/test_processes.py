"""Stocks under fire, with real OS processes on a real redis-server and a real Cluster: a
reservation storm, a buyer SIGKILLed mid-storm, and Redis killed and restarted from its AOF.
Each ends with ``available + reserved + confirmed == initial`` exactly, and with every
confirm a buyer saw succeed counted once."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from django_redislock.exceptions import RedisUnavailable, ReservationExpired
from django_redislock.stock.stock import Reservation, Stock
from tests.support.fixtures import Backend, Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.processes

NAME = "storm"
INITIAL = 5_000
BUYERS = 16
OPS = 1_000  # per buyer
SHORT_TTL = 0.05  # a reservation meant to expire
TTL = 1.0  # the others (every unfinished one is back a second after its buyer stopped)


class Buyer:
    """One buyer process's random mix of reserve / confirm / release / let expire, holding
    a few reservations at a time; ``sold`` counts the units of each confirm it saw succeed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.stock = Stock(NAME)
        self.held: list[Reservation] = []
        self.late: list[Reservation] = []  # short TTL: confirmed later, if still in time
        self.sold = self.sold_out = self.expired = 0

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.5 or not self.held:
            ttl = SHORT_TTL if roll < 0.1 else TTL
            got = self.stock.reserve(rng.randint(1, 3), ttl=ttl)
            if got is None:
                self.sold_out += 1
            else:
                (self.late if ttl == SHORT_TTL else self.held).append(got)
        elif roll < 0.8:
            self.confirm(self.held.pop(rng.randrange(len(self.held))))
        else:
            reservation = self.held.pop(rng.randrange(len(self.held)))
            released = self.stock.release(reservation)
            # False only once its TTL ran out (a busy machine can stall a buyer that long):
            # its units were back already. The server's clock is this host's.
            assert released or datetime.now(timezone.utc) >= reservation.expires_at
            # A retry: same answer, no double count.
            assert self.stock.release(reservation.id) is released
        if self.late and rng.random() < 0.05:  # fewer than are made: most wait to expire
            self.confirm(self.late.pop(0))

    def confirm(self, reservation: Reservation) -> None:
        try:
            self.stock.confirm(reservation)
        except ReservationExpired:
            self.expired += 1
            return
        self.stock.confirm(reservation.id)  # a retry: same answer, no double count
        self.sold += reservation.quantity


def storm(seed: int, ops: int, reports: Any) -> None:
    buyer = Buyer(seed)
    for _ in range(ops):
        buyer.step()
    reports.put((buyer.sold, buyer.sold_out, buyer.expired))


def settle(stock: Stock) -> tuple[int, int, int, int]:
    """The counters once every unfinished reservation expired (at least ``TTL`` after the
    last buyer stopped; on a loaded machine, whenever the server has seen that time pass)."""
    wait_for(lambda: stock.counts().reserved == 0, timeout=TTL + 30, what="reservations expire")
    return stock.counts()


@pytest.mark.timeout(120)
def test_reservation_storm_never_oversells_nor_loses_a_unit(
    real_backend: Backend, processes: Processes
) -> None:
    stock = Stock(NAME)
    stock.set(INITIAL)
    reports = processes.queue()
    started = time.monotonic()
    for seed in range(BUYERS):
        processes.start(storm, seed, OPS, reports)
    results = [reports.get(timeout=100) for _ in range(BUYERS)]
    processes.join_all(30)
    took = time.monotonic() - started
    sold = sum(r[0] for r in results)
    available, reserved, confirmed, total = settle(stock)
    assert (available + reserved + confirmed, total) == (INITIAL, INITIAL)
    assert confirmed == sold  # every confirm seen succeed counted once, no other
    assert sum(r[1] for r in results) > 0, "the storm never sold out"
    assert sum(r[2] for r in results) > 0, "no confirm ever came too late"
    print(f"\n{BUYERS} x {OPS} ops in {took:.1f} s: {sold} units sold")


def buy_until(stop: Any, ready: Any) -> None:
    buyer = Buyer(os.getpid())
    while not stop.is_set():
        buyer.step()
        if len(buyer.held) >= 3:
            ready.set()  # holds reservations from here on: a kill strands them


@pytest.mark.timeout(60)
def test_a_buyer_killed_mid_storm_loses_no_unit(
    real_backend: Backend, processes: Processes
) -> None:
    stock = Stock(NAME)
    stock.set(INITIAL)
    stop, ready = processes.event(), processes.event()
    buyers = [processes.start(buy_until, stop, ready) for _ in range(4)]
    victim = buyers[0]
    assert ready.wait(30)
    time.sleep(0.3)
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(5)
    stop.set()
    for buyer in buyers[1:]:
        buyer.join(30)
        assert buyer.exitcode == 0
    counts = stock.counts()
    assert counts.available + counts.reserved + counts.confirmed == INITIAL
    assert counts.reserved > 0, "nobody held a reservation at the kill"
    available, _, confirmed, total = settle(stock)  # the victim's come back
    assert (available + confirmed, total) == (INITIAL, INITIAL)


# --- Redis killed and restarted from its AOF ------------------------------------------------


PLENTY = 10**6  # never sold out here


@pytest.fixture
def aof_redis(settings: Any) -> Iterator[RedisServer]:
    with RedisServer("--appendonly", "yes", "--appendfsync", "always") as server:
        settings.REDISLOCK = {"URL": server.url}
        yield server


def persistent(call: Any, *args: Any) -> Any:
    """``call(*args)`` until Redis answers (confirm and release are safe to retry)."""
    while True:
        try:
            return call(*args)
        except RedisUnavailable:
            time.sleep(0.02)


def buy_through_restarts(stop: Any, reports: Any, sold_so_far: Any, failed_so_far: Any) -> None:
    stock = Stock(NAME)
    sold = failed = 0
    while not stop.is_set():
        try:
            reservation = stock.reserve(1, ttl=30)
        except RedisUnavailable:  # answered or not: an unseen reservation just expires
            failed += 1
            with failed_so_far.get_lock():
                failed_so_far.value += 1
            time.sleep(0.02)
            continue
        if reservation is None:
            continue
        try:
            persistent(stock.confirm, reservation)
        except ReservationExpired:
            continue
        sold += 1
        with sold_so_far.get_lock():
            sold_so_far.value += 1
    reports.put((sold, failed))


def wait_until(predicate: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.timeout(90)
def test_redis_killed_and_restarted_from_aof_loses_no_unit(
    aof_redis: RedisServer, processes: Processes
) -> None:
    stock = Stock(NAME)
    stock.set(PLENTY)
    stop, reports = processes.event(), processes.queue()
    sold, failed = processes.context.Value("l", 0), processes.context.Value("l", 0)
    for _ in range(4):
        processes.start(buy_through_restarts, stop, reports, sold, failed)
    wait_until(lambda: sold.value >= 20, 30, "the buyers never got going")
    aof_redis.kill()  # SIGKILL: no shutdown, no last write
    # Dead until a buyer has run into it (on a loaded machine that may take a while).
    wait_until(lambda: failed.value > 0, 30, "no buyer met the dead server")
    aof_redis.start()  # same port, same directory: it loads its AOF
    after = sold.value
    wait_until(lambda: sold.value >= after + 20, 30, "no sale after the restart")
    stop.set()
    results = [reports.get(timeout=30) for _ in range(4)]
    processes.join_all(30)
    counts = stock.counts()
    assert counts.available + counts.reserved + counts.confirmed == PLENTY == counts.total
    assert counts.confirmed == sum(r[0] for r in results)  # no acknowledged sale lost
    assert sum(r[1] for r in results) > 0
