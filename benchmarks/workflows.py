"""What workflows cost (issue 28), beside the alternatives on the same Redis, same run:

    bash scripts/bench.sh workflows [--quick]

* **hand-off**: an idle worker process (one job at a time); a step, then one that waits
  for it. The time from the end of the first (its last line) to the start of the second,
  both read in the worker; django-redislock's ``depends_on``, RQ's ``depends_on``, huey's
  ``.then()``. Target: p50 <= 2 ms.
* **enqueue->start**: the same worker, a single job: the reference for the chain.
* **1,000-job group with a callback**: ``group([...]).then(step(...)).enqueue()``: the
  commands Redis was sent for it (MONITOR, the scripts' own commands aside) and the time.
  Target: one round trip per 1,000 jobs (2 for 1,001 jobs).
* **a chain of 100 steps**: from ``enqueue()`` until the last step started, against 100 x
  the enqueue->start p50. Target <= 1.2x.

Every figure of ours is printed beside the same with ``SPIN_WAIT`` 0 (the reply's polling
switched off for the benchmark's own connection).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import redis

from benchmarks import command_line, queue_redis
from benchmarks import queue as queue_bench
from benchmarks.queue import WorkerProcess, collect, wait_until_blocked
from benchmarks.timing import percentile

# (the tasks module is imported once Django is set up: ``queue.setup``)
ENDS, STARTS = "bench:ends", "bench:starts"


class Ours(queue_bench.Ours):
    def hand_off(self) -> None:
        from benchmarks.queue_tasks import redislock_end_mark, redislock_start_mark
        from django_redislock.queue.arguments import new_id

        first = new_id()  # both in one enqueue, as a workflow writes its steps
        self.queue.enqueue_many(
            [
                {"task": redislock_end_mark.module_path, "job_id": first},
                {"task": redislock_start_mark.module_path, "depends_on": [first]},
            ]
        )


class OursNoSpin(queue_bench.OursNoSpin, Ours):
    pass


class RQ(queue_bench.RQ):
    def hand_off(self) -> None:
        from benchmarks.queue_tasks import end_mark, start_mark

        first = self.queue.enqueue(end_mark)
        self.queue.enqueue(start_mark, depends_on=first)


class Huey(queue_bench.Huey):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        from benchmarks.queue_tasks import end_mark, start_mark

        self.end_mark, self.start_mark = self.huey.task()(end_mark), self.huey.task()(start_mark)

    def hand_off(self) -> None:
        self.huey.enqueue(self.end_mark.s().then(self.start_mark))


def hand_offs(r: redis.Redis, contender: Any, probes: int) -> list[float]:
    """Seconds from a step's end to its dependant's start, ``probes`` times."""
    r.flushdb()
    worker = WorkerProcess(contender)
    try:
        worker.go()
        wait_until_blocked(r)
        found: list[float] = []
        for n in range(probes + 3):  # the first three warm up
            contender.hand_off()
            reply = r.blpop([STARTS], timeout=10)
            if reply is None:
                raise RuntimeError(f"{contender.name}: the second step never started.")
            ended = float(r.lpop(ENDS) or 0)
            if n >= 3:
                found.append(float(reply[1]) - ended)
            time.sleep(0.002)
        return found
    finally:
        worker.stop()


def start_latency(r: redis.Redis, contender: Any, probes: int) -> list[float]:
    return queue_bench.start_latency(r, contender, probes)


def group_enqueue(r: redis.Redis, members: int) -> tuple[int, float]:
    """(commands sent to Redis, seconds) to enqueue a group of ``members``, then one step:
    what MONITOR saw meanwhile, the commands scripts ran aside; the time of another such
    enqueue, unwatched."""
    from benchmarks.queue_tasks import redislock_noop
    from django_redislock.workflows import group, step

    def build() -> Any:
        return group([step(redislock_noop, n) for n in range(members)]).then(
            step(redislock_noop, -1)
        )

    r.flushdb()
    build().enqueue()  # warm up: scripts loaded, connections open
    r.flushdb()
    workflow = build()  # timed without MONITOR (which slows Redis down)
    started = time.perf_counter()
    workflow.enqueue()
    took = time.perf_counter() - started
    r.flushdb()
    workflow = build()
    sent: list[dict[str, Any]] = []
    ready = threading.Event()

    def watch() -> None:  # every command Redis is sent (a script's own ones aside)
        with r.monitor() as monitor:
            ready.set()
            for command in monitor.listen():
                if command["command"] == f"ECHO {END}":
                    return
                # (a new connection's handshake, the benchmark's ECHO's, is not the enqueue)
                handshake = command["command"].startswith(("HELLO", "CLIENT SETINFO"))
                if command.get("client_type") != "lua" and not handshake:
                    sent.append(command)

    watcher = threading.Thread(target=watch)
    watcher.start()
    ready.wait(10)
    time.sleep(0.05)  # (MONITOR answered: from here on, every command is seen)
    workflow.enqueue()
    r.echo(END)
    watcher.join(10)
    return len(sent), took


END = "bench:end-of-enqueue"


def chain_time(r: redis.Redis, contender: Any, steps: int) -> float:
    """Seconds from a chain's ``enqueue()`` until its last step started."""
    from benchmarks.queue_tasks import redislock_noop, redislock_stamp
    from django_redislock.workflows import chain, step

    r.flushdb()
    worker = WorkerProcess(contender)
    try:
        worker.go()
        wait_until_blocked(r)
        started = time.time()
        links = [step(redislock_noop, n) for n in range(steps - 1)]
        chain(*links, step(redislock_stamp, started)).enqueue()
        stamps = collect(r, 1, 60)
        if not stamps:
            raise RuntimeError("The chain's last step never started.")
        return stamps[0]
    finally:
        worker.stop()


