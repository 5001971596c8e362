"""Cancelling a running job (issue 15): ``queue.cancel(job_id)`` asks it to stop; its worker
raises ``JobCancelled`` in it at its next lease renewal (its ``finally`` blocks run), and it
ends dead as cancelled, saying who asked, never run again — also when its worker died or
ignores the request. Real worker processes on a real server; the scripts also on
fakeredis and Cluster."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.queue.queue import Queue
from tests.support.fixtures import Backend, Processes

from ..limit_tasks import CLEANED, FINISHED, SWALLOWED
from .test_time_limits import STATUS, configure, settled, stop, strings, wait_for, work

SPIN, DEAF = "tests.limit_tasks.spin", "tests.limit_tasks.deaf"
CANCELLED = "django_redislock.exceptions.JobCancelled"


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    configure(settings, LEASE=5)
    return get_queue()


def test_a_cancelled_running_job_is_dead_as_cancelled_once_it_settles(queue: Queue) -> None:
    queue.enqueue(SPIN, [1, 30], job_id="long")
    [job] = queue.pop()
    assert queue.cancel("long", by="admin alice")  # asked to stop
    lost, asked = queue.renew_leases([job])
    assert (lost, asked) == ([], ["long"])  # its worker learns it at the next renewal
    assert queue.retry(job, delay=0, error="JobCancelled: stopped")  # what its worker records
    dead = queue.get("long")
    assert dead.state == "dead"
    assert dead.error.startswith("Cancelled by admin alice")
    assert dead.error_class == CANCELLED
    assert queue.pop() == []  # never run again, whatever the worker asked for


def test_a_cancelled_job_whose_worker_is_gone_is_not_run_again(queue: Queue) -> None:
    queue.enqueue(SPIN, [1, 30], job_id="orphan")
    [job] = queue.pop()
    assert queue.cancel("orphan", by="ops")
    queue.renew([job], lease=0.05)  # then its worker dies: the lease runs out
    wait_for(lambda: queue.pop() == [] and queue.get("orphan").state == "dead", 5)
    assert "its lease ran out" in queue.get("orphan").error


def test_cancel_of_a_job_leased_but_not_started_buries_it_when_given_back(
    queue: Queue,
) -> None:
    queue.enqueue(SPIN, [1, 30], job_id="ahead")
    [job] = queue.pop()
    assert queue.cancel("ahead")
    assert queue.release([job]) == 1
    assert queue.get("ahead").state == "dead"
    assert queue.pop() == []


def test_cancel_drops_a_follow_up_asked_for_while_it_ran(queue: Queue) -> None:
    queue.enqueue(SPIN, [1, 30], job_id="reindex")
    [job] = queue.pop()
    queue.enqueue(SPIN, [2, 0], job_id="reindex", replace=True)  # a follow-up…
    assert queue.cancel("reindex")  # …cancelled with it
    assert queue.ack(job)  # it finished before it saw the request: done, and no follow-up
    assert queue.pop() == []


def test_cancel_by_is_checked(queue: Queue) -> None:
    queue.enqueue(SPIN, [1, 30], job_id="x")
    for bad in ("", "a|b", "x" * 201):
        with pytest.raises(ValueError, match="by must be"):
            queue.cancel("x", by=bad)
    assert queue.get("x").state == "ready"
    assert not queue.cancel("missing")


@pytest.mark.processes
@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_real_worker_stops_a_cancelled_job_and_goes_on(
    redis_backend: Backend, settings: Any, processes: Processes, concurrency: int
) -> None:
    configure(settings, LEASE=1)  # renewed every third of a second
    queue = get_queue()
    long = queue.enqueue(SPIN, [1, 60], job_id="long")
    worker = processes.start(work, concurrency)
    wait_for(lambda: queue.get("long").state == "running" and bool(queue.get("long").started))
    assert queue.cancel("long", by="admin alice")
    wait_for(lambda: queue.get("long").state == "dead", 10)
    dead = queue.get(long.id)
    assert dead.error.startswith("Cancelled by admin alice")
    assert dead.error_class == CANCELLED
    assert strings(CLEANED) == ["1"]  # its finally block ran
    assert "1" not in strings(FINISHED)
    assert f"{long.id} FAILED" in strings(STATUS)  # task_finished, as for any failure
    assert worker.is_alive()
    after = queue.enqueue(SPIN, [2, 0])  # the worker goes on
    wait_for(settled)
    assert queue.get(after.id).result == "2"
    stop(worker)


@pytest.mark.processes
def test_a_job_ignoring_the_request_is_still_never_run_again(
    redis_backend: Backend, settings: Any, processes: Processes
) -> None:
    configure(settings, LEASE=1)
    queue = get_queue()
    queue.enqueue(DEAF, [1, 1.5], job_id="deaf")  # swallows what is raised in it, returns
    worker = processes.start(work, 1)
    wait_for(lambda: queue.get("deaf").state == "running" and bool(queue.get("deaf").started))
    assert queue.cancel("deaf")
    wait_for(lambda: queue.get("deaf").state == "dead", 10)
    assert queue.get("deaf").error_class == CANCELLED  # not done, though it returned
    assert strings(SWALLOWED) == ["1"]
    assert queue.pop() == []
    stop(worker)


def test_stop_asks_only_a_running_job_to_stop(queue: Queue) -> None:
    """``stop`` (what the admin's "stop" action calls) leaves a job that is not running
    alone: False, and the job is still there as it was."""
    queue.enqueue(SPIN, [1, 30], job_id="waiting")
    assert not queue.stop("waiting", by="admin bob")
    assert queue.get("waiting").state == "ready"
    [job] = queue.pop()
    assert queue.stop("waiting", by="admin bob")
    assert queue.renew_leases([job]) == ([], ["waiting"])
    with pytest.raises(ValueError, match="by must be"):
        queue.stop("waiting", by="a|b")
    assert not queue.stop("missing")
