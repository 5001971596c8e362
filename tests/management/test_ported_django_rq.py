"""django-rq's tests of ``rqstats``, of requeueing failed / scheduled jobs, of emptying a queue
and of the scheduler's lock holder, restated against our operator commands
(``redislock_stats``, ``redislock_requeue``, ``redislock_purge``, ``redislock_locks``,
``redislock_force_release``). Failed jobs are made as django-rq makes them: a worker runs a
task that raises.

Ported (django-rq test -> test here):

- ``tests/tests.py::RqStatsTest::test_get_connection_default`` (``rqstats``, ``-j``) ->
  ``test_stats_of_idle_queues_as_a_table_and_as_json``
- ``tests/test_django_rq_utils.py::UtilsTest::test_get_statistics`` (workers per queue) ->
  ``test_stats_show_a_registered_worker_under_the_queues_it_serves``
- ``tests/test_views.py::ViewTest::test_requeue_job`` and the FAILED case of
  ``tests/test_django_rq_utils.py::UtilsTest::test_requeue_job`` ->
  ``test_requeue_by_id_puts_a_failed_job_back_in_line``
- ``tests/test_views.py::ViewTest::test_requeue_all`` -> ``test_requeue_all_after_confirming``
- ``tests/test_views.py::ViewTest::test_requeue_all_if_deleted_job`` ->
  ``test_requeue_all_when_a_job_is_deleted_after_the_count``
- the SCHEDULED case of ``UtilsTest::test_requeue_job`` ->
  ``test_requeue_a_scheduled_job_by_id_runs_it_now``
- the FINISHED case of ``UtilsTest::test_requeue_job`` ->
  ``test_a_finished_job_is_not_requeued`` (the opposite outcome: our queue only requeues
  dead and scheduled jobs, as the README says; a finished job is refused and named)
- ``tests/test_views.py::ViewTest::test_confirm_action_filters_missing_jobs`` ->
  ``test_requeue_of_ids_some_missing_requeues_the_rest_and_names_the_missing``
- ``tests/test_views.py::ViewTest::test_clear_queue`` ->
  ``test_purge_ready_empties_the_queue_and_deletes_the_jobs``
- ``tests/test_views.py::ViewTest::test_failed_jobs`` (an empty failed list, then one) ->
  ``test_purge_dead_with_nothing_dead_then_with_a_failed_job``
- ``tests/tests.py::SchedulerPIDTest`` (the pid holding the scheduler's lock, none once the
  lock is removed) -> ``test_locks_show_the_holding_pid_and_none_once_force_released``

Skipped, and why:

- ``rqstats -y`` (YAML) and ``--interval`` (a live dashboard): our command has neither;
- ``SuspendResumeTest`` (``rqsuspend``/``rqresume``): no such commands;
- the DEFERRED case of ``test_requeue_job`` and ``test_deferred_jobs``: we have no job
  dependencies;
- ``test_delete_job`` / ``test_action_delete_jobs`` / ``test_action_requeue_jobs`` /
  ``test_action_stop_jobs``: per-job deletes and stops are admin actions here, no command;
- ``test_scheduled_jobs_registry_removal`` / ``UtilsTest::test_get_jobs``: they test how
  rq's registries hold ids whose job hash was deleted; our sets and hashes change together
  in one script (the damaged-queue case is in ``test_queue_commands.py``);
- the worker commands (``rqworker``, ``rqworker-pool``, verbosity, custom classes): the
  worker is ``run_queue_worker``, tested in ``test_worker_*.py``; and the job / worker /
  queue class settings, serializers and connection settings have no equivalent.
"""

from __future__ import annotations

import json
import os
import socket
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from django_redislock import Lock, get_queue
from django_redislock.exceptions import JobNotFound
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from tests.support.counts import job_counts

from ..conftest import _configure
from .test_queue_commands import run

# The worker run here closes stale database connections, as after each job: a database
# test that ran before left one open, which a test without database access may not touch.
pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = {"default": {"MAX_ATTEMPTS": 1}, "async": {}}
STATES = ("ready", "scheduled", "running", "dead", "parked", "waiting")


