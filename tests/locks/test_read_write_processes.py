"""ReadWriteLock across real OS processes on a real redis-server and a real Redis Cluster.

Each process records the interval it held a side in (its kind, start, end on the
monotonic clock, which all processes of the machine share) to a queue the test reads: the
intervals prove that readers share (read intervals overlap), that writers exclude (no write
interval overlaps any other), and that a waiting writer blocks readers arriving after it.
A SIGKILLed holder's hold lapses within its TTL."""

from __future__ import annotations

import math
import os
import random
import signal
import time
from typing import Any, NamedTuple

import pytest

from django_redislock.locks.read_write import ReadWriteLock
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


class Interval(NamedTuple):
    kind: str
    start: float
    end: float
    fence: int | None = None


def overlap(a: Interval, b: Interval) -> bool:
    return a.start < b.end and b.start < a.end


def hold(side: Any, kind: str, seconds: float, out: Any) -> None:
    """Hold ``side`` (acquired) for ``seconds``, then record the interval and release."""
    start = time.monotonic()
    fence = side.fence
    time.sleep(seconds)
    end = time.monotonic()
    out.put(Interval(kind, start, end, fence))
    side.release()


class Unguarded:
    """A side that guards nothing: the control run."""

    fence = None

    def acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass


def mixed_workload(seed: int, rounds: int, fair: bool, out: Any, guarded: bool = True) -> None:
    rw = ReadWriteLock("catalog", ttl=10, timeout=math.inf, fair=fair, fencing=True)
    chance = random.Random(seed)
    for _ in range(rounds):
        kind = "write" if chance.random() < 0.3 else "read"
        side = (rw.write() if kind == "write" else rw.read()) if guarded else Unguarded()
        assert side.acquire()
        hold(side, kind, 0.002 if kind == "write" else 0.015, out)


def collect(out: Any, count: int) -> list[Interval]:
    return [Interval(*out.get(timeout=60)) for _ in range(count)]


@pytest.mark.parametrize("fair", [False, True], ids=["writers-first", "fair"])
def test_readers_share_and_writers_exclude(real_backend, processes, fair):
    out = processes.queue()
    for seed in range(6):
        processes.start(mixed_workload, seed, 25, fair, out)
    intervals = collect(out, 6 * 25)
    processes.join_all(60)
    reads = [i for i in intervals if i.kind == "read"]
    writes = sorted((i for i in intervals if i.kind == "write"), key=lambda i: i.start)
    assert reads
    assert writes
    assert any(overlap(a, b) for n, a in enumerate(reads) for b in reads[n + 1 :]), (
        "no two readers ever held the lock together"
    )
    for write in writes:
        others = [i for i in intervals if i is not write]
        assert not [i for i in others if overlap(write, i)], "a writer was not alone"
    fences = [w.fence for w in writes]
    assert fences == sorted(set(fences)), "write fences must increase with the writes"
    assert not ReadWriteLock("catalog").locked()


def test_control_unguarded_writers_overlap(real_backend, processes):
    # Proves the test above can fail: the same work without the lock lets writers overlap.
    out = processes.queue()
    for seed in range(6):
        processes.start(mixed_workload, seed, 25, False, out, False)
    intervals = collect(out, 6 * 25)
    processes.join_all(60)
    writes = [i for i in intervals if i.kind == "write"]
    assert any(overlap(w, i) for w in writes for i in intervals if i is not w)


def read_until_told(ready: Any, go: Any, out: Any) -> None:
    side = ReadWriteLock("pref", ttl=30).read()
    assert side.acquire(0)
    start = time.monotonic()
    ready.set()
    go.wait(30)
    out.put(Interval("first reader", start, time.monotonic()))
    side.release()


def take_and_record(kind: str, fair: bool, out: Any) -> None:
    rw = ReadWriteLock("pref", ttl=30, fair=fair)
    side = rw.write() if kind.endswith("writer") else rw.read()
    assert side.acquire(30)
    hold(side, kind, 0.05, out)


@pytest.mark.parametrize("fair", [False, True], ids=["writers-first", "fair"])
def test_a_waiting_writer_blocks_readers_arriving_after_it(real_backend, processes, fair):
    out, ready, go = processes.queue(), processes.event(), processes.event()
    rw = ReadWriteLock("pref", fair=fair)
    processes.start(read_until_told, ready, go, out)
    assert ready.wait(30)
    processes.start(take_and_record, "writer", fair, out)
    wait_for(lambda: rw.state().waiters == 1, 30, "the writer queued")
    queued_at = time.monotonic()
    processes.start(take_and_record, "late reader", fair, out)
    wait_for(lambda: rw.state().waiters == 2, 30, "the late reader queued")
    assert rw.readers() == 1  # the late reader waits, though only readers hold the lock
    go.set()
    got = {i.kind: i for i in collect(out, 3)}
    processes.join_all(60)
    first, writer, late = got["first reader"], got["writer"], got["late reader"]
    assert writer.start >= first.end
    assert late.start >= writer.end, "a reader arriving after a waiting writer went first"
    assert late.start > queued_at


def hold_forever(kind: str, ttl: float, held: Any) -> None:
    side = getattr(ReadWriteLock("crash", ttl=ttl), kind)()
    assert side.acquire(0)
    held.put(time.monotonic())
    while True:
        time.sleep(1)


def wait_for_the_other_side(kind: str, results: Any) -> None:
    side = getattr(ReadWriteLock("crash", ttl=30), kind)()
    results.put((side.acquire(20), time.monotonic()))


@pytest.mark.parametrize(("dead", "waiting"), [("write", "read"), ("read", "write")])
def test_a_sigkilled_holders_hold_lapses_within_its_ttl(
    real_backend, processes, settings, dead, waiting
):
    # A fallback re-check a minute away: the waiter gets in in time only by the wake-up it
    # times to the dead holder's TTL.
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    ttl = 1.0
    held, results = processes.queue(), processes.queue()
    holder = processes.start(hold_forever, dead, ttl, held)
    acquired_at = held.get(timeout=30)
    os.kill(holder.pid, signal.SIGKILL)
    processes.start(wait_for_the_other_side, waiting, results)
    got, at = results.get(timeout=30)
    assert got
    assert at >= acquired_at + ttl - 0.05  # not before the dead holder's TTL ran out
    assert at < acquired_at + ttl + 5
