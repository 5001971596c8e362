"""``expires`` (issue 26): a job not started within ``expires`` s of becoming due is never
started: POP buries it "expired" instead of leasing it, and a job leased ahead that expired
before its turn is buried by its START, uncharged, and not run. Counted apart (the queue's
expired counter, a Prometheus counter). On fakeredis, a real server and Cluster; with three
real worker processes racing at the end."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.fetch_scripts import START
from django_redislock.queue.jobs import Field
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, Processes
from tests.support.waiting import server_now, wait_for

from ..tasks import STARTED

TASK = "tests.tasks.record"


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5, "MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 0.05}},
    }
    return get_queue("default")


def past(job: Any, expires: float) -> None:
    """Wait (on the server's clock) until ``job``'s expiry has run out."""
    deadline = job.score / 1000 + expires
    wait_for(lambda: server_now() > deadline + 0.002, 10, "the expiry ran out")


def test_an_expired_job_is_never_leased_and_ends_dead_as_expired(queue: Queue) -> None:
    job = queue.enqueue(TASK, args=[1], job_id="late", expires=0.05)
    kept = queue.enqueue(TASK, args=[2], job_id="on-time", expires=60)
    assert job.meta == {"expires": 0.05}
    past(job, 0.05)
    assert [j.id for j in queue.pop(5)] == ["on-time"]
    dead = queue.get("late")
    assert (dead.state, dead.error, dead.attempts) == ("dead", "expired", 0)
    assert queue.expired_count() == 1
    assert queue.get(kept.id).state == "running"


def test_the_clock_starts_when_the_job_becomes_due(queue: Queue) -> None:
    """A delay longer than the expiry still runs: the expiry counts from the due time."""
    job = queue.enqueue(TASK, args=[1], delay=0.2, expires=5)
    popped: list[Any] = []
    wait_for(lambda: popped.extend(queue.pop()) or popped, 10, "the job became due")
    assert [j.id for j in popped] == [job.id]
    assert queue.expired_count() == 0


def test_a_retry_is_due_again_and_gets_its_expiry_afresh(queue: Queue) -> None:
    queue.enqueue(TASK, args=[1], job_id="r", expires=1)
    [job] = queue.pop()
    assert queue.retry(job, delay=1.2)  # due again later than its first deadline
    popped: list[Any] = []
    wait_for(lambda: popped.extend(queue.pop()) or popped, 10, "the retry became due")
    assert [(j.id, j.attempts) for j in popped] == [("r", 2)]


def test_a_job_leased_ahead_that_expired_is_buried_by_its_start_uncharged(queue: Queue) -> None:
    job = queue.enqueue(TASK, args=[1], job_id="ahead", expires=0.5)  # (a loaded machine)
    fresh = queue.enqueue(TASK, args=[2], job_id="fresh", expires=60)
    ahead = queue.fetch(2, worker="w", charge=False).jobs
    assert [j.id for j in ahead] == ["ahead", "fresh"]
    past(job, 0.5)
    lost = queue.run(START, *queue.start_args("w", [], ahead))
    assert [x.decode() if isinstance(x, bytes) else x for x in lost] == ["{expired}ahead"]
    dead = queue.get("ahead")
    assert (dead.state, dead.error, dead.attempts) == ("dead", "expired", 0)
    running = queue.get(fresh.id)
    assert (running.state, running.attempts) == ("running", 1)
    assert queue.expired_count() == 1
    assert queue.counts() == job_counts(running=1, dead=1)


@pytest.mark.parametrize("stored", ['{"expires":"soon"}', '{"expires":-1}', '{"expires"'])
def test_a_corrupt_expiry_sets_that_job_aside_alone(queue: Queue, stored: str) -> None:
    queue.enqueue(TASK, args=[1], job_id="before")
    queue.enqueue(TASK, args=[2], job_id="bad", meta={"expires": 60})
    queue.enqueue(TASK, args=[3], job_id="after")
    get_redis().hset(queue.keys.job("bad"), Field.META, stored)
    assert [j.id for j in queue.pop(5)] == ["before", "after"]
    dead = queue.get("bad")
    assert dead.state == "dead"
    assert 'expiry (metadata "expires") is not a number' in dead.error
    assert queue.expired_count() == 0  # set aside, not expired


def test_meta_of_another_shape_is_no_expiry(queue: Queue) -> None:
    queue.enqueue(TASK, args=[1], job_id="nested", meta={"about": {"expires": "whenever"}})
    assert [j.id for j in queue.pop()] == ["nested"]


def test_an_expiry_unset_in_meta_is_no_expiry(queue: Queue) -> None:
    """null there (a task's ``using(expires=None)`` keeps its unset options so): no expiry,
    not a corrupt one."""
    queue.enqueue(TASK, args=[1], job_id="unset", meta={"expires": None})
    assert [j.id for j in queue.pop()] == ["unset"]


def test_an_expiry_already_in_meta_is_checked(queue: Queue) -> None:
    with pytest.raises(ValueError, match="expires"):
        queue.enqueue(TASK, meta={"expires": -1})
    job = queue.enqueue(TASK, meta={"expires": 60, "who": "a"}, expires=5)
    assert job.meta == {"expires": 5, "who": "a"}


# --- three real workers racing -------------------------------------------------------------


def run_worker(concurrency: int) -> None:
    Worker(["default"], concurrency=concurrency).run()


def started() -> list[int]:
    return [json.loads(v)["n"] for v in get_redis().lrange(STARTED, 0, -1)]


def test_expired_jobs_never_start_with_three_workers_racing(
    real_backend: Backend, settings: Any, processes: Processes
) -> None:
    """Three worker processes (two one job at a time, leasing ahead; one running two at
    once) drain 240 jobs that expire 0.3 s after they are due: some run, the rest expire;
    none that expired ever started, and each that ran was charged before its deadline."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 5}}}
    queue = get_queue()
    get_redis().delete(STARTED)
    workers = [processes.start(run_worker, n) for n in (1, 1, 2)]
    queue.enqueue("tests.tasks.tracked", args=[-1])
    wait_for(lambda: started() == [-1], 30, "a worker is up")
    count, expires = 240, 0.3
    made = queue.enqueue_many(
        [
            {
                "task": "tests.tasks.tracked",
                "args": [n, 0.03 if n % 4 == 0 else 0],
                "job_id": f"x{n}",
                "expires": expires,
            }
            for n in range(count)
        ]
    )
    due = {job.id: job.score for job in made}

    def settled() -> bool:
        counts = queue.counts()
        return counts["ready"] == counts["scheduled"] == counts["running"] == 0

    wait_for(settled, 60, "every job ran or expired")
    for worker in workers:
        os.kill(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.join(20)
    ran = set(started()) - {-1}
    expired = {job.id for job in queue.jobs("dead", limit=count)}
    assert all(queue.get(i).error == "expired" for i in expired)
    assert ran  # the race was run: some in time,
    assert expired  # some not
    assert not {f"x{n}" for n in ran} & expired  # an expired job never started
    assert len(ran) + len(expired) == count  # and every other one ran, once
    assert queue.expired_count() == len(expired)
    for n in ran:
        job = queue.get(f"x{n}")  # done, kept with its result
        assert job.started <= due[job.id] + expires * 1000, job
