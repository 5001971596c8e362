"""Pause and resume (issue 27) as the queue's own calls see them: a paused queue leases
nothing and keeps its jobs ready; a paused task's jobs are parked as a fetch meets them
while the others start; resume lets them go (in batches past a thousand). On fakeredis, a
real server and Cluster; with real workers in ``test_worker_pause``."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.queue.queue import Queue
from tests.support.fixtures import Backend

A, B = "tests.tasks.record", "tests.tasks.slow"


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 30}}}
    return get_queue("default")


def test_a_paused_queue_accepts_jobs_and_starts_none_until_resumed(queue):
    first = queue.enqueue(A, [1])
    assert queue.pause(by="ops")
    assert not queue.pause()  # already paused
    assert queue.paused() == {"*"}
    second = queue.enqueue(A, [2])  # accepted
    fetched = queue.fetch(10, worker="w")
    assert fetched.jobs == []
    assert fetched.wait is None  # nothing due: a worker sleeps until woken
    assert queue.counts()["ready"] == 2  # kept ready, not parked
    assert queue.counts()["parked"] == 0
    assert queue.resume()
    assert queue.paused() == set()
    assert [job.id for job in queue.fetch(10, worker="w").jobs] == [first.id, second.id]
    assert not queue.resume()  # not paused any more


def test_a_paused_queue_still_finishes_and_sweeps(queue):
    job = queue.enqueue(A, [1])
    (running,) = queue.fetch(1, worker="w").jobs
    queue.pause()
    assert queue.ack(running)  # a running job finishes
    assert queue.counts()["running"] == 0
    assert job.id == running.id


def test_a_paused_task_is_parked_and_the_others_start(queue):
    a_jobs = [queue.enqueue(A, [n]) for n in range(3)]
    b_jobs = [queue.enqueue(B, [n, 0]) for n in range(2)]
    queue.pause(task=A)
    assert queue.paused() == {A}
    got = queue.fetch(10, worker="w").jobs
    assert sorted(job.id for job in got) == sorted(job.id for job in b_jobs)
    assert queue.counts()["parked"] == 3
    assert {str(queue.get(job.id).state) for job in a_jobs} == {"parked"}
    later = queue.enqueue(A, [9])
    assert queue.fetch(10, worker="w").jobs == []  # parked as it is met
    assert queue.resume(task=A)
    got = queue.fetch(10, worker="w").jobs
    assert [job.id for job in got] == [*(job.id for job in a_jobs), later.id]  # in order


def test_pausing_a_task_and_the_queue_are_separate(queue):
    queue.pause(task=A)
    queue.pause()
    assert queue.paused() == {A, "*"}
    queue.resume()
    assert queue.paused() == {A}


def test_resume_lets_every_parked_job_of_a_task_go_past_a_batch(queue):
    queue.enqueue_many([{"task": A, "args": [n]} for n in range(2500)])
    queue.pause(task=A)
    while queue.fetch(1000, worker="w").wait == 0:  # every job met: all parked
        pass
    assert queue.counts()["parked"] == 2500
    queue.resume(task=A)
    assert queue.counts() == {**queue.counts(), "ready": 2500, "parked": 0}


@pytest.mark.parametrize("task", ["", "*", "a b", 5, "x\x00y"])
def test_a_task_that_is_not_a_path_is_a_value_error_naming_it(queue, task):
    with pytest.raises(ValueError, match="task"):
        queue.pause(task=task)
    with pytest.raises(ValueError, match="task"):
        queue.resume(task=task)


def test_a_paused_hash_that_is_not_a_hash_is_deleted_at_the_next_fetch(queue):
    job = queue.enqueue(A, [1])
    queue.client.set(queue.keys.paused, "junk")
    assert queue.paused() == set()
    fetched = queue.fetch(10, worker="w")
    assert [j.id for j in fetched.jobs] == [job.id]
    assert f"{{limits}}{queue.keys.paused}" in fetched.lost
