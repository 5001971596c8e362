"""What keyed concurrency limits cost the worker (issue 27), beside the plain drain in the
same run, on the same Redis:

    bash scripts/bench.sh job_limits [--quick]

* **drain, a key on every job**: 10,000 jobs, each with ``concurrency_key="user:{0}"`` (a
  thousand users, limit 4), drained by one worker process, against the same jobs without a
  key. Nothing is held back: this is the price of the permits (taken at lease, given back
  at the end of each run). Target >= 0.8x.
* **drain, a rate key on every job**: the same jobs with ``rate_key="user:{0}"`` and a rate
  of 1,000/s per user, which none reaches: the price of the starts' windows. Target >= 0.8x.
* **a hot key ahead of the others**: 1,000 jobs of one key (limit 1) enqueued first, then
  10,000 plain jobs: the time until the plain ones are done, against the same 10,000 alone.
  The hot jobs are parked as the worker reaches them, and let go one at a time, so the
  others go by: target >= 0.8x (the worker also runs the 1,000 hot jobs meanwhile).

Each row is the median of the rounds, interleaved (the order alternates each round).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import redis

from benchmarks import benchmark_redis, command_line, machine
from benchmarks import queue as queue_bench

KEYED_JOBS, USERS, HOT_JOBS = 10000, 1000, 1000


def _drain(r: redis.Redis, jobs: list[dict[str, object]], expected: int) -> float:
    """Seconds from the worker's start until the last of ``jobs`` (a stamp job) ran."""
    ours = queue_bench.Ours("")
    r.flushdb()
    for at in range(0, len(jobs), 1000):
        ours.queue.enqueue_many(jobs[at : at + 1000])
    ours.enqueue_stamp(0.0)
    worker = queue_bench.WorkerProcess(ours, burst=True)
    try:
        started = worker.go()
        stamps = queue_bench.collect(r, 1, 300)
        if not stamps:
            raise RuntimeError("The last job never ran.")
        took = stamps[0] - started
    finally:
        worker.stop(wait=10)
    done = ours.queue.counts()
    if done["parked"] or done["ready"]:
        raise RuntimeError(f"Jobs were left behind: {done}")
    return expected / took


def plain(n: int) -> list[dict[str, object]]:
    return [{"task": queue_bench.NOOP, "args": [i]} for i in range(n)]


def keyed(n: int) -> list[dict[str, object]]:
    return [
        {
            "task": queue_bench.NOOP,
            "args": [i % USERS],
            "concurrency_key": "user:{0}",
            "concurrency_limit": 4,
        }
        for i in range(n)
    ]


def rated(n: int) -> list[dict[str, object]]:
    return [
        {"task": queue_bench.NOOP, "args": [i % USERS], "rate_key": "user:{0}", "rate": "1000/s"}
        for i in range(n)
    ]


def hot_first(n: int) -> list[dict[str, object]]:
    hot = [
        {"task": queue_bench.NOOP, "args": [i], "concurrency_key": "hot", "concurrency_limit": 1}
        for i in range(HOT_JOBS)
    ]
    return hot + plain(n)


def measure(r: redis.Redis, rounds: int, jobs: int) -> dict[str, float]:
    rows: dict[str, Callable[[], float]] = {
        "plain": lambda: _drain(r, plain(jobs), jobs + 1),
        "a key on every job": lambda: _drain(r, keyed(jobs), jobs + 1),
        "a rate key on every job": lambda: _drain(r, rated(jobs), jobs + 1),
        # the plain jobs' rate: the hot ones run too, in the same time
        "plain, behind a hot key": lambda: _drain(r, hot_first(jobs), jobs + 1),
    }
    samples: dict[str, list[float]] = {name: [] for name in rows}
    order = list(rows)
    for _ in range(rounds):
        order.reverse()
        for name in order:
            samples[name].append(rows[name]())
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = command_line(__doc__, "one round of 2,000 jobs")
    args = parser.parse_args()
    with benchmark_redis(flush=True) as url:
        queue_bench.setup(url)
        r = redis.Redis.from_url(url)
        print(machine(r) + "\n")
        rounds, jobs = (1, 2000) if args.quick else (3, KEYED_JOBS)
        started = time.monotonic()
        found = measure(r, rounds, jobs)
        base = found["plain"]
        print(f"drains of {jobs:,} jobs, one worker process, {rounds} round(s):")
        for name, value in found.items():
            print(f"  {name:28}{value:>10,.0f} jobs/s  {value / base:5.2f}x plain")
        print("\nTargets")
        for label, ratio in (
            ("a key on every job >= 0.8x plain", found["a key on every job"] / base),
            ("a rate key on every job >= 0.8x", found["a rate key on every job"] / base),
            ("others behind a hot key >= 0.8x", found["plain, behind a hot key"] / base),
        ):
            print(f"  {label:36}{ratio:6.2f}x  {'PASS' if ratio >= 0.8 else 'FAIL'}")
        print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
