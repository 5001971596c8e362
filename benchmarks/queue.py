"""Queue benchmark: django-redislock's job queue and worker side by side with huey and RQ, on
one Redis in one run.

    bash scripts/bench.sh queue          # or: python -m benchmarks.queue [--quick]
    bash scripts/bench.sh queue --only enqueue   # the one-job enqueue rows alone

Uses ``REDIS_URL`` when set (its database is flushed), else starts a ``redis-server`` of its
own on a free port. Every job is a no-op taking a small int, or ``stamp``, which records in
Redis when it started (``benchmarks/queue_tasks.py``). The contenders:

* django-redislock: ``Queue.enqueue`` and ``Queue.enqueue_many`` (100 per call); the worker
  ``Worker(["default"], concurrency=1)``. With ``RedisTaskBackend`` as the Tasks backend, a
  row for enqueueing through Django Tasks (``@task`` ``.enqueue()``) too;
* huey, with both Redis storages: ``RedisHuey`` (a list; huey's default) and
  ``PriorityRedisHuey`` (a sorted set; priorities, as ours); a task call enqueues; the
  worker is a consumer with one worker thread. huey has no batch enqueue; its best path,
  used for enqueue_many, is its own enqueue of 100 task calls with their Redis commands
  sent in one pipeline;
* RQ: ``Queue.enqueue`` and ``Queue.enqueue_many`` (its pipeline, 100 per call);
  ``SimpleWorker`` (no fork per job), with its scheduler (``with_scheduler=True``) for the
  delayed jobs;
* django-redislock with ``SPIN_WAIT`` 0: its enqueue waiting for each reply asleep in
  ``recv``, as redis-py (and so huey and RQ) does, rather than polling for it first;
* the floor: one ``LPUSH`` of our job's payload per call through redis-py (per 100 for
  enqueue_many, in one pipeline), the least an enqueue sent as huey and RQ send theirs can
  cost; and the same single ``LPUSH`` sent as django-redislock sends its commands (a held
  connection; the reply polled for up to ``SPIN_WAIT``). django-redislock's enqueue is that
  round trip plus its script and its Python.

Each worker runs in an OS process of its own (forked, imports done, then told to start);
the db is flushed before each contender. Measures:

* enqueue/s: one job per call, one producer (median of interleaved rounds); beside it the
  producer's CPU time per call (``time.process_time``): what an enqueue costs its caller
  besides the wait for Redis, though django-redislock's includes polling for the reply
  (``SPIN_WAIT``), so compare its Task.enqueue row with its own queue.enqueue row;
* enqueue_many jobs/s: as above, 100 jobs per call;
* drain jobs/s: N jobs queued, then one worker process starts; the time runs from its start
  until the last job (queued last; every queue here is FIFO) starts (median of rounds);
* enqueue->start p50/p99: an idle worker waits; a job carrying ``time.time()`` is enqueued
  every 2-5 ms; the job records its start time minus that;
* delayed lateness p50/p99: jobs due 50-500 ms after their enqueue, one enqueued every 3-7
  ms; the start time minus the due time. Negative is early: RQ keeps due times in whole
  seconds. RQ's scheduler and huey's poll once a second. Results are collected with a
  blocking pop, so the benchmark never wakes an idle Redis itself;
* bytes/job: N jobs queued into an empty db, no worker: ``MEMORY USAGE`` (SAMPLES 0) summed
  over every key (SCAN) / N, the number the target uses; INFO ``used_memory`` delta / N
  beside it.

Ratios are django-redislock / the other. Targets against huey use the faster of huey's two
storages.
"""

from __future__ import annotations

import os
import sys

from benchmarks import benchmark_redis, command_line, machine

# Run as a script, this file's directory comes first on sys.path, where this file would
# shadow the standard library's ``queue``: it goes last, and the repository root first.
sys.path.sort(
    key=lambda p: os.path.realpath(p or ".") == os.path.dirname(os.path.realpath(__file__))
)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dataclasses
import importlib.metadata
import json
import multiprocessing
import random
import signal
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

import django
import redis
from django.conf import settings

from benchmarks.timing import percentile

