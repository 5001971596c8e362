"""The queue API on fakeredis, a real redis-server and a real Cluster."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_redislock.exceptions import JobNotFound
from django_redislock.queue.queue import Queue, get_queue
from tests.support.counts import job_counts
from tests.support.fixtures import Backend
from tests.support.waiting import Stalls


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.05}},
    }
    return get_queue("default")


def test_enqueue_pop_ack(queue: Queue) -> None:
    before = time.time() * 1000
    job = queue.enqueue("shop.tasks.close", args=[7], kwargs={"why": "unpaid"})
    after = time.time() * 1000
    assert job.state == "ready"
    assert before - 1 <= job.score <= after + 1  # due now (the server shares this clock)
    assert queue.counts() == job_counts(ready=1)
    [popped] = queue.pop()
    assert (popped.id, popped.task, popped.args, popped.kwargs) == (
        job.id,
        "shop.tasks.close",
        [7],
        {"why": "unpaid"},
    )
    assert popped.attempts == 1
    assert popped.lease
    assert queue.counts()["running"] == 1
    assert queue.ack(popped)
    assert queue.counts() == job_counts()
    assert not queue.ack(popped)
    with pytest.raises(JobNotFound):
        queue.get(job.id)


def test_ack_with_a_result_keeps_the_job_done(queue: Queue) -> None:
    job = queue.enqueue("t", args=[1], job_id="kept")
    [popped] = queue.pop(worker="w1")
    assert queue.ack(popped, '{"total": 3}')
    done = queue.get("kept")
    assert (done.state, done.result, done.args, done.workers) == (
        "done",
        '{"total": 3}',
        [1],
        ("w1",),
    )
    assert done.enqueued <= done.started <= done.finished
    assert done.lease is None
    assert queue.counts() == job_counts()
    again = queue.enqueue("t", args=[2], job_id="kept")  # the id is free again
    assert again.state == "ready"
    assert queue.get("kept").args == [2]  # the pending job shows before the old result
    assert job.id == "kept"


def test_fetch_acknowledges_and_leases_in_one_step(queue: Queue) -> None:
    queue.enqueue_many([{"task": "t", "args": [i], "job_id": f"j{i}"} for i in range(5)])
    first, wait, lost = queue.fetch(2, worker="w1")
    assert [job.id for job in first] == ["j0", "j1"]
    assert (wait, lost) == (0, [])
    stale = first[1]
    assert queue.ack(stale)  # finished elsewhere: its lease is gone when fetch acks it
    finished = [(first[0], '"zero"'), (stale, None)]
    second, wait, lost = queue.fetch(5, worker="w1", finished=finished)
    assert [job.id for job in second] == ["j2", "j3", "j4"]
    assert lost == ["j1"]
    assert 0 < (wait or 0) <= 5  # nothing more is ready: the wait is for the leases
    assert queue.get("j0").result == '"zero"'
    assert queue.counts() == job_counts(running=3)
    assert queue.fetch(0, finished=[(job, None) for job in second])[2] == []
    assert queue.counts() == job_counts()


def test_release_gives_back_unstarted_jobs_in_front(queue: Queue) -> None:
    queue.enqueue_many([{"task": "t", "args": [i], "job_id": f"j{i}"} for i in range(4)])
    queue.enqueue("t", args=[9], job_id="urgent", priority=5)
    [urgent, j0, j1, j2] = queue.pop(4, worker="w1")
    assert urgent.id == "urgent"
    done_elsewhere = j2
    assert queue.ack(done_elsewhere)
    assert queue.release([urgent, j0, j1, done_elsewhere]) == 3  # j2's lease was gone
    assert queue.counts() == job_counts(ready=4)
    again = queue.pop(4, worker="w2")
    assert [job.id for job in again] == ["urgent", "j0", "j1", "j3"]  # their order, in front
    assert {(job.attempts, job.workers) for job in again} == {(1, ("w2",))}  # not counted
    assert queue.release([]) == 0


def test_wake_up_tokens_nobody_takes_stay_bounded(queue: Queue) -> None:
    # No worker takes the tokens: the list is cut back to 64 whenever it passes 128.
    for n in range(300):
        queue.enqueue("t", args=[n])
    assert 64 <= queue.client.llen(queue.base + "wake") <= 128
    queue.enqueue_many([{"task": "t"} for _ in range(500)])
    assert queue.client.llen(queue.base + "wake") <= 128


def test_priority_then_fifo(queue: Queue) -> None:
    for i, priority in enumerate([0, 5, 0, -3, 5, 100, -100]):
        queue.enqueue("t", args=[i], priority=priority)
    order = [job.args[0] for job in queue.pop(10)]
    assert order == [5, 1, 4, 0, 2, 3, 6]


def test_job_id_dedupe_keeps_first_or_replaces(queue: Queue) -> None:
    first = queue.enqueue("t", args=[1], job_id="close:1", delay=60)
    kept = queue.enqueue("t", args=[2], job_id="close:1")
    assert kept.score == first.score
    assert (first.state, kept.state) == ("scheduled", "scheduled")
    assert queue.get("close:1").args == [1]
    assert queue.counts()["scheduled"] == 1
    replaced = queue.enqueue("t", args=[3], job_id="close:1", replace=True)
    assert replaced.score < first.score
    assert replaced.state == "ready"
    assert queue.get("close:1").args == [3]
    assert queue.counts() == job_counts(ready=1)


def test_delayed_and_at(queue: Queue, settings: Any) -> None:
    # A stall past the 0.2 s delay before the first pops makes the job due early: such a
    # run is done again, on a queue of its own.
    more = {f"delayed-{n}": {} for n in range(1, 10)}
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {**settings.REDISLOCK["QUEUES"], **more},
    }
    queues = iter(["default", *more])

    def delayed() -> None:
        on = get_queue(next(queues))
        soon = on.enqueue("t", delay=0.2)
        later = on.enqueue("t", at=datetime.now(timezone.utc) + timedelta(hours=1))
        assert on.counts()["scheduled"] == 2
        assert on.pop() == []
        jobs, wait = on.pop_and_wait(1)
        assert jobs == []
        assert wait is not None
        assert 0 < wait <= 0.2
        time.sleep(0.25)
        [job] = on.pop()
        assert job.id == soon.id
        assert [j.id for j in on.jobs("scheduled")] == [later.id]

    with Stalls() as stalls:
        stalls.again_if_stalled(delayed)


def test_cancel_compares_the_due_time(queue: Queue) -> None:
    job = queue.enqueue("t", job_id="close:9", delay=30)
    assert not queue.cancel("close:9", score=job.score + 1)
    moved = queue.enqueue("t", job_id="close:9", delay=60, replace=True)
    assert not queue.cancel("close:9", score=job.score)
    assert queue.cancel("close:9", score=moved.score)
    assert not queue.cancel("close:9")
    assert queue.counts()["scheduled"] == 0


def test_enqueue_many_in_one_step(queue: Queue) -> None:
    jobs = queue.enqueue_many([{"task": "t", "args": [i], "job_id": f"j{i}"} for i in range(500)])
    assert len(jobs) == 500
    assert queue.counts()["ready"] == 500
    assert [j.args[0] for j in queue.peek(3)] == [0, 1, 2]
    assert queue.counts()["ready"] == 500


def test_a_large_batch_keeps_priority_then_fifo_order(queue: Queue) -> None:
    # Generated ids: ENQUEUE adds the ready jobs in ZADDs of 500; the order must not show it.
    specs = [{"task": "t", "args": [i], "priority": i % 3} for i in range(1201)]
    specs += [{"task": "t", "args": [-1], "delay": 60}, {"task": "t", "kwargs": {"k": 1}}]
    jobs = queue.enqueue_many(specs)
    assert [j.state for j in jobs[-3:]] == ["ready", "scheduled", "ready"]
    assert len({j.id for j in jobs}) == 1203
    assert all(len(j.id) == 20 for j in jobs)
    assert queue.counts() == job_counts(ready=1202, scheduled=1)
    order = [(j.priority, j.args[0] if j.args else None) for j in queue.pop(1202)]
    expected = [(p, i) for p in (2, 1) for i in range(1201) if i % 3 == p]
    expected += [(0, i) for i in range(0, 1201, 3)] + [(0, None)]
    assert order == expected


def test_retry_and_fail_to_the_dead_set(queue: Queue) -> None:
    queue.enqueue("t", job_id="poison")
    [job] = queue.pop()
    assert queue.fail(job, ValueError("bad input"), "Traceback: ...")
    assert queue.get("poison").state == "scheduled"  # backoff
    time.sleep(0.1)
    [job] = queue.pop()
    assert job.attempts == 2
    assert queue.fail(job, "still bad", "Traceback 2")
    dead = queue.get("poison")
    assert (dead.state, dead.error, dead.traceback) == ("dead", "still bad", "Traceback 2")
    assert queue.counts()["dead"] == 1
    assert queue.requeue("poison")
    [job] = queue.pop()
    assert job.attempts == 1
    assert queue.retry(job, delay=0)
    assert queue.pop()[0].id == "poison"


def test_expired_lease_is_delivered_again_then_dead(queue: Queue) -> None:
    queue.enqueue("t", job_id="crashy")
    [first] = queue.pop(lease=0.05)
    time.sleep(0.1)
    [second] = queue.pop(lease=0.05)
    assert second.id == "crashy"
    assert second.attempts == 2
    assert not queue.ack(first)  # the old lease is void
    time.sleep(0.1)
    assert queue.pop() == []
    assert queue.get("crashy").state == "dead"
    assert "lease ran out" in queue.get("crashy").error


def test_renew_keeps_a_lease(queue: Queue) -> None:
    queue.enqueue("t", job_id="long")
    [job] = queue.pop(lease=0.2)
    for _ in range(3):
        time.sleep(0.1)
        assert queue.renew([job], lease=0.2) == []
    assert queue.pop() == []
    assert queue.ack(job)


def test_purge(queue: Queue) -> None:
    queue.enqueue_many([{"task": "t", "delay": 60} for _ in range(25)])
    assert queue.purge("scheduled", batch=10) == 25
    assert queue.counts()["scheduled"] == 0


def test_bad_arguments(queue: Queue) -> None:
    with pytest.raises(TypeError, match="JSON"):
        queue.enqueue("t", args=[object()])
    with pytest.raises(ValueError, match="priority"):
        queue.enqueue("t", priority=101)
    with pytest.raises(ValueError, match="delay"):
        queue.enqueue("t", delay=-1)
    with pytest.raises(TypeError, match="aware"):
        queue.enqueue("t", at=datetime.now())
    with pytest.raises(TypeError, match="delay or at"):
        queue.enqueue("t", delay=1, at=datetime.now(timezone.utc))
    with pytest.raises(ValueError, match="job_id"):
        queue.enqueue("t", job_id="")
    with pytest.raises(TypeError, match="task"):
        queue.enqueue("")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="state"):
        queue.jobs("finished")
    with pytest.raises(ImproperlyConfigured, match="Unknown queue 'mail'"):
        get_queue("mail")
