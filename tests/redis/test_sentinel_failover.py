"""A Sentinel failover under load: 2 worker processes drain a stream of jobs, 2 processes
take and release a fenced ``Lock`` in a loop, and the master is SIGKILLed mid-run. Nobody is
restarted or reconfigured: they must find the new master by themselves.

What must hold (asserted), with Redis's asynchronous replication:

- work resumes after the promotion: jobs enqueued, run, and locks taken on the new master;
- every job acknowledged after the kill (so by the new master) runs; every job whose enqueue
  a replica confirmed (``WAIT 1`` on the enqueuing connection) runs, before or after;
- fences stay monotonic: every fence handed out after the kill is above every fence handed
  out before it (the new master's counter may lag, its clock does not);
- with ``wait_replicas=1`` no two holders are ever inside the lock at once, and no fenced
  write is refused (no holder is ever stale).

What async replication may lose (measured and printed, not asserted): enqueues acknowledged
by the old master in its last moments (never confirmed by a replica), acknowledgements of
finished jobs (the job runs again), and, without ``wait_replicas``, acquisitions (a second
holder gets the lock on the new master while the first still holds it on the dead one).
Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.exceptions import LockError, RedisUnavailable
from django_redislock.locks.lock import Lock
from django_redislock.queue.worker.loop import Worker
from django_redislock.redis.clients import call, get_redis
from tests.support.fixtures import Processes
from tests.support.sentinel_servers import RedisSentinelGroup

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

pytestmark = pytest.mark.processes

TASK = "tests.redis.test_sentinel_failover.append_run"
QUEUES = {"default": {"LEASE": 1, "MAX_ATTEMPTS": 50, "RETRY_BACKOFF": 0.05}}
LAG = 0.3  # seconds of writes the lagging replica misses


@task()
def append_run(n: int, path: str) -> None:
    """Records the run outside Redis (the failover could lose a record kept there). One
    short O_APPEND write: lines from several processes never interleave."""
    time.sleep(0.02)  # slower than the producer: a backlog is pending at the kill
    with open(path, "a") as log:
        log.write(f"{n}\n")


def lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def work() -> None:
    Worker(["default"], concurrency=2).run()


def produce(stop: Any, runs: str, acked: str, confirm: bool) -> None:
    """Enqueues j0, j1, ... and logs each acknowledged one (``n confirmed sent_at``: when
    the enqueue that succeeded was sent; one sent after the kill can only have reached the
    new master, while one logged after it may have been acknowledged by the old master just
    before, its process descheduled in between). A failed enqueue is retried with the same
    id, as an application would (ids make it idempotent)."""
    queue, client, n = get_queue(), get_redis(), 0
    with open(acked, "a", buffering=1) as log:
        while not stop.is_set():
            sent_at = time.time()
            try:
                queue.enqueue(TASK, [n, runs], job_id=f"j{n}")
                # WAIT counts the writes of this thread's connection, the enqueue's.
                replicas = int(call(client, "WAIT", 1, 1000)) if confirm else 0
            except RedisUnavailable:
                time.sleep(0.02)
                continue
            log.write(f"{n} {int(replicas >= 1)} {sent_at}\n")
            n += 1
            time.sleep(0.003)


def take_locks(stop: Any, folder: str, wait_replicas: int) -> None:
    """Takes the lock in a loop and does a short critical section each time."""
    with open(Path(folder) / f"locker-{os.getpid()}.log", "a", buffering=1) as log:
        while not stop.is_set():
            lock = acquired(folder, log, wait_replicas, ttl=2, timeout=0.5)
            if lock is not None:
                critical_section(Path(folder), lock, log, lambda: time.sleep(0.002))


def hold_long(grab: Any, done: Any, folder: str, wait_replicas: int) -> None:
    """Takes the lock once ``grab`` is set (the parent sets it as the master's last writes
    begin to miss the replica) and stays inside until ``done``: a holder whose work spans
    the failover. Its write comes at the end, as after a long computation."""
    grab.wait()
    with open(Path(folder) / f"locker-{os.getpid()}.log", "a", buffering=1) as log:
        lock = None
        while lock is None:
            lock = acquired(folder, log, wait_replicas, ttl=10, timeout=5)
        log.write(f"long {lock.fence}\n")
        critical_section(Path(folder), lock, log, done.wait)


def acquired(folder: str, log: Any, wait_replicas: int, **options: Any) -> Lock | None:
    """A fenced lock, held, or None (busy, Redis unreachable or the replica did not confirm);
    logs ``acquired <fence> <asked at> <acquired at>``."""
    lock = Lock("failover", fencing=True, wait_replicas=wait_replicas, **options)
    started = time.time()
    try:
        if lock.acquire():
            log.write(f"acquired {lock.fence} {started} {time.time()}\n")
            return lock
    except (RedisUnavailable, LockError):
        time.sleep(0.02)
    return None


def critical_section(base: Path, lock: Lock, log: Any, work: Any) -> None:
    """Claims a marker file (an overlap: another holder has it), runs ``work()``, then makes
    a fenced write to a 'database' and releases."""
    try:
        os.close(os.open(base / "inside", os.O_CREAT | os.O_EXCL))
        marked = True
    except FileExistsError:
        marked = False
        log.write("overlap\n")
    work()
    log.write(f"{'accepted' if fenced_write(base, lock.fence) else 'refused'}\n")
    if marked:
        os.unlink(base / "inside")
    with contextlib.suppress(RedisUnavailable, LockError):
        lock.release()


def fenced_write(base: Path, fence: int | None) -> bool:
    """A file holding the last fence, written only when the new fence is above it, under an
    OS lock: ``UPDATE … SET fence = %s WHERE fence < %s``."""
    assert fence is not None
    with open(base / "resource", "a+") as resource:
        fcntl.flock(resource, fcntl.LOCK_EX)
        resource.seek(0)
        last = int(resource.read() or 0)
        if fence <= last:
            return False
        resource.truncate(0)
        resource.write(str(fence))
        return True


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def settled() -> bool:
    with contextlib.suppress(RedisUnavailable, OSError):
        counts = get_queue().counts()
        return counts["ready"] + counts["scheduled"] + counts["running"] == 0
    return False


@pytest.mark.timeout(180)
@pytest.mark.parametrize("lag", [0.0, LAG], ids=["in-sync", "lagging"])
@pytest.mark.parametrize("wait_replicas", [0, 1])
def test_workers_and_locks_ride_a_failover(
    settings: Any,
    redis_sentinel: RedisSentinelGroup,
    processes: Processes,
    tmp_path: Path,
    wait_replicas: int,
    lag: float,
) -> None:
    """``lag``: the replica misses the master's last writes (frozen for that long before
    the kill), which is when async replication loses what it can lose."""
    group = redis_sentinel
    group.wait_healthy()
    group.master().client().flushall()
    settings.REDISLOCK = {"URL": group.url, "QUEUES": QUEUES}
    runs, acked = tmp_path / "runs.log", tmp_path / "acked.log"
    stop, grab, done = processes.event(), processes.event(), processes.event()
    workers = [processes.start(work) for _ in range(2)]
    lockers = [processes.start(take_locks, stop, str(tmp_path), wait_replicas) for _ in range(2)]
    lockers.append(processes.start(hold_long, grab, done, str(tmp_path), wait_replicas))
    producer = processes.start(produce, stop, str(runs), str(acked), bool(wait_replicas))
    old = None
    try:
        wait_for(lambda: len(lines(runs)) >= 100, 30, "jobs to run before the kill")
        wait_for(lambda: len(acquisitions(tmp_path)) >= 20, 30, "locks before the kill")
        old = group.kill_master(lag, meanwhile=grab.set)
        killed_at = time.time()  # what was sent after this, the new master acknowledged
        group.wait_promoted(old)
        promoted_at = time.time()
        # Brought back at once, as a supervisor would: it rejoins as the new master's replica
        # (until then, nothing can confirm a write to one replica).
        group.restart(old)
        time.sleep(1)  # the long holder stays inside past the promotion
        done.set()
        after = len(lines(acked))
        # Work resumes without restarting anybody.
        wait_for(lambda: len(lines(acked)) >= after + 100, 30, "enqueues on the new master")
        wait_for(
            lambda: sum(a[0] > killed_at for a in acquisitions(tmp_path)) >= 20,
            30,
            "locks on the new master",
        )
        stop.set()
        producer.join(10)
        for locker in lockers:
            locker.join(10)
        wait_for(settled, 30, "the queue to drain")
        last = {int(entry[0]) for entry in lines(acked) if float(entry[2]) > killed_at}
        wait_for(lambda: last <= {int(r[0]) for r in lines(runs)}, 10, "the last runs")
        for worker in workers:
            assert worker.is_alive(), f"a worker died: exit code {worker.exitcode}"
            os.kill(worker.pid, signal.SIGTERM)  # type: ignore[arg-type]
        for worker in workers:
            worker.join(15)
        figures = check_and_measure(tmp_path, killed_at, wait_replicas)
        figures["failover_s"] = round(promoted_at - killed_at, 2)
        print(f"\nSENTINEL FAILOVER wait_replicas={wait_replicas} lag={lag}: {figures}")
    finally:
        for event in (stop, grab, done):
            event.set()
        if old is not None and old.process is None:
            group.restart(old)
        group.wait_healthy()


def acquisitions(folder: Path) -> list[tuple[float, float, int]]:
    """(asked at, acquired at, fence) of every acquisition, all lockers."""
    found = []
    for path in folder.glob("locker-*.log"):
        for entry in lines(path):
            if entry[0] == "acquired":
                found.append((float(entry[2]), float(entry[3]), int(entry[1])))
    return found


def check_and_measure(folder: Path, killed_at: float, wait_replicas: int) -> dict[str, Any]:
    runs = Counter(int(entry[0]) for entry in lines(folder / "runs.log"))
    acked = [(int(n), c == "1", float(at)) for n, c, at in lines(folder / "acked.log")]
    lost = [n for n, _, _ in acked if n not in runs]
    # Must hold: what a replica confirmed, and what the new master acknowledged (sent after
    # the kill), ran.
    assert not [n for n, confirmed, _ in acked if confirmed and n not in runs]
    assert not [n for n, _, at in acked if at > killed_at and n not in runs]
    assert set(runs) <= {n for n, _, _ in acked} | {len(acked)}  # no job from nowhere
    taken = acquisitions(folder)
    before = [fence for _, got, fence in taken if got < killed_at]
    after = [fence for asked, _, fence in taken if asked > killed_at]
    assert before
    assert after
    assert max(before) < min(after), "a fence handed out after the failover went back"
    events = Counter(e[0] for path in folder.glob("locker-*.log") for e in lines(path))
    if wait_replicas:
        assert events["overlap"] == 0, "two holders at once despite wait_replicas=1"
        assert events["refused"] == 0, "a stale holder despite wait_replicas=1"
    assert get_queue().counts()["dead"] == 0
    return {
        "jobs_acked": len(acked),
        "confirmed_by_replica": sum(confirmed for _, confirmed, _ in acked),
        "acked_never_ran": len(lost),
        "ran_twice": sum(count > 1 for count in runs.values()),
        "lock_acquisitions": len(taken),
        "acquired_while_held": events["overlap"],
        "stale_writes_refused": events["refused"],
        # From the kill to the first enqueue and the first lock on the new master.
        "enqueues_resumed_s": round(min(at for _, _, at in acked if at > killed_at) - killed_at, 2),
        "locks_resumed_s": round(
            min(got for asked, got, _ in taken if asked > killed_at) - killed_at, 2
        ),
    }
