"""How the benchmarks time things: contenders in interleaved rounds (each round runs them in
the other order, so that a machine's drift hits them all alike), percentiles, and a hand-off
from a holder in this process to a waiter in another."""

from __future__ import annotations

import math
import multiprocessing
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

# A contender's (acquire, release); ``acquire()`` takes the lock at once or says it did not.
Pair = tuple[Callable[[], object], Callable[[], object]]


def percentile(values: list[float], q: float) -> float:
    """The value below which a share ``q`` (0 to 1) of ``values`` lie; NaN for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


def pairs_per_second(
    made: Mapping[str, Pair], rounds: int, seconds: float, batch: int = 200
) -> dict[str, float]:
    """Uncontended acquire+release pairs per second of each contender: the median of
    ``rounds`` interleaved rounds of ``seconds`` each, timed in batches of ``batch`` pairs."""
    rates: dict[str, list[float]] = {name: [] for name in made}
    order = list(made.items())
    for _ in range(rounds):
        order.reverse()
        for name, (acquire, release) in order:
            count, start = 0, time.perf_counter()
            end = start + seconds
            while time.perf_counter() < end:
                for _ in range(batch):
                    assert acquire(), f"{name}: an uncontended acquire failed"
                    release()
                count += batch
            rates[name].append(count / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def alternating_samples(
    names: list[str], run: Callable[[str], object], rounds: int, per_round: int
) -> dict[str, list[float]]:
    """Seconds each ``run(name)`` took, ``per_round`` calls per name in each of ``rounds``
    interleaved rounds, after 50 untimed calls per name (connections, scripts, caches)."""
    samples: dict[str, list[float]] = {name: [] for name in names}
    order = list(names)
    for name in order:
        for _ in range(50):
            run(name)
    for _ in range(rounds):
        order.reverse()
        for name in order:
            for _ in range(per_round):
                began = time.perf_counter()
                run(name)
                samples[name].append(time.perf_counter() - began)
    return samples


def until_blocked(r: Any, idle: float = 0.0) -> None:
    """Wait until a waiter is blocked in Redis: for push-based locks until Redis counts a
    blocked client (polling keeps every process awake, so no VM idle wake-up penalty hides
    the mechanism); for polling locks, or with ``idle``, a plain sleep."""
    if idle:
        time.sleep(idle)
        return
    deadline = time.perf_counter() + 0.2
    while r.info("clients")["blocked_clients"] < 1 and time.perf_counter() < deadline:
        pass


def take_in_turn(conn: Any, acquire: Callable[[], object], release: Callable[[], object]) -> None:
    """A waiter's side of ``hand_offs``: on each "go", block in ``acquire``, and send back
    the moment it held the lock."""
    while conn.recv() == "go":
        acquire()
        held = time.perf_counter()
        release()
        conn.send(held)


def hand_offs(
    waiter: Callable[..., None],
    args: tuple[Any, ...],
    holder: Callable[[], Pair],
    wait: Callable[[], None],
    iterations: int,
) -> list[float]:
    """Seconds from a release in this process to the hold of ``waiter(*args, conn)``, forked
    (it calls ``take_in_turn``). ``holder()``, made once the waiter runs, blocks in its
    acquire; ``wait()`` returns once the waiter is blocked."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=waiter, args=(*args, child), daemon=True)
    process.start()
    acquire, release = holder()
    latencies = []
    for _ in range(iterations):
        assert acquire()
        parent.send("go")
        wait()
        released = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        release()
        latencies.append(parent.recv() - released)
    parent.send("stop")
    process.join(10)
    return latencies
