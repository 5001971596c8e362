"""Stock benchmark: reserve+confirm pairs per second on one stock, from one process and from
N processes at once, beside the floor of two trivial scripts (two round trips) per pair.

    bash scripts/bench.sh stock          # or: python -m benchmarks.stock [--quick]

Uses ``REDIS_URL`` when set (its stock ``bench`` is overwritten), else starts a
``redis-server`` of its own on a free port. Nothing is asserted: the figures are printed.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import time
from typing import Any

from benchmarks import benchmark_redis, command_line, machine

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import django
from django.conf import settings

NAME = "bench"
PLENTY = 10**11  # never sold out


def setup(url: str) -> None:
    settings.configure(INSTALLED_APPS=["django_redislock"], REDISLOCK={"URL": url}, DATABASES={})
    django.setup()


def pairs(seconds: float, floor: bool = False) -> int:
    """How many reserve+confirm pairs (or, with ``floor``, pairs of trivial scripts) one
    client completes in ``seconds``."""
    from django_redislock.redis.clients import get_redis, run_script
    from django_redislock.redis.scripts import lua_script
    from django_redislock.stock.stock import Stock

    stock, client, trivial = Stock(NAME), get_redis(), lua_script("one", "return 1")
    keys = stock.keys
    done, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(50):
            if floor:
                run_script(client, trivial, keys, ())
                run_script(client, trivial, keys, ())
            else:
                reservation = stock.reserve(1, ttl=60)
                assert reservation is not None
                stock.confirm(reservation)
        done += 50
    return done


def worker(seconds: float, start: Any, results: Any) -> None:
    start.wait()
    results.put(pairs(seconds))


def parallel(processes: int, seconds: float) -> float:
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    children = [
        context.Process(target=worker, args=(seconds, start, results)) for _ in range(processes)
    ]
    for child in children:
        child.start()
    time.sleep(0.2)  # all forked and connected before the clock starts
    start.set()
    total = sum(results.get(timeout=seconds + 60) for _ in children)
    for child in children:
        child.join(10)
    return total / seconds


def main() -> None:
    parser = command_line(__doc__, "fewer rounds, shorter runs")
    parser.add_argument("--processes", type=int, nargs="*", default=[4, 16])
    args = parser.parse_args()
    rounds, seconds = (3, 0.5) if args.quick else (10, 1.0)

    with benchmark_redis() as url:
        setup(url)
        from django_redislock.redis.clients import get_redis
        from django_redislock.stock.stock import Stock

        stock = Stock(NAME)
        stock.delete()
        stock.set(PLENTY)
        print(machine(get_redis(), url) + "\n")
        try:
            ours: list[float] = []
            floor: list[float] = []
            for _ in range(rounds):  # interleaved, so drift hits both alike
                ours.append(pairs(seconds) / seconds)
                floor.append(pairs(seconds, floor=True) / seconds)
            best, base = statistics.median(ours), statistics.median(floor)
            print(f"One client, median of {rounds} interleaved rounds of {seconds:.1f} s")
            print(f"  {'':34}{'pairs/s':>10}")
            print(f"  {'reserve + confirm':34}{best:10.0f}  ({best / base:.2f}x the floor)")
            print(f"  {'floor: two trivial scripts':34}{base:10.0f}")
            print(f"\nN client processes on one stock, {seconds * 3:.1f} s each")
            for n in args.processes:
                rate = parallel(n, seconds * 3)
                print(f"  {n:3d} processes: {rate:10.0f} reserve+confirm pairs/s")
            counts = stock.counts()
            assert sum(counts[:3]) == counts.total == PLENTY  # a sanity check, not a figure
        finally:
            stock.delete()


if __name__ == "__main__":
    main()