@pytest.fixture(params=["fakeredis", "redis"])
def queue(request: pytest.FixtureRequest, settings: Any) -> Queue:
    _configure(request, settings, request.param)
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return get_queue("default")


def failed_by_a_worker(queue: Queue, count: int) -> list[str]:
    """``count`` jobs that a worker ran and that failed (MAX_ATTEMPTS 1: dead)."""
    ids = [queue.enqueue("tests.tasks.boom").id for _ in range(count)]
    Worker([queue.name], burst=True).run()
    assert [queue.get(job_id).state for job_id in ids] == ["dead"] * count
    return ids


def answering(monkeypatch: pytest.MonkeyPatch, answer: Any) -> list[str]:
    """A terminal on which ``answer(question)`` is typed; returns the questions asked."""
    asked: list[str] = []

    def typed(question: str) -> str:
        asked.append(question)
        return str(answer())

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", typed)
    return asked


def test_stats_of_idle_queues_as_a_table_and_as_json(queue: Queue) -> None:
    stats = json.loads(run("redislock_stats", "--json")[0])
    assert set(stats) == {"queues", "workers"}
    assert list(stats["queues"]) == list(QUEUES)
    for counts in stats["queues"].values():
        assert counts == {**dict.fromkeys(STATES, 0), "oldest_ready_age": None, "paused": []}
    assert stats["workers"] == []

    table, errors = run("redislock_stats")
    assert errors == ""
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[1:3]}
    idle = ["0", "0", "0", "0", "0", "0", "-"]
    assert rows == {"default": idle, "async": idle}
    assert "0 live worker(s)" in table


def test_stats_show_a_registered_worker_under_the_queues_it_serves(queue: Queue) -> None:
    worker = Worker(["async"])
    worker.tracker.beat()  # registered, as a running worker is
    try:
        stats = json.loads(run("redislock_stats", "--json", "--queue", "async")[0])
        [shown] = stats["workers"]
        assert (shown["id"], shown["queues"], shown["pid"]) == (worker.id, ["async"],
                                                                os.getpid())  # fmt: skip
        assert (
            json.loads(run("redislock_stats", "--json", "--queue", "default")[0])["workers"] == []
        )
    finally:
        worker.tracker.stop()
    assert json.loads(run("redislock_stats", "--json")[0])["workers"] == []


def test_requeue_by_id_puts_a_failed_job_back_in_line(queue: Queue) -> None:
    [job_id] = failed_by_a_worker(queue, 1)
    out, _ = run("redislock_requeue", "--queue", "default", f"--id={job_id}")
    assert f"Requeued {job_id}." in out
    assert [job.id for job in queue.jobs("ready")] == [job_id]
    assert queue.jobs("dead") == []
    requeued = queue.get(job_id)
    assert (requeued.state, requeued.attempts) == ("ready", 0)
    # and a worker takes it again (it fails again: it is still the same task)
    Worker(["default"], burst=True).run()
    assert queue.get(job_id).attempts == 1


