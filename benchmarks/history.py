"""What the per-task history costs (issue 30, point 6):

    bash scripts/bench.sh history [--quick]

* **memory, bytes per task per day**: a full day of minutes for one task, filled as workers
  record them (a flush a second), then ``MEMORY USAGE`` summed over the task's keys (its
  144 ten-minute hashes and 24 hour totals; the queue's task index, shared by its tasks, is
  shown apart). Three shapes of task: busy (a run a second, durations spread as real jobs'
  are: log-normal around 80 ms, 2 % failing), very spread (the same, durations spanning
  1 ms to minutes), and quiet (a run every ten minutes). The memory does not depend on the
  number of jobs: the busy task's 86,400 runs take what 8,640 would.
* **recording, µs per job**: what ``timed_run`` adds to a job's run on the worker's thread
  (counting it in memory), and what a flush costs the recorder's thread per job recorded
  (a second of a busy worker: 1,000 runs of 5 tasks sent in one pipeline).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from typing import Any

from benchmarks import command_line, queue_redis

TASK = "benchmarks.queue_tasks.redislock_noop"
DAY_MINUTES = 24 * 60


def fill(queue: Any, task: str, per_minute: float, sigma: float, rng: random.Random) -> int:
    """A day of ``task`` up to now, flushed once per simulated second of runs."""
    from django_redislock.history.recording import Recorder

    recorder = Recorder()
    now = time.time()
    runs = 0
    for minute in range(int(now // 60) - DAY_MINUTES + 1, int(now // 60) + 1):
        count = int(per_minute) if per_minute >= 1 else int(rng.random() < per_minute)
        for second in range(count):
            seconds = rng.lognormvariate(math.log(0.08), sigma)
            at = minute * 60 + second * 60 / max(1, count)
            recorder.add(queue, task, seconds, failed=rng.random() < 0.02, now=at)
            runs += 1
            if second % 60 == 59:
                recorder.flush()
        recorder.flush()
    return runs


def memory(r: Any, queue: Any, task: str) -> tuple[int, int]:
    """Bytes of ``task``'s keys, and how many keys."""
    from django_redislock.history.keys import HistoryKeys

    keys = HistoryKeys(queue.keys)
    found = [
        k
        for k in r.scan_iter(match=keys.base + "*", count=1000)
        if k.endswith(b":" + task.encode())
    ]
    return sum(r.memory_usage(k, samples=0) or 0 for k in found), len(found)


def recording_cost(queue: Any, jobs: int) -> tuple[float, float]:
    """µs a job: ``timed_run`` over a no-op beside the bare call, and a flush's share."""
    from django_redislock.history.recording import RECORDER, Recorder, timed_run
    from django_redislock.queue.jobs import Job

    job = Job(id="j", queue="default", task=TASK)

    def noop(job: Any, watch: Any) -> None:
        return None

    RECORDER.flush_every = 3600.0  # (its thread must not flush during the timing)
    rounds = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(jobs):
            noop(job, None)
        bare = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(jobs):
            timed_run(queue, job, noop, None)
        rounds.append((time.perf_counter() - started - bare) / jobs * 1e6)
        RECORDER.pending.clear()
    recorder = Recorder()
    flushes = []
    rng = random.Random(1)
    for _ in range(20):
        for n in range(1000):
            recorder.add(
                queue, f"{TASK}{n % 5}", rng.lognormvariate(math.log(0.08), 1.0), failed=False
            )
        started = time.perf_counter()
        recorder.flush()
        flushes.append((time.perf_counter() - started) / 1000 * 1e6)
    return statistics.median(rounds), statistics.median(flushes)


def main() -> None:
    parser = command_line(__doc__, "fewer timed jobs")
    options = parser.parse_args()
    with queue_redis() as (_, r):
        from django_redislock import get_queue
        from django_redislock.history.keys import HistoryKeys

        queue = get_queue("default")
        rng = random.Random(30)
        print(f"{'task':<14}{'runs/day':>10}{'keys':>6}{'bytes/day':>12}{'KiB/day':>9}")
        for name, per_minute, sigma in (
            ("busy", 60, 1.0),
            ("very spread", 60, 3.0),
            ("quiet", 0.1, 1.0),
        ):
            task = f"{TASK}_{name.replace(' ', '_')}"
            runs = fill(queue, task, per_minute, sigma, rng)
            used, count = memory(r, queue, task)
            print(f"{name:<14}{runs:>10,}{count:>6}{used:>12,}{used / 1024:>9.1f}")
        index = r.memory_usage(HistoryKeys(queue.keys).tasks, samples=0)
        print(f"(the queue's task index, for these 3 tasks: {index} bytes)")
        encodings = {r.object("encoding", k) for k in r.scan_iter(match="*hist:m*", count=1000)}
        print(f"(ten-minute hashes' encodings: {sorted(e.decode() for e in encodings)})\n")
        jobs = 20_000 if options.quick else 200_000
        per_job, per_flush = recording_cost(queue, jobs)
        print(f"timed_run on the job's thread: {per_job:.2f} µs a job ({jobs:,} no-op jobs)")
        print(f"the flush, on the recorder's thread: {per_flush:.2f} µs a job recorded")


if __name__ == "__main__":
    main()
