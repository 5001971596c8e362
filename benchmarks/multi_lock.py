"""MultiLock benchmark: a MultiLock of three names beside one Lock, on one Redis in one run.

    bash scripts/bench.sh multi_lock     # or: python -m benchmarks.multi_lock [--quick]

Uses ``REDIS_URL`` when set, else starts a ``redis-server`` of its own on a free port.
Measures:

* uncontended acquire+release pairs/s from one client (rounds interleaved, median of
  rounds): one ``Lock``, a ``MultiLock`` of three names (one script each way), and three
  ``Lock``s taken one after another (what a MultiLock saves); each also with ``SPIN_WAIT`` 0
  (each reply awaited asleep in ``recv``, as redis-py does, rather than polled for first).
  The MultiLock's time per pair over the Lock's is printed against the target of issue 29
  (<= 1.5x);
* hand-off: a MultiLock in one process releases, a ``Lock`` blocked on one of its names in
  another process holds it: median and p95, beside the same for a ``Lock``'s release.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

from benchmarks import benchmark_redis, command_line, machine
from benchmarks.locks import client, setup
from benchmarks.timing import hand_offs, pairs_per_second, percentile, take_in_turn, until_blocked

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Pair = tuple[Callable[[], bool], Callable[[], None]]
NAMES = ("sku:1", "sku:7", "points:42")


def _no_spin(url: str) -> None:
    """Have this thread's connection to ``url`` await replies asleep (``SPIN_WAIT`` 0)."""
    from django_redislock import get_redis
    from django_redislock.redis.fastpath import dedicated

    held = dedicated(get_redis(url))
    assert held is not None
    held.spin = 0.0


def one_lock(url: str, tag: str, spin: bool = True) -> Pair:
    from django_redislock import Lock

    lock = Lock(f"{tag}:{NAMES[0]}", ttl=10, using=None if spin else url)
    if not spin:
        _no_spin(url)
    return (lambda: lock.acquire(0)), lock.release


def multi_lock(url: str, tag: str, spin: bool = True) -> Pair:
    from django_redislock.locks.multi_lock import MultiLock

    lock = MultiLock([f"{tag}:{name}" for name in NAMES], ttl=10, using=None if spin else url)
    if not spin:
        _no_spin(url)
    return (lambda: lock.acquire(0)), lock.release


def three_locks(url: str, tag: str, spin: bool = True) -> Pair:
    from django_redislock import Lock

    locks = [Lock(f"{tag}:{name}", ttl=10, using=None if spin else url) for name in NAMES]
    if not spin:
        _no_spin(url)

    def acquire() -> bool:
        return all(lock.acquire(0) for lock in locks)

    def release() -> None:
        for lock in locks:
            lock.release()

    return acquire, release


CONTENDERS: dict[str, Callable[[str, str], Pair]] = {
    "Lock": one_lock,
    "MultiLock of 3": multi_lock,
    "3 Locks in a row": three_locks,
    "Lock, SPIN_WAIT 0": lambda url, tag: one_lock(url, tag, spin=False),
    "MultiLock of 3, SPIN_WAIT 0": lambda url, tag: multi_lock(url, tag, spin=False),
    "3 Locks, SPIN_WAIT 0": lambda url, tag: three_locks(url, tag, spin=False),
}


def uncontended(url: str, rounds: int, seconds: float) -> dict[str, float]:
    made = {name: factory(url, f"u{i}") for i, (name, factory) in enumerate(CONTENDERS.items())}
    return pairs_per_second(made, rounds, seconds, batch=100)


# --- hand-off: the holder (a MultiLock, or a Lock) releases; a Lock in another process,
# blocked on one of the names, holds it


def _waiter(name: str, conn: Any) -> None:
    from django_redislock import Lock
    from django_redislock.redis.clients import reset_connections

    reset_connections()
    lock = Lock(name, ttl=30)
    take_in_turn(conn, lambda: lock.acquire(math.inf), lock.release)


def handoff(url: str, kind: str, iterations: int) -> list[float]:
    from django_redislock import Lock
    from django_redislock.locks.multi_lock import MultiLock

    names = [f"h-{kind.replace(' ', '-')}:{name}" for name in NAMES]

    def holder() -> Pair:
        held: Any = MultiLock(names, ttl=30) if kind == "MultiLock" else Lock(names[-1], ttl=30)
        return (lambda: held.acquire(math.inf)), held.release

    probe = client(url)
    return hand_offs(_waiter, (names[-1],), holder, lambda: until_blocked(probe), iterations)


def main() -> None:
    parser = command_line(__doc__, "fewer rounds, shorter runs")
    args = parser.parse_args()
    rounds, seconds, iterations = (4, 0.3, 100) if args.quick else (20, 0.4, 500)

    with benchmark_redis() as url:
        setup(url)
        print(machine(client(url), url) + "\n")
        _uncontended(url, rounds, seconds)
        _handoffs(url, iterations)


def _uncontended(url: str, rounds: int, seconds: float) -> None:
    print(f"Uncontended acquire+release (one client, median of {rounds} interleaved rounds)")
    rates = uncontended(url, rounds, seconds)
    print(f"  {'':30}{'pairs/s':>10}{'us/pair':>10}")
    for name, rate in rates.items():
        print(f"  {name:30}{rate:10.0f}{1e6 / rate:10.1f}")
    for suffix in ("", ", SPIN_WAIT 0"):
        ratio = rates[f"Lock{suffix}"] / rates[f"MultiLock of 3{suffix}"]
        verdict = "PASS" if ratio <= 1.5 else "FAIL"
        print(
            f"  MultiLock of 3 / Lock{suffix}, time per pair: {ratio:.2f} "
            f"(issue 29: <= 1.50) {verdict}"
        )


def _handoffs(url: str, iterations: int) -> None:
    print("\nHand-off: the holder releases -> a Lock blocked on one of its names, in another")
    print("  process, holds it")
    print(f"  {'':30}{'median ms':>10}{'p95 ms':>10}")
    samples: dict[str, list[float]] = {"Lock": [], "MultiLock": []}
    for _ in range(5):  # alternate, so that drift hits both alike
        for kind in samples:
            samples[kind] += handoff(url, kind, max(1, iterations // 5))
    for kind, latencies in samples.items():
        med, p95 = statistics.median(latencies), percentile(latencies, 0.95)
        print(f"  {kind + ' releases':30}{med * 1000:10.3f}{p95 * 1000:10.3f}")


if __name__ == "__main__":
    main()