def test_requeue_all_after_confirming(queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = failed_by_a_worker(queue, 2)
    asked = answering(monkeypatch, lambda: "yes")
    out, _ = run("redislock_requeue", "--queue", "default")
    assert "all 2 dead job(s)" in asked[0]  # what the confirmation page showed as total
    assert "Requeued 2 dead job(s) of queue 'default'." in out
    assert sorted(job.id for job in queue.jobs("ready")) == sorted(ids)
    assert queue.counts() == job_counts(ready=2)


def test_requeue_all_when_a_job_is_deleted_after_the_count(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone, kept = failed_by_a_worker(queue, 2)

    def delete_one_then_confirm() -> str:
        assert queue.delete(gone)  # meanwhile, someone deletes one from the admin
        return "yes"

    asked = answering(monkeypatch, delete_one_then_confirm)
    out, _ = run("redislock_requeue", "--queue", "default")
    assert "all 2 dead job(s)" in asked[0]
    assert "Requeued 1 dead job(s) of queue 'default'." in out
    assert "could not be" not in out  # a deleted job is not a failure to requeue
    assert [job.id for job in queue.jobs("ready")] == [kept]
    with pytest.raises(JobNotFound):
        queue.get(gone)


def test_requeue_a_scheduled_job_by_id_runs_it_now(queue: Queue) -> None:
    later = queue.enqueue("tests.tasks.record", args=[1], delay=60).id
    assert queue.get(later).state == "scheduled"
    run("redislock_requeue", "--queue", "default", "--state", "scheduled", f"--id={later}")
    assert queue.get(later).state == "ready"
    assert queue.jobs("scheduled") == []
    Worker(["default"], burst=True).run()
    assert queue.get(later).state == "done"


def test_a_finished_job_is_not_requeued(queue: Queue) -> None:
    done = queue.enqueue("tests.tasks.record", args=[1]).id
    Worker(["default"], burst=True).run()
    assert queue.get(done).state == "done"
    out = StringIO()
    err = StringIO()
    with pytest.raises(CommandError, match="1 of 1 job"):
        call_command("redislock_requeue", "--queue", "default", f"--id={done}", stdout=out,
                     stderr=err)  # fmt: skip
    assert f"Not requeued {done}: not dead (done)." in err.getvalue()
    assert queue.get(done).state == "done"
    assert queue.counts()["ready"] == 0


def test_requeue_of_ids_some_missing_requeues_the_rest_and_names_the_missing(
    queue: Queue,
) -> None:
    [job_id] = failed_by_a_worker(queue, 1)
    missing = "0b5c3cf4-5a51-4d0e-8b65-3f1e0c9a2d77"
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 of 2 job"):
        call_command("redislock_requeue", "--queue", "default", f"--id={job_id}",
                     f"--id={missing}", stdout=out, stderr=err)  # fmt: skip
    assert f"Requeued {job_id}." in out.getvalue()
    assert f"Not requeued {missing}: not dead (missing)." in err.getvalue()
    assert [job.id for job in queue.jobs("ready")] == [job_id]


def test_purge_ready_empties_the_queue_and_deletes_the_jobs(queue: Queue) -> None:
    job_id = queue.enqueue("tests.tasks.record", args=[1]).id
    later = queue.enqueue("tests.tasks.record", args=[2], delay=600).id
    out, _ = run("redislock_purge", "--queue", "default", "--state", "ready", "--yes")
    assert "Deleted 1 ready job(s) of queue 'default'." in out
    with pytest.raises(JobNotFound):
        queue.get(job_id)  # the job itself is gone, not only its place in line
    assert queue.peek(5) == []
    assert queue.get(later).state == "scheduled"  # another state is left alone
    Worker(["default"], burst=True).run()
    assert queue.counts() == job_counts(scheduled=1)


def test_purge_dead_with_nothing_dead_then_with_a_failed_job(queue: Queue) -> None:
    out, _ = run("redislock_purge", "--queue", "default", "--state", "dead", "--yes")
    assert out.strip() == "No dead jobs in queue 'default'."
    [job_id] = failed_by_a_worker(queue, 1)
    out, _ = run("redislock_purge", "--queue", "default", "--state", "dead", "--yes")
    assert "Deleted 1 dead job(s) of queue 'default'." in out
    with pytest.raises(JobNotFound):
        queue.get(job_id)


def test_locks_show_the_holding_pid_and_none_once_force_released(queue: Queue) -> None:
    lock = Lock("scheduler:default", ttl=60)
    assert lock.acquire()
    [held] = json.loads(run("redislock_locks", "--prefix", "scheduler:", "--json")[0])["locks"]
    assert held["name"] == "scheduler:default"
    assert (held["host"], held["pid"]) == (socket.gethostname(), os.getpid())
    out, _ = run("redislock_force_release", "scheduler:default", "--yes")
    assert f"pid {os.getpid()}" in out
    listed = json.loads(run("redislock_locks", "--prefix", "scheduler:", "--json")[0])
    assert (listed["total"], listed["locks"]) == (0, [])
    assert not lock.owned()
