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

import math
import statistics
from collections.abc import Callable
from typing import Any

from benchmarks import benchmark_redis, command_line, machine
from benchmarks import locks as lock_bench
from benchmarks.timing import hand_offs, pairs_per_second, percentile, take_in_turn, until_blocked

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
    return pairs_per_second(made, rounds, seconds)


def _reader(url: str, spin: bool, conn: Any) -> None:
    from django_redislock.redis.clients import reset_connections

    reset_connections()
    acquire, release = read_write(url, "bench-rw-handoff", 30, "read", spin)
    take_in_turn(conn, lambda: acquire(blocking=True), release)


def handoff(url: str, iterations: int, spin: bool) -> list[float]:
    """A writer releases -> a reader blocked in another process holds the lock (seconds)."""

    def holder() -> Pair:
        acquire, release = read_write(url, "bench-rw-handoff", 30, "write", spin)
        return (lambda: acquire(blocking=True)), release

    probe = lock_bench.client(url)
    return hand_offs(_reader, (url, spin), holder, lambda: until_blocked(probe), iterations)


def main() -> None:
    parser = command_line(__doc__, "fewer rounds, shorter runs")
    args = parser.parse_args()
    rounds, seconds, iterations = (4, 0.3, 100) if args.quick else (20, 0.4, 500)
    with benchmark_redis() as url:
        lock_bench.setup(url)
        print(machine(lock_bench.client(url), url) + "\n")
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
            median, p95 = statistics.median(samples), percentile(samples, 0.95)
            print(f"  {label:28} median {median * 1000:7.3f} ms   p95 {p95 * 1000:7.3f} ms")


if __name__ == "__main__":
    main()
