"""ReadWriteLock benchmark: its readers' (and writers') uncontended acquire+release rate
beside a plain ``Lock``'s, on one Redis in one run.

    bash scripts/bench.sh read_write_lock     # or: python -m benchmarks.read_write_lock [--quick]

Uses ``REDIS_URL`` when set, else starts a ``redis-server`` of its own on a free port.
Rounds are interleaved (each contender's order alternates) and the median of rounds is
kept. Every figure also with ``SPIN_WAIT`` 0 (each reply awaited asleep in ``recv``), and
a read-side hand-off: a writer releases, a reader blocked in another process holds the
lock. Target (issue 29): readers >= 0.9x a Lock's acquire+release rate.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks import locks as lock_bench
from benchmarks import redis_url

Pair = tuple[Callable[..., bool], Callable[[], None]]


def read_write(url: str, name: str, ttl: float, kind: str, spin: bool = True) -> Pair:
    from django_redislock import get_redis
    from django_redislock.locks.read_write import ReadWriteLock
    from django_redislock.redis.fastpath import dedicated

    rw = ReadWriteLock(name, ttl=ttl, using=None if spin else url)
    if not spin:  # a client of its own, as in benchmarks.locks
        held = dedicated(get_redis(url))
        assert held is not None
        held.spin = 0.0
    side = rw.read() if kind == "read" else rw.write()

    def acquire(blocking: bool = False) -> bool:
        return side.acquire(math.inf if blocking else 0)

    return acquire, side.release


CONTENDERS: dict[str, Callable[..., Pair]] = {
    "Lock": lock_bench.ours,
    "ReadWriteLock read": lambda url, name, ttl: read_write(url, name, ttl, "read"),
    "ReadWriteLock write": lambda url, name, ttl: read_write(url, name, ttl, "write"),
    "Lock, SPIN_WAIT 0": lock_bench.ours_no_spin,
    "RW read, SPIN_WAIT 0": lambda url, name, ttl: read_write(url, name, ttl, "read", False),
}
RATIOS = [
    ("readers / Lock", "ReadWriteLock read", "Lock"),
    ("writers / Lock", "ReadWriteLock write", "Lock"),
    ("readers / Lock, SPIN_WAIT 0", "RW read, SPIN_WAIT 0", "Lock, SPIN_WAIT 0"),
]


def uncontended(url: str, rounds: int, seconds: float) -> dict[str, float]:
    made = {
        name: make(url, f"bench-rw-{i}", 10) for i, (name, make) in enumerate(CONTENDERS.items())
    }
    rates: dict[str, list[float]] = {name: [] for name in made}
    order = list(made.items())
    for _ in range(rounds):
        order.reverse()
        for name, (acquire, release) in order:
            count, start = 0, time.perf_counter()
            end = start + seconds
            while time.perf_counter() < end:
                for _ in range(200):
                    acquire()
                    release()
                count += 200
            rates[name].append(count / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def _reader(url: str, spin: bool, conn: Any) -> None:
    from django_redislock.redis.clients import reset_connections

    reset_connections()
    acquire, release = read_write(url, "bench-rw-handoff", 30, "read", spin)
    while conn.recv() == "go":
        acquire(blocking=True)
        held = time.perf_counter()
        release()
        conn.send(held)


def handoff(url: str, iterations: int, spin: bool) -> list[float]:
    """A writer releases -> a reader blocked in another process holds the lock (seconds)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    reader = ctx.Process(target=_reader, args=(url, spin, child), daemon=True)
    reader.start()
    acquire, release = read_write(url, "bench-rw-handoff", 30, "write", spin)
    probe = lock_bench.client(url)
    latencies = []
    for _ in range(iterations):
        assert acquire(blocking=True)
        parent.send("go")
        lock_bench._until_blocked(probe, 0.0)
        released = time.perf_counter()
        release()
        latencies.append(parent.recv() - released)
    parent.send("stop")
    reader.join(10)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds, shorter runs")
    args = parser.parse_args()
    rounds, seconds, iterations = (4, 0.3, 100) if args.quick else (20, 0.4, 500)
    url, server = redis_url()
    lock_bench.setup(url)
    info = lock_bench.client(url).info("server")
    print(
        f"Redis {info['redis_version']} at {url}; Python {sys.version.split()[0]}; "
        f"{os.cpu_count()} CPUs\n"
    )
    try:
        print(f"Uncontended acquire+release (one client, median of {rounds} interleaved rounds)")
        rates = uncontended(url, rounds, seconds)
        for name, rate in rates.items():
            print(f"  {name:24}{rate:10.0f} pairs/s")
        for title, mine, theirs in RATIOS:
            ratio = rates[mine] / rates[theirs]
            verdict = "" if title.startswith("writers") else (" PASS" if ratio >= 0.9 else " FAIL")
            print(f"  {title:30}{ratio:6.2f}x (issue 29: readers >= 0.90){verdict}")
        print("\nHand-off: a writer releases -> a reader blocked in another process holds it")
        for spin, label in [(True, "ReadWriteLock"), (False, "ReadWriteLock, SPIN_WAIT 0")]:
            samples = handoff(url, iterations, spin)
            median, p95 = statistics.median(samples), lock_bench.percentile(samples, 0.95)
            print(f"  {label:28} median {median * 1000:7.3f} ms   p95 {p95 * 1000:7.3f} ms")
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