def main() -> None:
    parser = command_line(__doc__, "fewer probes")
    args = parser.parse_args()
    with queue_redis(("rq", "huey", "redis")) as (url, r):
        run(url, r, args.quick)


def run(url: str, r: redis.Redis, quick: bool) -> None:
    probes, rounds = (50, 1) if quick else (300, 3)
    ours, no_spin = Ours(url), OursNoSpin(url)
    print(f"hand-off, a step's end to its dependant's start ({probes} probes), ms:")
    print(f"  {'':34}{'p50':>8}{'p99':>8}")
    handed: dict[str, float] = {}
    for contender in (ours, no_spin, RQ(url), Huey(url)):
        found = hand_offs(r, contender, probes)
        handed[contender.name] = percentile(found, 0.5) * 1000
        p99 = percentile(found, 0.99) * 1000
        print(f"  {contender.name:34}{handed[contender.name]:8.2f}{p99:8.2f}")
    single: dict[str, float] = {}
    for contender in (ours, no_spin):
        single[contender.name] = percentile(start_latency(r, contender, probes), 0.5) * 1000
    print("\nenqueue->start p50, one job, ms:")
    for name, value in single.items():
        print(f"  {name:34}{value:8.2f}")

    commands, took = group_enqueue(r, 1000)
    print(
        f"\n1,000-job group with a callback: {commands} commands sent to Redis, "
        f"{took * 1000:.1f} ms to enqueue"
    )

    steps = 100
    print(f"\na chain of {steps} steps, enqueue() to its last step's start ({rounds} round(s)):")
    chained: dict[str, float] = {}
    for contender in (ours, no_spin):
        chained[contender.name] = statistics.median(
            chain_time(r, contender, steps) for _ in range(rounds)
        )
        bound = steps * single[contender.name] / 1000
        print(
            f"  {contender.name:34}{chained[contender.name] * 1000:8.1f} ms"
            f"   {chained[contender.name] / bound:5.2f}x 100 x enqueue->start"
        )

    print("\nTargets")
    rows = [
        ("hand-off p50 <= 2 ms", f"{handed[ours.name]:.2f} ms", handed[ours.name] <= 2),
        ("group of 1,000 + 1: 2 round trips", f"{commands}", commands <= 2),
        (
            "chain of 100 <= 1.2x 100 x start",
            f"{chained[ours.name] / (steps * single[ours.name] / 1000):.2f}x",
            chained[ours.name] <= 1.2 * steps * single[ours.name] / 1000,
        ),
    ]
    for label, value, ok in rows:
        print(f"  {label:40}{value:>10}  {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