# The Tasks backend: with django-redislock's own, the "Task.enqueue" row is measured too.
IMMEDIATE_BACKEND = "django_tasks.backends.immediate.ImmediateBackend"
REDIS_TASK_BACKEND = "django_redislock.tasks.RedisTaskBackend"
TASKS_BACKEND = REDIS_TASK_BACKEND

BATCH = 100
NOOP = "benchmarks.queue_tasks.redislock_noop"
STAMP = "benchmarks.queue_tasks.redislock_stamp"


def setup(url: str) -> None:
    settings.configure(
        INSTALLED_APPS=["django_tasks", "django_redislock", "benchmarks"],
        REDISLOCK={"URL": url, "QUEUES": {"default": {}}},
        TASKS={"default": {"BACKEND": TASKS_BACKEND, "QUEUES": ["default"]}},
        DATABASES={},
        USE_TZ=True,
        LOGGING_CONFIG=None,
    )
    django.setup()
    from benchmarks import queue_tasks

    queue_tasks.configure(url)


# --- the contenders: enqueue one, enqueue a batch, enqueue a stamp, build a worker --------


class Ours:
    name = "django-redislock"
    burst = True

    def __init__(self, url: str) -> None:
        from django_redislock import get_queue

        self.queue = get_queue("default")

    def enqueue(self, n: int) -> None:
        self.queue.enqueue(NOOP, [n])

    def enqueue_batch(self, ns: Sequence[int]) -> None:
        self.queue.enqueue_many([{"task": NOOP, "args": [n]} for n in ns])

    def enqueue_stamp(self, since: float, delay: float | None = None) -> None:
        self.queue.enqueue(STAMP, [since], delay=delay)

    def worker(self, burst: bool, scheduler: bool) -> Callable[[], Any]:
        from django_redislock.queue.worker.loop import Worker

        return Worker(["default"], concurrency=1, burst=burst).run  # due jobs: always


class OursNoSpin(Ours):
    name = "django-redislock, SPIN_WAIT 0"

    def __init__(self, url: str) -> None:
        from django_redislock import get_queue
        from django_redislock.redis.fastpath import dedicated

        self.queue = get_queue("default", using=url)  # a client (and connection) of its own
        held = dedicated(self.queue.client)
        assert held is not None
        held.spin = 0.0  # as REDISLOCK["SPIN_WAIT"] = 0 would, for this connection only


class OursTasks(Ours):
    name = "django-redislock Task.enqueue"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        from benchmarks.queue_tasks import redislock_noop

        self.task = redislock_noop  # imported once, as a module-level import would be

    def enqueue(self, n: int) -> None:
        self.task.enqueue(n)


class OursTasksOptions(OursTasks):
    name = "django-redislock Task.enqueue, options"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        from benchmarks.queue_tasks import redislock_noop_with_options

        self.task = redislock_noop_with_options()


class Huey:
    name = "huey RedisHuey"
    burst = False  # the benchmark stops it
    storage = "RedisHuey"

    def __init__(self, url: str) -> None:
        import huey

        from benchmarks.queue_tasks import huey_tasks

        self.huey = getattr(huey, self.storage)("bench", url=url)
        self.noop, self.stamp = huey_tasks(self.huey)

    def enqueue(self, n: int) -> None:
        self.noop(n)

    def enqueue_batch(self, ns: Sequence[int]) -> None:
        storage = self.huey.storage
        conn = storage.conn
        pipe = storage.conn = conn.pipeline(transaction=False)
        try:
            for n in ns:
                self.noop(n)
        finally:
            storage.conn = conn
        pipe.execute()

    def enqueue_stamp(self, since: float, delay: float | None = None) -> None:
        if delay:
            self.stamp.schedule(args=(since,), delay=delay)
        else:
            self.stamp(since)

    def worker(self, burst: bool, scheduler: bool) -> Callable[[], Any]:
        consumer = self.huey.create_consumer(workers=1, worker_type="thread", periodic=False)
        return consumer.run  # type: ignore[no-any-return]


class PriorityHuey(Huey):
    name = "huey PriorityRedisHuey"
    storage = "PriorityRedisHuey"


