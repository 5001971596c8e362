"""Where a drain's time goes, job by job: N no-op jobs queued, then drained by one
``Worker(concurrency=1, burst=True)`` in this process, timed plainly (µs per job), then
again under cProfile, whose functions are summed into the parts of a job's life.

    python -m benchmarks.drain_profile [--jobs 10000] [--top 25]

The profile counts the worker thread's CPU time (waits for Redis are not the worker's
Python); cProfile inflates every call alike, so each part is shown as its share of that
profile and as that share of the plain runs' CPU µs per job. Uses ``REDIS_URL`` when set (its
database is flushed), else a ``redis-server`` of its own.
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import statistics
import time
from typing import Any

import redis

from benchmarks import benchmark_redis
from benchmarks.queue import BATCH, NOOP, setup

# Parts of a job's life, by the functions cProfile saw (a file fragment, optionally
# ":%(function)"): the first part matching takes its own time (tottime); a builtin's is its
# callers'.
PARTS: list[tuple[str, list[str]]] = [
    (
        "fetch: PEEK, POP sent, replies read",
        [
            "redis/",
            "socket",
            "select",
            "hiredis",
            "redis/wire",
            "queue/fetching.py:%(fetch_args)",
            "queue/fetching.py:%(candidates)",
            "channel.py:%(_read_until)",
            "channel.py:%(collect)",
            "channel.py:%(send_fetch)",
            "channel.py:%(fetch)",
            "leases.py:%(fetch_ahead)",
            "leases.py:%(send_ahead)",
            "keeping.py:%(_collect)",
            "queue/lua",
            "redis/scripts",
        ],
    ),
    (
        "decode: Job and JSON from POP's reply",
        [
            "queue/fetching.py:%(fetched)",
            "queue/jobs",
            "queue/job_factories",
            "queue/replies",
            "queue/job_codec",
            "json/decoder",
            "json/__init__",
        ],
    ),
    ("START sent (charge + acks)", ["worker/channel", "queue/keys", "queue/fetching"]),
    (
        "Tasks: TaskResult, signals, result JSON",
        [
            "tasks/results",
            "tasks/values",
            "tasks/receivers",
            "django/dispatch",
            "django_tasks/",
            "django/tasks/",
            "dataclasses",
            "django/utils/timezone",
            "django/utils/functional",
            "tasks/backend",
            "weakref",
            "enum.py",
            "json/encoder",
        ],
    ),
    ("run_job, tracing hook, the task", ["queue/execution", "queue_tasks", "metrics/"]),
    (
        "time limit watch",
        ["worker/time_limits", "worker/watch", "queue/time_limits", "inspect.py", "asgiref/sync"],
    ),
    ("logging", ["logging/"]),
    (
        "close_old_connections",
        ["worker/connections", "django/db", "django/utils/connection", "asgiref/local"],
    ),
    (
        "leases bookkeeping, locks",
        [
            "worker/leases",
            "worker/keeping",
            "worker/acknowledgements",
            "worker/renewal",
            "threading",
        ],
    ),
    ("runner, loop", ["worker/runner", "worker/loop", "worker/retrying", "worker/stop_signals"]),
]


CUMULATIVE = [
    ("Signal.send (task_started, task_finished)", "dispatcher.py:(send)"),
    ("Receivers.send (the same, since)", "receivers.py:(send)"),
    ("TaskResult built (task_result)", "results.py:(task_result)"),
    ("TaskResult built (running_result, since)", "new_results.py:(running_result)"),
    ("close_old_connections", "db/__init__.py:(close_old_connections)"),
    ("START: Channel.note", "channel.py:(note)"),
    ("decode: WorkerCalls.fetched", "fetching.py:(fetched)"),
    ("fetch: Leases.fetch_ahead", "leases.py:(fetch_ahead)"),
    ("fetch: Leases.send_ahead", "leases.py:(send_ahead)"),
    ("time limit: TimeLimits.watch", "time_limits.py:(watch)"),
    ("time limit: Watch.call", "watch.py:(call)"),
    ("the task itself", "queue_tasks.py:(noop)"),
]


def fill(r: redis.Redis, jobs: int) -> None:
    from django_redislock import get_queue

    r.flushdb()
    queue = get_queue("default")
    for at in range(0, jobs, BATCH):
        queue.enqueue_many([{"task": NOOP, "args": [n]} for n in range(at, min(at + BATCH, jobs))])


def drain() -> tuple[float, float, float]:
    """Seconds of wall time, of this thread's CPU and of the process's CPU."""
    from django_redislock.queue.worker.loop import Worker

    worker = Worker(["default"], concurrency=1, burst=True)
    started, own, cpu = time.perf_counter(), time.thread_time(), time.process_time()
    worker.run()
    return (time.perf_counter() - started, time.thread_time() - own, time.process_time() - cpu)


def _range(rows: list[list[float]], i: int) -> str:
    return f"[{min(v[i] for v in rows):.1f}-{max(v[i] for v in rows):.1f}]"


def part_of(name: str) -> str:
    for part, fragments in PARTS:
        for fragment in fragments:
            file, _, func = fragment.partition(":%")
            if file in name and (not func or name.endswith(func)):
                return part
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--top", type=int, default=25, help="functions listed by own time")
    parser.add_argument("--rounds", type=int, default=5, help="plain drains")
    args = parser.parse_args()
    with benchmark_redis() as url:
        setup(url)
        logging.getLogger("django_redislock").setLevel(logging.WARNING)
        r = redis.Redis.from_url(url)
        plain = []
        for _ in range(args.rounds):
            fill(r, args.jobs)
            plain.append([t / args.jobs * 1e6 for t in drain()])
        wall, own, cpu = (statistics.median(v[i] for v in plain) for i in range(3))
        print(
            f"plain drains ({args.rounds}, in process, no start-up), µs per job, median "
            f"[range]:\n  wall {wall:.1f} {_range(plain, 0)} ({1e6 / wall:,.0f} jobs/s)\n"
            f"  worker thread's CPU {own:.1f} {_range(plain, 1)}\n"
            f"  process CPU (every thread) {cpu:.1f} {_range(plain, 2)}"
        )
        us = own
        fill(r, args.jobs)
        # Timed in the worker thread's CPU time: waits for Redis (and for a busy VM) are not
        # the worker's Python.
        profile = cProfile.Profile(time.thread_time_ns, 1e-9)
        profile.enable()
        took = drain()
        profile.disable()
        print(
            f"profiled drain: wall {took[0] / args.jobs * 1e6:.1f} µs per job, "
            f"worker thread's CPU {took[1] / args.jobs * 1e6:.1f}"
        )
        stats: Any = pstats.Stats(profile)
        parts: dict[str, float] = {}
        rows = []
        for (file, line, func), (_, calls, tottime, _, callers) in stats.stats.items():
            name = f"{file}:{line}({func})" if line else func
            rows.append((tottime, calls, name))
            if file == "~" and callers:  # a builtin: its time is its callers', by calls
                total_calls = sum(c[1] for c in callers.values()) or 1
                for (cfile, cline, cfunc), c in callers.items():
                    part = part_of(f"{cfile}:{cline}({cfunc})")
                    parts[part] = parts.get(part, 0.0) + tottime * c[1] / total_calls
                continue
            parts[part_of(name)] = parts.get(part_of(name), 0.0) + tottime
        total = sum(parts.values())
        print(f"\n{'part':46}{'share':>8}{'µs/job':>9}   (of the plain runs' {us:.1f} µs of CPU)")
        for part, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
            share = seconds / total
            print(f"{part:46}{share:8.1%}{share * us:9.1f}")
        print("\nof which, cumulative (profiled µs per job):")
        for label, fragment in CUMULATIVE:
            cum = sum(v[3] for k, v in stats.stats.items() if fragment in f"{k[0]}:({k[2]})")
            print(f"  {label:44}{cum / args.jobs * 1e6:8.2f}")
        print(f"\ntop {args.top} functions by own time (profiled µs per job, calls per job)")
        for tottime, calls, name in sorted(rows, reverse=True)[: args.top]:
            short = name.split("site-packages/")[-1].split("django_redislock/")[-1]
            print(f"{tottime / args.jobs * 1e6:8.2f}{calls / args.jobs:8.2f}  {short[-90:]}")


if __name__ == "__main__":
    main()
