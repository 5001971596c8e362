"""Process mode: jobs/s draining a queue with ``run_queue_worker``'s worker in one process,
and with ``--processes`` 1 and 2 (a supervisor forking worker processes), for no-op jobs and
for CPU-bound ones (pure Python, holding the GIL), on one Redis in one run.

    PYTHONPATH=$PWD:$PWD/example_project python -m benchmarks.processes [--quick]

Uses ``REDIS_URL`` when set, else starts a ``redis-server`` of its own. Each row: the jobs
are enqueued first, then the workers run in burst mode (they exit when nothing is ready);
the time runs from their start to the last one's exit (process start-up included, as a
deploy pays it). Threads (``--concurrency 2``) beside processes show what the GIL does to
CPU-bound jobs.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import time
from typing import Any

from benchmarks import benchmark_redis
from benchmarks.queue import setup

CPU_LOOP = 150_000  # about 10 ms of Python per job here


def run(processes: int | None, concurrency: int) -> None:
    """The worker as the command runs it: in this process, or supervised children."""
    from django_redislock.queue.worker.loop import Worker
    from django_redislock.queue.worker.supervisor import Supervisor

    logging.getLogger("django_redislock").setLevel(logging.ERROR)  # no W002 per process

    def child(index: int) -> int:
        Worker(["default"], concurrency=concurrency, burst=True, schedule=False).run()
        return 0

    if processes is None:
        child(0)
    else:
        Supervisor(child, processes, burst=True).run()


def drain(jobs: list[dict[str, Any]], processes: int | None, concurrency: int) -> float:
    from django_redislock import get_queue, get_redis

    get_redis().flushdb()
    queue = get_queue()
    for start in range(0, len(jobs), 1000):
        queue.enqueue_many(jobs[start : start + 1000])
    worker = multiprocessing.get_context("fork").Process(target=run, args=(processes, concurrency))
    began = time.perf_counter()
    worker.start()
    worker.join()
    took = time.perf_counter() - began
    assert worker.exitcode == 0, worker.exitcode
    assert queue.counts()["ready"] == 0
    return len(jobs) / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer jobs")
    options = parser.parse_args()
    with benchmark_redis() as url:
        setup(url)
        noop_count, cpu_count = (4000, 100) if options.quick else (20000, 400)
        noop = [
            {"task": "benchmarks.queue_tasks.redislock_noop", "args": [n]}
            for n in range(noop_count)
        ]
        cpu = [
            {"task": "benchmarks.queue_tasks.redislock_cpu", "args": [CPU_LOOP]}
            for _ in range(cpu_count)
        ]
        rows = [
            ("one process, 1 thread", None, 1),
            ("one process, 2 threads", None, 2),
            ("--processes 1", 1, 1),
            ("--processes 2", 2, 1),
        ]
        print(
            f"{os.cpu_count()} CPUs; {noop_count} no-op jobs, {cpu_count} CPU-bound jobs "
            f"(~10 ms each); jobs/s, best of 2\n"
        )
        print(f"  {'':28} {'no-op jobs/s':>14} {'CPU-bound jobs/s':>18}")
        results = {}
        for label, processes, concurrency in rows:
            fast = max(drain(noop, processes, concurrency) for _ in range(2))
            slow = max(drain(cpu, processes, concurrency) for _ in range(2))
            results[label] = (fast, slow)
            print(f"  {label:28} {fast:14.0f} {slow:18.1f}")
        one, two = results["--processes 1"], results["--processes 2"]
        print(
            f"\n  --processes 2 / --processes 1: no-op {two[0] / one[0]:.2f}x, "
            f"CPU-bound {two[1] / one[1]:.2f}x"
        )


if __name__ == "__main__":
    main()