class RQ:
    name = "RQ SimpleWorker"
    burst = True

    def __init__(self, url: str) -> None:
        from rq import Queue

        self.connection = redis.Redis.from_url(url)
        self.queue = Queue("default", connection=self.connection)

    def enqueue(self, n: int) -> None:
        from benchmarks.queue_tasks import noop

        self.queue.enqueue(noop, n)

    def enqueue_batch(self, ns: Sequence[int]) -> None:
        from rq import Queue

        from benchmarks.queue_tasks import noop

        self.queue.enqueue_many([Queue.prepare_data(noop, (n,)) for n in ns])

    def enqueue_stamp(self, since: float, delay: float | None = None) -> None:
        from benchmarks.queue_tasks import stamp

        if delay:
            self.queue.enqueue_in(timedelta(seconds=delay), stamp, since)
        else:
            self.queue.enqueue(stamp, since)

    def worker(self, burst: bool, scheduler: bool) -> Callable[[], Any]:
        from rq import SimpleWorker

        worker = SimpleWorker([self.queue], connection=self.connection)
        return lambda: worker.work(burst=burst, with_scheduler=scheduler, logging_level="WARNING")


class Floor:
    name = "floor: 1 LPUSH, redis-py"

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.payload = json.dumps({"task": NOOP, "args": [0], "kwargs": {}})

    def enqueue(self, n: int) -> None:
        self.client.lpush("bench:floor", self.payload)

    def enqueue_batch(self, ns: Sequence[int]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for _ in ns:
            pipe.lpush("bench:floor", self.payload)
        pipe.execute()


class FloorOwn(Floor):
    name = "floor: 1 LPUSH, as ours sends"

    def enqueue(self, n: int) -> None:
        from django_redislock.redis.clients import call

        call(self.client, "LPUSH", "bench:floor", self.payload)


# --- worker processes ---------------------------------------------------------------------


def _worker_main(contender: Any, burst: bool, scheduler: bool, conn: Any) -> None:
    run = contender.worker(burst, scheduler)
    conn.send("ready")
    conn.recv()
    run()


class WorkerProcess:
    """A contender's worker in a forked process, built there, started by ``go()``."""

    def __init__(self, contender: Any, *, burst: bool = False, scheduler: bool = False) -> None:
        ctx = multiprocessing.get_context("fork")
        self.pipe, child = ctx.Pipe()
        # Not a daemon: RQ's worker forks its scheduler process.
        self.process = ctx.Process(target=_worker_main, args=(contender, burst, scheduler, child))
        self.process.start()
        self.pipe.recv()

    def go(self) -> float:
        started = time.time()
        self.pipe.send("go")
        return started

    def stop(self, wait: float = 0.0) -> None:
        """Let a burst worker end by itself (``wait``), else SIGTERM, then SIGKILL."""
        self.process.join(wait)
        if self.process.is_alive():
            assert self.process.pid is not None
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def wait_until_blocked(r: redis.Redis, timeout: float = 10.0) -> None:
    """Until the worker waits in Redis for a job (then idle: no backlog, nothing warming up)."""
    deadline = time.monotonic() + timeout
    while r.info("clients")["blocked_clients"] < 1:
        if time.monotonic() > deadline:
            raise RuntimeError("The worker never blocked waiting for jobs.")
        time.sleep(0.005)
    time.sleep(0.05)


def collect(r: redis.Redis, count: int, timeout: float) -> list[float]:
    """The ``count`` stamps the jobs push (fewer if some never ran within ``timeout``). A
    blocking pop, not polling: a Redis woken every few ms by the benchmark would hide how
    late an idle server ends a blocking command."""
    from benchmarks.queue_tasks import STAMPS

    values: list[float] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        try:
            reply = r.blpop([STAMPS], timeout=min(1.0, max(0.01, deadline - time.monotonic())))
        except redis.TimeoutError:  # the client gave up a moment before Redis answered nil
            reply = None
        if reply is not None:
            values.append(float(reply[1]))
    return values


# --- measurements -------------------------------------------------------------------------


def interleaved(
    contenders: Sequence[Any], rounds: int, measure: Callable[[Any], Any]
) -> dict[str, list[Any]]:
    """``measure(contender)`` per contender and round; the order alternates each round, so
    no contender always runs right after the same one."""
    samples: dict[str, list[Any]] = {c.name: [] for c in contenders}
    order = list(contenders)
    for _ in range(rounds):
        order.reverse()
        for c in order:
            samples[c.name].append(measure(c))
    return samples


def rate(r: redis.Redis, contender: Any, seconds: float, batch: bool) -> tuple[float, float]:
    """Jobs enqueued per second, one job (or a batch of ``BATCH``) per call, and the CPU
    time of this process per job, in microseconds."""
    r.flushdb()
    call = contender.enqueue_batch if batch else contender.enqueue
    per_call = BATCH if batch else 1
    call(range(BATCH) if batch else 0)  # warm up: scripts loaded, connection open
    calls, start, cpu = 0, time.perf_counter(), time.process_time()
    end = start + seconds
    while time.perf_counter() < end:
        for _ in range(10 if batch else 100):
            n = calls * per_call
            call(range(n, n + BATCH) if batch else n)
            calls += 1
    jobs, elapsed = calls * per_call, time.perf_counter() - start
    return jobs / elapsed, (time.process_time() - cpu) / jobs * 1e6


def drain(r: redis.Redis, contender: Any, jobs: int) -> float:
    r.flushdb()
    for at in range(0, jobs, BATCH):
        contender.enqueue_batch(range(at, min(at + BATCH, jobs)))
    contender.enqueue_stamp(0.0)  # the last job: pushes the time it started
    worker = WorkerProcess(contender, burst=contender.burst)
    try:
        started = worker.go()
        stamps = collect(r, 1, 300)
        if not stamps:
            raise RuntimeError(f"{contender.name}: the last job never ran.")
        return (jobs + 1) / (stamps[0] - started)
    finally:
        worker.stop(wait=10 if contender.burst else 0)


def start_latency(r: redis.Redis, contender: Any, probes: int) -> list[float]:
    r.flushdb()
    worker = WorkerProcess(contender)
    try:
        worker.go()
        wait_until_blocked(r)
        for _ in range(3):  # warm up
            contender.enqueue_stamp(time.time())
            time.sleep(0.02)
        collect(r, 3, 10)
        for _ in range(probes):
            time.sleep(random.uniform(0.002, 0.005))
            contender.enqueue_stamp(time.time())
        return collect(r, probes, 10)
    finally:
        worker.stop()


def lateness(r: redis.Redis, contender: Any, jobs: int) -> list[float]:
    r.flushdb()
    worker = WorkerProcess(contender, scheduler=True)
    try:
        worker.go()
        wait_until_blocked(r)
        for _ in range(jobs):
            time.sleep(random.uniform(0.003, 0.007))
            delay = random.uniform(0.05, 0.5)
            contender.enqueue_stamp(time.time() + delay, delay)
        return collect(r, jobs, 5)
    finally:
        worker.stop()


def memory_per_job(r: redis.Redis, contender: Any, jobs: int) -> tuple[float, float]:
    r.flushdb()
    before = r.info("memory")["used_memory"]
    for at in range(0, jobs, BATCH):
        contender.enqueue_batch(range(at, min(at + BATCH, jobs)))
    used = r.info("memory")["used_memory"] - before
    total = sum(r.memory_usage(key, samples=0) or 0 for key in r.scan_iter(count=1000))
    r.flushdb()
    return total / jobs, used / jobs


# --- report -------------------------------------------------------------------------------


COLUMNS = [  # key, header, decimals
    ("enqueue", "enqueue/s", 0),
    ("cpu", "CPU us/enq", 1),
    ("many", "many jobs/s", 0),
    ("drain", "drain jobs/s", 0),
    ("start50", "start p50 ms", 2),
    ("start99", "p99 ms", 2),
    ("late50", "late p50 ms", 1),
    ("late99", "p99 ms", 1),
    ("bytes", "bytes/job", 0),
    ("used", "used_mem/job", 0),
]
CELL = 13


def report(results: dict[str, dict[str, float]]) -> None:
    width = max(len(name) for name in results) + 3
    print(f"  {'':{width}}" + "".join(f"{header:>{CELL}}" for _, header, _ in COLUMNS))
    for name, row in results.items():
        cells = [f"{row[k]:{CELL}.{d}f}" if k in row else f"{'-':>{CELL}}" for k, _, d in COLUMNS]
        print(f"  {name:{width}}" + "".join(cells))
    ours = results[Ours.name]
    print("\n  django-redislock / it (rates: above 1 is better; times and bytes: below 1)")
    for name, row in results.items():
        if name == Ours.name:
            continue
        cells = [
            f"{ours[k] / row[k]:{CELL - 1}.{2 if ours[k] >= 0.1 * row[k] else 3}f}x"
            if k in ours and k in row and ours[k] > 0 and row[k] > 0
            else f"{'-':>{CELL}}"
            for k, _, _ in COLUMNS
        ]
        print(f"  {'vs ' + name:{width}}" + "".join(cells))


def targets(results: dict[str, dict[str, float]]) -> None:
    ours, rq = results[Ours.name], results[RQ.name]

    def huey(key: str) -> float:  # the faster of huey's storages
        return max(results[name][key] for name in (Huey.name, PriorityHuey.name))

    checks = [("enqueue >= 1.5x huey", f"{ours['enqueue/huey']:.2f}x", ours["enqueue/huey"] >= 1.5)]
    if OursTasks.name in results:
        tasks = results[OursTasks.name]["enqueue/huey"]
        checks.append(("Task.enqueue >= 1.5x huey", f"{tasks:.2f}x", tasks >= 1.5))
    if OursTasksOptions.name in results:
        opted = results[OursTasksOptions.name]["enqueue/huey"]
        plain = results[OursTasks.name]["enqueue/huey"]
        checks.append(
            ("with options >= 0.9x without", f"{opted / plain:.2f}x", opted >= 0.9 * plain)
        )
        checks.append(("  and >= 1.5x huey", f"{opted:.2f}x", opted >= 1.5))
    if "drain" in ours:  # not measured with --only enqueue
        checks += [
            (
                "drain >= 3x huey",
                f"{ours['drain'] / huey('drain'):.2f}x",
                ours["drain"] >= 3 * huey("drain"),
            ),
            ("enqueue->start p50 <= 2 ms", f"{ours['start50']:.2f} ms", ours["start50"] <= 2),
            ("delayed lateness p99 <= 10 ms", f"{ours['late99']:.1f} ms", ours["late99"] <= 10),
            (
                "bytes/job < RQ's",
                f"{ours['bytes']:.0f} vs {rq['bytes']:.0f}",
                ours["bytes"] < rq["bytes"],
            ),
        ]
    print(
        "\nTargets (huey: the faster of its two storages; enqueue: the median of each round's"
        " ratio)"
    )
    for label, shown, ok in checks:
        print(f"  {label:32}{shown:>14}  {'PASS' if ok else 'FAIL'}")
    asleep, floor = results[OursNoSpin.name]["enqueue"], results[Floor.name]["enqueue"]
    print(
        f"\n  Waiting for each reply asleep in recv (SPIN_WAIT 0), as redis-py does, "
        f"django-redislock's\n  enqueue is {asleep / huey('enqueue'):.2f}x huey's; a bare LPUSH "
        f"through redis-py is {floor / huey('enqueue'):.2f}x."
    )


@dataclasses.dataclass(frozen=True)
class Plan:
    rounds: int  # of each enqueue measurement, interleaved
    seconds: float  # per enqueue round
    drain_jobs: int
    drain_rounds: int
    probes: int  # enqueue->start jobs per round
    delayed: int  # delayed jobs per round
    latency_rounds: int
    memory_jobs: int


QUICK = Plan(3, 0.2, 2000, 1, 60, 50, 1, 2000)
# Drains of 10,000 jobs: at 20,000 jobs/s a shorter one is mostly the start of a process.
FULL = Plan(7, 0.3, 10000, 3, 100, 80, 2, 10000)


def measure(
    r: redis.Redis, url: str, plan: Plan, only_enqueue: bool = False
) -> dict[str, dict[str, float]]:
    contenders = [make(url) for make in (Ours, Huey, PriorityHuey, RQ)]
    results: dict[str, dict[str, float]] = {c.name: {} for c in contenders}
    floor = [Floor(url)]
    own_floor = [OursNoSpin(url), FloorOwn(url)]
    tasks = [OursTasks(url), OursTasksOptions(url)] if TASKS_BACKEND == REDIS_TASK_BACKEND else []
    print(f"enqueue, enqueue_many: {plan.rounds} interleaved rounds of {plan.seconds} s")
    for key, who, batch in (
        ("enqueue", contenders + floor + own_floor + tasks, False),
        ("many", contenders + floor, True),
    ):
        found = interleaved(who, plan.rounds, partial(rate, r, seconds=plan.seconds, batch=batch))
        # This VM's speed drifts by ±20 % within a run: the targets compare each round's rates
        # (measured moments apart), and take the median of those ratios.
        huey = [max(pair) for pair in zip(found[Huey.name], found[PriorityHuey.name], strict=True)]
        for name, values in found.items():
            results.setdefault(name, {})[key] = statistics.median(v for v, _ in values)
            results[name][f"{key}/huey"] = statistics.median(
                v / best for (v, _), (best, _) in zip(values, huey, strict=True)
            )
            if not batch:
                results[name]["cpu"] = statistics.median(c for _, c in values)
        if only_enqueue:
            return results

    print(f"drain: {plan.drain_jobs} jobs, one worker process, {plan.drain_rounds} round(s)")
    found = interleaved(contenders, plan.drain_rounds, lambda c: drain(r, c, plan.drain_jobs))
    for name, values in found.items():
        results[name]["drain"] = statistics.median(values)

    print(
        f"enqueue->start: {plan.probes} jobs, delayed: {plan.delayed} jobs; "
        f"{plan.latency_rounds} round(s)",
        flush=True,
    )
    found = interleaved(
        contenders,
        plan.latency_rounds,
        lambda c: (start_latency(r, c, plan.probes), lateness(r, c, plan.delayed)),
    )
    for name, pairs in found.items():
        started = [v for s, _ in pairs for v in s]
        late = [v for _, d in pairs for v in d]
        results[name].update(
            start50=percentile(started, 0.5) * 1000,
            start99=percentile(started, 0.99) * 1000,
            late50=percentile(late, 0.5) * 1000,
            late99=percentile(late, 0.99) * 1000,
        )
        ran, sent = (len(started), len(late)), (plan.probes, plan.delayed)
        if ran != tuple(n * plan.latency_rounds for n in sent):
            print(f"  {name}: only {ran[0]} and {ran[1]} of those jobs ran")

    print(f"memory: {plan.memory_jobs} queued jobs\n", flush=True)
    for c in contenders:
        results[c.name]["bytes"], results[c.name]["used"] = memory_per_job(r, c, plan.memory_jobs)
    return results


def main() -> None:
    parser = command_line(__doc__, "fewer rounds, fewer jobs")
    parser.add_argument(
        "--only",
        choices=["enqueue"],
        help="measure only that: one job per call (every contender, the Task.enqueue row too)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help="interleaved rounds of each enqueue measurement (more: "
        "steadier medians on a busy machine)",
    )
    args = parser.parse_args()

    with benchmark_redis(flush=True) as url:
        setup(url)
        r = redis.Redis.from_url(url)
        versions = [f"{p} {importlib.metadata.version(p)}" for p in ("rq", "huey", "redis")]
        print(machine(r, url, f"Django {django.get_version()}", *versions))
        print(f"Tasks backend {TASKS_BACKEND}\n")
        plan = QUICK if args.quick else FULL
        if args.rounds:
            plan = dataclasses.replace(plan, rounds=args.rounds)
        results = measure(r, url, plan, args.only == "enqueue")
        report(results)
        targets(results)


if __name__ == "__main__":
    main()
